# Two commands set everything up on a fresh machine: `make test` and (with the Spark sink) `make demo`.
# The virtualenv is created on first use; the install re-runs only when the packaging files change.
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
STAMP  := $(VENV)/.installed-dev
PYTEST_ARGS ?=

.PHONY: install test unit integration compat fuzz broker jars demo dist docs bench bench-producer bench-spark \
	bench-streaming bench-avro bench-avro-encode bench-avro-spark soak clean

# The venv's own pip installs (the package builds in an isolated environment with the setuptools
# pyproject.toml names). No byte-compiling at install: Python compiles what it imports on first
# use; compiling all of PySpark up front costs about a quarter of the install.
$(BIN)/python:
	$(PYTHON) -m venv $(VENV)

$(STAMP): $(BIN)/python setup.cfg pyproject.toml
	$(BIN)/python -m pip install -q --no-compile -e '.[dev]'
	touch $(STAMP)

install: $(STAMP)

# Resolve the Apache Kafka broker jars into the cache (tests and `broker` do this on demand too).
jars: install
	$(BIN)/python -m spark_kafka_sink.embedded.jars

# pytest-xdist workers: two on the 2-core machine; WORKERS=0 runs the tests in the pytest process
# itself. tests/scheduling.py orders the tests; a module's tests stay on one worker, so its
# module fixtures (a cluster, a module's own broker) start once.
WORKERS ?= 2
XDIST = $(if $(filter 0,$(WORKERS)),,-n $(WORKERS) --dist loadfile --no-loadscope-reorder)
# The broker and Spark tests wait more than they compute (node kills, timeouts, throttling, JVM
# and driver-process starts): a third worker overlaps those waits (on 2 cores: the broker tests
# 2 min 48 s against 3 min 19 s on two workers, the Spark tests about 3 min 50 s against 5 min).
BROKER_WORKERS ?= $(if $(filter 0,$(WORKERS)),0,3)
BROKER_XDIST = $(if $(filter 0,$(BROKER_WORKERS)),,-n $(BROKER_WORKERS) --dist loadfile --no-loadscope-reorder)

# The whole suite, the fast layer first: the unit tests (a broken one fails the run within a
# minute or two), the docs site (about a second), then the broker and Spark tests against a real
# embedded Apache Kafka (the examples of README.md and docs/ among them).
test: install
	$(BIN)/python -m pytest tests/unit $(XDIST) --spark-archive $(PYTEST_ARGS)
	$(MKDOCS)
	$(BIN)/python -m pytest tests/integration $(BROKER_XDIST) $(PYTEST_ARGS)
	$(BIN)/python -m pytest tests/spark $(BROKER_XDIST) $(PYTEST_ARGS)

unit: install
	$(BIN)/python -m pytest tests/unit $(XDIST) $(PYTEST_ARGS)

integration: install
	$(BIN)/python -m pytest tests/integration $(XDIST) $(PYTEST_ARGS)

# The compatibility runs (docs/install.md, "Supported versions"): for each older PySpark line a virtualenv
# .venv-compat/pyspark-<line> with the pins of compat/pyspark-<line>.txt installed first, then the
# package with its extras (which must keep that PySpark), then what can differ between PySpark
# lines: the tests marked 'versioned' (tests/scheduling.py: the unit tests that touch pyspark or
# pyarrow, and the Spark tests listed here), without the tests of the newest stack (marker
# 'newest'). `.ci/run` runs it after `make test`. PySpark 3.4 runs on Python 3.10 (the oldest
# supported), 3.5 on 3.11; each falls back to $(PYTHON) where that Python is not installed.
COMPAT_LINES ?= 3.4 3.5
COMPAT_TESTS ?= tests/unit tests/spark/test_sink.py tests/spark/test_task_retry.py \
	tests/spark/test_bad_input.py tests/spark/test_metrics.py tests/spark/test_jobs.py \
	tests/spark/test_error_policy.py tests/spark/test_spark_connect.py
PYTHON_3.4 ?= python3.10
PYTHON_3.5 ?= python3.11
COMPAT := .venv-compat

compat: $(addprefix compat-,$(COMPAT_LINES))

