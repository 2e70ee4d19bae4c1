"""The careless classes, one module a lab (tests/test_careless.py): each module's CLASS maps a
student to (the (old, new) replacements in the reference, the parts it loses or "all", the
words its feedback page must show)."""
