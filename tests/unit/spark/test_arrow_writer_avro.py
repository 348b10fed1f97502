"""ArrowWriter with Avro sides: the write schema validated and resolved as the driver does it, a
real producer over the in-memory cluster behind the fake pool (no Spark session, no registry)."""

from __future__ import annotations

import dataclasses
import datetime
import decimal
import json

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pyspark.sql import types as T

from spark_kafka_sink.avro import encode
from spark_kafka_sink.errors import SerializationError
from spark_kafka_sink.spark.arrow_writer import ArrowWriter, decimal_from_unscaled, flat_structs
from spark_kafka_sink.spark.dead_letters import HEADER_PREFIX
from spark_kafka_sink.spark.metrics import SinkTaskMetrics
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.rows import RowError
from spark_kafka_sink.spark.schema import WriteSchema, validate_schema
from spark_kafka_sink.spark.task import PartitionWriteError, TaskInfo

from ..producer.threaded_cluster import Cluster
from .test_partition_writer import FakePool

BOOT = {"kafka.bootstrap.servers": "b1:9092", "kafka.linger.ms": "0"}
FRAMED = {**BOOT, "value.format": "avro", "schema.registry.url": "http://127.0.0.1:8081",
          "value.avro.schema": ('{"type":"record","name":"User","fields":[{"name":"id","type":"long"},'
                                '{"name":"name","type":"string"},'
                                '{"name":"at","type":["null",{"type":"long","logicalType":"timestamp-micros"}]}]}')}
"""A user's schema whose name may not be null: a row with a null name cannot be encoded."""
DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}
USER = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True),
                     T.StructField("at", T.TimestampType(), True)])
FRAME = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", USER),
                      T.StructField("topic", T.StringType())])
IDS = {"t": 1, "u": 258}
SESSION_ZONE = "Asia/Kolkata"
"""Spark hands the tasks timestamps in the session's zone; the driver's type says UTC."""
AT = datetime.datetime(2024, 5, 6, 7, 8, 9, 10, tzinfo=datetime.timezone.utc)


def resolved(options, ids=IDS) -> tuple[SinkConfig, WriteSchema]:
    """The config and the write schema as the driver hands them to the tasks: a format per topic."""
    config = SinkConfig.from_options(options)
    written = validate_schema(FRAME, config)
    encoder = written.value_encoder
    formats = tuple((topic, encoder.template.with_schema_id(schema_id)) for topic, schema_id in ids.items())
    return config, dataclasses.replace(written, value_encoder=dataclasses.replace(encoder, by_topic=formats))


def spark_batch(rows: list[tuple]) -> pa.RecordBatch:
    """The sink columns as Spark's Arrow batches have them: ``(key, id, name, topic)`` per row."""
    value_type = pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("name", pa.string()),
                            pa.field("at", pa.timestamp("us", tz=SESSION_ZONE))])
    values = [{"id": i, "name": name, "at": AT} for _, i, name, _ in rows]
    return pa.RecordBatch.from_arrays(
        [pa.array([key for key, _, _, _ in rows]), pa.array(values, value_type),
         pa.array([topic for _, _, _, topic in rows])], names=["key", "value", "topic"])


@pytest.fixture
def cluster():
    made = Cluster()
    made.topics = {"t": 1, "u": 1, "dlq": 1}
    yield made
    made.close_producers()


def run(cluster, options, batches, ids=IDS, **kwargs):
    config, written = resolved(options, ids)
    pool = FakePool(cluster.producer())
    writer = ArrowWriter(config, written, pool=lambda: pool, task=lambda: TaskInfo(3, 0), **kwargs)
    out = list(writer(iter(batches)))
    return SinkTaskMetrics.from_json(out[0].column("metrics")[0].as_py()), written


def records(cluster, topic) -> list:
    return [record for batch in cluster.batches[(topic, 0)] for record in batch.records]


def body(written, topic, i, name) -> bytes:
    fmt = written.value_encoder.for_topic(topic)
    column = pa.array([{"id": i, "name": name, "at": AT}], written.value_encoder.arrow_type)
    return encode(column, fmt.schema, fmt.schema_id).bodies[0].as_py()


