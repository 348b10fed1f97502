"""The transactional producer against real brokers of both transaction versions, read back with
confluent-kafka's consumer at ``isolation.level=read_committed`` (tests/verify.py).

- ``tv2``: the session's Kafka 4.x, whose finalized ``transaction.version`` is 2 (KIP-890: Produce
  v12 enrols partitions, EndTxn v5 bumps the epoch);
- ``tv1``: Kafka 3.9, transaction version 1 (AddPartitionsToTxn, the epoch stays).

Every test runs on both: commit visible and abort invisible (the aborted records are in the log,
hidden), a second producer fencing the first, a transaction outliving ``transaction.timeout.ms``
aborted by the coordinator and reported, and a resumable transaction committed by another
process (re-committing it succeeds; completing a fenced or aborted one says the records are lost),
and fencing a list of ids without a producer (what the exactly-once sink does at query start).
"""

from __future__ import annotations

import pickle
import subprocess
import sys
import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer, abort_resumable, commit_resumable
from spark_kafka_sink.producer.transactions.resumable import fence_transactional_ids
from spark_kafka_sink.errors import (
    IllegalStateError, InvalidTxnStateError, KafkaError, ProducerFencedError, TransactionAbortedError,
)

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, list_offsets

pytestmark = pytest.mark.timeout(180)

PARTITIONS = 3


@pytest.fixture(params=["tv2", "tv1"])
def broker(request):
    """(bootstrap, the transaction version its transactions use)."""
    if request.param == "tv2":
        return request.getfixturevalue("kafka").bootstrap_servers, 2
    return request.getfixturevalue("kafka_tv1").bootstrap_servers, 1


def _topic(bootstrap: str, prefix: str) -> str:
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, name, PARTITIONS)
    return name


def _producer(bootstrap: str, transactional_id: str, **extra) -> KafkaProducer:
    return KafkaProducer({"bootstrap.servers": bootstrap, "transactional.id": transactional_id,
                          "linger.ms": 5, **extra})


def _committed_values(bootstrap: str, topic: str, expected: int) -> list[bytes]:
    consumed = consume_all(bootstrap, topic, PARTITIONS, expected_count=expected, timeout_s=30)
    return sorted(record.value for records in consumed.values() for record in records)


def _values(prefix: str, count: int) -> list[bytes]:
    return sorted(f"{prefix}-{i:04d}".encode() for i in range(count))


