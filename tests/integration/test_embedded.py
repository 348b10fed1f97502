"""The embedded Apache Kafka: starts, answers Metadata, fails over, stops cleanly, fails clearly."""

from __future__ import annotations

import gc
import os
import re
import selectors
import shutil
import signal
import socket
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from spark_kafka_sink.embedded import (DEFAULT_KAFKA_VERSION, BrokerStartError, EmbeddedKafka,
                                       JarResolutionError, JavaNotFoundError, PortInUseError,
                                       StorageFormatError, resolve_kafka_jars)
from spark_kafka_sink.embedded import embedded_kafka as cluster_module
from spark_kafka_sink.embedded import jars as jars_module
from spark_kafka_sink.embedded.ports import free_ports

from ..helpers import create_topic, metadata, wait_for

REPO = Path(__file__).resolve().parents[2]


def _broker_ids(port: int) -> list[int]:
    return sorted(b.node_id for b in metadata(f"127.0.0.1:{port}", []).brokers)


def _gone(pid: int) -> bool:
    """True when no process ``pid`` exists (reaped), as seen by both kill(0) and /proc."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return not Path(f"/proc/{pid}").exists()
    return False


def _state(pid: int) -> str | None:
    """The /proc state letter of ``pid`` (R, S, Z...), or None when it does not exist."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    return stat.rsplit(")", 1)[1].split()[0]


def _embedded_only(kafka):
    if getattr(kafka, "external", False):
        pytest.skip("KAFKA_BOOTSTRAP points at an external cluster")


# --- single node ----------------------------------------------------------------------------

@pytest.mark.broker
def test_single_node_answers_metadata_with_one_broker(kafka):
    _embedded_only(kafka)
    node = kafka.nodes[0]
    assert kafka.bootstrap_servers == f"127.0.0.1:{node.port}"
    assert _broker_ids(node.port) == [1]
    view = kafka.metadata([])
    assert tuple(view.nodes) == (1,) and view.controller_id == 1
    assert view.cluster_id == kafka.cluster_id
    assert node.is_alive and _state(node.pid) not in (None, "Z")
    assert node.log_mentions("Kafka Server started")


@pytest.mark.broker
def test_single_node_creates_topics_and_reports_leaders(kafka):
    _embedded_only(kafka)
    topic = f"embedded-{uuid.uuid4().hex[:8]}"
    leaders = create_topic(kafka.bootstrap_servers, topic, partitions=3)
    assert leaders == {0: 1, 1: 1, 2: 1}
    assert kafka.leaders(topic) == leaders


@pytest.mark.broker
def test_cli_broker_on_a_given_port_with_topics_prints_bootstrap_and_stops_on_sigint(tmp_path):
    (port,) = free_ports(1)
    command = [sys.executable, "-m", "spark_kafka_sink", "broker", "--work-dir", str(tmp_path),
               "--port", str(port), "--topic", "cli-events:3", "--topic", "cli-events.dlq"]
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            lines = _read_until(proc, "Press Ctrl-C", timeout_s=90)
            bootstrap = next(line.split("=", 1)[1] for line in lines
                             if line.startswith("bootstrap.servers="))
            assert bootstrap == f"127.0.0.1:{port}"
            assert {"topic cli-events: 3 partition(s)", "topic cli-events.dlq: 1 partition(s)"} <= set(lines)
            jvm_pid = int(re.search(r"node 1: pid (\d+)", "\n".join(lines)).group(1))
            assert _broker_ids(port) == [1]
            topics = {t.name: len(t.partitions)
                      for t in metadata(bootstrap, ["cli-events", "cli-events.dlq"]).topics}
            assert topics == {"cli-events": 3, "cli-events.dlq": 1}
            assert _state(jvm_pid) not in (None, "Z")
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr
    assert b"Stopped." in stderr
    assert _gone(jvm_pid), f"JVM {jvm_pid} survived the CLI (state {_state(jvm_pid)})"
    assert (tmp_path / "node-1" / "kafka.log").is_file()  # a given --work-dir is kept


def _read_until(proc: subprocess.Popen, marker: str, timeout_s: float) -> list[str]:
    """Lines of ``proc``'s stdout up to the one containing ``marker`` (raw reads: no buffering)."""
    data = b""
    fd = proc.stdout.fileno()
    deadline = time.monotonic() + timeout_s
    with selectors.DefaultSelector() as sel:
        sel.register(fd, selectors.EVENT_READ)
        while time.monotonic() < deadline and marker.encode() not in data:
            if sel.select(timeout=0.5):
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                data += chunk
            elif proc.poll() is not None:
                break
    lines = data.decode(errors="replace").splitlines()
    if marker.encode() in data:
        return lines
    raise AssertionError(f"the CLI never printed {marker!r}; stdout {lines}, exit {proc.poll()}, "
                         f"stderr:\n{proc.stderr.read() if proc.poll() is not None else ''}")


