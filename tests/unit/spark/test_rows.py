"""Row -> send arguments, for every column kind, nulls included (pyspark Rows, no SparkSession)."""

from __future__ import annotations

import datetime
import os
import time

import pytest
from pyspark.sql import Row
from pyspark.sql.types import TimestampType

from spark_kafka_sink.spark.rows import RowConverter, RowError, SendArguments, to_bytes, to_epoch_ms
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema

UTC = datetime.timezone.utc

FULL = WriteSchema(
    value=Column("value", 1, Kind.BINARY), key=Column("key", 0, Kind.STRING),
    topic=Column("topic", 2, Kind.STRING), partition=Column("partition", 3, Kind.INT),
    headers=Column("headers", 4, Kind.HEADERS), timestamp=Column("timestamp", 5, Kind.TIMESTAMP))


def full_row(key="k", value=bytearray(b"v"), topic="t", partition=1, headers=None, timestamp=None):
    return Row(key=key, value=value, topic=topic, partition=partition, headers=headers,
               timestamp=timestamp)


def test_every_column_is_read_by_position():
    ts = datetime.datetime(2024, 5, 6, 7, 8, 9, 123_456, tzinfo=UTC)
    headers = [Row(key="a", value=bytearray(b"1")), Row(key="b", value=None)]
    record = RowConverter(FULL, None).convert(full_row(headers=headers, timestamp=ts), 0)
    assert record == SendArguments("t", b"v", b"k", 1, int(ts.timestamp()) * 1000 + 123,
                                   [("a", b"1"), ("b", None)])
    assert type(record.value) is bytes and type(record.key) is bytes
    assert type(record.headers[0][1]) is bytes


def test_nulls_become_none():
    record = RowConverter(FULL, None).convert(full_row(key=None, value=None, partition=None), 3)
    assert record == SendArguments("t", None, None, None, None, None)


def test_only_value_and_topic_option():
    schema = WriteSchema(value=Column("value", 1, Kind.STRING))
    record = RowConverter(schema, "events").convert(Row(other=5, value="héllo"), 0)
    assert record == SendArguments("events", "héllo".encode(), None, None, None, None)


def test_topic_option_overrides_the_column():
    schema = WriteSchema(value=Column("value", 0, Kind.STRING))  # validate_schema drops the column
    assert RowConverter(schema, "opt").convert(Row(value="x", topic="col"), 0).topic == "opt"


def test_null_topic_without_option_names_the_row():
    with pytest.raises(RowError, match=r"row 7 of this partition has a null 'topic'.*'topic' option"):
        RowConverter(FULL, None).convert(full_row(topic=None), 7)


def test_invalid_topic_names_the_row():
    converter = RowConverter(FULL, None)
    with pytest.raises(RowError, match=r"row 2 .*invalid 'topic'.*empty"):
        converter.convert(full_row(topic=""), 2)
    with pytest.raises(RowError, match=r"row 3 .*characters"):
        converter.convert(full_row(topic="a b"), 3)


def test_empty_headers_and_header_with_null_key():
    converter = RowConverter(FULL, None)
    assert converter.convert(full_row(headers=[]), 0).headers == []
    with pytest.raises(RowError, match=r"row 4 .*header with a null key"):
        converter.convert(full_row(headers=[Row(key=None, value=b"x")]), 4)
    with pytest.raises(RowError, match=r"row 5 .*null header"):
        converter.convert(full_row(headers=[None]), 5)


def test_no_topic_at_all_is_refused():
    with pytest.raises(ValueError, match="no 'topic' column and no 'topic' option"):
        RowConverter(WriteSchema(value=Column("value", 0, Kind.STRING)), None)


@pytest.mark.parametrize("given, expected", [
    ("abc", b"abc"), ("ü€", "ü€".encode()), (b"\x00\xff", b"\x00\xff"), (bytearray(b"\x01"), b"\x01"),
    (memoryview(b"mv"), b"mv"), (None, None), ("", b"")])
def test_to_bytes(given, expected):
    result = to_bytes(given)
    assert result == expected and (result is None or type(result) is bytes)


def test_to_bytes_refuses_other_types():
    with pytest.raises(TypeError, match="got int"):
        to_bytes(5)


def test_aware_timestamps():
    assert to_epoch_ms(datetime.datetime(1970, 1, 1, tzinfo=UTC)) == 0
    tz = datetime.timezone(datetime.timedelta(hours=5, minutes=30))
    assert to_epoch_ms(datetime.datetime(2024, 1, 1, 5, 30, 0, 999_999, tzinfo=tz)) == 1_704_067_200_999
    assert to_epoch_ms(None) is None


@pytest.fixture
def local_zone():
    """Switch this process's local time zone (what Spark's naive datetimes are in); restore after."""
    saved = os.environ.get("TZ")

    def use(zone: str) -> None:
        os.environ["TZ"] = zone
        time.tzset()
        if zone != "UTC":  # the zone really applies (tzdata installed), or the test would prove nothing
            assert "UTC" not in time.tzname, time.tzname

    yield use
    if saved is None:
        os.environ.pop("TZ", None)
    else:
        os.environ["TZ"] = saved
    time.tzset()


@pytest.mark.parametrize("zone", ["UTC", "America/New_York", "Europe/Berlin", "Asia/Kolkata"])
def test_naive_timestamps_from_spark_round_trip(local_zone, zone):
    """Spark's Python value for TimestampType is a naive local datetime (fromInternal); every
    instant comes back to its floored millisecond, including the repeated hour of a DST change."""
    local_zone(zone)
    spark_type = TimestampType()
    base = 1_699_149_600_000_000  # 2023-11-05 02:00 UTC; New York leaves DST at 06:00 UTC
    instants = [0, 1_000, 999, -1_500_000, 1_704_067_200_123_456, 1_711_846_800_000_000]
    instants += [base + step * 900_000_000 + 1_234 for step in range(24)]  # every 15 min for 6 h
    for micros in instants:
        naive = spark_type.fromInternal(micros)
        assert naive.tzinfo is None
        assert to_epoch_ms(naive) == micros // 1000, (zone, micros, naive)
