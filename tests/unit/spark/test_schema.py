"""validate_schema: the sink columns, Spark's type rules, exact names, every problem in one error."""

from __future__ import annotations

import pickle

import pytest
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DoubleType,
    IntegerType,
    LongType,
    MapType,
    StringType,
    StructField,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from spark_kafka_sink.errors import KafkaError, SchemaError
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.schema import Column, Kind, WriteSchema, validate_schema

NO_TOPIC = SinkConfig.from_options({"kafka.bootstrap.servers": "localhost:9092"})
WITH_TOPIC = SinkConfig.from_options({"kafka.bootstrap.servers": "localhost:9092", "topic": "events"})
HEADERS = ArrayType(StructType([StructField("key", StringType()), StructField("value", BinaryType())]))


def schema(**columns) -> StructType:
    return StructType([StructField(name, data_type) for name, data_type in columns.items()])


def error_of(struct: StructType, config: SinkConfig = NO_TOPIC) -> str:
    with pytest.raises(SchemaError) as info:
        validate_schema(struct, config)
    assert isinstance(info.value, KafkaError) and isinstance(info.value, ValueError)
    return str(info.value)


# --- valid schemas --------------------------------------------------------------------------------

def test_every_optional_column():
    struct = schema(id=LongType(), key=StringType(), value=BinaryType(), topic=StringType(),
                    partition=IntegerType(), headers=HEADERS, timestamp=TimestampType(), extra=MapType(
                        StringType(), StringType()))
    assert validate_schema(struct, NO_TOPIC) == WriteSchema(
        value=Column("value", 2, Kind.BINARY), key=Column("key", 1, Kind.STRING),
        topic=Column("topic", 3, Kind.STRING), partition=Column("partition", 4, Kind.INT),
        headers=Column("headers", 5, Kind.HEADERS), timestamp=Column("timestamp", 6, Kind.TIMESTAMP))


@pytest.mark.parametrize("value_type, kind", [(StringType(), Kind.STRING), (BinaryType(), Kind.BINARY)])
def test_value_alone_with_the_topic_option(value_type, kind):
    written = validate_schema(schema(value=value_type), WITH_TOPIC)
    assert written == WriteSchema(value=Column("value", 0, kind))
    assert written.columns == (Column("value", 0, kind),)


def test_the_topic_option_overrides_the_column_which_is_not_read_nor_checked():
    written = validate_schema(schema(value=StringType(), topic=IntegerType()), WITH_TOPIC)
    assert written.topic is None


def test_key_may_be_binary():
    assert validate_schema(schema(key=BinaryType(), value=StringType()), WITH_TOPIC).key.kind is Kind.BINARY


def test_headers_ignore_nullability_and_field_name_case_as_spark():
    strict = ArrayType(StructType([StructField("KEY", StringType(), nullable=False),
                                   StructField("Value", BinaryType(), nullable=False)]), containsNull=False)
    assert validate_schema(schema(value=StringType(), headers=strict), WITH_TOPIC).headers.kind is Kind.HEADERS


@pytest.mark.newest  # collations: PySpark 4
def test_collated_strings_are_accepted():
    lcase = StringType("UTF8_LCASE")
    written = validate_schema(schema(value=lcase, topic=lcase), NO_TOPIC)
    assert written.value.kind is Kind.STRING and written.topic is not None


def test_first_column_of_a_repeated_name_wins_as_spark():
    struct = StructType([StructField("value", StringType()), StructField("value", IntegerType())])
    assert validate_schema(struct, WITH_TOPIC).value == Column("value", 0, Kind.STRING)


def test_an_exact_name_wins_over_case_variants():
    written = validate_schema(schema(KEY=IntegerType(), key=StringType(), value=StringType()), WITH_TOPIC)
    assert written.key == Column("key", 1, Kind.STRING)


