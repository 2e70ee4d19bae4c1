# Two commands on a fresh machine with only Python: `make book` and `make test` (see README).
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed
TORCH  := torch==2.13.0

.PHONY: install book test release grade clean

install: $(STAMP)

# torch is installed only when the environment has none (pinned then: an unpinned torch pulls
# gigabytes of CUDA packages); a GPU host's own torch is kept (README: "GPU hosts").
$(STAMP): requirements.txt pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -c "import torch" 2>/dev/null || $(PY) -m pip install --quiet $(TORCH)
	$(PY) -m pip install --quiet -r requirements.txt
	$(PY) -c "import torch, zerobook; print('torch', torch.__version__, '| zerobook ready')"
	touch $(STAMP)

# Executes every notebook; a cell that raises or warns fails the build.
book: $(STAMP)
	$(VENV)/bin/jupyter-book build . -W -n --keep-going
	@echo "The book is built: open file://$(CURDIR)/_build/html/index.html"

# Unit tests, the launcher's failure modes, nbval over every chapter, the grading round trip,
# and the built book (in headless Chromium when it is installed). Each lab notebook runs whole in
# the round trip (its instructor version is graded as the "reference" submission, full marks
# asserted), so nbval does not run it a second time. Test files run in parallel (pytest-xdist, one
# file per worker at a time): two workers fill each other's waits; on 2 cores this keeps
# `make test` under 15 minutes.
test: book
	$(PY) -m pytest tests chapters --nbval-lax --nbval-current-env \
	    --numprocesses=auto --maxprocesses=4 --dist loadfile

release: $(STAMP)
	$(PY) -m zerobook.grading release

grade: $(STAMP)
	$(PY) -m zerobook.grading grade

clean:
	rm -rf _build .pytest_cache
