# Two commands on a fresh machine with only Python: `make book` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := torch==2.13.0

.PHONY: install instructor book pdf test test-grading test-colab test-all test-quick gpu-check release grade clean

# The student's environment: nbgrader's JupyterLab tools for instructors (Formgrader, Create
# Assignment, Validate, the assignment and course lists) are switched off in the venv's
# etc/jupyter; `make instructor` switches them on (README: "Labs and grading").
NBGRADER_SERVER := $(addprefix nbgrader.server_extensions.,formgrader validate_assignment \
                   assignment_list course_list)
nbgrader_ui = $(VENV)/bin/jupyter labextension $(1) --level=sys_prefix @jupyter/nbgrader && \
              $(VENV)/bin/jupyter server extension $(1) --sys-prefix $(NBGRADER_SERVER)

install: $(STAMP)
	if [ -f $(VENV)/.instructor ]; then rm $(VENV)/.instructor && $(call nbgrader_ui,disable); fi

# The instructor's environment: the student's, with nbgrader's JupyterLab tools switched on (kept
# when the venv is updated; `make install` switches them off again).
instructor: $(STAMP)
	$(call nbgrader_ui,enable)
	touch $(VENV)/.instructor

# torch is installed only when the environment has none (pinned then: an unpinned torch pulls
# gigabytes of CUDA packages); a GPU host's own torch is kept (README: "GPU hosts").
# (Python's version is checked before anything is downloaded: macOS's own python3 is 3.9.)
$(STAMP): requirements.txt pyproject.toml
	@$(PYTHON) -c "import sys; sys.exit(0 if sys.version_info >= (3, 10) else \
	  'The course needs Python >= 3.10 (torch 2.13 does too); $(PYTHON) is ' + \
	  sys.version.split()[0] + ': install a newer one (python.org; on macOS ' + \
	  'brew install python@3.12) and run make PYTHON=python3.12')"
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -c "import torch, zerobook; print('torch', torch.__version__, '| zerobook ready')"
	$(call nbgrader_ui,$(if $(wildcard $(VENV)/.instructor),enable,disable))
	touch $(STAMP)

# --all: every page is written again (from the cached outputs: seconds), so a page left unchanged
# never keeps a table of contents from before a chapter was added.
BOOK   := $(VENV)/bin/jupyter-book build . -W -n --keep-going --all
CACHE  := _build/.jupyter_cache
# The labs' student versions, which the book shows (not executed): labs/ -> book/labs/.
LABS_FOR_BOOK := $(PY) -m zerobook.classroom book
# pytest with nbval (--nbval-lax: a cell that raises fails; outputs are not compared) and the
# plugin that keeps each notebook nbval executed for the book (tests/nbcache.py), each notebook's
# kernel forked from one that has imported torch, matplotlib and ipykernel and handed a launcher's
# zygote that has imported torch (tests/kernel_preload.py, on Linux; ZEROBOOK_KERNEL_PRELOAD=0:
# each started as a student's kernel and zygote are; a kernel has 180 s to answer, not nbval's
# 60: CI's first kernels start beside each other's torch imports); test files run in
# parallel, one file (one notebook) per worker at a time, two workers more than there are cores:
# some tests wait (a timeout, a hang being detected) and the extra workers use those seconds
# (on 2 cores, 2026-11-30: 3 workers 511 s, 4 workers 454 s with the cores busy 904 of 910 s);
# the longest files first (tests/conftest.py: LONGEST_FIRST). Beside each lab's instructor
# notebook nbval runs its student version with the reference filled in (written to $(SOLVED):
# tests/solved_labs.py, whose plugin gives the two one run cache: each launch runs once).
# (The cores this process may use: os.sched_getaffinity where the OS has it, Linux; else
# os.cpu_count(), as on macOS, whose Python has no sched_getaffinity.)
WORKERS := $(shell $(PYTHON) -c "import os; f = getattr(os, 'sched_getaffinity', None); \
             print(min((len(f(0)) if f else os.cpu_count() or 1) + 2, 6))")
PYTEST := $(PY) -m pytest -p tests.nbcache -p tests.kernel_preload -p tests.solved_labs \
          --nbval-lax --nbval-current-env --nbval-kernel-startup-timeout=180 \
          --numprocesses=$(WORKERS) --dist loadfile --no-loadscope-reorder
