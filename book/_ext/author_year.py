"""The references page lists each work under the name the chapters cite it by.

The chapters cite a work as a link named by author and year ("Rajbhandari et al., 2020"),
which reads the same in the book and in JupyterLab (jupyterlab-myst has no bibliography).
The References page lists every entry (``:all:``) under that same label, sorted by author,
instead of pybtex's alpha labels ("RRRH20") that the text never shows.
"""

from pybtex.style.formatting.plain import Style as Plain
from pybtex.style.labels import BaseLabelStyle
from pybtex.plugin import register_plugin


def author_year(entry) -> str:
    """ "Surname, 2020", "A and B, 2009", "Surname et al., 2022"; a work by an organisation,
    under its `shorthand` (biblatex's field for a label that replaces the usual one)."""
    if "shorthand" in entry.fields:
        return entry.fields["shorthand"]
    people = entry.persons.get("author", [])
    names = [" ".join(p.last_names) or " ".join(p.first_names) for p in people]
    year = entry.fields.get("year", "")
    if not names:
        return year
    if len(names) == 1:
        who = names[0].strip("{}")
    elif len(names) == 2 and names[1] != "others":
        who = f"{names[0]} and {names[1]}"
    else:
        who = f"{names[0]} et al."
    return f"{who}, {year}"


class AuthorYearLabels(BaseLabelStyle):
    def format_labels(self, sorted_entries):
        for entry in sorted_entries:
            yield author_year(entry)


class AuthorYear(Plain):
    default_label_style = AuthorYearLabels


def setup(app):
    register_plugin("pybtex.style.formatting", "author_year", AuthorYear)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
