"""The sink's key and value formats (spark/formats.py): a column's encoder checked on the driver,
when the driver must learn the topics first, and the registry ids resolved once, against the fake
registry (no Spark session, no broker)."""

from __future__ import annotations

import dataclasses
import json
import pickle

import pyarrow as pa
import pytest
from pyspark.sql import types as T

from spark_kafka_sink.avro import encode, parse_schema
from spark_kafka_sink.errors import ConfigError, SchemaError
from spark_kafka_sink.schema_registry import RegistrySchemaNotFoundError, SubjectNotFoundError
from spark_kafka_sink.spark.formats import ColumnEncoder, FormatResolver, column_encoder, needs_topics
from spark_kafka_sink.spark.options import FormatOptions, SinkConfig
from spark_kafka_sink.spark.schema import validate_schema

from ..schema_registry.fake_registry import FakeRegistry

BOOT = {"kafka.bootstrap.servers": "localhost:9092"}
USER = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True)])
USER_SCHEMA = {"type": "record", "name": "User", "namespace": "com.acme",
               "fields": [{"name": "id", "type": "long"}, {"name": "name", "type": ["null", "string"]}]}
NOT_USER = {"type": "record", "name": "Other", "fields": [{"name": "id", "type": "string"}]}


@pytest.fixture
def registry():
    with FakeRegistry() as fake:
        yield fake


def config(registry=None, **options) -> SinkConfig:
    url = {} if registry is None else {"schema.registry.url": registry.url}
    return SinkConfig.from_options({**BOOT, "value.format": "avro", **url, **options})


def value_encoder(sink: SinkConfig, data_type=USER) -> ColumnEncoder:
    return column_encoder(sink.value_format, data_type)


# --- column_encoder ------------------------------------------------------------------------------

def test_the_derived_schema_is_sparks_to_avro_schema_for_the_struct():
    data_type = T.StructType([
        T.StructField("id", T.LongType(), False),
        T.StructField("name", T.StringType(), True),
        T.StructField("at", T.TimestampType(), True),
        T.StructField("price", T.DecimalType(10, 2), False),
        T.StructField("tags", T.ArrayType(T.StringType(), False), True),
        T.StructField("counts", T.MapType(T.StringType(), T.IntegerType(), True), False),
        T.StructField("address", T.StructType([T.StructField("zip", T.IntegerType(), True)]), True),
        T.StructField("day", T.DateType(), False),
    ])
    encoder = column_encoder(FormatOptions("value", "avro", framing="none"), data_type)
    assert json.loads(encoder.template.schema_json) == {
        "type": "record", "name": "topLevelRecord", "fields": [
            {"name": "id", "type": "long"},
            {"name": "name", "type": ["string", "null"]},
            {"name": "at", "type": [{"type": "long", "logicalType": "timestamp-micros"}, "null"]},
            {"name": "price", "type": {"type": "fixed", "name": "fixed", "namespace": "topLevelRecord.price",
                                       "size": 5, "logicalType": "decimal", "precision": 10, "scale": 2}},
            {"name": "tags", "type": [{"type": "array", "items": "string"}, "null"]},
            {"name": "counts", "type": {"type": "map", "values": ["int", "null"]}},
            {"name": "address", "type": [{"type": "record", "name": "address", "namespace": "topLevelRecord",
                                          "fields": [{"name": "zip", "type": ["int", "null"]}]}, "null"]},
            {"name": "day", "type": {"type": "int", "logicalType": "date"}},
        ]}
    assert encoder.arrow_type.field("at").type == pa.timestamp("us", tz="UTC")
    assert encoder.arrow_type.field("id").nullable is False and encoder.arrow_type.field("name").nullable


def test_the_derived_record_takes_the_name_and_namespace_options():
    options = FormatOptions("key", "avro", framing="none", record_name="User", record_namespace="com.acme")
    encoder = column_encoder(options, USER)
    schema = json.loads(encoder.template.schema_json)
    assert (schema["name"], schema["namespace"]) == ("User", "com.acme")
    assert encoder.side == "key" and encoder.template.column == "key"
    assert json.loads(column_encoder(FormatOptions("value", "avro", framing="none"),
                                     T.StringType()).template.schema_json) == "string"


