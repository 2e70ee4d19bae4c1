"""Sphinx extension: the repository button and the launch buttons appear once the course is published.

_config.yml's `repository.url` is the one setting: empty (as shipped), the book has neither (no
button may point at a repository that does not exist, and sphinx-book-theme cannot build a launch
link without one); set, every notebook page gets the repository button and the launch menu (Colab,
and JupyterHub when `jupyterhub_url` is set). A lab's page launches the lab's student version,
which is written at build time (book/labs/, git-ignored) and published by the pages workflow on
branch `student-labs` (zerobook/classroom/student_branch.py): its menu points at that branch. The
Colab cell "How to use" shows names the same repository.
"""

LAUNCHERS = (
    "binderhub_url",
    "jupyterhub_url",
    "colab_url",
    "deepnote_url",
    "jupyterlite_url",
    "thebe",
)
LABS = "book/labs/"


def show_when_published(app, config):
    """The buttons follow `repository_url`: the repository button on, or every launcher off."""
    options = config.html_theme_options
    published = bool(options.get("repository_url"))
    options["use_repository_button"] = published
    if not published:
        launch = options.get("launch_buttons", {})
        options["launch_buttons"] = {
            k: v for k, v in launch.items() if k not in LAUNCHERS
        }


def launch_student_versions(app, pagename, templatename, context, doctree):
    """A lab page's launch menu opens the lab's student version: sphinx-book-theme's menu (added
    at priority 501) built again with the branch that holds them (STUDENT_BRANCH), by the theme's
    own code; a chapter's menu is left as it is (main)."""
    buttons = context.get("header_buttons")
    menu = [b for b in buttons or () if b.get("label") == "launch-buttons"]
    if not (pagename.startswith(LABS) and menu):
        return
    from sphinx_book_theme.header_buttons.launch import add_launch_buttons

    from zerobook.classroom.student_branch import STUDENT_BRANCH

    where = buttons.index(menu[0])
    buttons.remove(menu[0])
    options = app.config["html_theme_options"]
    branch = options.get("repository_branch")
    options["repository_branch"] = STUDENT_BRANCH
    try:
        add_launch_buttons(app, pagename, templatename, context, doctree)
    finally:
        options["repository_branch"] = branch
    buttons.insert(where, buttons.pop())  # where the theme had put it
    for button in buttons[where]["buttons"]:
        if button.get("text") == "JupyterHub":
            button["url"] = own_folder(button["url"], f"-{STUDENT_BRANCH}")


def own_folder(url: str, suffix: str) -> str:
    """An nbgitpuller link that clones into REPO+suffix, not REPO: a branch pulled into the folder
    of another fails (nbgitpuller#124), and a student who opened a chapter has main in REPO."""
    from urllib.parse import parse_qsl, urlencode, urlsplit

    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    repo = query["repo"].rstrip("/").split("/")[-1]
    query["targetpath"] = repo + suffix
    query["urlpath"] = query["urlpath"].replace(f"/{repo}/", f"/{repo}{suffix}/", 1)
    return parts._replace(query=urlencode(query, safe="/")).geturl()


def name_the_repository(app, doctree):
    """The Colab cell a page shows (book/how_to_use.md's literalinclude of
    zerobook/assets/colab_first_cell.py) names the published repository, as a released lab's does."""
    from docutils import nodes

    url = app.config.html_theme_options.get("repository_url")
    if not url:
        return
    for block in doctree.findall(nodes.literal_block):
        text = block.astext()
        if 'REPOSITORY = ""' in text:
            block.children = [
                nodes.Text(text.replace('REPOSITORY = ""', f'REPOSITORY = "{url}"'))
            ]
            block.rawsource = block.astext()


def setup(app):
    app.connect("doctree-read", name_the_repository)
    app.connect(
        "config-inited", show_when_published, priority=900
    )  # after the theme's own
    app.connect("html-page-context", launch_student_versions, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
