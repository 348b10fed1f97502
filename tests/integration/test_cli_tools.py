"""The client commands of ``spark-kafka-sink`` (``topics``, ``tail``, ``check``) against the real
broker, run in-process (``main(argv)``, output captured): what ``topics`` creates is what the
cluster describes; ``tail`` prints what confluent-kafka's consumer reads (keys, headers, binary
and null values; a transactional topic with an aborted transaction at read_committed); ``check``
passes for a good topic and fails on one line for a missing topic or a wrong address."""

from __future__ import annotations

import json
import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.admin import describe_topics
from spark_kafka_sink.cli import main
from spark_kafka_sink.cli.records import bytes_of

from ..verify import consume_all

pytestmark = [pytest.mark.broker, pytest.mark.timeout(60)]


def run(capsys, *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def name(what: str) -> str:
    return f"cli-{what}-{uuid.uuid4().hex[:8]}"


def tailed(capsys, bootstrap: str, topic: str, *extra: str) -> dict[int, list[tuple]]:
    """``tail --from-beginning --format json``, decoded: per partition, (offset, timestamp, key,
    value, headers) as bytes."""
    code, out, err = run(capsys, "tail", topic, "--from-beginning", "--format", "json",
                         "--max-records", "1000", "--bootstrap-server", bootstrap, *extra)
    assert code == 0, err
    got: dict[int, list[tuple]] = {}
    for line in out.splitlines():
        record = json.loads(line)
        assert record["topic"] == topic and record["timestamp_type"] == "CreateTime"
        got.setdefault(record["partition"], []).append(
            (record["offset"], record["timestamp"], bytes_of(record["key"]), bytes_of(record["value"]),
             [(k, bytes_of(v)) for k, v in record["headers"]]))
    return got


def consumed(bootstrap: str, topic: str, partitions: int, count: int) -> dict[int, list[tuple]]:
    got = consume_all(bootstrap, topic, partitions, expected_count=count, timeout_s=20)
    return {p: [(r.offset, r.timestamp_ms, r.key, r.value, list(r.headers)) for r in records]
            for p, records in got.items() if records}


def test_topics_create_list_and_describe(kafka, capsys):
    bootstrap = kafka.bootstrap_servers
    events, compacted = name("events"), name("compacted")
    code, out, err = run(capsys, "topics", "create", f"{events}:3", compacted, "--config",
                         "cleanup.policy=compact", "--bootstrap-server", bootstrap)
    assert code == 0, err
    assert out.splitlines() == [f"topic {events}: 3 partition(s), created",
                                f"topic {compacted}: 1 partition(s), created"]
    found = describe_topics(bootstrap, [events, compacted])
    assert (found[events].partitions, found[compacted].partitions) == (3, 1)
    assert found[compacted].configs["cleanup.policy"] == "compact"

    code, _, err = run(capsys, "topics", "create", events, "--bootstrap-server", bootstrap)
    assert code == 1 and err.startswith("spark-kafka-sink topics create: TopicAlreadyExistsError")
    code, out, _ = run(capsys, "topics", "create", events, "--if-not-exists",
                       "--bootstrap-server", bootstrap)
    assert code == 0 and out == f"topic {events}: 3 partition(s), exists already (left as it was)\n"

    code, out, _ = run(capsys, "topics", "list", "--bootstrap-server", bootstrap)
    rows = {line.split()[0]: line.split()[1:] for line in out.splitlines()[1:]}
    assert code == 0 and out.startswith("TOPIC ")
    assert rows[events] == ["3", "1"] and rows[compacted] == ["1", "1"]

    missing = name("missing")
    code, out, err = run(capsys, "topics", "describe", events, compacted, missing,
                         "--bootstrap-server", bootstrap)
    assert code == 1 and err == f"topic {missing}: does not exist\n"
    lines = out.splitlines()
    assert lines[0] == f"topic {events}: 3 partition(s), replication factor 1, 1 broker(s) in the cluster"
    assert [line.split(":")[0] for line in lines[1:4]] == [f"  partition {p}" for p in range(3)]
    assert all(", replicas " in line and ", in sync " in line for line in lines[1:4])
    at = lines.index(f"topic {compacted}: 1 partition(s), replication factor 1, 1 broker(s) in the cluster")
    assert lines[at + 2:] == ["  configs set on the topic:", "    cleanup.policy=compact"]


def test_tail_prints_what_confluent_kafka_reads(kafka, capsys):
    bootstrap = kafka.bootstrap_servers
    topic = name("tail")
    assert run(capsys, "topics", "create", f"{topic}:2", "--bootstrap-server", bootstrap)[0] == 0
    sent = [(b"order-1", b'{"id": 1}', [("trace", b"abc"), ("trace", b"def")]),
            (None, b"\x00\xff\xfe binary", [("bin", b"\x80\x81"), ("null", None)]),
            (b"\xc3\x28", None, []),                      # a key that is not UTF-8, a null value
            (b"", b"", [("empty", b"")]),
            ("clé".encode(), "ligne 1\nligne 2".encode(), [])]
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        for i, (key, value, headers) in enumerate(sent * 2):
            producer.send(topic, value, key=key, headers=headers, partition=i % 2)
        producer.flush()
    assert tailed(capsys, bootstrap, topic) == consumed(bootstrap, topic, 2, len(sent) * 2)

    code, out, err = run(capsys, "tail", topic, "--partition", "1", "--max-records", "2",
                         "--bootstrap-server", bootstrap)          # the newest two, in text
    assert code == 0
    assert err.splitlines() == [f"2 record(s) of topic '{topic}', partition(s) 1",
                                "older records: --from-beginning or --offset N"]
    assert [line for line in out.splitlines() if not line.startswith("partition ")] == [
        "  key:    [hex] c328", "  value:  (null)", "  key:    clé", "  value:  ligne 1\\nligne 2"]


def test_tail_read_committed_leaves_out_the_aborted_transaction_as_the_consumer_does(kafka, capsys):
    bootstrap = kafka.bootstrap_servers
    topic = name("txn")
    assert run(capsys, "topics", "create", topic, "--bootstrap-server", bootstrap)[0] == 0
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                        "transactional.id": name("txn-id")}) as producer:
        producer.init_transactions()
        for value, commit in ((b"committed-1", True), (b"aborted", False), (b"committed-2", True)):
            producer.begin_transaction()
            producer.send(topic, value, key=value, headers=[("h", value)])
            producer.send(topic, value + b"-again", key=value)
            producer.flush()
            producer.commit_transaction() if commit else producer.abort_transaction()
    committed = tailed(capsys, bootstrap, topic, "--isolation", "read_committed")
    assert committed == consumed(bootstrap, topic, 1, 4)
    assert [r[3] for r in committed[0]] == [b"committed-1", b"committed-1-again",
                                           b"committed-2", b"committed-2-again"]
    every = tailed(capsys, bootstrap, topic)                      # read_uncommitted: all six
    assert [r[3] for r in every[0]] == [b"committed-1", b"committed-1-again", b"aborted",
                                       b"aborted-again", b"committed-2", b"committed-2-again"]


