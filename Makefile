# Two commands do all the set-up on a fresh machine:
#   make run   - create .venv, install, start the server with embedded defaults
#   make test  - create .venv, install, lint, type-check and run every test
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed
# The project's own packages (pyproject.toml lists the same).
PACKAGES := telemetry protocol engine store team actors coordinator gateway personas

.PHONY: install compile run test lint docs bench cluster-demo clean

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e ".[dev]"
	touch $(STAMP)

install: $(STAMP)

# The sign-in tests run a real OpenID provider (tests/oidc: oidc-provider
# from the npm registry, pinned by its package-lock.json) under Node.js.
OIDC_DEPS := tests/oidc/node_modules/.package-lock.json
$(OIDC_DEPS): tests/oidc/package-lock.json
	npm ci --prefix tests/oidc --no-audit --no-fund --loglevel=error

# The AG-UI test runs the official client (tests/agui: @ag-ui/client from the
# npm registry, pinned by its package-lock.json) under Node.js.
AGUI_DEPS := tests/agui/node_modules/.package-lock.json
$(AGUI_DEPS): tests/agui/package-lock.json
	npm ci --prefix tests/agui --no-audit --no-fund --loglevel=error

# The tracing test sends spans to a real trace backend: Arize Phoenix from
# PyPI, pinned, in a venv of its own so that its many dependencies stay out
# of the project's.
PHOENIX_VERSION := 20.26.1
PHOENIX := .venv-phoenix/.installed-$(PHOENIX_VERSION)
$(PHOENIX):
	rm -rf .venv-phoenix
	$(PYTHON) -m venv .venv-phoenix
	.venv-phoenix/bin/pip install --quiet "arize-phoenix==$(PHOENIX_VERSION)"
	touch $(PHOENIX)

# Byte-code for the project's modules, written once: every process of a
# running instance (the gateway, coordinators, VP hosts, Ray's workers)
# imports them, and where PYTHONDONTWRITEBYTECODE is set each would
# otherwise compile them again at every start. Up-to-date files are skipped.
compile: $(STAMP)
	$(BIN)/python -m compileall -q $(PACKAGES)

run: compile
	$(BIN)/yeaft serve

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# Three workers: most tests wait on processes and sockets more than they
# compute, so even two cores run three at once; an idle worker takes tests
# queued for a busy one (worksteal). The fifteen slowest tests are
# listed at the end, so a slow one shows at once.
test: lint compile $(OIDC_DEPS) $(AGUI_DEPS) $(PHOENIX)
	$(BIN)/pytest -q -n 3 --dist worksteal --durations=15

# docs/configuration.md, protocol.md and http-api.md are generated from the
# code; tests/test_docs.py fails when they drift.
docs: $(STAMP)
	$(BIN)/python -m docs.gen

bench: compile
	$(BIN)/python bench/fanout.py

# A head and two worker nodes, two gateways on the local Redis (127.0.0.1:6379,
# its own key prefix): prints what it showed, stops everything it started.
cluster-demo: $(STAMP)
	$(BIN)/python bench/cluster_demo.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
