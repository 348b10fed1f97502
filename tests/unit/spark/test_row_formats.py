"""Rows mode's Avro sides (spark/row_formats.py): pyspark Rows encoded in chunks, each body the one
``spark_kafka_sink.avro.encode`` gives the same values as an Arrow column; local timestamps, chunk
boundaries, bad rows and topics (no Spark session, no registry)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import time

import pyarrow as pa
import pytest
from pyspark.sql import Row
from pyspark.sql import types as T

from spark_kafka_sink.avro import encode
from spark_kafka_sink.errors import SerializationError
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.row_formats import RowFormats, Unencodable
from spark_kafka_sink.spark.rows import RowError
from spark_kafka_sink.spark.schema import WriteSchema, validate_schema

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}
PLAIN = {"value.format": "avro", "value.avro.framing": "none"}
FRAMED = {"value.format": "avro", "schema.registry.url": "http://127.0.0.1:8081"}
UTC = datetime.timezone.utc
OFFSET_ZONE = "SKS-5:30"
"""A POSIX zone five and a half hours east of UTC (no zone database needed)."""

ITEM = T.StructType([T.StructField("sku", T.StringType(), False), T.StructField("qty", T.IntegerType(), True)])
ORDER = T.StructType([
    T.StructField("id", T.LongType(), False),
    T.StructField("price", T.DecimalType(9, 2), True),
    T.StructField("day", T.DateType(), True),
    T.StructField("items", T.ArrayType(ITEM, True), True),
    T.StructField("attrs", T.MapType(T.StringType(), T.StringType(), True), True),
    T.StructField("raw", T.BinaryType(), True),
])


def frame(value_type, *, key_type=T.StringType(), topic=True) -> T.StructType:
    fields = [T.StructField("key", key_type), T.StructField("value", value_type)]
    if topic:
        fields.append(T.StructField("topic", T.StringType()))
    return T.StructType(fields)


def write_schema(value_type, options=PLAIN, **frame_kwargs) -> WriteSchema:
    return validate_schema(frame(value_type, **frame_kwargs), SinkConfig.from_options({**BOOT, **options}))


def by_topic(value_type, ids: dict[str, int], options=FRAMED, **frame_kwargs) -> WriteSchema:
    """A framed value side as the driver resolves it: each topic's format with its own id."""
    written = write_schema(value_type, options, **frame_kwargs)
    encoder = written.value_encoder
    resolved = dataclasses.replace(encoder, by_topic=tuple(
        (topic, encoder.template.with_schema_id(schema_id)) for topic, schema_id in ids.items()))
    return dataclasses.replace(written, value_encoder=resolved)


def expected_bodies(written: WriteSchema, values: list, schema_id: int | None = None) -> list:
    """What the avro package gives the same values as one Arrow column."""
    encoder = written.value_encoder
    column = pa.array(values, type=encoder.arrow_type)
    return encode(column, encoder.template.schema, schema_id).bodies.to_pylist()


def take(iterator, out: list):
    """Drain ``iterator`` into ``out``; the error it raised, if any."""
    try:
        for item in iterator:
            out.append(item)
    except Exception as error:  # noqa: BLE001 - the test looks at it
        return error
    return None


@pytest.fixture
def offset_zone(monkeypatch):
    """The process's local zone set to :data:`OFFSET_ZONE` for the test, then restored."""
    monkeypatch.setenv("TZ", OFFSET_ZONE)
    time.tzset()
    yield
    monkeypatch.undo()
    time.tzset()


def order(i: int, **changes) -> Row:
    fields = {"id": i, "price": decimal.Decimal(f"{i}.25"), "day": datetime.date(2024, 1, 1 + i % 28),
              "items": [Row(sku=f"s{i}", qty=i), Row(sku="t", qty=None)] if i % 2 else [],
              "attrs": {"colour": "red", "size": None} if i % 3 else None, "raw": bytes([i % 256])}
    fields.update(changes)
    return Row(**fields)


