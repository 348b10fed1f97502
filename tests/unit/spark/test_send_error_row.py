"""Rows mode names the row whose ``send`` raised (an invalid partition, a record too large), as
arrow mode does: the fakes of ``test_partition_writer``, no broker, no SparkSession."""

from __future__ import annotations

import pytest
from pyspark.sql import Row

from spark_kafka_sink.errors import (AuthenticationError, BufferExhaustedError, MetadataTimeoutError,
                                     ProducerClosedError)
from spark_kafka_sink.spark.task import PartitionWriteError
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


@pytest.mark.parametrize("error", [
    MetadataTimeoutError("Topic t not present in metadata after 60000 ms"),
    BufferExhaustedError("Failed to allocate 100 bytes within 60000 ms"),
    AuthenticationError("SASL authentication failed"),
    ProducerClosedError("cannot send after the producer is closed"),
])
def test_with_errors_tolerance_all_a_send_that_raises_a_non_record_error_fails_the_task(error):
    """A timeout, an authentication failure or a closed producer says nothing about the row: it
    must fail the task, never become a dead letter (the row would be lost without a trace when
    the next one succeeds) nor be skipped."""

    class Raising(FakeProducer):
        def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
                 callback=None):
            if topic == "t" and value == b"v1":
                raise error
            return super().send(topic, value, key, partition, timestamp_ms, headers, callback)

    producer = Raising()
    options = {**OPTIONS, "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}
    writer, pool = make_writer(producer, options=options)
    with pytest.raises(PartitionWriteError,
                       match=rf"topic 't', partition not chosen yet, row 1 of this partition\): "
                             rf"{type(error).__name__}"):
        writer(iter([Row(key="k0", value="v0", topic="t"), Row(key="k1", value="v1", topic="t"),
                     Row(key="k2", value="v2", topic="t")]))
    assert [s[:2] for s in producer.sent] == [("t", b"v0")]       # no dead letter, nothing after
    assert pool.leases[0].released == 1