def test_commit_is_visible_abort_is_not_and_the_producer_goes_on(broker):
    bootstrap, version = broker
    topic = _topic(bootstrap, "txn")
    with _producer(bootstrap, f"txn-{uuid.uuid4().hex[:8]}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        assert producer._transactional.transaction_version == version
        for i in range(200):
            producer.send(topic, f"commit1-{i:04d}".encode(), key=str(i).encode())
        producer.commit_transaction()

        producer.begin_transaction()
        aborted = [producer.send(topic, f"abort-{i:04d}".encode(), key=str(i).encode())
                   for i in range(100)]
        producer.flush()                           # written to the log, then aborted
        assert all(future.exception() is None for future in aborted)
        producer.abort_transaction()

        producer.begin_transaction()
        queued = producer.send(topic, b"never-sent", partition=0)
        producer.abort_transaction()               # queued records fail, never written
        assert isinstance(queued.exception(timeout=10), TransactionAbortedError)

        producer.begin_transaction()
        for i in range(50):
            producer.send(topic, f"commit2-{i:04d}".encode(), key=str(i).encode())
        producer.commit_transaction()
        metrics = producer.metrics()
    assert _committed_values(bootstrap, topic, 250) == sorted(_values("commit1", 200)
                                                              + _values("commit2", 50))
    # the aborted records and the control markers are in the log, hidden by read_committed
    assert sum(list_offsets(bootstrap, topic, PARTITIONS, committed=False).values()) > 250 + 100
    for step in ("init", "begin", "commit", "abort"):
        assert metrics[f"txn-{step}-time-ns-total"] > 0


def test_sends_outside_a_transaction_are_refused(broker):
    bootstrap, _ = broker
    topic = _topic(bootstrap, "txn-outside")
    with _producer(bootstrap, f"txn-{uuid.uuid4().hex[:8]}") as producer:
        with pytest.raises(IllegalStateError, match="outside a transaction"):
            producer.send(topic, b"x")
        producer.init_transactions()
        with pytest.raises(IllegalStateError, match="call begin_transaction"):
            producer.send(topic, b"x")
        with pytest.raises(IllegalStateError, match="no open transaction"):
            producer.commit_transaction()
        producer.begin_transaction()
        producer.send(topic, b"inside")
        producer.commit_transaction()
        with pytest.raises(IllegalStateError, match="outside a transaction"):
            producer.send(topic, b"after")
    assert _committed_values(bootstrap, topic, 1) == [b"inside"]


def test_a_second_producer_with_the_same_id_fences_the_first(broker):
    bootstrap, _ = broker
    topic = _topic(bootstrap, "txn-fence")
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    first = _producer(bootstrap, transactional_id)
    second = _producer(bootstrap, transactional_id)
    try:
        first.init_transactions()
        first.begin_transaction()
        for i in range(20):
            first.send(topic, f"zombie-{i:04d}".encode())
        first.flush()
        second.init_transactions()                 # fences first, aborts its transaction
        with pytest.raises(ProducerFencedError, match="fenced"):
            first.commit_transaction()
        with pytest.raises(ProducerFencedError):
            first.send(topic, b"after-fencing")    # fatal: the producer must be closed
        second.begin_transaction()
        for i in range(10):
            second.send(topic, f"live-{i:04d}".encode())
        second.commit_transaction()
    finally:
        first.close()
        second.close()
    assert _committed_values(bootstrap, topic, 10) == _values("live", 10)


def test_a_transaction_outliving_its_timeout_is_aborted_and_reported(broker):
    bootstrap, _ = broker
    topic = _topic(bootstrap, "txn-timeout")
    with _producer(bootstrap, f"txn-{uuid.uuid4().hex[:8]}",
                   **{"transaction.timeout.ms": 2_000}) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(20):
            producer.send(topic, f"late-{i:04d}".encode())
        producer.flush()
        started = time.monotonic()
        time.sleep(2.0 + 1.0 + 1.5)                # the timeout, the broker's 1 s check, slack
        # Kafka 3.9 fences the epoch (PRODUCER_FENCED); 4.1 answers INVALID_TXN_STATE
        with pytest.raises((ProducerFencedError, InvalidTxnStateError),
                           match=r"transaction\.timeout\.ms \(2000 ms\)"):
            producer.commit_transaction(timeout=30)
        assert time.monotonic() - started < 30
    # aborted by the coordinator: nothing visible, and read_committed readers are not held back
    assert _committed_values(bootstrap, topic, 0) == []
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)


def test_a_resumable_transaction_is_committed_by_another_process(broker):
    bootstrap, version = broker
    topic = _topic(bootstrap, "txn-resume")
    transactional_id = f"txn-{uuid.uuid4().hex[:8]}"
    with _producer(bootstrap, transactional_id) as producer:
        producer.init_transactions()
        producer.begin_transaction()
        for i in range(60):
            producer.send(topic, f"resumed-{i:04d}".encode(), key=str(i).encode())
        with pytest.raises(IllegalStateError, match="flush"):
            producer.resumable_transaction()       # records still in flight
        producer.flush()
        value = producer.resumable_transaction()
    assert value.transactional_id == transactional_id and value.transaction_version == version
    assert {tp.partition for tp in value.partitions} == set(range(PARTITIONS))
    config = {"bootstrap.servers": bootstrap}
    child = subprocess.run(
        [sys.executable, "-c", "import pickle, sys\n"
         "from spark_kafka_sink import commit_resumable\n"
         "value, config = pickle.loads(sys.stdin.buffer.read())\n"
         "commit_resumable(value, config, timeout=60)\n"],
        input=pickle.dumps((value, config)), capture_output=True, timeout=120)
    assert child.returncode == 0, child.stderr.decode()
    assert _committed_values(bootstrap, topic, 60) == _values("resumed", 60)
    commit_resumable(value, config, timeout=30)    # already committed: succeeds again
    with pytest.raises(InvalidTxnStateError, match="already committed"):
        abort_resumable(value, config, timeout=30)


