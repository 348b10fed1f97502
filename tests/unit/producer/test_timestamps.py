"""Record timestamps, as Java's producer takes them: non-negative or None. A negative one (-1 used
to mean "no timestamp", so the broker stamped its own time) is a ValueError naming the value, and
the row for ``send_arrow``; nothing is queued. Over the threaded in-memory cluster."""

from __future__ import annotations

import datetime

import numpy as np
import pyarrow as pa
import pytest

from .threaded_cluster import Cluster


@pytest.fixture
def cluster_producer():
    cluster = Cluster()
    yield cluster, cluster.producer(**{"max.block.ms": 10_000})
    cluster.close_producers()


def _written_timestamps(cluster) -> list[int]:
    return [record.timestamp_ms for batches in cluster.batches.values() for batch in batches
            for record in batch.records]


@pytest.mark.parametrize("timestamp", [-1, -2, -1_700_000_000_000])
def test_send_refuses_a_negative_timestamp_naming_it(cluster_producer, timestamp):
    cluster, producer = cluster_producer
    with pytest.raises(ValueError, match=rf"Invalid timestamp: {timestamp}\. Timestamp should always "
                                         r"be non-negative or null"):
        producer.send("t", b"v", timestamp_ms=timestamp)
    producer.flush(10)
    assert _written_timestamps(cluster) == []
    assert cluster.metadata_requests("t") == 0               # refused before any wait


def test_send_takes_zero_and_integral_timestamps_and_refuses_other_types(cluster_producer):
    cluster, producer = cluster_producer
    for timestamp in (0, np.int64(5), (1 << 63) - 1):
        producer.send("t", b"v", partition=0, timestamp_ms=timestamp).result(10)
    assert _written_timestamps(cluster) == [0, 5, (1 << 63) - 1]
    for bad in (True, 1.5, "1"):
        with pytest.raises(TypeError, match="timestamp_ms must be an int"):
            producer.send("t", b"v", timestamp_ms=bad)
    with pytest.raises(ValueError, match="int64"):
        producer.send("t", b"v", timestamp_ms=1 << 63)


@pytest.mark.parametrize("column", [
    pa.array([0, 5, -1, None, -3], pa.int64()),
    pa.array([datetime.datetime(1970, 1, 1), datetime.datetime(1971, 1, 1),
              datetime.datetime(1969, 12, 31, 23, 59, 59, 999_000), None,
              datetime.datetime(1969, 7, 20)], pa.timestamp("ms")),
    pa.array([0, 1, -1_000, None, -1], pa.timestamp("us")),
])
def test_send_arrow_refuses_a_negative_timestamp_naming_column_row_and_value(cluster_producer, column):
    cluster, producer = cluster_producer
    table = pa.table({"value": [b"a", b"b", b"c", b"d", b"e"], "event_time": column})
    with pytest.raises(ValueError, match=r"row 2: timestamp -1 ms in column 'event_time' is negative "
                                         r"\(before 1970\).* 2 row\(s\) of this column are negative"):
        producer.send_arrow("t", table, timestamp="event_time")
    producer.flush(10)
    assert _written_timestamps(cluster) == [] and cluster.metadata_requests("t") == 0


def test_send_arrow_keeps_timestamp_zero_and_stamps_nulls(cluster_producer):
    cluster, producer = cluster_producer
    table = pa.table({"value": [b"a", b"b"], "timestamp": pa.array([0, None], pa.int64())})
    result = producer.send_arrow("t", table, partition=None)
    result.wait(10)
    result.raise_for_errors()
    written = sorted(_written_timestamps(cluster))
    assert written[0] == 0 and written[1] > 1_600_000_000_000