def test_plain_bodies_need_no_registry_and_framed_ones_wait_for_the_driver():
    plain = column_encoder(FormatOptions("value", "avro", framing="none"), USER)
    assert plain.default is plain.template and not plain.framed and plain.resolved
    assert plain.template.schema_id is None and plain.for_topic("any") is plain.template
    framed = column_encoder(FormatOptions("value", "avro"), USER)
    assert framed.framed and not framed.resolved and framed.default is None and framed.by_topic == ()
    assert framed.template == plain.template and framed.for_topic("any") is None


def test_a_given_schema_that_fits_is_the_template():
    text = json.dumps(USER_SCHEMA)
    encoder = column_encoder(FormatOptions("value", "avro", avro_schema=text, framing="none"), USER)
    assert encoder.template.schema == parse_schema(text)
    rows = pa.array([{"id": 1, "name": "a"}, {"id": 2, "name": None}], encoder.arrow_type)
    assert encoder.template.encode(rows).bodies.to_pylist() == encode(rows, text).bodies.to_pylist()


@pytest.mark.parametrize("schema, detail", [
    ({"type": "record", "name": "R", "fields": [{"name": "id", "type": "long"}]},
     "value.name: record R has no field 'name'"),
    ({"type": "record", "name": "R", "fields": [{"name": "id", "type": "string"},
                                                {"name": "name", "type": ["null", "string"]}]},
     "value.id"),
    ("string", "value"),
])
def test_a_given_schema_that_does_not_fit_is_a_schema_error_naming_the_field(schema, detail):
    options = FormatOptions("value", "avro", avro_schema=json.dumps(schema), framing="none")
    with pytest.raises(SchemaError) as info:
        column_encoder(options, USER)
    message = str(info.value)
    assert message.startswith("option 'value.avro.schema' does not fit column 'value': ") and detail in message


def test_a_schema_id_leaves_the_schema_to_the_registry():
    encoder = column_encoder(FormatOptions("value", "avro", schema_id=5), USER)
    assert encoder.template is None and encoder.framed and not encoder.resolved


def test_a_map_with_int_keys_has_no_avro_type():
    with pytest.raises(SchemaError, match=r"^column 'value' has no Avro type: value: an Arrow map with int32 "
                                          r"keys cannot be written as Avro"):
        column_encoder(FormatOptions("value", "avro", framing="none"), T.MapType(T.IntegerType(), T.StringType()))
    # even with the schema to come from the registry: the type is checked on the driver
    nested = T.StructType([T.StructField("m", T.MapType(T.LongType(), T.StringType()))])
    with pytest.raises(SchemaError, match=r"value\.m"):
        column_encoder(FormatOptions("value", "avro", schema_id=5), nested)


def test_a_spark_type_without_an_avro_type_is_named_by_its_path():
    data_type = T.StructType([T.StructField("span", T.DayTimeIntervalType(), True)])
    with pytest.raises(SchemaError, match=r"^key\.span: column type interval day to second cannot be written "
                                          r"as Avro"):
        column_encoder(FormatOptions("key", "avro", framing="none"), data_type)


def test_validate_schema_gives_each_avro_side_its_encoder_and_lists_every_problem():
    schema = T.StructType([T.StructField("key", T.IntegerType()), T.StructField("value", USER),
                           T.StructField("topic", T.StringType())])
    sink = SinkConfig.from_options({**BOOT, "key.format": "avro", "key.avro.framing": "none",
                                    "value.format": "avro", "value.avro.framing": "none"})
    written = validate_schema(schema, sink)
    assert written.key_encoder.arrow_type == pa.int32() and written.value_encoder.arrow_type.num_fields == 2
    assert written.encoders == (written.key_encoder, written.value_encoder)
    bad = T.StructType([T.StructField("key", T.MapType(T.IntegerType(), T.StringType())),
                        T.StructField("value", T.StructType([T.StructField("i", T.DayTimeIntervalType())])),
                        T.StructField("topic", T.StringType())])
    with pytest.raises(SchemaError, match=r"\(2 problems\)") as info:
        validate_schema(bad, sink)
    assert "column 'key' has no Avro type" in str(info.value) and "value.i:" in str(info.value)


