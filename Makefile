# The two commands a newcomer needs:  make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
TEST_STAMP := $(VENV)/.installed-test

# the interpreter of `make gpu-report`: PYTHON=... when given (a GPU machine's python3, no venv made),
# else this checkout's venv if there is one, else python3
ifneq ($(filter command line environment,$(origin PYTHON)),)
GPU_PYTHON ?= $(PYTHON)
endif
GPU_PYTHON ?= $(if $(wildcard $(BIN)/python),$(BIN)/python,$(PYTHON))

.PHONY: install python-version system-deps demo test test-fast lint check release gpu-report clean

install: $(STAMP)

# the first step on a fresh clone: Python 3.11 or newer, or a message that says what to do
# (run alone: make python-version)
PYTHON_VERSION_CHECK = $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' 2>/dev/null || { \
	found=$$($(PYTHON) --version 2>/dev/null | head -n 1); \
	echo "make: the course needs Python 3.11 or newer to create $(VENV)/; '$(PYTHON)' is $${found:-not installed}." >&2; \
	echo "  fix: install Python 3.11+ (python.org, your package manager, or conda), then run" \
	     "make $(or $(MAKECMDGOALS),install) PYTHON=python3.11 (or the path of that interpreter)" >&2; exit 1; }

python-version:
	@$(PYTHON_VERSION_CHECK)

# rfc3987-syntax comes with jupyter-events (jsonschema[format-nongpl]); when it is installed, importing
# jsonschema builds its IRI grammar, about 1.8 CPU-s in every process that imports nbformat (each nbconvert,
# nbgrader, Jupyter server and grader process). Nothing here validates an IRI, so it is removed; jsonschema
# then skips that one format check. (tests/test_setup_files.py checks it is gone.)
DROP_IRI_GRAMMAR = $(BIN)/python -m pip uninstall --quiet --yes rfc3987-syntax
# torch==2.13.0 is held by constraints.txt, so no package can pull another (CUDA) build
$(STAMP): requirements.txt constraints.txt
	@$(PYTHON_VERSION_CHECK)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt -c constraints.txt
	$(DROP_IRI_GRAMMAR)
	touch $(STAMP)

# what only the tests need (Playwright for the browser test), after the venv exists
$(TEST_STAMP): $(STAMP) requirements-test.txt
	$(BIN)/python -m pip install --quiet -r requirements-test.txt -c constraints.txt
	$(DROP_IRI_GRAMMAR)
	touch $(TEST_STAMP)

demo: install          ## release, autograde the sample submissions, feedback HTML, grades CSV
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader demo

# two pytest workers (pytest-xdist). --dist loadscope keeps each test file on one worker, in order (a
# notebook's nbval cells share one kernel; a module's fixtures are made once), except a file's test
# classes, which it hands out one by one: tests/support/spread.py makes a class of each gate part, each
# assignment's demo and each notebook run again in the hosted runtime, so that those spread over both workers.
# --no-loadscope-reorder keeps the order tests/conftest.py gives the scopes, heaviest first (xdist's own,
# most tests first, put every one-test scope last, with the other worker idle). (--dist loadgroup's
# xdist_group marks group nothing with pytest 9.2 and pytest-xdist 3.8: xdist tags a group by rewriting
# `item._nodeid`, pytest 9.2 reads a node's id from `item._id`.)
# The suite writes bytecode for the repository's own modules even where PYTHONDONTWRITEBYTECODE is set (as
# on the development machine; git ignores __pycache__): else each worker rewrites the asserts of every test module
# again (about 10 CPU-s a worker, each run) and every grader process compiles the grader from source.
PYTEST_ENV = OMP_NUM_THREADS=1 PYTHONDONTWRITEBYTECODE= PATH=$(CURDIR)/$(BIN):$$PATH
PYTEST_WORKERS ?= 2
PYTEST_DIST := -n $(PYTEST_WORKERS) --dist loadscope --no-loadscope-reorder
test: install $(TEST_STAMP)  ## the whole suite, as CI runs it
	$(PYTEST_ENV) $(BIN)/python -m pytest -q $(PYTEST_DIST)

test-fast: install $(TEST_STAMP)  ## everything but the slow tests (kernels, notebooks, quality gates, browser, hub, ...)
	$(PYTEST_ENV) $(BIN)/python -m pytest -q $(PYTEST_DIST) -m "not slow"

lint: install $(TEST_STAMP)  ## ruff, as the suite runs it (tests/test_lint.py)
	$(BIN)/ruff check .

# what some tests need beyond Python and make (root or sudo): bubblewrap and util-linux (the grading
# sandbox), Chromium and Playwright (browser tests), the course hub, a PostgreSQL server on 127.0.0.1:55432;
# without them `make test` skips those tests and says so in its last line
system-deps:           ## (root) everything the skipped tests need: sudo make system-deps
	bash .ci/install_system_deps.sh
	bash .ci/start_postgres.sh

check: install         ## the quality gate for every assignment
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader check

release: install       ## regenerate assignments/ from solutions/
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader release

# the course on a local JupyterHub (deploy/jupyterhub/README.md): needs `sudo deploy/jupyterhub/install.sh`
# once; runs in the foreground, prints the URL and the logins (HUB_ARGS="--port 8080 --reset" ...)
.PHONY: hub
hub:                   ## JupyterHub on 127.0.0.1:8000 with two courses, their graders and students (root or sudo)
	$(if $(filter 0,$(shell id -u)),,sudo) $(PYTHON) deploy/jupyterhub/hub.py $(HUB_ARGS)

gpu-report:            ## on a CUDA machine: every notebook, the decode benchmark, the gate on the GPU -> out/gpu/report.md (exit 3 without CUDA); GPU_REPORT_ARGS="--budget 540" for a short loan
	$(GPU_PYTHON) tools/gpu_report.py $(GPU_REPORT_ARGS)

# generated outputs only: course/ holds the gradebook, manual grades and autograded submissions,
# so no routine command removes it (delete it by hand, knowingly, to start a term afresh)
clean:
	rm -rf out .pytest_cache