def test_each_topic_gets_its_bodies_with_its_schema_id_and_instants_in_any_zone(cluster):
    batches = [spark_batch([("k0", 0, "a", "t"), ("k1", 1, "b", "u")]),
               spark_batch([("k2", 2, "c", "u"), ("k3", 3, "d", "t")])]
    metrics, written = run(cluster, FRAMED, batches)
    assert [(r.key, r.value) for r in records(cluster, "t")] == [(b"k0", body(written, "t", 0, "a")),
                                                                 (b"k3", body(written, "t", 3, "d"))]
    assert [r.value for r in records(cluster, "u")] == [body(written, "u", 1, "b"), body(written, "u", 2, "c")]
    assert {r.value[:5] for r in records(cluster, "u")} == {b"\x00\x00\x00\x01\x02"}
    assert metrics.records_sent == 4


def test_a_row_that_cannot_be_encoded_fails_the_task_named_by_its_partition_position(cluster):
    batches = [spark_batch([("k0", 0, "a", "t"), ("k1", 1, "b", "t"), ("k2", 2, "c", "u")]),
               spark_batch([("k3", 3, "d", "t"), ("k4", 4, "e", "u"), ("k5", 5, "f", "t"), ("k6", 6, None, "u")])]
    with pytest.raises(PartitionWriteError) as info:
        run(cluster, FRAMED, batches, rechunk_rows=0)  # Spark's batches as they come
    message = str(info.value)
    assert "(topic 'u', partition not chosen yet, row 6 of this partition): SerializationError: row 6: " \
           "value.name: " in message
    cause = info.value.__cause__
    assert isinstance(cause, SerializationError) and (cause.row, cause.path) == (6, "value.name")
    assert [r.key for r in records(cluster, "u")] == [b"k2"]      # u's group of the bad batch: not sent


def test_tolerant_sends_unencodable_rows_to_the_dead_letters_with_the_value_as_json(cluster):
    batches = [spark_batch([("k0", 0, "a", "t")]),
               spark_batch([("k1", 1, None, "u"), ("k2", 2, "c", "t"), ("k3", 3, None, "t")])]
    metrics, written = run(cluster, {**FRAMED, **DLQ}, batches, rechunk_rows=0)  # letters in batch order
    assert [r.key for r in records(cluster, "t")] == [b"k0", b"k2"]
    assert records(cluster, "u") == []
    letters = records(cluster, "dlq")
    assert [letter.key for letter in letters] == [b"k1", b"k3"]
    assert [json.loads(letter.value) for letter in letters] == [
        {"id": 1, "name": None, "at": "2024-05-06T12:38:09.000010+05:30"},
        {"id": 3, "name": None, "at": "2024-05-06T12:38:09.000010+05:30"}]
    headers = [dict(letter.headers) for letter in letters]
    assert [h[HEADER_PREFIX + "topic"] for h in headers] == [b"u", b"t"]
    assert [h[HEADER_PREFIX + "exception.message"].split(b":")[0] for h in headers] == [b"row 1", b"row 3"]
    assert headers[1][HEADER_PREFIX + "exception.class.name"] == b"spark_kafka_sink.errors.SerializationError"
    assert (metrics.records_sent, metrics.as_dict()["dlq-record-send-total"]) == (2, 2)


def test_an_unresolved_topic_fails_the_task_at_its_first_row(cluster):
    batches = [spark_batch([("k0", 0, "a", "t"), ("k1", 1, "b", "late"), ("k2", 2, "c", "t")])]
    with pytest.raises(PartitionWriteError) as info:
        run(cluster, FRAMED, batches, ids={"t": 1})
    assert "row 1 of this partition): RowError: row 1 of this partition goes to topic 'late', for which the " \
           "driver registered no value schema" in str(info.value)
    assert isinstance(info.value.__cause__, RowError)


def test_with_errors_tolerance_all_an_unresolved_topics_rows_are_dead_letters(cluster):
    batches = [spark_batch([("k0", 0, "a", "late"), ("k1", 1, "b", "t")]),
               spark_batch([("k2", 2, "c", "late"), ("k3", 3, "d", "t")])]
    metrics, _ = run(cluster, {**FRAMED, **DLQ}, batches, ids={"t": 1})
    assert [r.key for r in records(cluster, "t")] == [b"k1", b"k3"]
    letters = records(cluster, "dlq")
    assert [(letter.key, json.loads(letter.value)["id"]) for letter in letters] == [(b"k0", 0), (b"k2", 2)]
    messages = [dict(letter.headers)[HEADER_PREFIX + "exception.message"] for letter in letters]
    assert messages[0].startswith(b"row 0 of this partition goes to topic 'late'")
    assert messages[1].startswith(b"row 2 of this partition goes to topic 'late'")
    assert metrics.as_dict()["error.RowError.record-error-total"] == 2


