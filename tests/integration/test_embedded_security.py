"""The embedded broker's secured listeners and per-node advertised ports, checked with an independent
client (confluent-kafka / librdkafka) and with our blocking Metadata and Produce requests.

The session's secured single-node broker (``secured_kafka`` in tests/conftest.py) serves the module: SSL with a required client certificate, SASL_PLAINTEXT
and SASL_SSL with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512. The 3-node advertised-ports test runs first,
before that broker starts, so that at most one cluster runs at a time.
"""

from __future__ import annotations

import signal
import stat
import subprocess
import sys
import time
import uuid

import pytest
from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

from spark_kafka_sink import cli
from spark_kafka_sink.client.blocking import BlockingConnection
from spark_kafka_sink.embedded import EmbeddedKafka
from spark_kafka_sink.embedded.ports import free_ports
from spark_kafka_sink.protocol import apis
from spark_kafka_sink.record.builder import RecordBatchBuilder

from ..helpers import create_topic, metadata, wait_for
from .test_embedded import REPO, _read_until

SASL_CASES = [(protocol, mechanism) for protocol in ("SASL_PLAINTEXT", "SASL_SSL")
              for mechanism in ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")]
RECORDS = [(f"k{i}".encode(), f"value {i} ✓".encode()) for i in range(5)]


# --- advertised ports (3 nodes) ------------------------------------------------------------------

def leader_of(port: int, topic: str, partition: int) -> int:
    """The partition's leader as node ``port`` sees it now."""
    return next(p.leader_id for t in metadata(f"127.0.0.1:{port}", [topic]).topics
                for p in t.partitions if p.partition_index == partition)


def _produce_acks_all(port: int, topic: str, partition: int) -> int:
    """One acks=all Produce straight to ``port`` (a node's own listener); the error code."""
    builder = RecordBatchBuilder()
    assert builder.append(1_700_000_000_000, b"k", b"v") is not None
    body = {"acks": -1, "timeout_ms": 15_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}]}
    with BlockingConnection("127.0.0.1", port, timeout_s=20) as conn:
        return conn.request(apis.PRODUCE, body).responses[0].partition_responses[0].error_code


@pytest.mark.cluster
@pytest.mark.heavy
def test_advertised_ports_are_what_clients_see_while_brokers_replicate_internally(tmp_path):
    """Nothing listens on the advertised ports, so every byte of replication (acks=all, full ISR)
    and of the restart went over the INTERNAL and CONTROLLER listeners."""
    advertised = free_ports(3)
    with EmbeddedKafka(3, work_dir=tmp_path, heap="256m", advertised_ports=advertised) as cluster:
        real = {node.node_id: node.port for node in cluster.nodes}
        want = {node_id: advertised[node_id - 1] for node_id in real}
        assert cluster.bootstrap_servers == ",".join(f"127.0.0.1:{p}" for p in advertised)
        assert {n.node_id: n.advertised_port for n in cluster.nodes} == want
        for port in real.values():
            assert {b.node_id: b.port for b in metadata(f"127.0.0.1:{port}", []).brokers} == want

        topic = f"adv-{uuid.uuid4().hex[:8]}"
        leaders = create_topic(f"127.0.0.1:{real[1]}", topic, partitions=3, replication_factor=3)
        for partition in leaders:
            # right after creation the leader node 1 names may not have loaded the partition yet
            # (UNKNOWN_TOPIC_OR_PARTITION) or may have handed it on (NOT_LEADER_OR_FOLLOWER):
            # both retriable; ask the current leader until it answers, then expect success
            def produce_to_leader(p=partition) -> tuple[int] | None:
                leader = leader_of(real[1], topic, p)
                code = _produce_acks_all(real[leader], topic, p)
                return None if code in (3, 6) else (code,)

            assert wait_for(produce_to_leader, 15, f"{topic}-{partition} on its leader") == (0,)

        def full_isr() -> bool:
            parts = metadata(f"127.0.0.1:{real[1]}", [topic]).topics[0].partitions
            return all(sorted(p.isr_nodes) == [1, 2, 3] for p in parts)

        wait_for(full_isr, 30, "every partition to have ISR [1, 2, 3]")

        victim = leaders[0]
        config = cluster.node(victim).config_path.read_text()
        cluster.kill_node(victim)
        cluster.restart_node(victim)
        assert cluster.node(victim).port == real[victim]
        assert cluster.node(victim).config_path.read_text() == config  # same ports after restart
        wait_for(full_isr, 30, f"node {victim} to rejoin every ISR")
        assert {b.node_id: b.port for b in metadata(f"127.0.0.1:{real[victim]}", []).brokers} == want


