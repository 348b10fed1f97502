"""Exactly-once streaming writes through driver crashes, in both sink modes, read back with
confluent-kafka at ``isolation.level=read_committed``.

A driver is a process, and a crash is ``os._exit`` at a chosen point of a micro-batch:
``tests.spark.crash_job`` runs four queries side by side in one driver process per run (arrow
and rows mode exactly once, each micro-batch a Spark job; arrow mode exactly once with the
micro-batches small enough for the driver to write them itself, in one transaction; and arrow
mode at least once), each on its own checkpoint, and dies once each has reached its run's crash
point. The first run dies in micro-batch 1 of 4, the second
restarts the queries from their checkpoints and dies in micro-batch 2, the third runs them to
the end. The four exactly-once points (the batch's record not written; recorded ``prepared``;
between two commits; every commit done and recorded) are split between the modes, two each:
arrow mode dies before the record, then between the commits; rows mode after the record, then
after the commits; the driver's own write, as arrow mode, in the middle of its transaction (its
records sent, the batch not recorded) and between its commit and the ``committed`` record. Then every row is in the topic exactly once, no transaction is left open on
it, and each restarted driver saw the replayed batch as what it was: a no-op when the driver
before it had recorded the batch (its commits finished from the commit log), a normal write when
it had not. Every point in both modes (and these figures) runs in the fast layer too, over
in-memory brokers (tests/unit/spark/test_driver_crash.py). The same crashes at least once
duplicate the replayed batches: the test has teeth. A write whose job fails has every
transaction of its tasks aborted. A checkpoint reset with the prefix kept is refused, not taken
for a replay."""

from __future__ import annotations

import json
import os
import uuid
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import pytest

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, list_offsets
from .crash_job import CRASH_EXIT_CODE, REPLAYED
from .session import run_script
from .streaming import run_available_now

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(600)]

FILES, ROWS_PER_FILE, PARTITIONS = 4, 100, 3
TASKS = {"arrow": 2, "rows": 2, "driver": 1}
"""Transactions per micro-batch: crash_job repartitions each micro-batch in two (two tasks),
which the driver's own write takes as one."""
ROWS = FILES * ROWS_PER_FILE
CRASHES = {"arrow": (("before-record", 1), ("between-commits", 2)),
           "rows": (("after-record", 1), ("after-commits", 2)),
           "driver": (("before-record", 1), ("between-commits", 2)),
           "at-least-once": (("after-write", 1), ("after-write", 2))}
"""Per query, the runs' crash points, one per run, each at its micro-batch; a last run finishes.
The at-least-once query writes in arrow mode."""


def _input(directory: Path) -> Path:
    directory.mkdir()
    for index in range(FILES):
        rows = range(index * ROWS_PER_FILE, (index + 1) * ROWS_PER_FILE)
        path = directory / f"part-{index}.json"
        path.write_text("".join(f'{{"id": {i}}}\n' for i in rows))
        stamp = 1_700_000_000 + index * 60        # the file source takes files oldest first
        os.utime(path, (stamp, stamp))
    return directory


@dataclass(frozen=True)
class Chain:
    """One query's runs: its topic and, per run, its metrics history by batch id."""

    topic: str
    histories: list[dict]


