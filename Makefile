# The two commands a new user runs: `make run` and `make test`.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed

.PHONY: run test lint system-deps venv clean

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --upgrade pip
	# torch first and pinned: the CPU wheel here, the CUDA wheel on a GPU host.
	$(PY) -m pip install --quiet torch==2.13.0
	$(PY) -m pip install --quiet -e '.[test,postgres,eval]'
	@touch $(STAMP)

venv: $(STAMP)

# Debian packages the tests need (browser, database, speech synthesis); skipped when present.
system-deps:
	@scripts/install_system_deps.sh
	@test -f tests/browser/.axe/node_modules/axe-core/axe.min.js || npm install --no-save --no-audit --no-fund --prefix tests/browser/.axe axe-core@4

run: $(STAMP)
	$(VENV)/bin/captions migrate
	$(VENV)/bin/captions serve

lint: $(STAMP)
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy

# Two workers, one test file each at a time (module fixtures stay per file): the suite waits on servers,
# browsers and databases as much as it computes, so the two cores overlap.
test: $(STAMP) system-deps lint
	$(PY) -m pytest -n 2 --dist loadfile

clean:
	rm -rf $(VENV) .pytest_cache .ruff_cache