def test_each_body_is_what_the_avro_package_encodes_for_the_same_values():
    written = write_schema(ORDER)
    rows = [Row(key=f"k{i}", value=order(i), topic="orders") for i in range(7)]
    out = list(RowFormats(written, None).rows(rows))
    values = [row.value.asDict(recursive=True) for row in rows]
    assert [row[1] for row in out] == expected_bodies(written, values)
    assert [(row[0], row[2]) for row in out] == [(f"k{i}", "orders") for i in range(7)]  # the rest as given


def test_a_null_value_stays_null_and_a_plain_column_is_encoded_too():
    written = write_schema(T.StringType())
    out = list(RowFormats(written, None).rows([Row(key="a", value="x", topic="t"),
                                              Row(key="b", value=None, topic="t")]))
    assert out == [["a", b"\x02x", "t"], ["b", None, "t"]]


def test_a_local_timestamp_encodes_the_same_instant_as_the_aware_utc_one(offset_zone):
    written = write_schema(T.TimestampType())
    local = datetime.datetime(2024, 1, 2, 3, 4, 5, 6)            # as PySpark hands it: naive, local
    instant = datetime.datetime(2024, 1, 1, 21, 34, 5, 6, tzinfo=UTC)
    assert local.astimezone(UTC) == instant                     # the zone is in effect
    out = list(RowFormats(written, None).rows([Row(key=None, value=local, topic="t")]))
    assert out[0][1] == expected_bodies(written, [instant])[0]
    assert out[0][1] != expected_bodies(written, [local])[0]     # naive read as UTC would be 5.5 h off


def test_nested_local_timestamps_in_structs_arrays_and_maps_are_instants_too(offset_zone):
    inner = T.StructType([T.StructField("at", T.TimestampType(), True)])
    value_type = T.StructType([
        T.StructField("at", T.TimestampType(), True),
        T.StructField("inner", inner, True),
        T.StructField("history", T.ArrayType(T.TimestampType(), True), True),
        T.StructField("events", T.ArrayType(inner, True), True),
        T.StructField("by_name", T.MapType(T.StringType(), T.TimestampType(), True), True),
        T.StructField("wall", T.TimestampNTZType(), True),
    ])
    written = write_schema(value_type)
    local = datetime.datetime(2024, 6, 1, 12, 0)

    def value(at):
        return {"at": at, "inner": {"at": at}, "history": [at, None], "events": [{"at": at}, None],
                "by_name": {"a": at, "b": None}, "wall": local}
    rows = [Row(key=None, value=Row(at=local, inner=Row(at=local), history=[local, None],
                                    events=[Row(at=local), None], by_name={"a": local, "b": None}, wall=local),
                topic="t"),
            Row(key=None, value=Row(at=None, inner=None, history=None, events=None, by_name=None, wall=None),
                topic="t")]
    out = list(RowFormats(written, None).rows(rows))
    instant = local.astimezone(UTC)
    empty = {"at": None, "inner": None, "history": None, "events": None, "by_name": None, "wall": None}
    assert [row[1] for row in out] == expected_bodies(written, [value(instant), empty])


@pytest.mark.parametrize("chunk_rows", [1, 2, 3, 512])
def test_chunks_keep_the_rows_in_order_whatever_their_size(chunk_rows):
    written = write_schema(ORDER)
    rows = [Row(key=f"k{i}", value=None if i == 4 else order(i), topic=None if i == 2 else "t") for i in range(7)]
    out = list(RowFormats(written, None, chunk_rows=chunk_rows).rows(iter(rows)))
    assert out == list(RowFormats(written, None).rows(rows))
    assert [row[0] for row in out] == [f"k{i}" for i in range(7)]
    assert out[2] == list(rows[2]) and out[4][1] is None         # a null topic passes as given; a null value
    bodies = expected_bodies(written, [order(i).asDict(recursive=True) for i in (0, 1, 3, 5, 6)])
    assert [out[i][1] for i in (0, 1, 3, 5, 6)] == bodies


