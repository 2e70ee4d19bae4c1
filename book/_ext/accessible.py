"""Sphinx extension: two things the extensions write into a page body that axe-core flags.

- sphinxcontrib-bibtex's bibliography is a `role="list"` whose entries carry docutils'
  `role="doc-biblioentry"`, a role DPUB-ARIA 1.1 deprecated: a screen reader then finds a list
  with no items (axe: aria-required-children, critical). Each entry becomes a `listitem`.
- myst-nb names every folded cell's toggle "Toggle hidden content" (`aria-label`), while the
  reader sees "Checked by code: show the source": a speech user who says what they see is not
  understood (axe: label-content-name-mismatch, WCAG 2.5.3). Without the label the toggle is
  named by its visible text.

The theme's own buttons are fixed in book/_static/zerobook.js (they exist only with JavaScript).
tests/test_book.py runs axe-core on every page.
"""

REPLACEMENTS = [
    ('role="doc-biblioentry"', 'role="listitem"'),
    ('<summary aria-label="Toggle hidden content">', "<summary>"),
]


def accessible_body(app, pagename, templatename, context, doctree):
    body = context.get("body")
    if body:
        for old, new in REPLACEMENTS:
            body = body.replace(old, new)
        context["body"] = body


def setup(app):
    app.connect("html-page-context", accessible_body)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
