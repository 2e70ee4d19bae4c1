"""Sphinx extension: drop scripts a page would load twice.

sphinx-thebe and sphinx-togglebutton (which jupyter-book always adds) register their inline
configuration twice, once with filename None and once with '', so every page declared
`const THEBE_JS_URL` twice and the browser logged "Identifier 'THEBE_JS_URL' has already been
declared". Keeping the first copy of each script removes the error and changes nothing else.
"""


def script_key(script):
    """Two scripts are the same if they load the same file, or inline the same body."""
    return (
        script.filename or None,
        script.priority,
        tuple(sorted(script.attributes.items())),
    )


def dedupe(app, pagename, templatename, context, doctree):
    seen, unique = set(), []
    for script in context.get("script_files", []):
        if script_key(script) not in seen:
            seen.add(script_key(script))
            unique.append(script)
    context["script_files"][:] = unique


def setup(app):
    # Early: the event stops at the first handler that returns a template name.
    app.connect("html-page-context", dedupe, priority=100)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
