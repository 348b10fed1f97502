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
