"""The driver's side of exactly-once (``spark.exactly_once``) over an in-memory commit log and an
in-memory transaction coordinator (:class:`FakeOps`, the ``TransactionOps`` seam): recovery,
replays, commit and abort, the upward fencing probe, the commit record's format, the query id
that tells a checkpoint reset from a replay, the commit topic's check, and the refusal of
speculation. The real thing runs in tests/spark/test_exactly_once.py and
tests/integration/test_commit_log.py."""

from __future__ import annotations

from types import MappingProxyType

import pytest

from spark_kafka_sink.admin import TopicDescription
from spark_kafka_sink.errors import (
    ConfigError, InvalidProducerIdMappingError, InvalidTxnStateError, KafkaError,
    KafkaTimeoutError, ProducerFencedError, TopicAuthorizationFailedError,
)
from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction
from spark_kafka_sink.spark.commit_log import (
    ABORTED, COMMITTED, PREPARED, BatchRecord, BatchState, CheckpointResetError, DriverFencedError,
    OlderBatchError, is_replay, judge_topic, writer_id,
)
from spark_kafka_sink.spark.exactly_once import FENCE_GAP, ExactlyOnceDriver, FencedId
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.sink import JobWatch, _refuse_speculation, _rows_rdd
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock

CONFIG = SinkConfig.from_options({"kafka.bootstrap.servers": "127.0.0.1:9092",
                                  "delivery.guarantee": "exactly-once",
                                  "transactional.id.prefix": "q"})


def txn(partition: int, epoch: int = 0) -> ResumableTransaction:
    return ResumableTransaction(f"q-{partition}", 100 + partition, epoch,
                                (TopicPartition("t", partition),), 2)


def ids(*partitions: int) -> list[str]:
    return [f"q-{p}" for p in partitions]


class MemoryLog:
    """The CommitLog interface, in memory; ``fail`` makes the appends of the states it holds
    raise once each (a stalled network)."""

    def __init__(self, records=(), fail=()):
        self.records = list(records)
        self.topic = CONFIG.commit_topic
        self.ensured = 0
        self.closed = False
        self.fail = set(fail)

    def ensure_topic(self):
        self.ensured += 1

    def latest(self):
        return self.records[-1] if self.records else None

    def append(self, record):
        if record.state in self.fail:
            self.fail.discard(record.state)
            raise KafkaTimeoutError("Expiring 1 record(s) for spark-kafka-sink-commits.q-0")
        self.records.append(record)

    def begin(self, record):
        """A record sent in an open transaction (``CommitLog.begin``): appended on commit."""
        log = self

        class Pending:
            def commit(self, replacement=None):
                log.append(record)
                if replacement is not None:
                    log.append(replacement)

            def abort(self):
                pass
        return Pending()

    def close(self):
        self.closed = True

    def states(self, batch_id):
        return [r.state for r in self.records if r.batch_id == batch_id]


class FakeOps:
    """A transaction coordinator in memory: each id's epoch (absent: never used, so fresh) and
    its open transaction; ``calls`` in order; ``lost`` maps an id to the error its commit
    raises."""

    def __init__(self):
        self.epochs: dict[str, int] = {}
        self.open: set[str] = set()
        self.calls: list[tuple] = []
        self.lost: dict[str, type] = {}

    def use(self, *partitions: int) -> None:
        """Tasks' ``init_transactions()``, each leaving a transaction open."""
        for transactional_id in ids(*partitions):
            self.epochs[transactional_id] = self.epochs.get(transactional_id, -1) + 1
            self.open.add(transactional_id)

    def commit(self, transaction):
        if transaction.transactional_id in self.lost:
            raise self.lost[transaction.transactional_id](f"{transaction.transactional_id}: lost")
        self.calls.append(("commit", transaction.transactional_id))
        self.open.discard(transaction.transactional_id)

    def fence(self, transactional_ids):
        transactional_ids = list(dict.fromkeys(transactional_ids))
        self.calls.append(("fence", transactional_ids))
        fenced = []
        for transactional_id in transactional_ids:
            self.epochs[transactional_id] = self.epochs.get(transactional_id, -1) + 1
            self.open.discard(transactional_id)
            fenced.append(FencedId(transactional_id, 7, self.epochs[transactional_id]))
        return tuple(fenced)

    def commits(self):
        return [call[1] for call in self.calls if call[0] == "commit"]


