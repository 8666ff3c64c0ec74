# The two commands a newcomer needs:  make demo   and   make test
VENV ?= .venv
export PATH := $(CURDIR)/$(VENV)/bin:$(PATH)

.PHONY: demo test test-fast check install install-test lock clean down

install:
	VENV=$(VENV) scripts/bootstrap.sh

install-test:
	VENV=$(VENV) scripts/bootstrap.sh --test

## make demo: install, start the local stack (Kafka A and B, Connect + MM2, the Spark Connect server the
## parity proofs run on), load a workload, show it replicating and where the Spark Connect server listens
demo: install
	$(VENV)/bin/mirrorbook demo

## make test: install what the tests need, check the code, and run the whole suite (unit, integration, Airflow, Spark)
test: install-test check
	$(VENV)/bin/python -m pytest $(PYTEST_ARGS)

## make check: style and complexity (ruff), types (mypy: strict for core, replication and runbooks) and the layer
## order (import-linter contracts), as pyproject.toml configures them, in seconds (mypy's cache: .mypy_cache)
check: install-test
	$(VENV)/bin/ruff check .
	$(VENV)/bin/mypy
	$(VENV)/bin/lint-imports

## make test-fast: the tests that need nothing running (unit and property tests, the audit store on SQLite), in
## a few minutes: the inner loop
test-fast: install-test check
	$(VENV)/bin/python -m pytest -m "not services" $(PYTEST_ARGS)

## make down: stop the demo stack and delete its data
down:
	$(VENV)/bin/mirrorbook devstack down --purge

## make lock: re-pin the full dependency set after changing requirements.txt
lock:
	python3 -m venv /tmp/mirrorbook-lock && /tmp/mirrorbook-lock/bin/pip install -q -r requirements.txt \
	  && /tmp/mirrorbook-lock/bin/pip freeze --all --exclude-editable | grep -v '^pip==' > requirements.lock && rm -rf /tmp/mirrorbook-lock

clean:
	rm -rf $(VENV) .pytest_cache