PHASES := $(PY) tests/phases.py
SOLVED := _build/solved_labs
# The capstone's instructor notebook trains 800 steps on 3 ranks (minutes of a 2-core machine):
# make test runs its solution on a 20-step schedule (tests/test_capstone_short.py), make
# test-grading both its notebooks in full under nbval, the instructor's and the solved student
# version (tests/test_capstone_notebooks.py), and its round trip (tests/test_grading_labs.py).
LONG_LABS := --ignore=labs/capstone/capstone.ipynb --ignore=$(SOLVED)/capstone

# Executes every notebook (the cache is emptied first, so nothing stale is shown); a cell that
# raises or warns fails the build.
book: $(STAMP)
	rm -rf $(CACHE)
	$(LABS_FOR_BOOK)
	$(BOOK)
	@echo "The book is built: open file://$(CURDIR)/_build/html/index.html"

# The book as one PDF, offline: headless Chromium prints each page of the built book in the table
# of contents' order and pypdf merges them (book/pdf.py), into _build/pdf/book.pdf and the HTML
# output's _static/book.pdf, which the intro links to. Builds the book first if it is not built.
pdf: $(STAMP)
	test -f _build/html/index.html || $(MAKE) book
	$(PY) book/pdf.py

# Each notebook is executed once: nbval runs every chapter and every lab's instructor notebook
# (its solutions and hidden tests: full marks) beside the unit tests, the launcher's failure modes
# and each lab's harness on an untouched release (tests/test_labs.py); the book is then built from
# the outputs nbval kept (_build/.jupyter_cache), and tested as a reader meets it. The time of
# each phase is printed. What grades a class (the round trips, each harness's feedback on planted
# mistakes, the hostile and careless classes) is make test-grading's: CI runs it after make test.
# (Python keeps the bytecode it compiles, __pycache__, git-ignored, whatever the environment says:
# some images set PYTHONDONTWRITEBYTECODE, an empty value unsets it. Every rank, kernel and test
# process imports the course's modules, and without the caches each compiles them again: ~1.6
# CPU-s a pytest process's tests, 0.06 s a rank's modules.)
test: export PYTHONDONTWRITEBYTECODE =
test: $(STAMP)
	@mkdir -p _build && rm -rf $(CACHE)
	@$(PHASES) \
	  "tests and notebooks" "$(PY) tests/solved_labs.py $(SOLVED) > /dev/null && \
	    $(PYTEST) tests chapters labs $(SOLVED) $(LONG_LABS) -m 'not book and not slow'" \
	  "book" "$(LABS_FOR_BOOK) && $(BOOK) > _build/book.log 2>&1 || (tail -n 80 _build/book.log; exit 1)" \
	  "book tests" "$(PY) -m pytest tests/test_book*.py -m book --numprocesses=$(WORKERS) --dist load"

# The instructor's full grading round trip of every lab (release, submit the instructor notebook,
# the untouched release and planted mistakes, autograde, feedback), each harness's feedback on
# planted mistakes (tests/test_lab_*.py) and the hostile, careless, forged and bounded classes:
# CI runs it after make test.
test-grading: $(STAMP)
	$(PY) -m pytest tests -m slow --numprocesses=$(WORKERS) --dist loadgroup

# The course as a Colab student gets it (tests/colab_like.py): a fresh environment with another
# torch than the pin (2.14.1, Colab-like), the course installed by `pip install` alone, Lab 0 and
# the launching chapter run from a folder outside the clone. CI runs it after make test-grading.
test-colab:
	$(PYTHON) tests/colab_like.py

# Everything: make test, then every lab's round trip.
test-all: test test-grading

# The contributor's loop: the package's unit tests, no ranks launched, no notebook, no book.
test-quick: $(STAMP)
	$(PY) -m pytest tests -m "not launch and not grading and not book and not slow" --numprocesses=2

# On a GPU host: every GPU path (NCCL, CUDA tensors in every run and lab harness, the CUDA
# allocator against the calculator, bandwidth, ours vs FSDP2, streams, the datasheet's FLOP/s),
# saved to benchmarks/results/gpu_<device>_<date>.md/.json, which the chapters show. Without a
# GPU: the dry run (the CPU path; make test runs it too).
gpu-check: $(STAMP)
	$(PY) benchmarks/gpu.py

# LABS=path/to/private-labs: release and grade from an instructor's private copy of labs/
# (its own hidden tests, and hidden_params.json per lab: book/how_to_use.md, "For instructors").
LABS ?= labs
release: $(STAMP)
	$(PY) -m zerobook.classroom release --labs $(LABS)

grade: $(STAMP)
	$(PY) -m zerobook.classroom grade --labs $(LABS)

clean:
	rm -rf _build .pytest_cache
