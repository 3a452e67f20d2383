# kafka-reassigner — everything installs itself, idempotently, into project-local dirs:
#   .venv/   Python packages (PyPI)        .cache/jars/   Kafka + Spark connector jars (Maven Central)
#   redis-server, Java and Maven come from Debian's packages when missing.
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
export REASSIGNER_CACHE_DIR := $(CURDIR)/.cache
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(BIN)/python

.PHONY: demo test test-scenarios test-faults test-fast install system-packages jars lint bench clean

demo: install                    ## the main job on a real local Kafka cluster, Redis and Spark
	$(BIN)/reassigner demo $(DEMO_ARGS)

test: install                    ## the whole suite (unit, property, real-stack and Spark tests)
	$(BIN)/pytest $(PYTEST_ARGS)

test-scenarios: install          ## every reaction, asserted on one real local cluster (tests/scenarios)
	$(BIN)/pytest -m scenario $(PYTEST_ARGS)

test-faults: install             ## the fault-injection suite: each fault of issue 14 on one real cluster (tests/faults)
	$(BIN)/pytest -m faults $(PYTEST_ARGS)

test-fast: install               ## only the fast tests (no Kafka, Redis or Spark started)
	$(BIN)/pytest -m "not slow and not stack and not spark" $(PYTEST_ARGS)

install: system-packages $(VENV)/.installed jars

system-packages:
	@missing=""; \
	command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	if command -v docker >/dev/null 2>&1 && ! docker compose version >/dev/null 2>&1; then \
	  command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

$(VENV)/.installed: pyproject.toml
	@[ -x $(BIN)/python ] || $(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e ".[test]"
	@touch $@

jars: $(VENV)/.installed
	$(BIN)/reassigner local fetch-jars

lint: install
	$(BIN)/lint-imports

bench: install
	$(BIN)/python benchmarks/bench_placement.py
	$(BIN)/python benchmarks/bench_codec.py

clean:
	rm -rf .reassigner .hypothesis spark-warehouse