@pytest.fixture
def ops():
    return FakeOps()


def driver(log, ops):
    return ExactlyOnceDriver(CONFIG, commit_log=log, transactions=ops, clock=FakeClock())


def test_a_first_batch_fences_its_ids_then_commits_recording_before_and_after(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    start = eos.begin_batch("0", 2)
    assert not start.replay and start.fenced == FENCE_GAP and log.ensured == 1
    assert ops.calls == [("fence", ids(*range(FENCE_GAP)))]     # <prefix>-0 first: the timeout check
    assert log.states("0") == [PREPARED] and log.records[-1].transactions == ()  # count before tasks
    assert log.records[-1].max_partitions == 2
    ops.use(0, 1)
    result = eos.commit_batch("0", [txn(1), txn(0)], 2)
    assert ops.commits() == ids(0, 1) and not ops.open
    assert log.states("0") == [PREPARED, PREPARED, COMMITTED]
    assert log.records[-1].transactions == (txn(0), txn(1)) and result.committed == 2
    assert eos.begin_batch("1", 2).replay is False and len(ops.calls) == 3   # recovers once


def test_a_batch_recorded_but_not_committed_is_finished_then_its_replay_is_skipped(ops):
    log = MemoryLog([BatchRecord("q", "5", PREPARED, 2, (txn(0), txn(1)), 4)])
    start = driver(log, ops).begin_batch("5", 2)
    assert start.replay and start.recovered_commits == 2
    # commits first, then the fencing (of as many ids as any batch used, and the window above)
    assert ops.calls == [("commit", "q-0"), ("commit", "q-1"),
                         ("fence", ids(*range(4 + FENCE_GAP)))]
    assert log.records[-1].state == COMMITTED and log.records[-1].batch_id == "5"


def test_a_committed_batch_id_is_a_replay_and_the_next_one_runs(ops):
    log = MemoryLog([BatchRecord("q", "5", COMMITTED, 2, (txn(0),), 2)])
    eos = driver(log, ops)
    assert eos.begin_batch("5", 2).replay
    assert not ops.commits()
    assert not eos.begin_batch("6", 3).replay


def test_a_failed_job_has_its_ids_fenced_and_the_batch_recorded_aborted(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 3)
    ops.use(0, 1, 2)
    result = eos.abort_batch("0", 3)
    assert ops.calls[-1] == ("fence", ids(0, 1, 2)) and result.aborted == 3 and not ops.open
    assert log.records[-1].state == ABORTED and log.records[-1].max_partitions == 3
    assert not eos.begin_batch("0", 3).replay                  # an aborted batch runs again


def test_a_failed_arrow_job_with_no_count_probes_upward_for_its_ids(ops):
    log = MemoryLog([BatchRecord("q", "4", COMMITTED, 2, (txn(0), txn(1)), 2)])
    eos = driver(log, ops)
    eos.begin_batch("5")
    ops.use(0, 1, 2, 3, 4)                                     # more partitions than ever
    eos.abort_batch("5")
    assert not ops.open
    assert log.records[-1].state == ABORTED and log.records[-1].max_partitions == 5


def test_a_lost_first_transaction_aborts_the_others_and_records_the_batch_aborted(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 3)
    ops.lost["q-0"] = ProducerFencedError
    with pytest.raises(KafkaError, match=r"micro-batch 0 could not be committed: the transaction "
                                         r"of 'q-0' was lost .*every row once"):
        eos.commit_batch("0", [txn(0), txn(1), txn(2)], 3)
    assert ops.calls[-1] == ("fence", ids(1, 2)) and not ops.commits()
    assert log.records[-1].state == ABORTED
    assert not eos.begin_batch("0", 3).replay                  # the replay runs it again


def test_a_transaction_lost_after_others_committed_says_their_rows_repeat(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 3)
    ops.lost["q-1"] = InvalidTxnStateError
    with pytest.raises(KafkaError, match=r"committed already \(q-0\) and the other 1 aborted.*"
                                         r"appear twice"):
        eos.commit_batch("0", [txn(0), txn(1), txn(2)], 3)
    assert ops.commits() == ["q-0"] and ops.calls[-1] == ("fence", ids(2))
    assert log.records[-1].state == ABORTED


def test_a_commit_out_of_reach_leaves_the_batch_prepared_for_the_next_driver(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 1)
    ops.lost["q-0"] = KafkaTimeoutError
    with pytest.raises(KafkaTimeoutError):
        eos.commit_batch("0", [txn(0)], 1)
    assert log.records[-1].state == PREPARED
    del ops.lost["q-0"]
    assert eos.begin_batch("0", 1).replay                      # the same driver finishes it first


def test_recovery_of_a_batch_with_a_lost_transaction_records_it_aborted_and_goes_on(ops, caplog):
    log = MemoryLog([BatchRecord("q", "5", PREPARED, 2, (txn(0), txn(1)), 2)])
    ops.lost["q-0"] = ProducerFencedError
    with caplog.at_level("ERROR"):
        start = driver(log, ops).begin_batch("5", 2)
    assert not start.replay and "micro-batch 5 could not be committed" in caplog.text
    assert log.records[-1].state == ABORTED


# --- issue 25, items 1-4 ---------------------------------------------------------------------

def test_a_failed_replay_never_replaces_the_committed_record_of_its_batch(ops):
    """The Data Source: batch 5 is committed, Spark replays it (its checkpoint lacked it), the
    replayed job fails: ``abort()`` (a fresh driver) aborts the replay's transactions but leaves
    the record committed (and max_partitions as high), so the next replay is skipped again."""
    log = MemoryLog([BatchRecord("q", "5", COMMITTED, 2, (txn(0), txn(1)), 4)])
    ops.use(0, 1)
    aborted = driver(log, ops).abort_batch("5", 2)
    assert aborted.replay and not ops.open
    assert log.records[-1].state == COMMITTED and log.records[-1].batch_id == "5"
    assert log.records[-1].max_partitions == 4
    ops.use(0, 1)
    again = driver(log, ops).commit_written("5", [txn(0, 1), txn(1, 1)], 2)
    assert again.replay and again.committed == 0 and not ops.commits() and not ops.open


def test_an_abort_of_another_batch_keeps_the_highest_partition_count(ops):
    log = MemoryLog([BatchRecord("q", "5", COMMITTED, 6, (txn(0),), 6)])
    driver(log, ops).abort_batch("6", 2)
    assert log.records[-1].state == ABORTED and log.records[-1].max_partitions == 6


def test_a_driver_that_could_not_record_committed_reads_the_log_again_before_the_replay(ops):
    """Every commit succeeded, then writing ``committed`` timed out: the error says the records
    are committed and only the record is missing. The same driver, restarted with the query in
    the same process, recovers from the log first, so Spark's replay of the batch is skipped."""
    log = MemoryLog(fail={COMMITTED})
    eos = driver(log, ops)
    eos.begin_batch("5", 2)
    ops.use(0, 1)
    with pytest.raises(KafkaError, match=r"micro-batch 5: its 2 transaction\(s\) are committed .*"
                                         r"Expiring 1 record.*only that record is missing"):
        eos.commit_batch("5", [txn(0), txn(1)], 2)
    start = eos.begin_batch("5", 2)
    assert start.replay and ops.commits() == ids(0, 1, 0, 1)   # committed again: a no-op
    assert log.records[-1].state == COMMITTED and log.records[-1].batch_id == "5"


def test_a_driver_whose_prepared_record_timed_out_reads_the_log_again(ops):
    log = MemoryLog(fail={PREPARED})
    eos = driver(log, ops)
    eos.begin_batch("5")                                       # arrow mode: no pre-job record
    ops.use(0, 1)
    log.fail = {PREPARED}
    with pytest.raises(KafkaTimeoutError):
        eos.commit_batch("5", [txn(0), txn(1)], 2)
    assert not eos.begin_batch("5").replay and not ops.open   # fenced again: the batch reruns


@pytest.mark.parametrize("recovering", [True, False])
def test_a_transaction_whose_id_expired_is_lost_the_batch_aborted_and_run_again(ops, caplog,
                                                                                recovering):
    """EndTxn answers INVALID_PRODUCER_ID_MAPPING (the driver stayed down longer than
    transactional.id.expiration.ms): the batch is recorded aborted and runs again, and the error
    says whose rows may repeat (a stopped driver may have committed them), or that every row is
    written once (no driver had committed them)."""
    ops.lost["q-0"] = ops.lost["q-1"] = InvalidProducerIdMappingError
    if recovering:
        log = MemoryLog([BatchRecord("q", "5", PREPARED, 2, (txn(0), txn(1)), 2)])
        with caplog.at_level("ERROR"):
            start = driver(log, ops).begin_batch("5", 2)
        message = caplog.text
        assert not start.replay
        assert "its id had expired" in message and "transactional.id.expiration.ms" in message
        assert "the rows of q-0, q-1 appear twice if that driver had committed them" in message
    else:
        log = MemoryLog()
        eos = driver(log, ops)
        eos.begin_batch("5", 2)
        with pytest.raises(KafkaError, match="'q-0' was lost .*every row once"):
            eos.commit_batch("5", [txn(0), txn(1)], 2)
    assert log.records[-1].state == ABORTED and log.records[-1].batch_id == "5"
    assert not driver(log, ops).begin_batch("5", 2).replay


def test_recovery_fences_ids_a_crashed_run_used_above_the_recorded_count(ops):
    """A run crashed in a batch with 4 partitions; the log only knew 2 (arrow mode learns the
    count after the job): the upward probe aborts <prefix>-2 and -3 too, and records 4."""
    log = MemoryLog([BatchRecord("q", "3", COMMITTED, 2, (txn(0), txn(1)), 2)])
    ops.use(0, 1, 2, 3)
    start = driver(log, ops).begin_batch("4", 2)
    assert not ops.open and start.fenced == 4 + FENCE_GAP
    assert log.records[-1].max_partitions == 4


def test_the_probe_looks_past_a_gap_of_ids_tasks_had_not_reached(ops):
    log = MemoryLog([BatchRecord("q", "3", COMMITTED, 2, (txn(0),), 2)])
    ops.use(0, 1, 2, 2 + FENCE_GAP - 1, 2 + 2 * FENCE_GAP - 2)   # holes of FENCE_GAP - 2 ids
    driver(log, ops).prepare_query()
    assert not ops.open and log.records[-1].max_partitions == 2 + 2 * FENCE_GAP - 1


def test_repeated_recoveries_fence_the_same_ids_and_the_range_does_not_grow(ops):
    log = MemoryLog()
    for _ in range(5):
        driver(log, ops).prepare_query()                       # a Data Source save each
    assert set(ops.epochs) == set(ids(*range(FENCE_GAP)))
    assert log.records[-1].max_partitions == 0 and log.records[-1].probe_epochs == (4,) * FENCE_GAP
    ops.use(3)                                                  # a crashed task inside the window
    driver(log, ops).prepare_query()
    assert not ops.open and log.records[-1].max_partitions == 4


def test_a_count_known_before_the_job_is_recorded_before_any_task_runs(ops):
    log = MemoryLog([BatchRecord("q", "3", COMMITTED, 2, (txn(0),), 2)])
    driver(log, ops).begin_batch("4", 3 * FENCE_GAP)
    assert log.records[-1].state == PREPARED and log.records[-1].transactions == ()
    assert log.records[-1].max_partitions == 3 * FENCE_GAP
    ops.use(*range(3 * FENCE_GAP))                             # then the driver dies mid-job
    start = driver(log, ops).begin_batch("4", 3 * FENCE_GAP)   # no transaction to commit
    assert not start.replay and not ops.open and start.recovered_commits == 0


def test_the_commit_record_round_trips_as_json_and_refuses_an_unknown_format():
    record = BatchRecord("q", "12", PREPARED, 2, (txn(0), txn(1, epoch=3)), 5, 1_700_000_000_000,
                         (3, 0))
    assert BatchRecord.from_json(record.to_json()) == record
    with pytest.raises(ValueError, match="unknown commit record format 9"):
        BatchRecord.from_json(b'{"format": 9}')
    with pytest.raises(ValueError, match="unknown commit record state 'maybe'"):
        BatchRecord("q", "1", "maybe", 1, (), 1)


def test_the_state_is_a_batch_state_written_and_read_as_the_same_strings():
    written = (b'{"batch_id":"3","format":1,"max_partitions":2,"partitions":2,"prefix":"q",'
               b'"probe_epochs":[],"state":"aborted","transactions":[],"written_ms":5}')
    record = BatchRecord.from_json(written)
    assert record.state is BatchState.ABORTED and record.to_json() == written   # format unchanged
    assert [state.value for state in BatchState] == ["prepared", "committed", "aborted"]
    assert BatchRecord("q", "3", "aborted", 2, (), 2, 5) == record             # a value is parsed
    assert str(record) == "micro-batch 3 (aborted)"


def test_a_record_with_an_unknown_state_is_refused_naming_it():
    unknown = (b'{"batch_id":"3","format":1,"max_partitions":2,"partitions":2,"prefix":"q",'
               b'"state":"rolled-back","transactions":[],"written_ms":5}')
    with pytest.raises(ValueError, match=r"unknown commit record state 'rolled-back' \(this "
                                         r"version knows 'prepared', 'committed', 'aborted'\)"):
        BatchRecord.from_json(unknown)
    with pytest.raises(ValueError, match="unknown commit record state None"):
        BatchRecord.from_json(unknown.replace(b'"rolled-back"', b'null'))


def test_after_a_failed_job_the_next_batch_recovers_again_fencing_every_id(ops):
    """A task still running when its job failed may initialize its id after ``abort_batch``
    fenced it and leave a transaction open; the driver's next batch (the query restarted in the
    same process, maybe with fewer tasks) fences every id the prefix used before any task runs."""
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 3)
    ops.use(0, 1, 2)
    eos.abort_batch("0", 3)
    ops.use(2)                                   # the late task opens a transaction
    ops.calls.clear()
    start = eos.begin_batch("0", 1)
    assert "q-2" not in ops.open and log.ensured == 2
    assert ops.calls[0] == ("fence", ids(*range(3 + FENCE_GAP))) and start.fenced == 3 + FENCE_GAP
    eos.commit_batch("0", [txn(0)], 1)
    ops.calls.clear()
    assert eos.begin_batch("1", 1).fenced == 0 and ops.calls == []   # only after a failure