# --- lifecycle ------------------------------------------------------------------------------

@pytest.mark.broker
def test_close_reaps_every_jvm_including_restarted_ones(tmp_path):
    cluster = EmbeddedKafka(1, work_dir=tmp_path).start()
    try:
        first = cluster.nodes[0].pid
        assert cluster.kill_node(1) == -signal.SIGKILL
        assert _gone(first)  # killed and reaped at once: no zombie
        cluster.restart_node(1)
        second = cluster.nodes[0].pid
        assert second != first and _broker_ids(cluster.nodes[0].port) == [1]
    finally:
        cluster.close()
    assert _gone(second)
    assert not cluster.nodes
    cluster.close()  # idempotent


@pytest.mark.broker
def test_a_forgotten_cluster_is_killed_by_its_finalizer():
    cluster = EmbeddedKafka(1).start()
    pid, work_dir = cluster.nodes[0].pid, cluster.work_dir
    del cluster
    gc.collect()
    assert _gone(pid)
    assert not work_dir.exists()  # the temporary work dir goes too


@pytest.mark.broker
def test_jvm_dies_with_a_python_process_that_is_sigkilled(tmp_path):
    script = ("import sys, time\n"
              "from spark_kafka_sink.embedded import EmbeddedKafka\n"
              "k = EmbeddedKafka(1, work_dir=sys.argv[1]).start()\n"
              "print(k.nodes[0].pid, flush=True)\n"
              "time.sleep(600)\n")
    command = [sys.executable, "-c", script, str(tmp_path)]  # a SIGKILLed process cleans nothing up
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE) as proc:
        try:
            jvm = int(proc.stdout.readline())
        finally:
            proc.kill()
    # The JVM is not our child: once its parent is gone it belongs to init, which reaps it.
    wait_for(lambda: _state(jvm) in (None, "Z"), 15, f"JVM {jvm} to die with its parent")


@pytest.mark.broker
@pytest.mark.heavy
def test_appcds_archives_are_dumped_once_then_used(tmp_path):
    shared = resolve_kafka_jars(DEFAULT_KAFKA_VERSION)
    shutil.copytree(shared.directory, tmp_path / "cache" / shared.directory.name,
                    ignore=shutil.ignore_patterns("cds"))  # the same jars, no archives yet
    archives = tmp_path / "cache" / shared.directory.name / "cds"
    with EmbeddedKafka(1, cache_dir=tmp_path / "cache", work_dir=tmp_path / "a") as first:
        assert first.nodes[0].log_mentions("-XX:ArchiveClassesAtExit=")
        assert sorted(p.name.split("-")[0] for p in archives.glob("*.jsa")) == ["tool"]
    assert sorted(p.name.split("-")[0] for p in archives.glob("*.jsa")) == ["broker", "tool"]
    assert not list(archives.glob("*.tmp"))
    with EmbeddedKafka(1, cache_dir=tmp_path / "cache", work_dir=tmp_path / "b") as second:
        assert second.nodes[0].log_mentions("-XX:SharedArchiveFile=")
        assert "[warning][cds]" not in second.nodes[0].log_path.read_text()


# --- three nodes ----------------------------------------------------------------------------

@pytest.mark.cluster
@pytest.mark.heavy
def test_three_nodes_spread_leaders_and_fail_over(kafka_cluster):
    cluster = kafka_cluster
    ports = {node.node_id: node.port for node in cluster.nodes}
    assert all(_broker_ids(port) == [1, 2, 3] for port in ports.values())
    assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in ports.values())

    topic = f"failover-{uuid.uuid4().hex[:8]}"
    leaders = create_topic(cluster.bootstrap_servers, topic, partitions=6, replication_factor=3)
    assert len(set(leaders.values())) >= 2, leaders

    victim = leaders[0]
    led = sorted(p for p, leader in leaders.items() if leader == victim)
    survivor = next(port for node_id, port in ports.items() if node_id != victim)
    killed_at = time.monotonic()
    cluster.kill_node(victim)

    def moved() -> dict[int, int] | None:
        resp = metadata(f"127.0.0.1:{survivor}", [topic])
        now = {p.partition_index: p.leader_id for p in resp.topics[0].partitions}
        brokers = {b.node_id for b in resp.brokers}
        if victim in brokers or any(now[p] in (victim, -1) for p in led):
            return None
        return now

    after = wait_for(moved, 30, f"partitions {led} to leave killed node {victim}")
    failover_s = time.monotonic() - killed_at
    assert all(after[p] != victim and after[p] in ports for p in led), after
    assert failover_s < 30

    cluster.restart_node(victim)
    assert all(_broker_ids(port) == [1, 2, 3] for port in ports.values())
    print(f"leaders {leaders} -> {after} in {failover_s:.1f} s after killing node {victim}")


