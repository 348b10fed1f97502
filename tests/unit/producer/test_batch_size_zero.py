"""``batch.size=0``: no batching, as in Java (its KafkaProducer sizes batches with
``max(1, batch.size)``, so a batch holds its first record and the next never fits). A real
producer over the in-memory cluster: every record is delivered, one record per batch, through
``send()`` and ``send_arrow()`` alike, and no memory is left leased."""

from __future__ import annotations

import pyarrow as pa
import pytest

from .threaded_cluster import Cluster

WAIT_S = 5.0


@pytest.fixture
def producer_and_cluster():
    cluster = Cluster()
    yield cluster.producer(**{"batch.size": 0, "linger.ms": 5}), cluster
    cluster.close_producers()


def test_send_with_batch_size_zero_delivers_one_record_per_batch(producer_and_cluster):
    producer, cluster = producer_and_cluster
    futures = [producer.send("t", f"v{i}".encode(), key=b"k", partition=i % 2) for i in range(20)]
    producer.flush(WAIT_S)
    assert sorted(f.result(0).offset for f in futures if f.result(0).partition == 0) == list(range(10))
    for partition in (0, 1):
        batches = cluster.batches[("t", partition)]
        assert [len(b.records) for b in batches] == [1] * 10
        assert [b.records[0].value for b in batches] == [f"v{i}".encode() for i in range(partition, 20, 2)]
    assert producer._pool.available_memory == producer.config.buffer_memory


def test_send_arrow_with_batch_size_zero_delivers_one_record_per_batch(producer_and_cluster):
    producer, cluster = producer_and_cluster
    table = pa.table({"value": [f"r{i}".encode() for i in range(12)], "partition": [0, 1] * 6})
    result = producer.send_arrow("t", table)
    result.wait(WAIT_S)
    result.raise_for_errors()
    assert result.acked == 12
    for partition in (0, 1):
        batches = cluster.batches[("t", partition)]
        assert [len(b.records) for b in batches] == [1] * 6
    assert producer._pool.available_memory == producer.config.buffer_memory
