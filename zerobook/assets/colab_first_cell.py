# On Colab, or any Python without the course: install it (a minute). Elsewhere: nothing.
import importlib.util
import subprocess
import sys

# where the course is published (_config.yml's repository.url); Colab's own torch is kept
REPOSITORY = ""
COURSE = "zero-from-scratch"
if importlib.util.find_spec("zerobook") is None:
    if not REPOSITORY:
        sys.exit(
            "No course to install from: set REPOSITORY to the course's git address."
        )
    subprocess.run(["git", "clone", "--depth=1", REPOSITORY, COURSE], check=True)
    pip = [sys.executable, "-m", "pip", "install", "--quiet", "-e", COURSE]
    subprocess.run(pip, check=True)
    sys.path.insert(0, COURSE)  # importable now, without restarting the runtime