# --- needs_topics --------------------------------------------------------------------------------

@pytest.mark.parametrize("options, needs", [
    ({}, True),                                                           # a subject per topic
    ({"value.subject.name.strategy": "TopicRecordNameStrategy"}, True),
    ({"value.subject.name.strategy": "RecordNameStrategy"}, False),       # one subject for all
    ({"key.subject.name.strategy": "RecordNameStrategy"}, True),          # the key's, not the value's
    ({"value.schema.id": "4"}, False),                                    # no subject at all
    ({"topic": "orders"}, False),                                         # the topic is known
    ({"use.latest.version": "true", "auto.register.schemas": "false"}, True),
])
def test_needs_topics_when_a_framed_side_has_a_subject_per_unknown_topic(options, needs):
    sink = SinkConfig.from_options({**BOOT, "value.format": "avro",
                                    "schema.registry.url": "http://127.0.0.1:8081", **options})
    assert needs_topics(sink, [value_encoder(sink)]) is needs
    assert needs_topics(sink, [None, value_encoder(sink)]) is needs


def test_needs_topics_is_false_without_a_framed_side_or_registry():
    plain = SinkConfig.from_options({**BOOT, "value.format": "avro", "value.avro.framing": "none"})
    assert needs_topics(plain, [value_encoder(plain)]) is False
    keyed = SinkConfig.from_options({**BOOT, "key.format": "avro", "value.format": "avro",
                                     "value.avro.framing": "none", "value.subject.name.strategy":
                                     "RecordNameStrategy", "schema.registry.url": "http://127.0.0.1:8081"})
    plain_value = column_encoder(keyed.value_format, USER)
    assert needs_topics(keyed, [plain_value]) is False      # the value is plain
    assert needs_topics(keyed, [column_encoder(keyed.key_format, T.StringType()), plain_value]) is True
    assert needs_topics(keyed, []) is False


# --- FormatResolver ------------------------------------------------------------------------------

def test_topic_name_strategy_gives_one_id_per_topic_under_topic_value(registry):
    sink = config(registry)
    encoder = value_encoder(sink)
    resolver = FormatResolver(sink)
    resolved = resolver.resolve(encoder, ["returns", "orders", "returns"])
    schema_id = registry.subjects["orders-value"][0]
    assert set(registry.subjects) == {"orders-value", "returns-value"}
    assert registry.schemas[schema_id] == (encoder.template.schema_json, "AVRO")
    assert [topic for topic, _ in resolved.by_topic] == ["orders", "returns"] and resolved.default is None
    assert resolved.for_topic("orders") == encoder.template.with_schema_id(schema_id)
    assert resolved.for_topic("returns").schema_id == schema_id and resolved.for_topic("other") is None
    assert resolved.resolved and repr(resolved) == (f"ColumnEncoder(value, orders: id {schema_id}, "
                                                    f"returns: id {schema_id})")


def test_record_name_strategy_gives_one_default_id_under_the_records_full_name(registry):
    sink = config(registry, **{"value.subject.name.strategy": "RecordNameStrategy",
                               "value.avro.record.name": "User", "value.avro.record.namespace": "com.acme"})
    resolved = FormatResolver(sink).resolve(value_encoder(sink), ["orders", "returns"])
    assert list(registry.subjects) == ["com.acme.User"]
    schema_id = registry.subjects["com.acme.User"][0]
    assert resolved.default.schema_id == schema_id and resolved.by_topic == ()
    assert resolved.for_topic("orders") is resolved.for_topic("anything") is resolved.default
    assert repr(resolved) == f"ColumnEncoder(value, id {schema_id})"
    assert registry.requests_to("POST", "subjects", "com.acme.User", "versions") == 1


def test_topic_record_name_strategy_names_topic_and_record(registry):
    sink = config(registry, **{"value.subject.name.strategy": "TopicRecordNameStrategy",
                               "value.avro.schema": json.dumps(USER_SCHEMA)})
    resolved = FormatResolver(sink).resolve(value_encoder(sink), ["orders"])
    assert list(registry.subjects) == ["orders-com.acme.User"]
    assert resolved.for_topic("orders").schema == parse_schema(json.dumps(USER_SCHEMA))