def test_write_schema_is_a_frozen_picklable_value():
    written = validate_schema(schema(value=StringType(), headers=HEADERS, topic=StringType()), NO_TOPIC)
    assert pickle.loads(pickle.dumps(written)) == written and hash(written) == hash(pickle.loads(pickle.dumps(written)))
    assert written.columns == (written.value, written.headers, written.topic)
    with pytest.raises(AttributeError):
        written.key = None


# --- the bad schemas: each names the column, its type and what it takes ----------------------

def test_missing_value():
    message = error_of(schema(key=StringType(), body=StringType()), WITH_TOPIC)
    assert "value: required column not found" in message and "string or binary" in message


def test_value_of_int_type():
    message = error_of(schema(value=IntegerType()), WITH_TOPIC)
    assert "value: column 'value' has type int; expected string or binary" in message


def test_headers_of_the_wrong_type():
    for wrong in (ArrayType(StringType()), MapType(StringType(), BinaryType()),
                  ArrayType(StructType([StructField("key", StringType()), StructField("value", StringType())])),
                  ArrayType(StructType([StructField("value", BinaryType()), StructField("key", StringType())]))):
        message = error_of(schema(value=StringType(), headers=wrong), WITH_TOPIC)
        assert f"headers: column 'headers' has type {wrong.simpleString()}" in message
        assert "expected array<struct<key:string,value:binary>>" in message


def test_partition_as_string():
    message = error_of(schema(value=StringType(), partition=StringType()), WITH_TOPIC)
    assert "partition: column 'partition' has type string; expected int" in message and "cast('int')" in message


def test_partition_must_be_int_not_long_as_spark():
    assert "has type bigint; expected int" in error_of(schema(value=StringType(), partition=LongType()), WITH_TOPIC)


def test_no_topic_at_all():
    message = error_of(schema(value=StringType()), NO_TOPIC)
    assert "topic: no 'topic' column and no 'topic' option" in message


def test_topic_column_must_be_a_string():
    assert "topic: column 'topic' has type int; expected string" in error_of(
        schema(value=StringType(), topic=IntegerType()))


def test_key_of_a_wrong_type():
    assert "key: column 'key' has type double; expected string or binary" in error_of(
        schema(key=DoubleType(), value=StringType()), WITH_TOPIC)


@pytest.mark.parametrize("data_type, fragment", [
    (TimestampNTZType(), "timestamp_ntz names no instant"), (LongType(), "cast('timestamp')"),
    (DoubleType(), "cast('timestamp')")])
def test_timestamp_must_be_a_timestamp(data_type, fragment):
    message = error_of(schema(value=StringType(), timestamp=data_type), WITH_TOPIC)
    assert f"timestamp: column 'timestamp' has type {data_type.simpleString()}; expected timestamp" in message
    assert fragment in message


# --- names and several problems -----------------------------------------------------------------

def test_case_variants_are_errors_not_silently_ignored():
    message = error_of(schema(Value=StringType(), KEY=StringType(), Topic=StringType()))
    for name, variant in (("value", "Value"), ("key", "KEY"), ("topic", "Topic")):
        assert f"{name}: no column named exactly '{name}', but '{variant}' differs only in case" in message
    assert "required column not found" not in message  # the variant explains it


def test_every_problem_in_one_message_in_column_order():
    struct = schema(value=IntegerType(), partition=StringType(), headers=ArrayType(StringType()),
                    timestamp=LongType())
    message = error_of(struct, NO_TOPIC)
    assert message.startswith("the DataFrame cannot be written to Kafka (5 problems):")
    lines = [line.strip()[2:].split(":")[0] for line in message.splitlines()[1:]]
    assert lines == ["value", "topic", "partition", "headers", "timestamp"]


def test_one_problem_is_singular():
    assert "(1 problem):" in error_of(schema(value=IntegerType()), WITH_TOPIC)


def test_schema_must_be_a_struct_type():
    with pytest.raises(TypeError):
        validate_schema(["value"], WITH_TOPIC)