@pytest.fixture(scope="module")
def chains(kafka, tmp_path_factory) -> dict[str, Chain]:
    """The three queries of ``CRASHES``, side by side in one driver process per run (the driver
    dies once every query reached its run's crash point), each on its own checkpoint: one run
    per crash, then one to the end."""
    bootstrap, root = kafka.bootstrap_servers, tmp_path_factory.mktemp("eos")
    queries = {}
    for name in CRASHES:
        topic = f"eos-{name}-{uuid.uuid4().hex[:8]}"
        create_topic(bootstrap, topic, PARTITIONS)
        queries[name] = {"topic": topic, "input": str(_input(root / f"input-{name}")),
                         "checkpoint": str(root / f"checkpoint-{name}"),
                         "mode": name if name in ("rows", "driver") else "arrow",
                         "prefix": "-" if name == "at-least-once" else f"eos-{uuid.uuid4().hex[:8]}"}
    runs = len(CRASHES["arrow"]) + 1
    assert all(len(crashes) == runs - 1 for crashes in CRASHES.values())
    for number in range(runs):
        last = number == runs - 1
        spec = {"bootstrap": bootstrap, "queries": [
            {**query, "point": "none" if last else CRASHES[name][number][0],
             "batch": "-1" if last else str(CRASHES[name][number][1]),
             "out": str(root / f"out-{name}-{number}.json")}
            for name, query in queries.items()]}
        spec_path = root / f"run-{number}.json"
        spec_path.write_text(json.dumps(spec))
        code, output = run_script("tests.spark.crash_job", str(spec_path), timeout_s=300)
        expected = 0 if last else CRASH_EXIT_CODE
        assert code == expected, f"run {number} ended with exit {code}, not {expected}:\n{output[-4000:]}"
    histories = {name: [] for name in queries}
    for name in queries:
        for number in range(runs):
            out = root / f"out-{name}-{number}.json"
            history = json.loads(out.read_text()) if out.exists() else []
            histories[name].append({batch_id: figures for batch_id, figures in history})
    return {name: Chain(query["topic"], histories[name]) for name, query in queries.items()}


def _counts(bootstrap: str, topic: str, expected: int) -> Counter:
    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=expected, timeout_s=60)
    assert all(r.key == r.value for part in records.values() for r in part)
    return Counter(int(r.key) for part in records.values() for r in part)


@pytest.mark.heavy
@pytest.mark.parametrize("mode", ["arrow", "rows", "driver"])
def test_a_driver_killed_mid_batch_then_restarted_writes_every_row_exactly_once(kafka, chains,
                                                                               mode):
    """Two crashes, at two points (``CRASHES``), then a run to the end: each run published the
    batches from the one its predecessor died in up to the one it died in; a replayed batch has
    ``batch-replay-total`` 1 and commits nothing, a rewritten one commits every task's
    transaction; the last batch, after both recoveries, is a normal one."""
    crashes, topic, histories = CRASHES[mode], chains[mode].topic, chains[mode].histories
    seen = _counts(kafka.bootstrap_servers, topic, ROWS)
    assert set(seen) == set(range(ROWS)), f"{ROWS - len(seen)} rows missing"
    assert set(seen.values()) == {1}, f"{sum(n > 1 for n in seen.values())} rows written twice"
    assert_no_open_transaction(kafka.bootstrap_servers, topic, PARTITIONS)
    firsts = [0] + [batch for _, batch in crashes]
    ends = [batch for _, batch in crashes] + [FILES]
    assert [sorted(h) for h in histories] == [list(range(a, b)) for a, b in zip(firsts, ends)]
    for (point, batch), restarted in zip(crashes, histories[1:]):
        replayed = restarted[batch]
        assert replayed["batch-replay-total"] == int(REPLAYED[point]), point
        assert replayed["transaction-commit-total"] == (0 if REPLAYED[point] else TASKS[mode]), point
    last = histories[-1][FILES - 1]
    assert last["batch-replay-total"] == 0 and last["transaction-commit-total"] == TASKS[mode]
    assert last["record-send-total"] == ROWS_PER_FILE and last["transaction-commit-time-ms"] > 0