def test_completing_an_aborted_or_fenced_resumable_transaction_says_the_records_are_lost(broker):
    bootstrap, _ = broker
    topic = _topic(bootstrap, "txn-lost")
    config = {"bootstrap.servers": bootstrap}
    values = []
    for _ in range(2):
        with _producer(bootstrap, f"txn-{uuid.uuid4().hex[:8]}") as producer:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"lost")
            producer.flush()
            values.append(producer.resumable_transaction())
    aborted, fenced = values
    abort_resumable(aborted, config, timeout=30)
    with pytest.raises(InvalidTxnStateError, match="already aborted .* records are lost"):
        commit_resumable(aborted, config, timeout=30)
    with _producer(bootstrap, fenced.transactional_id) as newer:
        newer.init_transactions()                   # fences the handed-out epoch
    with pytest.raises(ProducerFencedError, match="records are lost"):
        commit_resumable(fenced, config, timeout=30)
    assert _committed_values(bootstrap, topic, 0) == []


def test_a_failed_record_makes_the_commit_fail_and_abort_recovers(broker):
    bootstrap, _ = broker
    topic = f"txn-abortable-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 1, configs={"max.message.bytes": "1024"})
    with _producer(bootstrap, f"txn-{uuid.uuid4().hex[:8]}") as producer:
        producer.init_transactions()
        producer.begin_transaction()
        kept_out = producer.send(topic, b"kept-out")
        producer.flush()
        too_large = producer.send(topic, b"x" * 4_000)  # the broker refuses it: MESSAGE_TOO_LARGE
        producer.flush()
        assert too_large.exception() is not None and kept_out.exception() is None
        with pytest.raises(KafkaError, match="can only be aborted"):
            producer.commit_transaction()
        with pytest.raises(KafkaError, match="can only be aborted"):
            producer.send(topic, b"refused")
        producer.abort_transaction()
        producer.begin_transaction()
        producer.send(topic, b"after-abort")
        producer.commit_transaction()
    consumed = consume_all(bootstrap, topic, 1, expected_count=1, timeout_s=30)
    assert [record.value for record in consumed[0]] == [b"after-abort"]


def test_fencing_ids_aborts_their_open_transactions_and_fences_their_producers(broker):
    bootstrap, _ = broker
    topic = _topic(bootstrap, "txn-fence-ids")
    prefix = f"fence-{uuid.uuid4().hex[:8]}"
    producers = [_producer(bootstrap, f"{prefix}-{p}") for p in range(3)]
    try:
        for producer in producers:
            producer.init_transactions()
            producer.begin_transaction()
            producer.send(topic, b"dangling")
            producer.flush()
        fenced = fence_transactional_ids([f"{prefix}-{p}" for p in range(4)],
                                         {"bootstrap.servers": bootstrap}, timeout=60)
        assert [f.transactional_id for f in fenced] == [f"{prefix}-{p}" for p in range(4)]
        # the coordinator gives a new id epoch 0 (fresh); a used one's epoch rises (init 0, then
        # the fence: one bump to abort its open transaction, one more for the new producer)
        assert [(f.producer_epoch, f.fresh) for f in fenced] == [(2, False)] * 3 + [(0, True)]
        assert fence_transactional_ids([f"{prefix}-3"], {"bootstrap.servers": bootstrap},
                                       timeout=60)[0].producer_epoch == 1
        for producer in producers:
            with pytest.raises((ProducerFencedError, InvalidTxnStateError)):
                producer.commit_transaction(timeout=30)
    finally:
        for producer in producers:
            producer.close()
    # nothing visible, and nothing holds read_committed readers back
    assert _committed_values(bootstrap, topic, 0) == []
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)


def test_a_transaction_timeout_above_the_brokers_maximum_is_refused_at_init_naming_both(broker):
    bootstrap, _ = broker
    config = {"bootstrap.servers": bootstrap, "transaction.timeout.ms": 900_001}
    with pytest.raises(KafkaError, match=r"transaction\.timeout\.ms \(900001 ms\) is refused by the "
                                         r"brokers .* transaction\.max\.timeout\.ms"):
        fence_transactional_ids([f"too-long-{uuid.uuid4().hex[:8]}"], config, timeout=30)
    with _producer(bootstrap, f"too-long-{uuid.uuid4().hex[:8]}",
                   **{"transaction.timeout.ms": 900_001}) as producer:
        with pytest.raises(KafkaError, match="INVALID_TRANSACTION_TIMEOUT"):
            producer.init_transactions(timeout=30)
