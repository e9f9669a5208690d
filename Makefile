# Every target creates .venv on demand, so a fresh clone needs only Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin
# langgraph dev lives apart: its server's pins clash with the dev tools (see pyproject.toml).
STUDIO_VENV := .venv-studio

.PHONY: demo test lint docs studio bench clean

$(BIN)/phasegraph: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.dev: $(BIN)/phasegraph
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $@

$(VENV)/.bench: $(BIN)/phasegraph
	$(BIN)/pip install --quiet -e '.[bench]'
	@touch $@

$(STUDIO_VENV)/bin/langgraph: pyproject.toml
	$(PYTHON) -m venv $(STUDIO_VENV)
	$(STUDIO_VENV)/bin/pip install --quiet --upgrade pip
	$(STUDIO_VENV)/bin/pip install --quiet -e '.[studio]'
	@touch $@

demo: $(BIN)/phasegraph
	$(BIN)/phasegraph run triggered_phase "Summarise the roadmap in the docs folder."

# The real JS clients the suite drives (tests/server/test_js_*.py), exactly as tests/js/package-lock.json
# pins them; `npm ci` again whenever the lockfile changes. No install scripts run (none is needed).
JS_CI := tests/js/node_modules/.ci
$(JS_CI): tests/js/package-lock.json
	cd tests/js && npm ci --ignore-scripts --no-audit --no-fund
	@touch $@

# The suite runs `make bench QUICK=1` once (tests/test_bench.py), so it needs the bench extra too.
test: $(VENV)/.dev $(VENV)/.bench $(STUDIO_VENV)/bin/langgraph $(JS_CI)
	$(BIN)/pytest -q --durations=30

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

# docs/ as a site in site/ (mkdocs.yml); --strict: a broken link or anchor fails the build.
docs: $(VENV)/.dev
	$(BIN)/mkdocs build --strict

studio: $(STUDIO_VENV)/bin/langgraph
	$(STUDIO_VENV)/bin/langgraph dev

# Every figure is a ratio against its anchor, measured in the same run (docs/performance.md).
# QUICK=1: a small version in under two minutes.
bench: $(VENV)/.bench $(STUDIO_VENV)/bin/langgraph
	$(BIN)/python -m bench $(if $(QUICK),--quick)

clean:
	rm -rf $(VENV) $(STUDIO_VENV) .pytest_cache .mypy_cache .ruff_cache
