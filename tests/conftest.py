"""Shared fixtures: the real Apache Kafka the integration tests run against.

``kafka``          one node for the whole session (or an external cluster, see below).
``kafka_cluster``  three nodes (replication factor 3, min ISR 2) per test module, started only by
                   the modules that ask for it; tests may kill and restart its nodes.
``secured_kafka``  one node with SSL, SASL_PLAINTEXT and SASL_SSL listeners (client certificates
                   required) for the session, shared by the producer, broker and Spark security tests.
``proxied_cluster`` a ``spark_kafka_sink.testing.KafkaCluster`` of three nodes, each behind a
                   FaultProxy, per test module (the fault tests keep to one module: a 3-node start
                   costs 10-30 s on 2 cores).

The nodes' storage and logs live in pytest's temporary directory (``basetemp``/kafka-1node0/...,
kept for the last three runs). If a broker cannot start, the fixture FAILS (it never skips), and
the failure message carries the node's log tail.
"""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path
from importlib import metadata

import pytest

from spark_kafka_sink.embedded import BrokerLaunchError, BrokerSecurity, EmbeddedKafka
from spark_kafka_sink.testing import KafkaCluster

from .scheduling import is_versioned, run_order

# The tests' brokers (and those of the processes they start: the demo's, the soak's) carry little
# load, so they run on the C1 compiler only: less CPU to start and to idle (docs/ARCHITECTURE.md,
# "The run"). Benchmarks leave their brokers as they are.
os.environ.setdefault("SPARK_KAFKA_SINK_BROKER_JAVA_OPTIONS", "-XX:TieredStopAtLevel=1")


def pytest_configure(config):
    """PySpark 3.x's ``DataFrame.collect()`` leaves its result socket to the garbage collector
    (PySpark 4 closes it): on those lines only (the compatibility runs), an unclosed socket is not
    a test failure. The suite on PySpark 4 still fails on any socket left open."""
    try:
        pyspark = metadata.version("pyspark")
    except metadata.PackageNotFoundError:
        return
    if pyspark.startswith("3."):
        config.addinivalue_line("filterwarnings", r"ignore:unclosed <socket\.socket:ResourceWarning")
        config.addinivalue_line(
            "filterwarnings", r"ignore:Exception ignored in. <socket\.socket:pytest.PytestUnraisableExceptionWarning")


def pytest_collection_modifyitems(config, items):
    """The suite's order and the ``versioned`` marker (``tests/scheduling.py``)."""
    items[:] = run_order(items)
    sources: dict[Path, str] = {}
    for item in items:
        path = Path(item.fspath)
        if path not in sources:
            sources[path] = path.read_text(encoding="utf-8") if path.suffix == ".py" else ""
        if is_versioned(item.nodeid, sources[path]):
            item.add_marker(pytest.mark.versioned)


_ARCHIVE_DUMP = pytest.StashKey()


def pytest_addoption(parser):
    parser.addoption("--spark-archive", action="store_true",
                     help="dump Spark's class-data archive (spark_kafka_sink.spark.cds) in the background "
                          "while this run's tests run, unless there is one; the run ends once it is done")


def pytest_sessionstart(session):
    """With ``--spark-archive`` and no Spark class-data archive yet (a fresh machine), start
    dumping one in the background, so the dump overlaps tests that need no Spark JVM (``make
    test``'s unit run, ``make compat``'s unit tests); the Spark tests' fixture waits for it. In
    the pytest process only, not in an xdist worker."""
    if session.config.getoption("--spark-archive") and not hasattr(session.config, "workerinput"):
        from spark_kafka_sink.spark import cds as spark_cds  # imports pyspark: only here

        dump = spark_cds.start_ensuring()
        if dump is not None:
            session.config.stash[_ARCHIVE_DUMP] = dump


def pytest_unconfigure(config):
    """Wait for the background dump (ended with its children, by its process group, past 5 minutes)."""
    dump = config.stash.get(_ARCHIVE_DUMP, None)
    if dump is not None:
        from spark_kafka_sink.spark import cds as spark_cds

        try:
            dump.wait(timeout=300)
        except subprocess.TimeoutExpired:
            spark_cds.kill_group(dump)