@pytest.mark.cluster
def test_three_node_cluster_uses_replication_factor_3_and_min_isr_2(kafka_cluster):
    props = kafka_cluster.nodes[0].config_path.read_text()
    assert "default.replication.factor=3\n" in props
    assert "min.insync.replicas=2\n" in props
    assert "controller.quorum.voters=" + ",".join(
        f"{n.node_id}@127.0.0.1:{n.controller_port}" for n in kafka_cluster.nodes) in props


# --- clear errors ---------------------------------------------------------------------------

def test_busy_port_is_named(tmp_path):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        started = time.monotonic()
        with pytest.raises(PortInUseError, match=rf"127\.0\.0\.1:{port}\b") as info:
            EmbeddedKafka(1, ports=[port], work_dir=tmp_path).start()
        assert info.value.port == port
        assert time.monotonic() - started < 5


@pytest.mark.broker
def test_a_port_taken_after_allocation_is_replaced_once(tmp_path, monkeypatch):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        real = cluster_module.free_ports
        calls = []

        def racy(count: int) -> list[int]:
            calls.append(count)
            ports = real(count)
            return [port, *ports[1:]] if len(calls) == 1 else ports

        monkeypatch.setattr(cluster_module, "free_ports", racy)
        with EmbeddedKafka(1, work_dir=tmp_path) as cluster:
            assert len(calls) == 2
            assert cluster.nodes[0].port != port
            assert _broker_ids(cluster.nodes[0].port) == [1]


def test_missing_java_says_to_install_java_17(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))
    monkeypatch.delenv("JAVA_HOME", raising=False)
    with pytest.raises(JavaNotFoundError, match="Java 17") as info:
        EmbeddedKafka(1, cache_dir=tmp_path / "cache", work_dir=tmp_path / "work").start()
    assert "install" in str(info.value).lower()
    with pytest.raises(JavaNotFoundError, match="Java 17"):
        resolve_kafka_jars(DEFAULT_KAFKA_VERSION, tmp_path / "cache")


def test_bogus_version_fails_with_maven_complaint(tmp_path):
    started = time.monotonic()
    with pytest.raises(JarResolutionError) as info:
        resolve_kafka_jars("0.0.0-bogus", tmp_path, method="maven")
    message = str(info.value)
    assert "0.0.0-bogus" in message
    assert "kafka_2.13" in message and "[ERROR]" in message  # Maven's own words
    assert not (tmp_path / "kafka-0.0.0-bogus" / ".complete").exists()
    assert time.monotonic() - started < 60


def test_neither_maven_nor_ivy_is_a_clear_error(tmp_path, monkeypatch):
    monkeypatch.setattr(jars_module.shutil, "which", lambda name: None)
    monkeypatch.setattr(jars_module, "find_ivy_jar", lambda: None)
    with pytest.raises(JarResolutionError, match="pip install pyspark"):
        resolve_kafka_jars(DEFAULT_KAFKA_VERSION, tmp_path, java="java")


@pytest.mark.broker
def test_bad_property_fails_the_format_with_kafkas_message(tmp_path):
    with pytest.raises(StorageFormatError, match="Invalid value lots for configuration num.network.threads"):
        EmbeddedKafka(1, work_dir=tmp_path, extra_properties={"num.network.threads": "lots"}).start()


@pytest.mark.broker
def test_a_jvm_that_dies_at_start_fails_with_its_exit_code_and_log(tmp_path):
    with pytest.raises(BrokerStartError, match=r"(?s)exited with code 1 during start-up.*heap") as info:
        EmbeddedKafka(1, work_dir=tmp_path, heap="1m").start()
    assert str(tmp_path / "node-1" / "kafka.log") in str(info.value)


@pytest.mark.broker
def test_start_timeout_reports_the_log(tmp_path):
    with pytest.raises(BrokerStartError, match=r"(?s)timed out after .* node 1 log") as info:
        EmbeddedKafka(1, work_dir=tmp_path, start_timeout_s=0.01).start()
    assert "spark-kafka-sink: starting node 1" in str(info.value)


def test_ivy_resolves_the_same_jars_as_maven(tmp_path):
    """pyspark (a dev dependency) ships the Ivy jar used on machines without Maven."""
    assert jars_module.find_ivy_jar() is not None, "pyspark's Ivy jar was not found"
    maven = resolve_kafka_jars(DEFAULT_KAFKA_VERSION)
    ivy = resolve_kafka_jars(DEFAULT_KAFKA_VERSION, tmp_path, method="ivy")
    assert ivy.method == "ivy"
    assert ivy.jars == maven.jars
    assert not [j for j in ivy.jars if re.search(r"-(sources|javadoc|tests|test)\.jar$", j)]