@pytest.mark.parametrize("chunk_rows", [2, 512])
def test_a_row_that_cannot_be_encoded_fails_after_the_rows_before_it_naming_its_position(chunk_rows):
    user = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True)])
    schema = ('{"type":"record","name":"User","fields":[{"name":"id","type":"long"},'
              '{"name":"name","type":"string"}]}')                  # the name may not be null
    written = write_schema(user, {**PLAIN, "value.avro.schema": schema})
    rows = [Row(key=f"k{i}", value=Row(id=i, name=None if i in (3, 5) else f"n{i}"), topic="t") for i in range(6)]
    out: list = []
    error = take(RowFormats(written, None, chunk_rows=chunk_rows).rows(rows), out)
    assert isinstance(error, SerializationError)
    assert (error.row, error.path) == (3, "value.name") and str(error).startswith("row 3: value.name: ")
    assert [row[0] for row in out] == ["k0", "k1", "k2"]
    assert [row[1] for row in out] == expected_bodies(written, [{"id": i, "name": f"n{i}"} for i in range(3)])


def test_a_value_arrow_cannot_take_is_named_by_its_row_and_the_others_are_encoded():
    written = write_schema(ORDER)
    rows = [Row(key=f"k{i}", value=order(i), topic="t") for i in range(4)]
    rows[2] = Row(key="k2", value=order(2, id="not a number"), topic="t")
    out: list = []
    error = take(RowFormats(written, None, tolerant=True, chunk_rows=4).rows(rows), out)
    assert error is None and isinstance(out[2], Unencodable) and out[2].row is rows[2]
    assert isinstance(out[2].error, SerializationError) and out[2].error.row == 2
    assert [out[i][1] for i in (0, 1, 3)] == expected_bodies(
        written, [order(i).asDict(recursive=True) for i in (0, 1, 3)])
    with pytest.raises(SerializationError, match=r"^row 2: value: "):
        list(RowFormats(written, None, chunk_rows=4).rows(rows))


def test_tolerant_yields_the_unencodable_row_with_its_error_in_its_place():
    written = write_schema(ORDER)
    bad = Row(key="k1", value=order(1, id=None), topic="t")     # id is not nullable
    rows = [Row(key="k0", value=order(0), topic="t"), bad, Row(key="k2", value=order(2), topic="t")]
    out = list(RowFormats(written, None, tolerant=True, chunk_rows=2).rows(rows))
    assert isinstance(out[1], Unencodable) and out[1].row is bad
    assert str(out[1].error) == "row 1: value.id: null, but the Avro schema has no null here"
    assert [out[0][0], out[2][0]] == ["k0", "k2"] and isinstance(out[2][1], bytes)


def test_several_topics_in_one_chunk_each_get_their_own_schema_id():
    written = by_topic(ORDER, {"orders": 1, "returns": 258})
    topics = ["orders", "returns", "returns", "orders", "returns"]
    rows = [Row(key=None, value=order(i), topic=topic) for i, topic in enumerate(topics)]
    out = list(RowFormats(written, None).rows(rows))
    headers = {"orders": b"\x00\x00\x00\x00\x01", "returns": b"\x00\x00\x00\x01\x02"}
    assert [row[1][:5] for row in out] == [headers[topic] for topic in topics]
    for i, topic in enumerate(topics):
        assert out[i][1] == expected_bodies(written, [order(i).asDict(recursive=True)],
                                            1 if topic == "orders" else 258)[0]