def test_without_auto_register_the_schema_is_looked_up(registry):
    sink = config(registry, **{"auto.register.schemas": "false"})
    encoder = value_encoder(sink)
    schema_id = registry.register("orders-value", encoder.template.schema_json)
    resolver = FormatResolver(sink)
    assert resolver.resolve(encoder, ["orders"]).for_topic("orders").schema_id == schema_id
    assert registry.requests_to("POST", "subjects", "orders-value") == 1
    assert registry.requests_to("POST", "subjects", "orders-value", "versions") == 0
    with pytest.raises(SubjectNotFoundError, match="subject 'returns-value'"):
        resolver.resolve(encoder, ["orders", "returns"])
    registry.register("other-value", json.dumps(USER_SCHEMA))   # another schema under the subject
    with pytest.raises(RegistrySchemaNotFoundError, match="auto.register.schemas=true"):
        resolver.resolve(encoder, ["other"])
    assert set(registry.subjects) == {"orders-value", "other-value"}


def test_an_explicit_schema_id_is_read_once_and_checked_against_the_column(registry):
    schema_id = registry.register("anything", json.dumps(USER_SCHEMA))
    sink = config(registry, **{"value.schema.id": str(schema_id)})
    resolver = FormatResolver(sink)
    encoder = value_encoder(sink)
    first = resolver.resolve(encoder, ["orders"])
    again = resolver.resolve(encoder, ["returns", "orders"])
    assert first == again and first.default.schema_id == schema_id
    assert first.default.schema == parse_schema(json.dumps(USER_SCHEMA))
    assert registry.requests_to("GET", "schemas", "ids", str(schema_id)) == 1
    assert list(registry.subjects) == ["anything"]              # nothing registered


def test_an_explicit_schema_id_that_does_not_fit_names_the_id_and_the_field(registry):
    schema_id = registry.register("anything", json.dumps(NOT_USER))
    sink = config(registry, **{"value.schema.id": str(schema_id)})
    with pytest.raises(SchemaError) as info:
        FormatResolver(sink).resolve(value_encoder(sink), [])
    assert str(info.value).startswith(f"the schema registered as id {schema_id} (option 'value.schema.id') "
                                      f"does not fit column 'value': value.")
    with pytest.raises(RegistrySchemaNotFoundError):
        FormatResolver(config(registry, **{"value.schema.id": "999"})).resolve(value_encoder(sink), [])


def test_use_latest_version_takes_the_latest_schema_checked_against_the_column(registry):
    registry.register("orders-value", json.dumps(NOT_USER))
    latest = registry.register("orders-value", json.dumps(USER_SCHEMA))
    registry.register("returns-value", json.dumps(NOT_USER))
    sink = config(registry, **{"use.latest.version": "true", "auto.register.schemas": "false"})
    resolver = FormatResolver(sink)
    resolved = resolver.resolve(value_encoder(sink), ["orders"])
    assert resolved.for_topic("orders").schema_id == latest
    assert resolved.for_topic("orders").schema == parse_schema(json.dumps(USER_SCHEMA))
    with pytest.raises(SchemaError) as info:
        resolver.resolve(value_encoder(sink), ["returns"])
    returns_id = registry.subjects["returns-value"][0]
    assert str(info.value).startswith(f"the latest schema of subject 'returns-value' (version 1, id "
                                      f"{returns_id}) does not fit column 'value': value.")
    assert registry.requests_to("POST", "subjects", "orders-value", "versions") == 0


def test_a_second_resolve_asks_the_registry_nothing(registry):
    sink = config(registry)
    resolver = FormatResolver(sink)
    encoder = value_encoder(sink)
    first = resolver.resolve(encoder, ["orders", "returns"])
    asked = resolver.client.requests
    assert asked == 2
    assert resolver.resolve(encoder, ["returns", "orders"]) == first
    assert resolver.resolve(value_encoder(sink), ["orders"]).for_topic("orders") == first.for_topic("orders")
    assert resolver.client.requests == asked and len(registry.seen) == asked
    resolver.resolve(encoder, ["orders", "refunds"])            # only the new topic is asked for
    assert resolver.client.requests == asked + 1