def test_rows_of_a_null_topic_and_an_unencodable_row_are_dead_letters_in_one_batch(cluster):
    batch = spark_batch([("k0", 0, "a", None), ("k1", 1, None, "t"), ("k2", 2, "c", "t")])
    metrics, _ = run(cluster, {**FRAMED, **DLQ}, [batch])
    assert [r.key for r in records(cluster, "t")] == [b"k2"]
    letters = records(cluster, "dlq")
    assert [(letter.key, json.loads(letter.value)["id"]) for letter in letters] == [(b"k0", 0), (b"k1", 1)]
    assert metrics.as_dict()["record-error-total"] == 2


def test_a_map_in_a_dead_letters_value_is_a_json_object_as_in_rows_mode():
    from spark_kafka_sink.spark.arrow_writer import arrow_bad_record
    from spark_kafka_sink.spark.dead_letters import as_bytes

    value_type = pa.struct([("counts", pa.map_(pa.string(), pa.int32()))])
    batch = pa.RecordBatch.from_pydict({"value": pa.array([{"counts": [("a", 1), ("b", 2)]}], value_type),
                                        "topic": ["t"]})
    letter = arrow_bad_record(batch, 0, SerializationError(0, "value", "bad"), 0)
    assert json.loads(letter.value) == json.loads(as_bytes({"counts": {"a": 1, "b": 2}}))   # rows mode's


def flattened(batch: pa.RecordBatch, flag: bool = True) -> pa.RecordBatch:
    """``batch`` as ``sink_frame(flat=True)`` hands it to the tasks: the value struct's fields as
    columns ``_sink_value_<i>`` (a decimal of up to 18 digits as its unscaled long) and, with
    ``flag`` (the column may be null), its null flag, in the struct's place."""
    value = batch.column("value")
    fields = [unscaled(field) if pa.types.is_decimal(field.type) and field.type.precision <= 18 else field
              for field in value.flatten()]
    flags = [value.is_null()] if flag else []
    columns = [batch.column("key"), *fields, *flags, batch.column("topic")]
    names = ["key", *(f"_sink_value_{i}" for i in range(value.type.num_fields)),
             *(["_sink_value_null"] if flag else []), "topic"]
    return pa.RecordBatch.from_arrays(columns, names=names)


def test_a_flattened_struct_is_rebuilt_as_it_was_nulls_and_field_order_kept():
    _, written = resolved(FRAMED)
    (spec,) = flat_structs(written)
    assert (spec.side, spec.fields, spec.nullable) == ("value", ("id", "name", "at"), (False, True, True))
    batch = spark_batch([(b"k0", 0, "a", "t"), (b"k1", 1, None, "u"), (b"k2", 2, "c", "t")])
    with_null = pa.RecordBatch.from_arrays(
        [batch.column("key"), pa.array([batch.column("value")[0].as_py(), None, batch.column("value")[2].as_py()],
                                       batch.schema.field("value").type), batch.column("topic")],
        names=batch.schema.names)
    rebuilt = spec.rebuild(flattened(with_null))
    assert rebuilt.schema.names == ["key", "value", "topic"]
    assert rebuilt.to_pylist() == with_null.to_pylist()
    assert not rebuilt.schema.field("value").type.field("id").nullable


def test_the_writer_with_flat_batches_writes_what_it_writes_from_the_struct():
    config, written = resolved(FRAMED)
    rows = [("k0", 0, "a", "t"), ("k1", 1, "b", "u"), ("k2", 2, "c", "t")]

    def written_values(batch, flat):
        cluster = Cluster()
        cluster.topics = {"t": 1, "u": 1}
        pool = FakePool(cluster.producer())
        try:
            ArrowWriter(config, written, pool=lambda: pool, task=lambda: TaskInfo(0, 0), flat=flat).run([batch])
            return {topic: [(r.key, r.value) for r in records(cluster, topic)] for topic in ("t", "u")}
        finally:
            cluster.close_producers()

    assert written_values(flattened(spark_batch(rows)), True) == written_values(spark_batch(rows), False)


