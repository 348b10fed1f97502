"""Rows mode names the row whose ``send`` raised (an invalid partition, a record too large), as
arrow mode does: the fakes of ``test_partition_writer``, no broker, no SparkSession."""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from spark_kafka_sink.spark.partition_writer import PartitionWriteError
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema

from .test_partition_writer import OPTIONS, FakeProducer, make_writer


@pytest.mark.parametrize("raise_at", [0, 2])
def test_a_send_that_raises_names_its_row_in_the_partition(raise_at):
    schema = WriteSchema(value=Column("value", 0, Kind.BINARY), partition=Column("partition", 1, Kind.INT))
    producer = FakeProducer(raise_at=raise_at)
    writer, pool = make_writer(producer, schema=schema, options={**OPTIONS, "topic": "big"})
    with pytest.raises(PartitionWriteError,
                       match=rf"topic 'big', partition 7, row {raise_at} of this partition\): MessageTooLargeError"):
        writer(iter([Row(value=b"v", partition=7)] * 4))
    assert len(producer.sent) == raise_at and pool.leases[0].released == 1


def test_a_timestamp_before_1970_names_its_row_and_value_and_nothing_after_it_is_sent():
    # the real producer's check (Java's: non-negative or null), behind the real rows path
    import datetime

    from ..producer.threaded_cluster import Cluster

    cluster = Cluster()
    producer = cluster.producer()
    try:
        schema = WriteSchema(value=Column("value", 0, Kind.BINARY),
                             timestamp=Column("timestamp", 1, Kind.TIMESTAMP))
        writer, _ = make_writer(producer, schema=schema, options={**OPTIONS, "topic": "t"})
        utc = datetime.timezone.utc
        rows = [Row(value=b"a", timestamp=datetime.datetime(1970, 1, 1, tzinfo=utc)),
                Row(value=b"b", timestamp=None),
                Row(value=b"c", timestamp=datetime.datetime(1969, 12, 31, 23, 59, 59, tzinfo=utc)),
                Row(value=b"d", timestamp=datetime.datetime(2024, 1, 1, tzinfo=utc))]
        with pytest.raises(PartitionWriteError, match=r"row 2 of this partition\): RecordContentError: Invalid "
                                                      r"timestamp: -1000\. Timestamp should always be "
                                                      r"non-negative or null"):
            writer(iter(rows))
        written = [r.value for batches in cluster.batches.values() for b in batches for r in b.records]
        assert sorted(written) == [b"a", b"b"]
    finally:
        cluster.close_producers()