def test_a_topic_the_driver_resolved_no_id_for_is_a_row_error():
    written = by_topic(ORDER, {"orders": 1})
    rows = [Row(key="k0", value=order(0), topic="orders"), Row(key="k1", value=order(1), topic="late"),
            Row(key="k2", value=order(2), topic="orders")]
    out: list = []
    error = take(RowFormats(written, None).rows(rows), out)
    assert isinstance(error, RowError) and [row[0] for row in out] == ["k0"]
    assert str(error).startswith("row 1 of this partition goes to topic 'late', for which the driver "
                                 "registered no value schema")
    tolerant = list(RowFormats(written, None, tolerant=True).rows(rows))
    assert isinstance(tolerant[1], Unencodable) and isinstance(tolerant[1].error, RowError)
    assert tolerant[1].row is rows[1] and tolerant[2][1][:5] == b"\x00\x00\x00\x00\x01"


def test_rows_with_a_null_or_empty_topic_pass_unchanged_for_the_converter():
    written = by_topic(ORDER, {"orders": 1})
    rows = [Row(key="k0", value=order(0), topic=None), Row(key="k1", value=order(1), topic=""),
            Row(key="k2", value=order(2), topic="orders")]
    out = list(RowFormats(written, None).rows(rows))
    assert out[0] == list(rows[0]) and out[1] == list(rows[1])
    assert out[0][1] is rows[0].value and out[2][1][:5] == b"\x00\x00\x00\x00\x01"


def test_a_row_with_an_invalid_topic_passes_unchanged_for_the_converter():
    written = by_topic(ORDER, {"orders": 1})
    rows = [Row(key="k0", value=order(0), topic="bad topic!"), Row(key="k1", value=order(1), topic="orders")]
    out = list(RowFormats(written, None).rows(rows))
    assert out[0] == list(rows[0])


def test_the_topic_option_sends_every_row_through_its_format():
    written = by_topic(ORDER, {"orders": 7}, {**FRAMED, "topic": "orders"}, topic=False)
    rows = [Row(key="k0", value=order(0)), Row(key="k1", value=order(1))]
    out = list(RowFormats(written, "orders").rows(rows))
    assert [row[1][:5] for row in out] == [b"\x00\x00\x00\x00\x07"] * 2


def test_key_and_value_sides_are_both_encoded_and_a_bad_key_is_named():
    options = {**PLAIN, "key.format": "avro", "key.avro.framing": "none"}
    written = write_schema(ORDER, options, key_type=T.StructType([T.StructField("id", T.LongType(), False)]))
    rows = [Row(key=Row(id=1), value=order(1), topic="t"), Row(key=Row(id=None), value=order(2), topic="t")]
    out = list(RowFormats(written, None, tolerant=True).rows(rows))
    assert out[0][0] == b"\x02" and out[0][1] == expected_bodies(written, [order(1).asDict(recursive=True)])[0]
    assert isinstance(out[1], Unencodable) and out[1].error.path == "key.id"


def test_chunk_rows_must_be_positive():
    with pytest.raises(ValueError, match="chunk_rows must be >= 1, got 0"):
        RowFormats(write_schema(ORDER), None, chunk_rows=0)


def test_rows_mode_sends_the_rows_before_an_unencodable_one_and_fails_naming_it():
    """As a null topic's RowError, the row's error ends the task as it is (rows mode)."""
    from .test_partition_writer import OPTIONS, FakeProducer, make_writer

    user = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True)])
    schema = ('{"type":"record","name":"User","fields":[{"name":"id","type":"long"},'
              '{"name":"name","type":"string"}]}')
    options = {**OPTIONS, **PLAIN, "value.avro.schema": schema}
    written = validate_schema(frame(user), SinkConfig.from_options(options))
    producer = FakeProducer(complete_at_once=True)
    writer, _ = make_writer(producer, schema=written, options=options)
    rows = [Row(key=f"k{i}", value=Row(id=i, name=None if i == 2 else "n"), topic="t") for i in range(4)]
    with pytest.raises(SerializationError, match=r"^row 2: value\.name: null, but the Avro schema has no null"):
        writer(iter(rows))
    assert [(s[0], s[1], s[2]) for s in producer.sent] == [("t", b"\x00\x02n", b"k0"), ("t", b"\x02\x02n", b"k1")]