def test_the_key_side_registers_under_topic_key(registry):
    sink = SinkConfig.from_options({**BOOT, "key.format": "avro", "schema.registry.url": registry.url})
    encoder = column_encoder(sink.key_format, T.StringType())
    resolved = FormatResolver(sink).resolve(encoder, ["orders"])
    assert list(registry.subjects) == ["orders-key"]
    assert registry.schemas[registry.subjects["orders-key"][0]] == ('"string"', "AVRO")
    assert repr(resolved).startswith("ColumnEncoder(key, orders: id ")
    body = resolved.for_topic("orders").encode(pa.array(["k", None])).bodies.to_pylist()
    assert body == [b"\x00" + registry.subjects["orders-key"][0].to_bytes(4, "big") + b"\x02k", None]


def test_resolve_schema_resolves_both_sides_of_a_write_schema(registry):
    schema = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", USER)])
    sink = SinkConfig.from_options({**BOOT, "key.format": "avro", "value.format": "avro", "topic": "orders",
                                    "schema.registry.url": registry.url})
    written = validate_schema(schema, sink)
    resolved = FormatResolver(sink).resolve_schema(written, ["orders"])
    assert resolved.key_encoder.for_topic("orders") is not None and resolved.value_encoder.resolved
    assert set(registry.subjects) == {"orders-key", "orders-value"}
    assert dataclasses.replace(resolved, key_encoder=written.key_encoder,
                               value_encoder=written.value_encoder) == written


def test_unframed_sides_never_need_the_registry():
    sink = SinkConfig.from_options({**BOOT, "value.format": "avro", "value.avro.framing": "none"})
    resolver = FormatResolver(sink)
    encoder = value_encoder(sink)
    assert resolver.resolve(encoder, ["orders"]) is encoder and resolver.resolve(None, ["orders"]) is None
    with pytest.raises(ConfigError, match=r"no schema registry is configured \(schema.registry.url\)"):
        resolver.client


def test_no_topics_yet_leaves_a_per_topic_encoder_unresolved(registry):
    sink = config(registry)
    resolved = FormatResolver(sink).resolve(value_encoder(sink), [])
    assert resolved.by_topic == () and not resolved.resolved and registry.seen == []


# --- ColumnEncoder -------------------------------------------------------------------------------

def test_a_resolved_encoder_pickles_and_encodes_the_same(registry):
    sink = config(registry)
    resolved = FormatResolver(sink).resolve(value_encoder(sink), ["orders"])
    clone = pickle.loads(pickle.dumps(resolved))
    assert clone == resolved and repr(clone) == repr(resolved)
    rows = pa.array([{"id": 7, "name": "x"}], resolved.arrow_type)
    assert clone.for_topic("orders").encode(rows).bodies.to_pylist() == \
        resolved.for_topic("orders").encode(rows).bodies.to_pylist()


def test_for_topic_prefers_the_default_and_resolved_says_whether_tasks_can_encode():
    template = column_encoder(FormatOptions("value", "avro", framing="none"), USER).template
    framed = ColumnEncoder("value", template.arrow_type, template, framed=True)
    by_topic = dataclasses.replace(framed, by_topic=(("a", template.with_schema_id(1)),
                                                     ("b", template.with_schema_id(2))))
    assert by_topic.resolved and by_topic.for_topic("b").schema_id == 2 and by_topic.for_topic("c") is None
    both = dataclasses.replace(by_topic, default=template.with_schema_id(9))
    assert both.for_topic("a").schema_id == 9 and repr(both) == "ColumnEncoder(value, id 9)"
    plain = ColumnEncoder("key", template.arrow_type, template, default=template)
    assert plain.resolved and repr(plain) == "ColumnEncoder(key, plain)"


def test_the_repr_of_an_unresolved_framed_encoder_does_not_call_it_plain():
    framed = column_encoder(FormatOptions("value", "avro"), USER)
    assert "plain" not in repr(framed)
