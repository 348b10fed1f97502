"""The commit log (``spark.commit_log``) over a fake partition read: two sinks may share one
``commit.topic``, each keyed by its own ``transactional.id.prefix``, and each reads back only its
own records. The broker round trip runs in tests/spark/test_exactly_once.py."""

from __future__ import annotations

from dataclasses import dataclass

import pytest

from spark_kafka_sink.errors import (InvalidProducerEpochError, KafkaError, KafkaTimeoutError,
                                     ProducerFencedError)
from spark_kafka_sink.producer.resumable import ResumableTransaction
from spark_kafka_sink.spark import commit_log
from spark_kafka_sink.spark.commit_log import (COMMITTED, PREPARED, BatchRecord, CommitLog,
                                               DriverFencedError)
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.structs import TopicPartition


@dataclass(frozen=True)
class LogRecord:
    """What ``admin.read_partition`` yields, as far as the commit log reads it."""

    offset: int
    key: bytes | None
    value: bytes | None


def config(prefix: str) -> SinkConfig:
    return SinkConfig.from_options({"kafka.bootstrap.servers": "127.0.0.1:9092",
                                    "delivery.guarantee": "exactly-once",
                                    "transactional.id.prefix": prefix,
                                    "commit.topic": "shared-commits"})


def batch(prefix: str, batch_id: str, state: str) -> bytes:
    transaction = ResumableTransaction(f"{prefix}-0", 7, 0, (TopicPartition("t", 0),), 2)
    return BatchRecord(prefix, batch_id, state, 1, (transaction,), 1).to_json()


@pytest.fixture
def shared_topic(monkeypatch):
    """The one partition of the shared commit topic; the reads it served, by topic (each
    read_committed). The log's transactional writer is not made: reading needs none here."""
    records: list[LogRecord] = []
    reads: list[str] = []

    def read_partition(bootstrap, topic, partition=0, *, timeout_s, config, isolation_level):
        assert isolation_level == commit_log.READ_COMMITTED
        reads.append(topic)
        return list(records)

    monkeypatch.setattr(commit_log, "read_partition", read_partition)
    monkeypatch.setattr(CommitLog, "_writer", lambda self: None)

    def write(key: str | None, value: bytes | None) -> None:
        records.append(LogRecord(len(records), None if key is None else key.encode(), value))

    return write, reads


def test_two_sinks_sharing_a_commit_topic_read_only_their_own_prefix(shared_topic):
    write, reads = shared_topic
    write("q", batch("q", "0", PREPARED))
    write("q-eu", batch("q-eu", "5", PREPARED))                # a prefix that starts with "q"
    write("q", batch("q", "0", COMMITTED))
    write("q-eu", batch("q-eu", "5", COMMITTED))
    write("other", b"not a commit record")                     # not ours: never parsed
    write(None, batch("q", "9", COMMITTED))                    # no key: no sink's record
    write("qq", batch("qq", "8", COMMITTED))

    ours, theirs = CommitLog(config("q")).latest(), CommitLog(config("q-eu")).latest()
    assert (ours.prefix, ours.batch_id, ours.state) == ("q", "0", COMMITTED)
    assert (theirs.prefix, theirs.batch_id, theirs.state) == ("q-eu", "5", COMMITTED)
    assert CommitLog(config("nobody")).latest() is None
    assert reads == ["shared-commits"] * 3


def test_a_tombstone_is_skipped_and_an_unreadable_record_of_the_prefix_is_an_error(shared_topic):
    write, _ = shared_topic
    write("q", batch("q", "3", COMMITTED))
    write("q", None)
    assert CommitLog(config("q")).latest().batch_id == "3"
    write("q", b'{"format": 99}')
    with pytest.raises(KafkaError, match=r"commit log 'shared-commits', offset 2: unreadable "
                                         r"record for prefix 'q'"):
        CommitLog(config("q")).latest()


class RefusingWriter:
    """The log's transactional writer whose commit fails with ``error``; whether it was closed."""

    def __init__(self, error: BaseException):
        self.error = error
        self.closed = False

    def begin_transaction(self) -> None:
        pass

    def send(self, topic, value, *, key, partition):
        return None

    def commit_transaction(self, timeout_s) -> None:
        raise self.error

    def close(self, timeout_s) -> None:
        self.closed = True


@pytest.mark.parametrize("error", [ProducerFencedError("fenced"),
                                   InvalidProducerEpochError("epoch")])
def test_an_append_by_a_fenced_writer_says_another_driver_took_over(error):
    """PRODUCER_FENCED (a newer driver's writer initialized) and INVALID_PRODUCER_EPOCH (the
    append outlived the writer's transaction, or was fenced mid-way) both mean this driver must
    stop: DriverFencedError naming the record that was not written, the writer discarded."""
    log = CommitLog(config("q"))
    log._producer = writer = RefusingWriter(error)
    record = BatchRecord.from_json(batch("q", "4", COMMITTED))
    with pytest.raises(DriverFencedError, match=r"another driver of the query .* took over") as raised:
        log.append(record)
    assert str(record) in str(raised.value) and raised.value.__cause__ is error
    assert writer.closed and log._producer is None


def test_an_append_that_times_out_is_not_taken_for_a_fenced_driver():
    log = CommitLog(config("q"))
    log._producer = writer = RefusingWriter(KafkaTimeoutError("commit timed out"))
    with pytest.raises(KafkaTimeoutError):
        log.append(BatchRecord.from_json(batch("q", "4", COMMITTED)))
    assert writer.closed and log._producer is None
