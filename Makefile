# Two commands do all the set-up on a fresh machine:
#   make run   - create .venv, install, start the server with embedded defaults
#   make test  - create .venv, install, lint, type-check and run every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed

.PHONY: install run test lint bench cluster-demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

run: $(STAMP)
	$(BIN)/yeaft serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

test: lint
	$(BIN)/pytest -q

bench: $(STAMP)
	$(BIN)/python bench/fanout.py

# A head and two worker nodes, two gateways on the local Redis (127.0.0.1:6379,
# its own key prefix): prints what it showed, stops everything it started.
cluster-demo: $(STAMP)
	$(BIN)/python bench/cluster_demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
