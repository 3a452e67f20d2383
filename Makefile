# kafka-reassigner — everything installs itself, idempotently, into project-local dirs:
#   .venv/   Python packages (PyPI), the exact versions of requirements.lock (with their hashes);
#            `make docs` adds mkdocs at the versions of requirements-docs.lock
#   .cache/jars/   Kafka + Spark connector jars (Maven Central)
#   python3, python3-venv, redis-server, Java, Maven, promtool (package prometheus: the alert
#   rules' test), chromium (the status page's browser test) and docker-compose (`config`
#   validates docker-compose.yml; no Docker engine is needed) come from Debian's packages when
#   missing.
# The one prerequisite is make itself (it runs this file): apt-get install -y make
SHELL := /bin/bash
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
LOCK ?= requirements.lock
export REASSIGNER_CACHE_DIR := $(CURDIR)/.cache
export PYSPARK_PYTHON := $(CURDIR)/$(BIN)/python
export PYSPARK_DRIVER_PYTHON := $(CURDIR)/$(BIN)/python

.PHONY: demo test test-slow test-scenarios test-faults test-kafka-versions test-fast install system-packages python-packages jars lint lock docs bench clean

demo: install                    ## the main job on a real local Kafka cluster, Redis and Spark
	$(BIN)/reassigner demo $(DEMO_ARGS)

test: install                    ## unit, property, real-stack and Spark tests (about 8 minutes)
	$(BIN)/pytest -m "not scenario and not faults and not long" $(PYTEST_ARGS)

test-slow: install               ## the suites with a stack or processes of their own (about 12 minutes; CI runs them)
	$(BIN)/pytest -m long $(PYTEST_ARGS)

test-scenarios: install          ## every reaction, asserted on one real local cluster (tests/scenarios, about 18 minutes)
	$(BIN)/pytest -m scenario $(PYTEST_ARGS)

test-faults: install             ## the fault-injection suite: every fault the product rides out, on one real cluster (tests/faults, about 15-19 minutes)
	$(BIN)/pytest -m faults $(PYTEST_ARGS)

KAFKA_MATRIX ?= 3.7.2 4.4.0
# On each release: `make test`'s real-stack and Spark tests, then the suites of a stack of their
# own that read what differs between releases (the watcher, cordons, ELR).
KAFKA_MATRIX_MARKS ?= (stack or spark) and not scenario and not faults and not long
KAFKA_MATRIX_TESTS ?= tests/edge/test_watcher_sees_cluster.py tests/edge/test_cordons_on_a_real_cluster.py tests/edge/test_eligible_leaders_on_a_real_move.py

test-kafka-versions: install       ## `make test`'s real-stack and Spark tests, the watcher's, the cordons' and the ELR heal's, on the oldest and newest supported Kafka (KAFKA_MATRIX; CI runs it)
	@for version in $(KAFKA_MATRIX); do \
	  echo "--- Kafka $$version"; \
	  REASSIGNER_LOCAL_KAFKA_VERSION=$$version $(BIN)/pytest -m "$(KAFKA_MATRIX_MARKS)" $(PYTEST_ARGS) || exit 1; \
	  REASSIGNER_LOCAL_KAFKA_VERSION=$$version $(BIN)/pytest -m long $(KAFKA_MATRIX_TESTS) $(PYTEST_ARGS) || exit 1; \
	done

test-fast: install               ## only the fast tests (no Kafka, Redis or Spark started)
	$(BIN)/pytest -m "not slow and not stack and not spark" $(PYTEST_ARGS)

install: system-packages python-packages jars