def test_the_commit_log_writer_id_is_no_task_id():
    assert writer_id("q") == "q-commit-log"
    assert writer_id("q") not in {CONFIG.transactional_id(p) for p in range(10_000)}


def test_records_carry_the_query_id_and_a_batch_committed_by_another_query_is_refused(ops):
    log = MemoryLog()
    eos = driver(log, ops)
    eos.begin_batch("0", 1, "query-a")
    eos.commit_batch("0", [txn(0)], 1)
    assert {r.query_id for r in log.records} == {"query-a"}
    assert driver(log, ops).begin_batch("0", 1, "query-a").replay   # same checkpoint: a replay
    before = list(log.records)
    ops.calls.clear()
    with pytest.raises(CheckpointResetError, match=r"checkpoint reset detected: the commit log "
                       r"'spark-kafka-sink-commits.q' of transactional.id.prefix 'q' shows "
                       r"micro-batch 0 committed by streaming query query-a, and this is query "
                       r"query-b.*new transactional.id.prefix.*restore the old checkpoint"):
        driver(log, ops).begin_batch("0", 1, "query-b")                # checkpoint deleted
    assert ops.commits() == [] and [r.state for r in log.records[len(before):]] == [COMMITTED]


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
    assert b'"query_id"' not in BatchRecord.from_json(legacy).to_json()
    record = BatchRecord("q", "3", PREPARED, 1, (txn(0),), 1, 5, (2, 0), query_id="3f1c")
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