@pytest.mark.heavy
def test_at_least_once_the_same_crash_writes_the_replayed_batch_twice(kafka, chains):
    """The driver dies after the tasks wrote micro-batch 1 (before Spark's checkpoint records
    it), then, restarted, after they wrote micro-batch 2: each restarted query writes the batch
    its driver died in again. In arrow mode only: that a restarted query runs the batch its
    driver died in again, the exactly-once runs show in both modes by the replayed batch's
    figures."""
    seen = _counts(kafka.bootstrap_servers, chains["at-least-once"].topic, ROWS + 2 * ROWS_PER_FILE)
    assert set(seen) == set(range(ROWS))
    twice = sorted(i for i, n in seen.items() if n == 2)
    assert twice == list(range(ROWS_PER_FILE, 3 * ROWS_PER_FILE)), "batches 1 and 2 are written twice"
    assert set(seen.values()) == {1, 2}


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_a_failed_exactly_once_write_aborts_every_transaction_of_its_tasks(spark, kafka, mode):
    """One task of two fails (a null topic; ``local[2]`` does not retry): a task that succeeded
    had handed its transaction over, open (unless Spark cancelled it first); the driver aborts it
    with the failed one's. Nothing is visible, nothing is left open, though the records were
    written (the test has teeth)."""
    from spark_kafka_sink import KafkaSink

    bootstrap = kafka.bootstrap_servers
    topic = f"eos-failed-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    df = spark.range(0, 1_000, 1, 2).selectExpr(
        "cast(id as string) as key", "cast(id as string) as value",
        f"case when id = 900 then null else '{topic}' end as topic")
    sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "mode": mode,
                        "delivery.guarantee": "exactly-once",
                        "transactional.id.prefix": f"eos-failed-{uuid.uuid4().hex[:8]}"})
    try:
        with pytest.raises(Exception, match="null 'topic'"):
            sink.write(df)
    finally:
        sink.close()
    assert _counts(bootstrap, topic, 0) == Counter()
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)
    # the failing task sent its 400 rows before the bad one (the other may be cancelled first)
    assert sum(list_offsets(bootstrap, topic, PARTITIONS, committed=False).values()) >= 400


def test_a_checkpoint_reset_with_the_prefix_kept_is_refused_not_skipped(spark, kafka, tmp_path):
    """A query writes micro-batch 0; its checkpoint is then deleted and the query started again
    with the same prefix: Spark gives it a new query id and its batch ids start again at 0. The
    commit log shows batch 0 committed by the first query id, so the sink refuses the batch
    (checkpoint reset detected) instead of skipping it as a replay, which would lose its rows."""
    from pyspark.errors import StreamingQueryException

    from spark_kafka_sink import KafkaSink

    bootstrap = kafka.bootstrap_servers
    topic = f"eos-reset-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic,
               "delivery.guarantee": "exactly-once",
               "transactional.id.prefix": f"eos-reset-{uuid.uuid4().hex[:8]}"}
    stream = spark.readStream.format("rate-micro-batch").option("rowsPerBatch", 5).load() \
        .selectExpr("cast(value as string) as key", "cast(value as string) as value")
    first = KafkaSink(**options)
    try:
        assert len(run_available_now(stream, first, str(tmp_path / "checkpoint"))) == 1
    finally:
        first.close()
    reset = KafkaSink(**options)
    query = (stream.writeStream.foreachBatch(reset).option("checkpointLocation",
                                                           str(tmp_path / "checkpoint-reset"))
             .trigger(availableNow=True).start())
    try:
        with pytest.raises(StreamingQueryException, match=r"checkpoint reset detected: .* shows "
                                                          r"micro-batch 0 committed by streaming query"):
            query.awaitTermination(120)
    finally:
        query.stop()
        reset.close()
    assert _counts(bootstrap, topic, 5) == Counter(range(5))      # the first query's rows, once


def _eos_config(bootstrap: str, prefix: str, **options) -> "SinkConfig":
    from spark_kafka_sink.spark.options import SinkConfig

    return SinkConfig.from_options({"kafka.bootstrap.servers": bootstrap, "topic": "unused",
                                    "delivery.guarantee": "exactly-once",
                                    "transactional.id.prefix": prefix, **options})


def test_recovery_aborts_transactions_above_the_recorded_partition_count(kafka):
    """A run crashed in a batch with 4 partitions after a recorded batch of 2 (arrow mode learns
    the count after the job): the restarted driver's upward probe aborts what <prefix>-2 and -3
    left open too, at once, instead of after transaction.timeout.ms."""
    from spark_kafka_sink import KafkaProducer
    from spark_kafka_sink.spark.commit_log import COMMITTED, BatchRecord, CommitLog
    from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver

    bootstrap = kafka.bootstrap_servers
    topic, prefix = f"eos-probe-{uuid.uuid4().hex[:8]}", f"eos-probe-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    config = _eos_config(bootstrap, prefix)
    log = CommitLog(config)
    log.ensure_topic()
    log.append(BatchRecord(prefix, "3", COMMITTED, 2, (), 2))
    producers = [KafkaProducer({"bootstrap.servers": bootstrap,
                                "transactional.id": config.transactional_id(p)}) for p in range(4)]
    try:
        for p, producer in enumerate(producers):
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"dangling", partition=p % PARTITIONS)
            producer.flush()
        driver = ExactlyOnceDriver(config, commit_log=log)
        start = driver.begin_batch("4")
        assert_no_open_transaction(bootstrap, topic, PARTITIONS, timeout_s=10)
        assert not start.replay and log.latest().max_partitions == 4
    finally:
        for producer in producers:
            producer.close(5)
        log.close()


