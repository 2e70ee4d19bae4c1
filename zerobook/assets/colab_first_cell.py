# On Colab, or any Python without the course: install it (a minute). Elsewhere: nothing.
import importlib.util
import subprocess
import sys

# where the course is published (Colab's own torch is kept)
REPOSITORY = "https://github.com/<you>/zero-from-scratch"
COURSE = "zero-from-scratch"
if importlib.util.find_spec("zerobook") is None:
    subprocess.run(["git", "clone", "--depth=1", REPOSITORY, COURSE], check=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-e", COURSE]
    subprocess.run(pip, check=True)
    sys.path.insert(0, COURSE)  # importable now, without restarting the runtime