# --- the CLI ---------------------------------------------------------------------------------------

@pytest.mark.broker
def test_cli_broker_with_security_prints_listeners_and_writes_client_properties(tmp_path, capsys):
    command = [sys.executable, "-m", "spark_kafka_sink", "broker", "--security", "--client-auth",
               "required", "--heap", "256m", "--work-dir", str(tmp_path)]
    with subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE) as proc:
        try:
            lines = _read_until(proc, "Press Ctrl-C", timeout_s=90)
            printed = dict(line.split("=", 1) for line in lines if "=" in line and " " not in line)
            assert printed["ssl.ca.location"] == str(tmp_path / "tls" / "ca.pem")
            path = tmp_path / "client-sasl_ssl.properties"
            assert printed["client.properties.SASL_SSL"] == str(path)
            assert stat.S_IMODE(path.stat().st_mode) == 0o600
            conf = dict(line.split("=", 1) for line in path.read_text().splitlines())
            assert conf["bootstrap.servers"] == printed["bootstrap.servers.SASL_SSL"]
            assert conf["ssl.key.location"] == str(tmp_path / "tls" / "client-key.pem")
            brokers = Producer(conf).list_topics(timeout=20).brokers
            assert [b.port for b in brokers.values()] == [int(conf["bootstrap.servers"].rsplit(":", 1)[1])]
            assert conf["sasl.password"] not in "\n".join(lines)
            # the client commands take that file as it is (in-process), and name a refusal
            assert cli.main(["topics", "list", "--config-file", str(path)]) == 0
            assert capsys.readouterr().err == ""
            assert cli.main(["topics", "list", "--config-file", str(path), "--property",
                             "sasl.password=wrong", "--timeout", "5"]) == 1
            refused = capsys.readouterr().err
            assert refused.startswith(f"spark-kafka-sink topics list: the cluster at "
                                      f"{conf['bootstrap.servers']} refused the client: ")
            assert refused.count("\n") == 1 and "wrong" not in refused
            proc.send_signal(signal.SIGINT)
            _, stderr = proc.communicate(timeout=30)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
    assert proc.returncode == 0, stderr
    assert conf["sasl.password"].encode() not in stderr


# --- the secured broker --------------------------------------------------------------------------

@pytest.fixture
def secured(secured_kafka):
    """The session's secured broker (tests/conftest.py)."""
    return secured_kafka


def _topic(kafka: EmbeddedKafka, prefix: str) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic)  # over PLAINTEXT
    return topic


def _round_trip(kafka: EmbeddedKafka, topic: str, conf: dict[str, str]) -> list[tuple[bytes, bytes]]:
    """Produce RECORDS with confluent-kafka over ``conf``, read them back over the same listener."""
    errors: list[KafkaError] = []
    producer = Producer({**conf, "acks": "all", "error_cb": errors.append})
    for key, value in RECORDS:
        producer.produce(topic, value=value, key=key, partition=0)
    assert producer.flush(30) == 0, f"undelivered records; client errors: {errors}"
    consumer = Consumer({**conf, "group.id": f"g-{topic}", "enable.auto.commit": False,
                         "check.crcs": True, "error_cb": errors.append})
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        got: list[tuple[bytes, bytes]] = []
        deadline = time.monotonic() + 30
        while len(got) < len(RECORDS) and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is not None:
                assert message.error() is None, message.error()
                got.append((message.key(), message.value()))
        seen = list(errors)        # not those of close(), which cuts the group coordinator's
    finally:                       # connection (mid-handshake on a loaded machine)
        consumer.close()
    assert not seen, seen
    return got


