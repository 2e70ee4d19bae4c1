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
# asserted), so nbval does not run it a second time. The book builds (one process, executing
# every chapter: a cell that raises fails it) while pytest runs everything that does not need the
# built book, in parallel (pytest-xdist, one file per worker at a time); the book's own tests run
# last. On 2 cores this keeps `make test` under 15 minutes.
test: $(STAMP)
	@mkdir -p _build
	@echo "building the book in the background (log: _build/book.log) while the tests run"
	@$(VENV)/bin/jupyter-book build . -W -n --keep-going > _build/book.log 2>&1 & book=$$!; \
	$(PY) -m pytest tests chapters --ignore=tests/test_book.py --nbval-lax --nbval-current-env \
	    --numprocesses=auto --maxprocesses=4 --dist loadfile; tests=$$?; \
	if wait $$book; then echo "The book is built: _build/html/index.html"; \
	else tail -n 80 _build/book.log; echo "make test: the book build failed (above)"; exit 1; fi; \
	$(PY) -m pytest tests/test_book.py; book_tests=$$?; \
	exit $$(( tests || book_tests ))

release: $(STAMP)
	$(PY) -m zerobook.grading release

grade: $(STAMP)
	$(PY) -m zerobook.grading grade

clean:
	rm -rf _build .pytest_cache