def test_a_failed_replay_keeps_the_batch_committed_on_the_real_log(kafka):
    """The Data Source's abort() of a replayed batch (a fresh driver per step) leaves its
    committed record as it was; the next replay is skipped."""
    from spark_kafka_sink.spark.commit_log import COMMITTED, BatchRecord, CommitLog
    from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver

    prefix = f"eos-replay-{uuid.uuid4().hex[:8]}"
    config = _eos_config(kafka.bootstrap_servers, prefix)
    log = CommitLog(config)
    log.ensure_topic()
    log.append(BatchRecord(prefix, "5", COMMITTED, 3, (), 3))
    try:
        ExactlyOnceDriver(config, commit_log=log).abort_batch("5", 2)
        reader = CommitLog(config)
        try:
            last = reader.latest()
        finally:
            reader.close()
        assert (last.batch_id, last.state, last.max_partitions) == ("5", COMMITTED, 3)
        replayed = ExactlyOnceDriver(config)         # a fresh driver (and log), as each step's
        try:                                         # (the reader's writer fenced ``log``'s)
            assert replayed.commit_written("5", [], 2).replay
        finally:
            replayed.close()
    finally:
        log.close()


def test_a_new_prefix_with_a_transaction_timeout_above_the_brokers_is_refused_on_the_driver(kafka):
    """The Data Source's planning step (prepare_query) on an empty commit log: the probe's
    InitProducerId of <prefix>-0 carries the timeout, and the brokers refuse it, naming it."""
    from spark_kafka_sink.errors import KafkaError
    from spark_kafka_sink.spark.exactly_once import ExactlyOnceDriver

    config = _eos_config(kafka.bootstrap_servers, f"eos-timeout-{uuid.uuid4().hex[:8]}",
                         **{"kafka.transaction.timeout.ms": "1200000"})
    driver = ExactlyOnceDriver(config)
    try:
        with pytest.raises(KafkaError, match=r"transaction\.timeout\.ms \(1200000 ms\) is refused"):
            driver.prepare_query()
    finally:
        driver.close()


@pytest.mark.parametrize(("mode", "guarantee"), [("arrow", "exactly-once"), ("rows", "exactly-once"),
                                                 ("arrow", "at-least-once")])
def test_each_mode_computes_the_upstream_once_per_write(spark, kafka, mode, guarantee):
    """A Python UDF upstream of an aggregation, a join and a repartition runs once per row, in
    every mode (exactly-once once asked Spark for the partition count first, a job of its own
    under adaptive execution: twice)."""
    from pyspark.sql import functions as F

    from spark_kafka_sink import KafkaSink

    bootstrap, rows = kafka.bootstrap_servers, 40
    topic = f"eos-once-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    calls = spark.sparkContext.accumulator(0)

    def tag(i):
        calls.add(1)
        return str(i)

    ids = spark.range(0, rows, 1, 2).withColumn("k", F.col("id") % 4)
    sizes = ids.groupBy("k").agg(F.count("*").alias("n"))
    df = (ids.withColumn("v", F.udf(tag, "string")(F.col("id"))).join(sizes, "k").repartition(3)
          .selectExpr("cast(id as string) as key", "v as value"))
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": mode,
               "delivery.guarantee": guarantee}
    if guarantee == "exactly-once":
        options["transactional.id.prefix"] = f"eos-once-{uuid.uuid4().hex[:8]}"
    sink = KafkaSink(**options)
    try:
        sink.write(df)
    finally:
        sink.close()
    assert calls.value == rows, f"{calls.value / rows:.1f} UDF calls per row"
    assert _counts(bootstrap, topic, rows) == Counter({i: 1 for i in range(rows)})
