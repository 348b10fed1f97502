"""The exactly-once commit log (``spark.commit_log``) and the driver around it against the real
broker, without Spark: a driver that outlived its replacement cannot write after it, a task still
running after its job failed leaves no transaction open past the next batch's start, and a commit
topic that is not compacted is refused. Read back with confluent-kafka at read_committed."""

from __future__ import annotations

import json
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import ConfigError, KafkaError, ProducerFencedError
from spark_kafka_sink.admin import describe_topics
from spark_kafka_sink.spark.commit_log import (
    ABORTED, COMMITTED, BatchRecord, CommitLog, DriverFencedError, writer_id,
)
from spark_kafka_sink.spark.exactly_once import FENCE_GAP, ExactlyOnceDriver
from spark_kafka_sink.spark.options import SinkConfig

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, list_offsets

pytestmark = [pytest.mark.broker, pytest.mark.timeout(120)]


def _config(bootstrap: str, prefix: str, **options) -> SinkConfig:
    return SinkConfig.from_options({"kafka.bootstrap.servers": bootstrap,
                                    "delivery.guarantee": "exactly-once",
                                    "transactional.id.prefix": prefix, **options})


def _closing(*drivers):
    for driver in drivers:
        driver.close()


def test_a_newer_driver_fences_the_older_ones_commit_log_writer(kafka):
    """Two drivers of one query (a driver restarted while the old one still runs): once the
    newer one has recovered, the older one's append is refused, so its ``aborted`` cannot land
    after the newer one's ``committed``; the log keeps the newer driver's record. The older
    driver's abort learns that it was fenced before it fences any id: the newer driver's task,
    writing meanwhile, keeps its transaction and commits."""
    bootstrap = kafka.bootstrap_servers
    config = _config(bootstrap, f"eol-{uuid.uuid4().hex[:8]}")
    topic = f"eol-stale-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    old, new = ExactlyOnceDriver(config), ExactlyOnceDriver(config)
    task = KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0,
                          "transactional.id": config.transactional_id(0)})
    try:
        assert not old.begin_batch("7", 1).replay           # the old driver runs batch 7...
        assert not new.begin_batch("7", 1).replay           # ...when its replacement starts
        task.init_transactions()                             # the new driver's task
        task.begin_transaction()
        task.send(topic, b"row", key=b"row").result(timeout=30)
        task.flush()
        handed = task.resumable_transaction()
        with pytest.raises(DriverFencedError, match=r"another driver of the query with "
                                                    r"transactional.id.prefix .* took over"):
            old.abort_batch("7", 1)                          # its job "failed" meanwhile
        new.commit_batch("7", [handed], 1)                   # not aborted by the old driver
    finally:
        task.close(0)
        _closing(old, new)
    assert [r.value for r in consume_all(bootstrap, topic, 1, expected_count=1)[0]] == [b"row"]
    log = CommitLog(config)
    try:
        assert log.latest().state == COMMITTED
    finally:
        log.close()
    consumed = consume_all(kafka.bootstrap_servers, config.commit_topic, 1, expected_count=2)[0]
    states = [json.loads(r.value)["state"] for r in consumed
              if json.loads(r.value)["batch_id"] == "7"]
    assert ABORTED not in states and states[-1] == COMMITTED  # nothing of the old driver's after
    restarted = ExactlyOnceDriver(config)
    try:
        assert restarted.begin_batch("7", 1).replay          # so Spark's replay is skipped
    finally:
        restarted.close()


def test_a_record_its_driver_did_not_commit_is_never_read(kafka):
    """A driver that died in the middle of an append left its record in an open transaction; the
    next driver's writer aborts it when it takes the log over, and the read (read_committed)
    leaves it out: the log's last record is the one committed before."""
    config = _config(kafka.bootstrap_servers, f"eol-{uuid.uuid4().hex[:8]}")
    driver = ExactlyOnceDriver(config)
    try:
        driver.begin_batch("3", 1)
        driver.commit_batch("3", [], 1)
    finally:
        driver.close()
    dying = KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers,
                           "transactional.id": writer_id(config.transactional_id_prefix)})
    try:
        dying.init_transactions()
        dying.begin_transaction()
        undone = BatchRecord(config.transactional_id_prefix, "4", ABORTED, 1, (), 1)
        dying.send(config.commit_topic, undone.to_json(), key=config.transactional_id_prefix.encode(),
                   partition=0).result(timeout=30)
    finally:
        dying.close(0)                                       # the driver dies: left open
    log = CommitLog(config)
    try:
        last = log.latest()
    finally:
        log.close()
    assert (last.batch_id, last.state) == ("3", COMMITTED)


def test_a_task_opening_its_transaction_after_the_abort_is_aborted_when_the_next_batch_starts(
        kafka):
    """A task still running after its job failed (a slow-to-die Python worker, a lost executor)
    initializes its transactional id after ``abort_batch`` fenced it and writes: its transaction
    is open, holding read_committed readers back. The next batch of the driver (the query
    restarted in the same process) recovers again and fences every id the prefix used, though
    the rerun has fewer tasks: the transaction is aborted there, and the late task's commit
    refused."""
    bootstrap = kafka.bootstrap_servers
    prefix = f"eol-{uuid.uuid4().hex[:8]}"
    topic = f"eol-late-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1)
    driver = ExactlyOnceDriver(_config(bootstrap, prefix))
    late = KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": f"{prefix}-1",
                          "linger.ms": 0})
    try:
        driver.begin_batch("0", 2)
        driver.abort_batch("0", 2)                           # the job failed
        late.init_transactions()                             # ...but task 1 was still running
        late.begin_transaction()
        late.send(topic, b"late", key=b"late").result(timeout=30)
        assert list_offsets(bootstrap, topic, 1, committed=True) == {0: 0}   # held back
        start = driver.begin_batch("0", 1)                   # the rerun: one task, id -0 only
        assert start.fenced == 2 + FENCE_GAP                # every id used, and the window above
        assert_no_open_transaction(bootstrap, topic, 1)
        with pytest.raises(KafkaError) as refused:
            late.commit_transaction(30)
        assert isinstance(refused.value, ProducerFencedError) or "fenced" in str(refused.value).lower()
    finally:
        late.close(0)
        driver.close()
    assert consume_all(bootstrap, topic, 1, expected_count=0)[0] == []


def test_an_existing_commit_topic_that_is_not_compacted_is_refused(kafka):
    bootstrap = kafka.bootstrap_servers
    commit_topic = f"eol-commits-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, commit_topic, 1, configs={"cleanup.policy": "delete"})
    config = _config(bootstrap, f"eol-{uuid.uuid4().hex[:8]}", **{"commit.topic": commit_topic})
    described = describe_topics(bootstrap, [commit_topic])[commit_topic]
    assert (described.replication_factor, described.cluster_brokers) == (1, 1)
    driver = ExactlyOnceDriver(config)
    try:
        with pytest.raises(ConfigError, match=rf"option 'commit.topic': topic '{commit_topic}' has "
                                              r"cleanup.policy='delete'.*kafka-configs.*"
                                              r"cleanup.policy=compact"):
            driver.begin_batch("0", 1)
    finally:
        driver.close()
    assert consume_all(bootstrap, commit_topic, 1, expected_count=0)[0] == []   # nothing recorded