system-packages:
	@missing=""; \
	command -v $(PYTHON) >/dev/null 2>&1 || missing="$$missing python3"; \
	$(PYTHON) -c 'import ensurepip, venv' >/dev/null 2>&1 || missing="$$missing python3-venv"; \
	command -v redis-server >/dev/null 2>&1 || [ -x /usr/bin/redis-server ] || missing="$$missing redis-server"; \
	command -v java >/dev/null 2>&1 || missing="$$missing openjdk-17-jre-headless"; \
	command -v mvn >/dev/null 2>&1 || missing="$$missing maven"; \
	command -v promtool >/dev/null 2>&1 || missing="$$missing prometheus"; \
	command -v chromium >/dev/null 2>&1 || missing="$$missing chromium"; \
	if ! { command -v docker >/dev/null 2>&1 && docker compose version >/dev/null 2>&1; }; then \
	  command -v docker-compose >/dev/null 2>&1 || missing="$$missing docker-compose"; fi; \
	if [ -n "$$missing" ]; then \
	  echo "installing Debian packages:$$missing"; \
	  SUDO=$$( [ "$$(id -u)" = 0 ] || echo sudo ); \
	  $$SUDO apt-get update -qq && DEBIAN_FRONTEND=noninteractive $$SUDO apt-get install -y -qq $$missing >/dev/null; \
	fi

# A venv is trusted only if its pip runs: `python3 -m venv` without python3-venv leaves a
# .venv/bin/python and no pip, and an interrupted install can leave worse. Such a venv is made again.
python-packages:
	@if ! $(BIN)/python -m pip --version >/dev/null 2>&1; then \
	  if [ -e $(VENV) ]; then echo "$(VENV) has no working pip (made without python3-venv, or cut short): making it again"; fi; \
	  rm -rf $(VENV) && $(PYTHON) -m venv $(VENV); \
	fi
	@$(MAKE) --no-print-directory $(VENV)/.installed

# The lock's exact versions, checked against its hashes; then the product itself, editable.
$(VENV)/.installed: pyproject.toml $(LOCK)
	$(BIN)/python -m pip install -q --disable-pip-version-check --require-hashes -r $(LOCK)
	$(BIN)/python -m pip install -q --disable-pip-version-check --no-deps -e .
	@touch $@

jars: python-packages
	$(BIN)/reassigner local fetch-jars

# The documentation site (mkdocs.yml): docs/ built with --strict, so a broken link, anchor or nav
# entry fails; the site goes to .cache/site (ignored). mkdocs comes from requirements-docs.lock,
# with its hashes, into the same venv, once.
docs: python-packages            ## the documentation site, built with mkdocs --strict into .cache/site
	@$(MAKE) --no-print-directory $(VENV)/.docs-installed
	$(BIN)/mkdocs build --strict --site-dir .cache/site

$(VENV)/.docs-installed: requirements-docs.lock $(VENV)/.installed
	$(BIN)/python -m pip install -q --disable-pip-version-check --require-hashes -r requirements-docs.lock
	@touch $@

# Resolve pyproject.toml's ranges again into requirements.lock (keeps the pinned versions unless
# UPGRADE=--upgrade or UPGRADE="--upgrade-package NAME"); uv runs from a throwaway venv. Then the
# `docs` extra into requirements-docs.lock, constrained by requirements.lock (one version of each
# package both need, so installing the docs tool moves nothing the product runs on).
lock:
	@[ -x .cache/lock-venv/bin/uv ] || { $(PYTHON) -m venv .cache/lock-venv && .cache/lock-venv/bin/pip install -q uv==0.13.9; }
	.cache/lock-venv/bin/uv pip compile pyproject.toml --extra test --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --generate-hashes $(UPGRADE) -o requirements.lock
	$(PYTHON) -c 'import tomllib; print(*tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]["docs"], sep="\n")' \
	  | .cache/lock-venv/bin/uv pip compile - --constraint requirements.lock --python-version 3.11 \
	  --python-platform x86_64-manylinux_2_28 --generate-hashes --custom-compile-command "make lock" \
	  $(UPGRADE) -o requirements-docs.lock

lint: install
	$(BIN)/lint-imports

bench: install
	$(BIN)/python benchmarks/bench_placement.py
	$(BIN)/python benchmarks/bench_codec.py

clean:
	rm -rf .reassigner .hypothesis spark-warehouse