def test_a_struct_spark_says_is_never_null_goes_without_a_null_flag():
    """``struct(...)`` is not nullable in Spark's schema: the tasks get its fields alone (one
    column fewer for Spark to export per row) and write the same records."""
    config = SinkConfig.from_options(FRAMED)
    never_null = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", USER, False),
                               T.StructField("topic", T.StringType())])
    written = validate_schema(never_null, config)
    assert not written.value_encoder.nullable and validate_schema(FRAME, config).value_encoder.nullable
    encoder = written.value_encoder
    formats = tuple((topic, encoder.template.with_schema_id(schema_id)) for topic, schema_id in IDS.items())
    written = dataclasses.replace(written, value_encoder=dataclasses.replace(encoder, by_topic=formats))
    (spec,) = flat_structs(written)
    assert spec.nulls is None and spec.columns == ("_sink_value_0", "_sink_value_1", "_sink_value_2")
    batch = spark_batch([("k0", 0, "a", "t"), ("k1", 1, "b", "u")])
    rebuilt = spec.rebuild(flattened(batch, flag=False))
    assert rebuilt.schema.names == ["key", "value", "topic"] and rebuilt.to_pylist() == batch.to_pylist()
    assert rebuilt.column("value").null_count == 0


def unscaled(column: pa.Array) -> pa.Array:
    """A decimal column as Spark exports ``CAST(field * 10^scale AS BIGINT)``: int64, nulls kept."""
    return pa.array([None if v is None else int(v.scaleb(column.type.scale)) for v in column.to_pylist()],
                    pa.int64())


@st.composite
def decimal_columns(draw):
    """A decimal128 column of at most 18 digits: nulls, negatives, both extremes of the precision."""
    precision = draw(st.integers(1, 18))
    scale = draw(st.integers(0, precision))
    top = 10 ** precision - 1
    value = st.one_of(st.sampled_from([top, -top, 0, 1, -1]), st.integers(-top, top))
    ints = draw(st.lists(st.one_of(st.none(), value), min_size=1, max_size=40))
    column = pa.array([None if v is None else decimal.Decimal(v).scaleb(-scale) for v in ints],
                      pa.decimal128(precision, scale))
    start = draw(st.integers(0, len(ints) - 1))   # a slice: an offset into the buffers
    return column.slice(start) if draw(st.booleans()) else column


@settings(max_examples=60, deadline=None)
@given(decimal_columns())
def test_a_decimal_rebuilt_from_its_unscaled_longs_equals_the_decimal_column(column):
    longs = unscaled(column)
    for exported in (longs, pa.concat_arrays([pa.array([7], pa.int64()), longs]).slice(1)):
        rebuilt = decimal_from_unscaled(exported, column.type.precision, column.type.scale)
        rebuilt.validate(full=True)
        assert rebuilt.type == column.type
        assert rebuilt.equals(column)
        assert rebuilt.to_pylist() == column.to_pylist()


def test_every_scale_of_18_digits_and_an_empty_column_rebuild_exactly():
    top = 10 ** 18 - 1
    for scale in range(19):
        column = pa.array([decimal.Decimal(v).scaleb(-scale) if v is not None else None
                           for v in (top, -top, 0, None, -1, 1, 5 * 10 ** 17)], pa.decimal128(18, scale))
        assert decimal_from_unscaled(unscaled(column), 18, scale).equals(column)
    assert decimal_from_unscaled(pa.array([], pa.int64()), 10, 2).equals(pa.array([], pa.decimal128(10, 2)))


PRICED = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("price", T.DecimalType(10, 2), True),
                       T.StructField("tiny", T.DecimalType(18, 18), False),
                       T.StructField("wide", T.DecimalType(19, 2), True),
                       T.StructField("inner", T.StructType([T.StructField("cost", T.DecimalType(5, 1))]))])


def priced(options=None):
    config = SinkConfig.from_options(options or {**BOOT, "topic": "t", "value.format": "avro",
                                                 "value.avro.framing": "none"})
    return config, validate_schema(T.StructType([T.StructField("value", PRICED)]), config)


def test_top_level_decimals_of_up_to_18_digits_go_as_their_unscaled_longs():
    (spec,) = flat_structs(priced()[1])
    assert spec.decimals == (None, (10, 2), (18, 18), None, None)    # 19 digits and a nested one: as they are
    (plain,) = flat_structs(resolved(FRAMED)[1])
    assert plain.decimals == ()


