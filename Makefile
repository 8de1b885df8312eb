# Two entry points, each of which bootstraps .venv on a fresh machine:
#   make demo   runs the traffic-fine service on SQLite
#   make test   runs every check: lint, format, types, benchmark smoke, tests (with doctests);
#               pytest runs last so its summary closes the output
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
SUDO := $(shell [ "$$(id -u)" = 0 ] || echo sudo)

# A second venv with kurrentdbclient instead of esdbclient (their grpcio pins exclude each
# other): the EventStoreDB adapter's tests and the processor tests on it run there too.
KVENV := .venv-kurrentdb
KSTAMP := $(KVENV)/.installed

.PHONY: demo test lint types pytest bench clean postgres browser test-kurrentdb

$(STAMP): pyproject.toml
	test -x $(BIN)/python || $(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,esdb,postgres-binary]'
	touch $(STAMP)

$(KSTAMP): pyproject.toml
	test -x $(KVENV)/bin/python || $(PYTHON) -m venv $(KVENV)
	$(KVENV)/bin/python -m pip install --quiet --upgrade pip
	$(KVENV)/bin/python -m pip install --quiet -e '.[kurrentdb,test]'
	touch $(KSTAMP)

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

# The console's browser test drives Debian's chromium: installed here when missing, never skipped.
browser:
	@command -v chromium >/dev/null && command -v chromedriver >/dev/null || \
		{ $(SUDO) apt-get update && \
		  $(SUDO) env DEBIAN_FRONTEND=noninteractive apt-get install -y chromium chromium-driver; }

pytest: $(STAMP) postgres browser
	$(BIN)/python -m pytest -q

bench: $(STAMP) postgres
	$(BIN)/python -m benchmarks --quick

# The adapter's contract suite and the processor tests (EventStoreDB parametrisation) with
# kurrentdbclient; ESDB_URI=... points the adapter tests at a real KurrentDB here too.
test-kurrentdb: $(KSTAMP)
	$(KVENV)/bin/python -m pytest -q -p no:cacheprovider tests/esdb tests/processors -k esdb

test: lint types bench test-kurrentdb pytest

clean:
	rm -rf $(VENV) $(KVENV) .mypy_cache .ruff_cache .hypothesis
