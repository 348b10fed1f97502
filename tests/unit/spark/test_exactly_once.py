"""The driver's side of exactly-once (``spark.exactly_once``) over an in-memory commit log, with
the commits and fencing recorded instead of sent: recovery, replays, commit and abort, the
commit record's format, the query id that tells a checkpoint reset from a replay, the commit
topic's check, and the refusal of speculation. The real thing runs in
tests/spark/test_exactly_once.py and tests/integration/test_commit_log.py."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from spark_kafka_sink.admin import TopicDescription
from spark_kafka_sink.errors import (
    ConfigError, InvalidTxnStateError, KafkaError, KafkaTimeoutError, ProducerFencedError,
    TopicAuthorizationFailedError,
)
from spark_kafka_sink.producer.resumable import ResumableTransaction
from spark_kafka_sink.spark import exactly_once
from spark_kafka_sink.spark.commit_log import (
    ABORTED, COMMITTED, PREPARED, BatchRecord, CheckpointResetError, is_replay, judge_topic,
    writer_id,
)
from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.sink import _refuse_speculation
from spark_kafka_sink.structs import TopicPartition

CONFIG = SinkConfig.from_options({"kafka.bootstrap.servers": "127.0.0.1:9092",
                                  "delivery.guarantee": "exactly-once",
                                  "transactional.id.prefix": "q"})


def txn(partition: int, epoch: int = 0) -> ResumableTransaction:
    return ResumableTransaction(f"q-{partition}", 100 + partition, epoch,
                                (TopicPartition("t", partition),), 2)


class MemoryLog:
    """The CommitLog interface, in memory."""

    def __init__(self, records=()):
        self.records = list(records)
        self.topic = CONFIG.commit_topic
        self.ensured = 0
        self.closed = False

    def ensure_topic(self):
        self.ensured += 1

    def latest(self):
        return self.records[-1] if self.records else None

    def append(self, record):
        self.records.append(record)

    def close(self):
        self.closed = True


@pytest.fixture
def broker(monkeypatch):
    """What the driver asked of the cluster: ("commit", id) and ("fence", ids)."""
    calls = []
    monkeypatch.setattr(exactly_once, "commit_resumable",
                        lambda transaction, config, timeout=None: calls.append(
                            ("commit", transaction.transactional_id)))

    def fence(ids, config, timeout=None):
        ids = list(ids)
        calls.append(("fence", ids))
        return len(ids)

    monkeypatch.setattr(exactly_once, "fence_transactional_ids", fence)
    return calls


def test_a_first_batch_fences_its_ids_then_commits_recording_before_and_after(broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    start = driver.begin_batch("0", 2)
    assert not start.replay and start.fenced == 2 and log.ensured == 1
    assert broker == [("fence", ["q-0", "q-1"])]
    result = driver.commit_batch("0", 2, [txn(1), txn(0)])
    assert broker[1:] == [("commit", "q-0"), ("commit", "q-1")]
    assert [r.state for r in log.records] == [PREPARED, COMMITTED]
    assert log.records[0].transactions == (txn(0), txn(1)) and result.committed == 2
    assert driver.begin_batch("1", 2).replay is False and len(broker) == 3   # recovers once


def test_a_batch_recorded_but_not_committed_is_finished_then_its_replay_is_skipped(broker):
    prepared = BatchRecord("q", "5", PREPARED, 2, (txn(0), txn(1)), 4)
    log = MemoryLog([prepared])
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    start = driver.begin_batch("5", 2)
    assert start.replay and start.recovered_commits == 2
    # commits first, then the fencing (of as many ids as any batch used), never the reverse
    assert broker == [("commit", "q-0"), ("commit", "q-1"), ("fence", ["q-0", "q-1", "q-2", "q-3"])]
    assert log.records[-1].state == COMMITTED and log.records[-1].batch_id == "5"


def test_a_committed_batch_id_is_a_replay_and_the_next_one_runs(broker):
    log = MemoryLog([BatchRecord("q", "5", COMMITTED, 2, (txn(0),), 2)])
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    assert driver.begin_batch("5", 2).replay
    assert not any(call[0] == "commit" for call in broker)
    assert not driver.begin_batch("6", 3).replay


def test_a_failed_job_has_its_ids_fenced_and_the_batch_recorded_aborted(broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 3)
    result = driver.abort_batch("0", 3)
    assert broker[-1] == ("fence", ["q-0", "q-1", "q-2"]) and result.aborted == 3
    assert log.records[-1].state == ABORTED and log.records[-1].max_partitions == 3
    assert not driver.begin_batch("0", 3).replay                # an aborted batch runs again


def _committing(monkeypatch, broker, lost: set[str], error=ProducerFencedError):
    def commit(transaction, config, timeout=None):
        if transaction.transactional_id in lost:
            raise error(f"{transaction.transactional_id}: fenced")
        broker.append(("commit", transaction.transactional_id))

    monkeypatch.setattr(exactly_once, "commit_resumable", commit)


def test_a_lost_first_transaction_aborts_the_others_and_records_the_batch_aborted(monkeypatch, broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 3)
    _committing(monkeypatch, broker, {"q-0"})
    with pytest.raises(KafkaError, match=r"micro-batch 0 could not be committed: the transaction "
                                         r"of 'q-0' was lost .*every row once"):
        driver.commit_batch("0", 3, [txn(0), txn(1), txn(2)])
    assert broker[-1] == ("fence", ["q-1", "q-2"]) and not any(c[0] == "commit" for c in broker)
    assert log.records[-1].state == ABORTED
    assert not driver.begin_batch("0", 3).replay                # the replay runs it again


def test_a_transaction_lost_after_others_committed_says_their_rows_repeat(monkeypatch, broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 3)
    _committing(monkeypatch, broker, {"q-1"}, InvalidTxnStateError)
    with pytest.raises(KafkaError, match=r"committed already \(q-0\) and the other 1 aborted.*"
                                         r"appear twice"):
        driver.commit_batch("0", 3, [txn(0), txn(1), txn(2)])
    assert ("commit", "q-0") in broker and broker[-1] == ("fence", ["q-2"])
    assert log.records[-1].state == ABORTED


def test_a_commit_out_of_reach_leaves_the_batch_prepared_for_the_next_driver(monkeypatch, broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 1)
    _committing(monkeypatch, broker, {"q-0"}, KafkaTimeoutError)
    with pytest.raises(KafkaTimeoutError):
        driver.commit_batch("0", 1, [txn(0)])
    assert log.records[-1].state == PREPARED


def test_recovery_of_a_batch_with_a_lost_transaction_records_it_aborted_and_goes_on(
        monkeypatch, broker, caplog):
    log = MemoryLog([BatchRecord("q", "5", PREPARED, 2, (txn(0), txn(1)), 2)])
    _committing(monkeypatch, broker, {"q-0"})
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    with caplog.at_level("ERROR"):
        start = driver.begin_batch("5", 2)
    assert not start.replay and "micro-batch 5 could not be committed" in caplog.text
    assert log.records[-1].state == ABORTED


def test_the_commit_record_round_trips_as_json_and_refuses_an_unknown_format():
    record = BatchRecord("q", "12", PREPARED, 2, (txn(0), txn(1, epoch=3)), 5, 1_700_000_000_000)
    assert BatchRecord.from_json(record.to_json()) == record
    with pytest.raises(ValueError, match="unknown commit record format 9"):
        BatchRecord.from_json(b'{"format": 9}')
    with pytest.raises(ValueError, match="state must be one of"):
        BatchRecord("q", "1", "maybe", 1, (), 1)


def test_after_a_failed_job_the_next_batch_recovers_again_fencing_every_id(broker):
    """A task still running when its job failed may initialize its id after ``abort_batch``
    fenced it and leave a transaction open; the driver's next batch (the query restarted in the
    same process, maybe with fewer tasks) fences every id the prefix used before any task runs."""
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 3)
    driver.abort_batch("0", 3)
    broker.clear()
    start = driver.begin_batch("0", 1)
    assert start.fenced == 3 and broker == [("fence", ["q-0", "q-1", "q-2"])] and log.ensured == 2
    driver.commit_batch("0", 1, [txn(0)])
    broker.clear()
    assert driver.begin_batch("1", 1).fenced == 0 and broker == []   # only after a failure


def test_the_commit_log_writer_id_is_no_task_id():
    assert writer_id("q") == "q-commit-log"
    assert writer_id("q") not in {CONFIG.transactional_id(p) for p in range(10_000)}


def test_records_carry_the_query_id_and_a_batch_committed_by_another_query_is_refused(broker):
    log = MemoryLog()
    driver = ExactlyOnceDriver(CONFIG, commit_log=log)
    driver.begin_batch("0", 1, "query-a")
    driver.commit_batch("0", 1, [txn(0)])
    assert [r.query_id for r in log.records] == ["query-a", "query-a"]
    restarted = ExactlyOnceDriver(CONFIG, commit_log=log)          # same checkpoint: a replay
    assert restarted.begin_batch("0", 1, "query-a").replay
    reset = ExactlyOnceDriver(CONFIG, commit_log=log)              # checkpoint deleted
    broker.clear()
    with pytest.raises(CheckpointResetError, match=r"checkpoint reset detected: the commit log "
                       r"'spark-kafka-sink-commits.q' of transactional.id.prefix 'q' shows "
                       r"micro-batch 0 committed by streaming query query-a, and this is query "
                       r"query-b.*new transactional.id.prefix.*restore the old checkpoint"):
        reset.begin_batch("0", 1, "query-b")
    assert not any(call[0] == "commit" for call in broker) and len(log.records) == 2


def test_a_query_id_unknown_on_either_side_judges_by_batch_id_as_before(caplog):
    old = BatchRecord("q", "5", COMMITTED, 1, (), 1)                  # written without a query id
    assert is_replay(old, "5", "query-b", "t")
    assert is_replay(BatchRecord("q", "5", COMMITTED, 1, (), 1, query_id="query-a"), "5", None, "t")
    assert not is_replay(old, "6", "query-b", "t") and not is_replay(None, "0", "query-b", "t")
    with caplog.at_level("WARNING"):
        other = BatchRecord("q", "57", COMMITTED, 1, (), 1, query_id="query-a")
        assert not is_replay(other, "0", "query-b", "t")             # no collision: it goes on
    assert "last written by micro-batch 57 of streaming query query-a (committed)" in caplog.text


def test_a_record_without_a_query_id_reads_as_before_and_one_with_it_round_trips():
    legacy = (b'{"batch_id":"3","format":1,"max_partitions":2,"partitions":2,"prefix":"q",'
              b'"state":"committed","transactions":[],"written_ms":5}')
    assert BatchRecord.from_json(legacy) == BatchRecord("q", "3", COMMITTED, 2, (), 2, 5)
    assert BatchRecord.from_json(legacy).to_json() == legacy
    record = BatchRecord("q", "3", PREPARED, 1, (txn(0),), 1, 5, query_id="3f1c")
    assert BatchRecord.from_json(record.to_json()) == record


def described(policy="compact", rf=3, brokers=3, **configs) -> TopicDescription:
    values = {"cleanup.policy": policy, "retention.ms": "604800000", "retention.bytes": "-1",
              **configs}
    return TopicDescription("commits", True, 1, MappingProxyType(values), None, rf, brokers)


def test_a_compacted_replicated_commit_topic_is_accepted():
    assert judge_topic(described(), "b:9092") == judge_topic(described(rf=1, brokers=1), "b:9092")
    assert judge_topic(described(), "b:9092").refusal is None
    assert judge_topic(described(), "b:9092").warning is None
    assert judge_topic(described("compact,delete", **{"retention.ms": "-1"}), "b:9092").refusal is None


@pytest.mark.parametrize("policy", ["delete", "compact,delete", ""])
def test_a_commit_topic_whose_records_can_be_deleted_is_refused_naming_the_fix(policy):
    verdict = judge_topic(described(policy), "b:9092")
    assert verdict.refusal.startswith(f"option 'commit.topic': topic 'commits' has "
                                      f"cleanup.policy={policy!r}")
    assert "kafka-configs.sh --bootstrap-server b:9092 --alter --entity-type topics " \
           "--entity-name commits --add-config cleanup.policy=compact" in verdict.refusal


def test_replication_factor_one_on_several_brokers_is_a_warning():
    verdict = judge_topic(described(rf=1, brokers=3), "b:9092")
    assert verdict.refusal is None
    assert "'commits' has replication factor 1 on a cluster of 3 brokers" in verdict.warning


def test_a_commit_topic_whose_configuration_cannot_be_read_is_a_warning():
    unreadable = TopicDescription("commits", True, 1, config_error=TopicAuthorizationFailedError("denied"))
    verdict = judge_topic(unreadable, "b:9092")
    assert verdict.refusal is None and "make sure its cleanup.policy is compact" in verdict.warning


class _Conf:
    def __init__(self, values):
        self.values = values

    def get(self, name, default=None):
        return self.values.get(name, default)


class _Session:
    def __init__(self, values):
        self.sparkContext = type("Context", (), {"getConf": lambda _self: _Conf(values)})()


class _Frame:
    def __init__(self, values):
        self.sparkSession = _Session(values)


def test_speculation_is_refused_with_exactly_once():
    with pytest.raises(ConfigError, match="spark.speculation=true"):
        _refuse_speculation(_Frame({"spark.speculation": "true"}))
    _refuse_speculation(_Frame({"spark.speculation": "false"}))
    _refuse_speculation(_Frame({}))