def test_check_passes_for_a_good_topic_and_fails_on_one_line_otherwise(kafka, capsys):
    bootstrap = kafka.bootstrap_servers
    topic, dlq = name("check"), name("check-dlq")
    assert run(capsys, "topics", "create", f"{topic}:2", dlq, "--bootstrap-server", bootstrap)[0] == 0
    code, out, err = run(capsys, "check", "--topic", topic, "--option",
                         f"errors.deadletterqueue.topic.name={dlq}", "--option", "errors.tolerance=all",
                         "--bootstrap-server", bootstrap)
    assert code == 0, err
    assert out.splitlines()[0] == (f"OK: the sink's preflight passed at kafka.bootstrap.servers="
                                   f"{bootstrap} (security.protocol PLAINTEXT)")
    assert f"  topic '{topic}' (option 'topic'): 2 partition(s), replication factor 1" in out
    assert f"  topic '{dlq}' (option 'errors.deadletterqueue.topic.name'): 1 partition(s)" in out

    missing = name("missing")
    started = time.monotonic()
    code, out, err = run(capsys, "check", "--topic", missing, "--timeout", "0.5",
                         "--bootstrap-server", bootstrap)
    assert code == 1 and out == "" and time.monotonic() - started < 3
    assert err.startswith(f"spark-kafka-sink check: FAILED: option 'topic': topic '{missing}' does not "
                          "exist on the cluster") and err.count("\n") == 1

    started = time.monotonic()
    code, out, err = run(capsys, "check", "--topic", topic, "--bootstrap-server", "127.0.0.1:1")
    assert code == 1 and out == "" and time.monotonic() - started < 2
    assert err.startswith("spark-kafka-sink check: FAILED: preflight: cannot reach the cluster at "
                          "kafka.bootstrap.servers='127.0.0.1:1' within 10 s") and err.count("\n") == 1
