# Every target creates .venv on demand, so a fresh clone needs only Python 3.11.
PYTHON ?= python3.11
VENV := .venv
BIN := $(VENV)/bin

.PHONY: demo test lint clean

$(BIN)/phasegraph: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	$(BIN)/pip install --quiet -e .
	@touch $@

$(VENV)/.dev: $(BIN)/phasegraph
	$(BIN)/pip install --quiet -e '.[dev]'
	$(BIN)/python -m ipykernel install --sys-prefix --name python3 >/dev/null
	@touch $@

demo: $(BIN)/phasegraph
	$(BIN)/phasegraph run triggered_phase "Summarise the roadmap in the docs folder."

test: $(VENV)/.dev
	$(BIN)/pytest -q

lint: $(VENV)/.dev
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .
	$(BIN)/mypy

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache
