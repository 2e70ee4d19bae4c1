"""pytest's view of labs/: nbval runs every lab's instructor notebook (solutions and hidden tests),
except Lab 0's. make test executes that one already, once, as the reference submission of the
grading round trip (tests/test_grading.py: nbgrader runs every cell and it must score full marks),
so running it under nbval too would execute the same notebook twice."""
collect_ignore = ["setup_check/setup_check.ipynb"]
