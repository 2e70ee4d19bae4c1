"""Sphinx extension: the repository button and the launch buttons appear once the course is published.

_config.yml's `repository.url` is the one setting: empty (as shipped), the book has neither (no
button may point at a repository that does not exist, and sphinx-book-theme cannot build a launch
link without one); set, every notebook page gets the repository button and the launch menu (Colab,
and JupyterHub when `jupyterhub_url` is set). The labs' pages never get the launch menu: their
student versions are written at build time (book/labs/, not in the repository), and the page's
download button already gives that notebook.
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


def no_launch_on_labs(app, pagename, templatename, context, doctree):
    """Drop the launch menu from a lab's page (sphinx-book-theme adds it at priority 501)."""
    if pagename.startswith(LABS) and "header_buttons" in context:
        context["header_buttons"][:] = [
            b for b in context["header_buttons"] if b.get("label") != "launch-buttons"
        ]


def setup(app):
    app.connect(
        "config-inited", show_when_published, priority=900
    )  # after the theme's own
    app.connect("html-page-context", no_launch_on_labs, priority=502)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
