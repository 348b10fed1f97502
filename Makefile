# Two commands set everything up on a fresh machine: `make test` and (with the Spark sink) `make demo`.
# The virtualenv is created on first use; the install re-runs only when the packaging files change.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: install test unit integration broker jars bench clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/python -m pip install -q --upgrade pip setuptools wheel

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Resolve the Apache Kafka broker jars into the cache (tests and `broker` do this on demand too).
jars: install
	$(BIN)/python -m spark_kafka_sink.embedded.jars

# The whole suite: unit tests, then integration tests against a real embedded Apache Kafka.
test: install
	$(BIN)/python -m pytest $(PYTEST_ARGS)

unit: install
	$(BIN)/python -m pytest tests/unit $(PYTEST_ARGS)

integration: install
	$(BIN)/python -m pytest tests/integration $(PYTEST_ARGS)

# A single-node Apache Kafka on loopback until Ctrl-C (use --nodes 3 via ARGS for a cluster).
broker: install
	$(BIN)/spark-kafka-sink broker $(ARGS)

# The standalone producer benchmark against kafka-python, confluent-kafka and the Java client
# (bench/README.md); not a timed test. Pass options via ARGS, e.g. ARGS="--records 200000".
bench: install
	$(BIN)/python -m bench.producer $(ARGS)

clean:
	rm -rf $(VENV) build *.egg-info .pytest_cache .hypothesis