class FakeTracker:
    """Spark's status tracker: jobs by group, their stages, each stage's running tasks (a list
    consumed one value per look)."""

    def __init__(self, jobs, stages):
        self.jobs, self.stages = jobs, stages

    def getJobIdsForGroup(self, group):
        return list(self.jobs.get(group, ()))

    def getJobInfo(self, job):
        return type("JobInfo", (), {"stageIds": [s for s in self.stages if s // 10 == job]})()

    def getStageInfo(self, stage):
        counts = self.stages[stage]
        return type("StageInfo", (), {"numActiveTasks": counts.pop(0) if len(counts) > 1 else counts[0]})()


def test_after_a_failed_job_the_driver_waits_for_its_cancelled_tasks_before_fencing():
    """Spark fails the job while its cancelled tasks still run (until their Python worker ends):
    the wait ends when none of the write's jobs has a running task; jobs that were there before
    (another write of the same group) do not count."""
    tracker = FakeTracker({"run-1": [1, 2, 3]}, {10: [2, 1, 1, 0], 20: [0], 30: [5]})
    watch = JobWatch(tracker, "run-1", frozenset({3}))
    assert watch.watching and watch.active_tasks() == 2
    assert watch.await_tasks_stopped(5, poll_s=0)
    assert tracker.stages[10] == [0]                            # it looked until the last one ended
    stuck = JobWatch(FakeTracker({"run-1": [1]}, {10: [1]}), "run-1", frozenset())
    assert not stuck.await_tasks_stopped(0.05, poll_s=0.01)
    assert not JobWatch(None, None, frozenset()).watching       # Spark Connect: nothing to watch


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


@pytest.mark.parametrize("state", [COMMITTED, ABORTED, PREPARED])
def test_a_batch_id_older_than_the_logs_last_is_refused_and_not_written(ops, state):
    log = MemoryLog([BatchRecord("q", "2", state, 1, (), 1, query_id="query-a")])
    with pytest.raises(OlderBatchError, match=r"micro-batch 1 is older than the last one the "
                       r"commit log 'spark-kafka-sink-commits.q' records for transactional.id."
                       r"prefix 'q': micro-batch 2 of streaming query query-a.*duplicate.*not "
                       r"written. Restore the newest checkpoint, or use a new "
                       r"transactional.id.prefix"):
        driver(log, ops).begin_batch("1", 1, "query-a")
    ops.calls.clear()
    with pytest.raises(OlderBatchError):                  # the Data Source: no query id known
        driver(log, ops).commit_written("0", [txn(0)], 1)
    assert ops.commits() == [] and {r.batch_id for r in log.records} == {"2"}   # restated: 2


def test_an_older_batch_id_of_another_query_or_a_write_id_is_not_ordered(ops):
    log = MemoryLog([BatchRecord("q", "7", COMMITTED, 1, (), 1, query_id="query-a")])
    assert not driver(log, ops).begin_batch("3", 1, "query-b").replay    # another query's ids
    log = MemoryLog([BatchRecord("q", "7", COMMITTED, 1, (), 1)])
    assert not driver(log, ops).begin_batch("write-5f0c", 1).replay      # KafkaSink.write
    assert driver(log, ops).begin_batch("7", 1).replay                   # the last one: a replay


def test_the_abort_of_an_older_batch_fences_its_tasks_but_records_nothing_of_it(ops):
    log = MemoryLog([BatchRecord("q", "4", COMMITTED, 1, (), 1)])
    ops.use(0)
    with pytest.raises(OlderBatchError, match="micro-batch 2 is older"):
        driver(log, ops).abort_batch("2", 1)
    assert not ops.open and [r.batch_id for r in log.records] == ["4", "4"]


class FencedLog(MemoryLog):
    """A log whose writer another driver has fenced: nothing can be begun or appended."""

    def begin(self, record):
        raise DriverFencedError("another driver took over")

    append = begin


def test_a_stale_driver_learns_it_is_fenced_before_it_fences_any_id(ops):
    log = FencedLog([BatchRecord("q", "3", COMMITTED, 2, (), 2)])
    eos = driver(log, ops)
    eos._last, eos._used, eos._recovered = log.records[-1], 2, True    # mid-batch 4
    ops.use(0, 1)                                                      # the new driver's tasks
    for partitions in (2, None):
        with pytest.raises(DriverFencedError):
            eos.abort_batch("4", partitions)
        eos._last, eos._recovered = log.records[-1], True
    assert ops.calls == [] and ops.open == set(ids(0, 1))


class _NoRdd:
    """Spark Connect's DataFrame: PySpark 4 raises on ``df.rdd``; 3.4 has a function there."""

    def __init__(self, rdd=None):
        self._rdd = rdd

    @property
    def rdd(self):
        if self._rdd is None:
            raise RuntimeError("[NOT_IMPLEMENTED] rdd() is not implemented.")
        return self._rdd


@pytest.mark.parametrize("df", [_NoRdd(), _NoRdd(rdd=lambda: None)], ids=["raises", "a-function"])
def test_exactly_once_rows_mode_without_an_rdd_names_arrow_mode(df):
    with pytest.raises(ConfigError, match=r"mode='rows' needs classic Spark .*use mode='arrow'"):
        _rows_rdd(df)