$(COMPAT)/pyspark-%/.installed: compat/pyspark-%.txt setup.cfg pyproject.toml
	rm -rf $(COMPAT)/pyspark-$*
	py=$$(for c in $(PYTHON_$*) $$(ls -d $${PYENV_ROOT:-$$HOME/.pyenv}/versions/$(PYTHON_$*:python%=%).*/bin/$(PYTHON_$*) \
	  2>/dev/null) $(PYTHON); do $$c -c '' 2>/dev/null && { echo $$c; break; }; done); \
	  echo "pyspark-$*: $$($$py --version)"; $$py -m venv $(COMPAT)/pyspark-$*
	$(COMPAT)/pyspark-$*/bin/python -m pip install -q --upgrade pip setuptools wheel
	$(COMPAT)/pyspark-$*/bin/python -m pip install -q -r compat/pyspark-$*.txt
	$(COMPAT)/pyspark-$*/bin/python -m pip install -q -e '.[spark,test,zstd,snappy]'
	$(COMPAT)/pyspark-$*/bin/python -m compat.check compat/pyspark-$*.txt
	touch $@

compat-%: $(COMPAT)/pyspark-%/.installed
	$(COMPAT)/pyspark-$*/bin/python -m pytest -m "versioned and not newest" $(COMPAT_TESTS) $(XDIST) --spark-archive $(PYTEST_ARGS)

# The model-based tests (the producer core; the exactly-once commit protocol) with their long
# profiles (thousands of runs, longer ones; `make test` runs bounded profiles). Repeat them for
# longer hunts, e.g. FUZZ_ROUNDS=10.
FUZZ_ROUNDS ?= 1
FUZZ_TESTS ?= tests/unit/producer/test_producer_model.py tests/unit/spark/test_commit_model.py
fuzz: install
	for round in $$(seq $(FUZZ_ROUNDS)); do \
	  SKS_FUZZ=1 $(BIN)/python -m pytest $(FUZZ_TESTS) -p no:cacheprovider -q \
	    $(PYTEST_ARGS) || exit 1; done

# A single-node Apache Kafka on loopback until Ctrl-C (use --nodes 3 via ARGS for a cluster).
broker: install
	$(BIN)/spark-kafka-sink broker $(ARGS)

# The main streaming job end to end on the embedded Apache Kafka (demo/README.md): generate click
# events, spark-submit jobs/stream_to_kafka.py with availableNow, read the topic back, print it.
demo: install
	$(BIN)/python -m demo $(ARGS)

# The user guide as a static site in site/ (mkdocs.yml: docs/, with README.md as its home page),
# warnings (a broken link or anchor, a page left out of the nav) as errors.
MKDOCS = NO_MKDOCS_2_WARNING=1 $(BIN)/python -m mkdocs build --strict --quiet
docs: install
	$(MKDOCS)

# A wheel of the package in dist/ (README, "Install": until the package is published, install it
# from this wheel, on a cluster too). tests/integration/test_dist.py builds it the same way.
dist: install
	rm -rf dist
	$(BIN)/python -m pip wheel -q --no-deps -w dist .
	@ls dist/*.whl

# Benchmarks (bench/README.md); not timed tests. `bench` runs both; pass options to one via ARGS,
# e.g. make bench-producer ARGS="--records 200000".
bench: bench-producer bench-spark

# The standalone producer against kafka-python, confluent-kafka and the Java client.
bench-producer: install
	$(BIN)/python -m bench.producer $(ARGS)

# KafkaSink in Spark local[2] against Spark's built-in Kafka sink, confluent-kafka in
# foreachPartition, and the no-op floors.
bench-spark: install
	$(BIN)/python -m bench.spark $(ARGS)

# Streaming latency (bench/README.md, "Streaming"): Spark's addBatch time per micro-batch of a
# rate source through KafkaSink (at-least-once and exactly-once), Spark's built-in Kafka sink and
# the no-op floors, e.g. make bench-streaming ARGS="--rates 2000 --duration 12".
bench-streaming: install
	$(BIN)/python -m bench.streaming $(ARGS)

# Avro (bench/README.md, "Avro"): the column-wise encoder alone against fastavro and
# confluent-kafka's AvroSerializer, then KafkaSink with value.format=avro and a schema registry in
# Spark local[2] against Spark's to_avro and its built-in Kafka sink. ARGS go to both (--rows,
# --repeat) or to the one run alone, e.g. make bench-avro-spark ARGS="--rows 50000".
bench-avro: bench-avro-encode bench-avro-spark

bench-avro-encode: install
	$(BIN)/python -m bench.avro_encode $(ARGS)

bench-avro-spark: install
	$(BIN)/python -m bench.avro_spark $(ARGS)

# The soak (docs/soak.md): a bounded-rate stream through KafkaSink for 10 minutes on an embedded
# Apache Kafka, then a pass/fail verdict on RSS, threads, fds, pool eviction and delivery (exit 1 on
# failure). Options via ARGS, e.g. make soak ARGS="--duration 120 --rate 200".
soak: install
	$(BIN)/python -m bench.soak $(ARGS)

clean:
	rm -rf $(VENV) $(COMPAT) build dist site *.egg-info .pytest_cache .hypothesis
