"""The commit log (``spark.commit_log``) over a fake partition read: two sinks may share one
``commit.topic``, each keyed by its own ``transactional.id.prefix``, and each reads back only its
own records. The broker round trip runs in tests/spark/test_exactly_once.py."""

from __future__ import annotations

from dataclasses import dataclass
from types import SimpleNamespace

import pytest

from spark_kafka_sink.errors import (InvalidProducerEpochError, InvalidProducerIdMappingError,
                                     KafkaError, KafkaTimeoutError, ProducerFencedError)
from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark import commit_log
from spark_kafka_sink.spark.commit_log import (COMMITTED, PREPARED, BatchRecord, CommitLog,
                                               DriverFencedError)
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.structs import TopicPartition


MAKE_WRITER = CommitLog._writer


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


def test_a_record_of_the_prefix_with_an_unknown_state_is_an_error_naming_it(shared_topic):
    write, _ = shared_topic
    write("q", batch("q", "3", COMMITTED))
    write("q", batch("q", "4", COMMITTED).replace(b'"committed"', b'"half-done"'))
    with pytest.raises(KafkaError, match=r"commit log 'shared-commits', offset 1: unreadable "
                                         r"record for prefix 'q': unknown commit record state "
                                         r"'half-done'"):
        CommitLog(config("q")).latest()


class RefusingWriter:
    """The log's transactional writer whose commit fails with ``error``; whether it was closed."""

    def __init__(self, error: BaseException):
        self.error = error
        self.closed = False

    def begin_transaction(self) -> None:
        pass

    def send(self, topic, value, *, key, partition):
        return SimpleNamespace(result=lambda timeout: None)

    def flush(self, timeout_s) -> None:
        pass

    def commit_transaction(self, timeout_s) -> None:
        raise self.error

    def abort_transaction(self, timeout_s) -> None:
        pass

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


class FakeWriter:
    """The commit log's transactional producer over the fake topic: a record becomes visible
    when its transaction commits; ``expire`` makes the next send fail as a writer whose
    transactional id the coordinator forgot (INVALID_PRODUCER_ID_MAPPING)."""

    made: list[FakeWriter] = []
    expire = False

    def __init__(self, write):
        self.write = write
        self.pending: list[tuple[str, bytes]] = []
        FakeWriter.made.append(self)

    def init_transactions(self, timeout):
        pass

    def begin_transaction(self):
        self.pending = []

    def send(self, topic, value, *, key, partition):
        future = SimpleNamespace(result=lambda timeout: None)
        if FakeWriter.expire:
            FakeWriter.expire = False
            error = KafkaError("Failing batch since the transaction became abortable")
            error.__cause__ = InvalidProducerIdMappingError("producer id not the coordinator's")

            def refused(timeout):
                raise error
            future = SimpleNamespace(result=refused)
        self.pending.append((key.decode(), value))
        return future

    def flush(self, timeout):
        pass

    def commit_transaction(self, timeout):
        for key, value in self.pending:
            self.write(key, value)
        self.pending = []

    def abort_transaction(self, timeout):
        self.pending = []

    def close(self, timeout=None):
        pass


@pytest.fixture
def writer(shared_topic, monkeypatch):
    """The shared topic with the log's real writer over :class:`FakeWriter`."""
    write, _ = shared_topic
    monkeypatch.setattr(CommitLog, "_writer", MAKE_WRITER)
    FakeWriter.made, FakeWriter.expire = [], False
    monkeypatch.setattr(commit_log, "KafkaProducer", lambda config: FakeWriter(write))
    return write


def test_an_expired_writer_is_made_again_when_the_log_still_ends_with_this_drivers_record(writer):
    writer("q", batch("q", "0", COMMITTED))
    log = CommitLog(config("q"))
    assert log.latest().batch_id == "0"
    FakeWriter.expire = True                    # the query was idle past the expiration
    log.append(BatchRecord.from_json(batch("q", "1", PREPARED)))
    assert len(FakeWriter.made) == 2
    assert log.latest().batch_id == "1"


def test_an_expired_writer_is_not_made_again_when_another_driver_wrote_since(writer):
    writer("q", batch("q", "0", COMMITTED))
    log = CommitLog(config("q"))
    log.latest()
    writer("q", batch("q", "1", COMMITTED))     # another driver took over after the expiry
    FakeWriter.expire = True
    with pytest.raises(commit_log.DriverFencedError, match=r"'q-commit-log' of transactional.id."
                                                            r"prefix 'q' had expired.*micro-batch "
                                                            r"1 \(committed\).*another driver"):
        log.append(BatchRecord.from_json(batch("q", "2", PREPARED)))
    assert len(FakeWriter.made) == 1
    assert log.latest().batch_id == "1"
