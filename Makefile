# icml26 — two commands on a fresh machine: `make run` and `make test`.
PY ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed-run
TEST_STAMP := $(VENV)/.installed-test
TORCH ?= torch==2.13.0
JOBS ?= 2

.PHONY: run test lint install clean report

$(BIN)/python:
	$(PY) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip

# Torch is installed first and pinned: an unpinned torch pulls a multi-GB CUDA build.
# The package itself only asks for torch>=2.4, so any recent torch (GPU builds too) works for users.
# `make run` installs the package and the one extra a reproduction needs (B12's causal-discovery peers);
# `make test` adds the test-only peers (cvxpy, cca-zoo, POT, Ray) and pytest.
$(STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[causal]"
	touch $(STAMP)

$(TEST_STAMP): pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet "$(TORCH)"
	$(BIN)/pip install --quiet -e ".[test]"
	touch $(STAMP) $(TEST_STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/icml26 reproduce --all --budget quick --jobs $(JOBS)

# lint and types first (a few seconds): ruff's default rules plus import sorting on the whole tree, mypy on the
# typed public surface (harness/, cli.py, catalog.py); both configured in pyproject.toml
lint: $(TEST_STAMP)
	$(BIN)/ruff check src tests conftest.py
	$(BIN)/mypy

# pytest runs tests/ and every ```python block of the READMEs (conftest.py hands them to pytest-markdown-docs)
test: lint
	$(BIN)/python -m pytest -n $(JOBS) --dist loadfile -q --durations=15

report: $(STAMP)
	$(BIN)/icml26 report

clean:
	rm -rf $(VENV) runs build *.egg-info src/*.egg-info
