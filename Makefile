# The two commands the README promises: `make demo` and `make test`.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test test-sqlite test-postgres test-mariadb test-mssql test-extras lint services browsers mariadb-headers spark benchmark clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark]'
	touch $@

demo: $(INSTALLED)
	$(BIN)/python example_project/demo.py

services:
	scripts/ensure-services.sh

browsers:
	scripts/ensure-chromium.sh

mariadb-headers:
	scripts/ensure-mariadb-headers.sh

spark:
	scripts/ensure-spark.sh

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/mypy eventferry_django

test-sqlite: $(INSTALLED) services browsers spark
	EVENTFERRY_TEST_DB=sqlite $(BIN)/pytest

test-postgres: $(INSTALLED) services spark
	EVENTFERRY_TEST_DB=postgres $(BIN)/pytest

test-mariadb: $(INSTALLED) services spark
	EVENTFERRY_TEST_DB=mariadb $(BIN)/pytest

# Needs EVENTFERRY_MSSQL_URL (see tests/settings.py) and `pip install -e '.[mssql]'`.
test-mssql: $(INSTALLED)
	$(BIN)/python -m pip install --quiet -e '.[mssql]'
	EVENTFERRY_TEST_DB=mssql $(BIN)/pytest

# Each user-facing extra in a clean virtualenv of its own, without dev (see the script).
test-extras: $(INSTALLED) services mariadb-headers
	$(BIN)/python scripts/check_extras.py

test: lint test-extras test-sqlite test-postgres test-mariadb

benchmark: $(INSTALLED) services spark
	$(BIN)/python benchmarks/relay.py
	$(BIN)/python benchmarks/publishers.py
	$(BIN)/python benchmarks/archive.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info