def _first_error(conf: dict[str, str], topic: str, timeout_s: float = 20.0) -> tuple[KafkaError, bool]:
    """The first client error a producer on ``conf`` reports, and whether any record got through."""
    errors: list[KafkaError] = []
    delivered: list[bool] = []
    producer = Producer({**conf, "error_cb": errors.append, "message.timeout.ms": 5_000,
                         "reconnect.backoff.ms": 500, "reconnect.backoff.max.ms": 2_000})
    producer.produce(topic, value=b"x", on_delivery=lambda err, msg: delivered.append(err is None))
    deadline = time.monotonic() + timeout_s
    while not errors and time.monotonic() < deadline:
        producer.poll(0.1)
    producer.purge()  # nothing can be delivered; do not wait for message.timeout.ms
    producer.flush(5)
    assert errors, "no client error was reported"
    return errors[0], any(delivered)


@pytest.mark.broker
def test_every_listener_has_its_own_port_and_plaintext_still_works(secured):
    ports = {p: secured.bootstrap_for(p) for p in ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")}
    assert len(set(ports.values())) == 4
    assert secured.bootstrap_servers == ports["PLAINTEXT"] == secured.nodes[0].bootstrap
    assert [b.node_id for b in metadata(secured.bootstrap_servers, []).brokers] == [1]
    assert secured.tls is not None and secured.tls.ca_path.is_file()


@pytest.mark.broker
def test_ssl_with_the_required_client_certificate(secured):
    conf = {"bootstrap.servers": secured.bootstrap_for("SSL"), **secured.client_properties("SSL")}
    assert conf["ssl.key.location"] == str(secured.tls.client_key_path)
    assert _round_trip(secured, _topic(secured, "ssl"), conf) == RECORDS


@pytest.mark.broker
@pytest.mark.parametrize("protocol, mechanism", SASL_CASES)
def test_sasl_listener_accepts_each_mechanism(secured, protocol, mechanism):
    conf = {"bootstrap.servers": secured.bootstrap_for(protocol),
            **secured.client_properties(protocol, mechanism, "bob")}
    assert conf["sasl.mechanism"] == mechanism and conf["sasl.username"] == "bob"
    assert _round_trip(secured, _topic(secured, protocol.lower()), conf) == RECORDS


@pytest.mark.broker
def test_ssl_without_a_client_certificate_is_refused(secured):
    conf = {"bootstrap.servers": secured.bootstrap_for("SSL"), **secured.client_properties("SSL")}
    for key in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
        del conf[key]
    error, delivered = _first_error(conf, _topic(secured, "nocert"))
    assert not delivered
    assert error.code() in (KafkaError._SSL, KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN), error


@pytest.mark.broker
@pytest.mark.parametrize("protocol, mechanism", [("SASL_PLAINTEXT", "PLAIN"),
                                                 ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
                                                 ("SASL_SSL", "SCRAM-SHA-512")])
def test_a_wrong_password_fails_authentication(secured, protocol, mechanism):
    conf = {"bootstrap.servers": secured.bootstrap_for(protocol),
            **secured.client_properties(protocol, mechanism), "sasl.password": "not-the-password"}
    error, delivered = _first_error(conf, _topic(secured, "badpw"))
    assert not delivered
    assert error.code() == KafkaError._AUTHENTICATION, error
    assert "Authentication failed" in error.str() or "authentication" in error.str().lower(), error


@pytest.mark.broker
def test_secrets_stay_out_of_logs_and_reprs(secured):
    secrets = [*secured.security.users.values(), secured.tls.client_key_password]
    node = secured.nodes[0]
    visible = "\n".join([node.log_path.read_text(errors="replace"),
                         (node.directory / "format.log").read_text(errors="replace"),
                         repr(secured), repr(secured.security), repr(secured.tls), repr(node)])
    for secret in secrets:
        assert secret not in visible
    assert "PRIVATE KEY" not in visible
    # The broker's own configuration holds them, readable by its owner only.
    assert stat.S_IMODE(node.config_path.stat().st_mode) == 0o600
    assert all(secret in node.config_path.read_text() for secret in secured.security.users.values())
