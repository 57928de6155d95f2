# The two commands a newcomer needs:  make demo   and   make test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install demo test test-fast check release clean

install: $(STAMP)

# torch==2.13.0 is held by constraints.txt, so no package can pull another (CUDA) build
$(STAMP): requirements.txt constraints.txt
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet -r requirements.txt -c constraints.txt
	touch $(STAMP)

demo: install          ## release, autograde the sample submissions, feedback HTML, grades CSV
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader demo

test: install          ## the whole suite, as CI runs it
	OMP_NUM_THREADS=1 PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q

test-fast: install     ## everything but the slow batch corpus
	OMP_NUM_THREADS=1 PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m pytest -q -m "not batch"

check: install         ## the quality gate for every assignment
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader check

release: install       ## regenerate assignments/ from solutions/
	PATH=$(CURDIR)/$(BIN):$$PATH $(BIN)/python -m grader release

clean:
	rm -rf out course .pytest_cache
