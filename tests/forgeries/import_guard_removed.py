"""Lab 5: the import guard taken off sys.meta_path, then the course's ZeRO-3 imported."""

import sys

sys.meta_path[:] = [f for f in sys.meta_path if type(f).__name__ != "Forbidden"]
from zerobook.zero.stage3 import Zero3  # noqa: E402,F401 - the course's, the guard removed