def test_decimals_sent_as_longs_are_written_byte_for_byte_as_the_struct():
    config, written = priced()
    top = decimal.Decimal(10 ** 18 - 1).scaleb(-18)
    values = [{"id": 0, "price": decimal.Decimal("99999999.99"), "tiny": top, "wide": decimal.Decimal("-1.5"),
               "inner": {"cost": decimal.Decimal("-9999.9")}},
              {"id": 1, "price": None, "tiny": -top, "wide": None, "inner": None},
              {"id": 2, "price": decimal.Decimal("-99999999.99"), "tiny": decimal.Decimal(0),
               "wide": decimal.Decimal(10 ** 17 - 1), "inner": {"cost": None}},
              None]
    value_type = pa.struct([pa.field("id", pa.int64(), nullable=False), pa.field("price", pa.decimal128(10, 2)),
                            pa.field("tiny", pa.decimal128(18, 18), nullable=False),
                            pa.field("wide", pa.decimal128(19, 2)),
                            pa.field("inner", pa.struct([pa.field("cost", pa.decimal128(5, 1))]))])
    value = pa.array(values, value_type)
    batch = pa.RecordBatch.from_arrays([pa.array([f"k{i}" for i in range(4)]), value, pa.array(["t"] * 4)],
                                       names=["key", "value", "topic"])
    flat = flattened(batch)
    assert [flat.schema.field(f"_sink_value_{i}").type for i in range(5)][1:4] == \
        [pa.int64(), pa.int64(), pa.decimal128(19, 2)]

    def written_values(batch, flat):
        cluster = Cluster()
        cluster.topics = {"t": 1}
        pool = FakePool(cluster.producer())
        try:
            ArrowWriter(config, written, pool=lambda: pool, task=lambda: TaskInfo(0, 0), flat=flat).run([batch])
            return [(r.key, r.value) for r in records(cluster, "t")]
        finally:
            cluster.close_producers()

    got = written_values(flat, True)
    assert got == written_values(batch, False)
    assert [value is None for _, value in got] == [False, False, False, True]   # the null struct: no value
    assert got[0][1] != got[2][1]


def test_a_struct_whose_field_names_differ_only_in_case_is_not_flattened():
    frame = T.StructType([T.StructField("value", T.StructType([T.StructField("id", T.IntegerType()),
                                                               T.StructField("ID", T.StringType())]))])
    config = SinkConfig.from_options({**BOOT, "topic": "t", "value.format": "avro", "value.avro.framing": "none"})
    assert flat_structs(validate_schema(frame, config)) == ()


def test_an_avro_side_rechunks_spark_batches_by_default_and_bytes_columns_do_not():
    """The Avro encoder's cost per send_arrow call spreads over more rows: Spark's 10,000-row
    batches are concatenated up to AVRO_RECHUNK_ROWS; a bytes-only sink sends them as they come."""
    from spark_kafka_sink.spark.arrow_writer import AVRO_RECHUNK_ROWS, DEFAULT_RECHUNK_ROWS

    config, written = resolved(FRAMED)
    assert ArrowWriter(config, written).rechunk_rows == AVRO_RECHUNK_ROWS > 10_000
    assert ArrowWriter(config, written, rechunk_rows=0).rechunk_rows == 0
    plain = SinkConfig.from_options(BOOT)
    assert ArrowWriter(plain, validate_schema(FRAME.fromJson({**FRAME.jsonValue(), "fields": [
        f for f in FRAME.jsonValue()["fields"] if f["name"] != "value"] + [
        {"name": "value", "type": "string", "nullable": True, "metadata": {}}]}), plain)).rechunk_rows \
        == DEFAULT_RECHUNK_ROWS == 0


def test_rechunked_avro_batches_name_the_rows_of_the_partition(cluster):
    """Concatenated batches keep every row's position in the task's partition: the row that
    cannot be encoded is named as it would be in its own Spark batch."""
    first = spark_batch([("k0", 0, "a", "t"), ("k1", 1, "b", "t")])
    second = spark_batch([("k2", 2, "c", "t"), ("k3", 3, None, "t")])
    with pytest.raises(PartitionWriteError) as info:
        run(cluster, FRAMED, [first, second])
    assert "row 3" in str(info.value)


def test_sink_frame_quotes_every_name_and_writes_decimals_as_exact_longs():
    """sink_frame's SQL strings: a name with a backtick stays one identifier; a decimal field
    goes as its unscaled long (Spark evaluates these; tests/spark/test_avro.py reads them back)."""
    from spark_kafka_sink.spark.arrow_writer import _flat_field, _quoted

    assert _quoted("a`b.c") == "`a``b.c`"
    assert _flat_field("`s`.`p`", None) == "`s`.`p`"
    assert _flat_field("`s`.`p`", (18, 0)) == "CAST(`s`.`p` AS BIGINT)"
    assert _flat_field("`s`.`p`", (10, 2)) == "CAST(`s`.`p` * 100BD AS BIGINT)"
    assert _flat_field("`s`.`p`", (18, 18)) == f"CAST(`s`.`p` * {10 ** 18}BD AS BIGINT)"
