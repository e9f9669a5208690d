# Every target creates .venv on demand, so a fresh clone needs only Python 3.11 or newer: python3.11 when
# there is one, else the first of python3, python3.12, python3.13, python3.14 that is new enough.
# `make PYTHON=/path/to/python3.12 demo` names another.
PYTHON ?= $(shell for candidate in python3.11 python3 python3.12 python3.13 python3.14; do \
	$$candidate -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1 && { echo $$candidate; break; }; \
	done)
# Refuses, saying what it needs, before a venv is made with a Python that cannot run phasegraph.
CHECK_PYTHON = @if [ -z "$(PYTHON)" ]; then \
	echo "phasegraph needs Python 3.11 or newer: found none as python3.11, python3, python3.12, python3.13" \
	"or python3.14 on PATH. Install one, or name it: make PYTHON=/path/to/python3.12 $(or $(MAKECMDGOALS),demo)" >&2; exit 2; \
	elif ! $(PYTHON) -c 'import sys; sys.exit(sys.version_info < (3, 11))' >/dev/null 2>&1; then \
	echo "phasegraph needs Python 3.11 or newer: PYTHON=$(PYTHON) is" \
	"$$($(PYTHON) --version 2>&1 || echo 'not a Python that runs')." >&2; exit 2; fi
# pip prints errors only: the build's one notice left is setuptools' "InformationOnly" note on editable
# installs (every data folder is declared, tests/test_packaging.py holds the build to no warning).
PIP_QUIET := -qq
VENV := .venv
BIN := $(VENV)/bin
# langgraph dev lives apart: its server's pins clash with the dev tools (see pyproject.toml).
STUDIO_VENV := .venv-studio

.PHONY: demo test check coverage lint docs notebooks studio bench clean screenshots

# A stamp, not bin/phasegraph: installing an extra rewrites that script, which made every later `make test`
# install both extras again.
$(VENV)/.base: pyproject.toml
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install $(PIP_QUIET) --upgrade pip
	$(BIN)/pip install $(PIP_QUIET) -e .
	@touch $@

$(VENV)/.dev: $(VENV)/.base
	$(BIN)/pip install $(PIP_QUIET) -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $@

$(VENV)/.bench: $(VENV)/.base
	$(BIN)/pip install $(PIP_QUIET) -e '.[bench]'
	@touch $@

$(VENV)/.notebooks: $(VENV)/.base
	$(BIN)/pip install $(PIP_QUIET) -e '.[notebooks]'
	@touch $@

$(STUDIO_VENV)/bin/langgraph: pyproject.toml
	$(CHECK_PYTHON)
	$(PYTHON) -m venv $(STUDIO_VENV)
	$(STUDIO_VENV)/bin/pip install $(PIP_QUIET) --upgrade pip
	$(STUDIO_VENV)/bin/pip install $(PIP_QUIET) -e '.[studio]'
	@touch $@

demo: $(VENV)/.base
	$(BIN)/phasegraph run triggered_phase "Summarise the roadmap in the docs folder."

# The real JS clients the suite drives (tests/server/test_js_*.py), exactly as tests/js/package-lock.json
# pins them; `npm ci` again whenever the lockfile changes. No install scripts run (none is needed).
JS_CI := tests/js/node_modules/.ci
$(JS_CI): tests/js/package-lock.json
	cd tests/js && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# A pytest worker per CPU; each test module runs on one worker, so the servers a module shares start once
# (spreading a module's tests over the workers was measured slower: each worker then starts them).
PARALLEL := -n auto --dist loadscope

# Bytecode written ahead: the suite starts ~250 Python processes that import phasegraph, and where
# PYTHONDONTWRITEBYTECODE is set (as on CI) none keeps what it compiles, so each compiled the project's
# 29k lines again (about 0.3 s of CPU per server start). Only files changed since are compiled again.
COMPILE = $(BIN)/python -m compileall -q -j0 -x node_modules phasegraph nodes graphs server tools tests bench >/dev/null

# The suite runs `make bench QUICK=1` once (tests/test_bench.py), so it needs the bench extra too.
test: $(VENV)/.dev $(VENV)/.bench $(STUDIO_VENV)/bin/langgraph $(JS_CI)
	$(COMPILE)
	$(BIN)/pytest -q --durations=30 $(PARALLEL)

# The inner loop, in under three minutes: lint, then the unit and graph tests (no server, no browser).
check: lint
	$(COMPILE)
	$(BIN)/pytest -q $(PARALLEL) tests/unit tests/graphs

# Line coverage of graphs/ nodes/ tools/ server/ over the whole suite, server processes included
# (pyproject.toml's [tool.coverage]); slower than `make test`.
coverage: $(VENV)/.dev $(VENV)/.bench $(STUDIO_VENV)/bin/langgraph $(JS_CI)
	rm -f .coverage .coverage.*
	$(COMPILE)
	$(BIN)/pytest -q $(PARALLEL) --cov --cov-report=term:skip-covered

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# docs/ as a site in site/ (mkdocs.yml); --strict: a broken link or anchor fails the build.
docs: $(VENV)/.dev
	$(BIN)/mkdocs build --strict

# JupyterLab on notebooks/, in the browser; it runs until stopped (Ctrl-C), so the suite never starts it
# (tests/test_notebooks.py executes the notebooks with nbclient). Jupyter refuses to run as root unless told
# to, and root is who runs make on CI machines and containers.
notebooks: $(VENV)/.notebooks
	$(BIN)/jupyter lab notebooks/$(if $(filter 0,$(shell id -u)), --allow-root)

# The page's screenshots in docs/assets (docs/screenshots.py), from a real server in Debian's Chromium.
screenshots: $(VENV)/.dev
	$(BIN)/python docs/screenshots.py

studio: $(STUDIO_VENV)/bin/langgraph
	$(STUDIO_VENV)/bin/langgraph dev

# Every figure is a ratio against its anchor, measured in the same run (docs/performance.md).
# QUICK=1: a small version in under two minutes.
bench: $(VENV)/.bench $(STUDIO_VENV)/bin/langgraph
	$(BIN)/python -m bench $(if $(QUICK),--quick)

clean:
	rm -rf $(VENV) $(STUDIO_VENV) .pytest_cache .mypy_cache .ruff_cache .coverage .coverage.* htmlcov
