# Two entry points, each of which bootstraps .venv on a fresh machine:
#   make demo   runs the traffic-fine service on SQLite
#   make test   runs every check: lint, format, types, benchmark smoke, tests (with doctests);
#               pytest runs last so its summary closes the output
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint types pytest bench clean postgres

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,esdb,postgres-binary]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/python -m samples.traffic_fine.demo

lint: $(STAMP)
	$(BIN)/ruff check .
	$(BIN)/ruff format --check .

types: $(STAMP)
	$(BIN)/mypy decider samples benchmarks tests

# The PostgreSQL tests need the local server: started here if it is down, never skipped.
postgres:
	.ci/ensure-postgres

pytest: $(STAMP) postgres
	$(BIN)/python -m pytest -q

bench: $(STAMP) postgres
	$(BIN)/python -m benchmarks --quick

test: lint types bench pytest

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .hypothesis