def pytest_sessionfinish(session, exitstatus):
    """In CI (``CI`` set) a skipped test fails the run: broker and Spark tests must really run."""
    if not os.environ.get("CI") or exitstatus != pytest.ExitCode.OK:
        return
    reporter = session.config.pluginmanager.get_plugin("terminalreporter")
    skipped = reporter.stats.get("skipped", []) if reporter else []
    if skipped:
        reporter.ensure_newline()
        reporter.write_line(f"CI: {len(skipped)} test(s) skipped; skips are failures in CI:", red=True)
        for report in skipped:
            reporter.write_line(f"  {report.nodeid}: {report.longrepr}")
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@dataclass(frozen=True)
class ExternalKafka:
    """A cluster the tests did not start (``KAFKA_BOOTSTRAP``): only its address is known."""

    bootstrap_servers: str
    external: bool = True


@pytest.fixture(scope="session")
def kafka(tmp_path_factory):
    """A single-node Apache Kafka (KRaft) for the session: ``kafka.bootstrap_servers``.

    Set ``KAFKA_BOOTSTRAP=host:port[,host:port]`` to run the tests against an existing cluster
    instead; the fixture then yields an :class:`ExternalKafka` with only ``bootstrap_servers``
    (tests that need to control the nodes skip). Auto topic creation must be off there too,
    since tests create their topics explicitly.
    """
    external = os.environ.get("KAFKA_BOOTSTRAP", "").strip()
    if external:
        yield ExternalKafka(external)
        return
    yield from _embedded(1, tmp_path_factory)


TV1_KAFKA_VERSION = "3.9.1"
"""The newest Kafka without transaction version 2 (KIP-890): its transactions are version 1."""


@pytest.fixture(scope="session")
def kafka_tv1(tmp_path_factory):
    """A single-node Apache Kafka 3.9 (KRaft), whose transactions are version 1 (AddPartitionsToTxn,
    EndTxn below v5), for the tests that check both transaction versions."""
    cluster = EmbeddedKafka(1, version=TV1_KAFKA_VERSION, heap="256m",
                            work_dir=tmp_path_factory.mktemp("kafka-tv1"))
    yield from _started(cluster, f"the embedded Apache Kafka {TV1_KAFKA_VERSION}")


@pytest.fixture(scope="module")
def kafka_cluster(tmp_path_factory):
    """A 3-node Apache Kafka cluster (static voters, RF 3, min ISR 2), fresh for each module.

    Always embedded (``KAFKA_BOOTSTRAP`` is ignored): fault tests kill and restart its nodes with
    ``kill_node`` / ``stop_node`` / ``restart_node``. A test that takes a node down should bring
    it back (``restart_node``) so later tests of the module see three brokers.
    """
    yield from _embedded(3, tmp_path_factory)


@pytest.fixture(scope="module")
def proxied_cluster(tmp_path_factory):
    """Three nodes (RF 3, min ISR 2), each client listener behind its own FaultProxy
    (``cluster.proxy(node_id)``); replication and the quorum stay direct. Tests that kill,
    freeze or stall a node bring it back before they end."""
    cluster = KafkaCluster(3, proxied=True, work_dir=tmp_path_factory.mktemp("kafka-3proxied"))
    yield from _started(cluster, "the proxied 3-node Apache Kafka")


@pytest.fixture(scope="session")
def secured_kafka(tmp_path_factory):
    """One node with every secured listener (``BrokerSecurity(client_auth="required")``, the
    default users): ``bootstrap_for(protocol)``, ``client_properties(protocol, mechanism, user)``,
    ``tls``. Tests must not change its users or listeners."""
    cluster = EmbeddedKafka(1, work_dir=tmp_path_factory.mktemp("kafka-secured"), heap="256m",
                            security=BrokerSecurity(client_auth="required"))
    yield from _started(cluster, "the secured embedded Apache Kafka")


def _embedded(nodes: int, tmp_path_factory):
    cluster = EmbeddedKafka(nodes, work_dir=tmp_path_factory.mktemp(f"kafka-{nodes}node"))
    yield from _started(cluster, f"the embedded Apache Kafka ({nodes} node(s))")


def _started(cluster, what: str):
    """Start ``cluster`` (FAIL, never skip, if it cannot), yield it, close it."""
    try:
        cluster.start()
    except BrokerLaunchError as exc:
        pytest.fail(f"{what} did not start: {type(exc).__name__}: {exc}", pytrace=False)
    try:
        yield cluster
    finally:
        cluster.close()
