"""The DataFrame columns the sink writes, checked once on the driver before any task runs.

==============  ==============================================  ==================================
column          type                                            when absent
==============  ==============================================  ==================================
``value``       string or binary (any type with ``value.format``  an error: it is required
                ``avro``)
``key``         string or binary (any type with ``key.format``    records have a null key
                ``avro``)
``topic``       string                                          the ``topic`` option is required
``partition``   int                                             the partitioner picks one
``headers``     ``array<struct<key:string,value:binary>>``      records have no headers
``timestamp``   timestamp                                       the producer stamps the record
==============  ==============================================  ==================================

As Spark's Kafka sink (``KafkaWriter.validateQuery``):

- A column is found by its exact name; the first one wins if the name repeats. Other columns are
  ignored.
- Strings are written as their UTF-8 bytes.
- When the ``topic`` option is set it overrides the ``topic`` column, which is not read or checked.
- Types match ignoring nullability (``containsNull``, ``nullable``), and the header struct's field
  names match without case (Spark's default ``spark.sql.caseSensitive=false``). The struct's two
  fields come in that order.

Where this differs from Spark:

- All problems are reported together in one :class:`~spark_kafka_sink.errors.SchemaError`. Each one
  names the column, its type (``simpleString``) and the types it may have.
- A column whose name differs from a sink column's only in case (``Value``, ``KEY``) is an error
  when the exact name is absent. Spark would ignore it silently: a missing ``value``, or a null key
  on every record.
- ``timestamp`` is checked here, on the driver. Spark checks it only in its tasks, where it also
  takes a double of seconds. ``timestamp_ntz`` is refused because it names no instant. Convert it
  with ``to_utc_timestamp`` (or ``cast("timestamp")`` in the session time zone).
- A string with a collation (``string collate UTF8_LCASE``) is accepted: its bytes are the same.

With ``key.format``/``value.format`` ``avro`` that column's kind is ``AVRO`` and its
:class:`~.formats.ColumnEncoder` is ``WriteSchema.key_encoder``/``value_encoder``; a type or
field that cannot be written as Avro is one more problem of the list.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum
from typing import Any

from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    DataType,
    IntegerType,
    StringType,
    StructType,
    TimestampNTZType,
    TimestampType,
)

from ..errors import SchemaError
from .formats import ColumnEncoder, column_encoder
from .options import KEY, TOPIC, VALUE, SinkConfig

HEADERS_TYPE = "array<struct<key:string,value:binary>>"


class Kind(str, Enum):
    """How the writer reads a column."""

    STRING = "string"  # a str, written as UTF-8
    BINARY = "binary"  # bytes / bytearray
    INT = "int"
    HEADERS = "headers"  # a list of (key: str, value: bytes | None) structs
    TIMESTAMP = "timestamp"
    AVRO = "avro"  # any type, encoded by the side's ColumnEncoder


@dataclass(frozen=True)
class Column:
    """A sink column found in the DataFrame: its name as written there, position and kind."""

    name: str
    index: int
    kind: Kind


@dataclass(frozen=True)
class WriteSchema:
    """The sink columns of a validated DataFrame schema.

    ``value`` is always there; every other column is ``None`` when absent. ``topic`` is also
    ``None`` when the ``topic`` option is set, because the option overrides the column.
    """

    value: Column
    key: Column | None = None
    topic: Column | None = None
    partition: Column | None = None
    headers: Column | None = None
    timestamp: Column | None = None
    key_encoder: ColumnEncoder | None = None
    value_encoder: ColumnEncoder | None = None

    @property
    def encoders(self) -> tuple[ColumnEncoder, ...]:
        """The Avro sides' encoders (none for bytes)."""
        return tuple(encoder for encoder in (self.key_encoder, self.value_encoder) if encoder is not None)

    def encoder(self, side: str) -> ColumnEncoder | None:
        return self.key_encoder if side == KEY else self.value_encoder

    @property
    def columns(self) -> tuple[Column, ...]:
        """The sink columns present, in schema order."""
        found = (self.value, self.key, self.topic, self.partition, self.headers, self.timestamp)
        return tuple(sorted((column for column in found if column is not None), key=lambda c: c.index))


def validate_schema(schema: StructType, config: SinkConfig) -> WriteSchema:
    """The columns the writer reads from ``schema``, or a :class:`SchemaError` listing every problem."""
    if not isinstance(schema, StructType):
        raise TypeError(f"schema must be a pyspark StructType, got {type(schema).__name__}")
    problems: list[str] = []
    avro = {options.side for options in config.formats if options.avro}
    columns: dict[str, Any] = {
        name: None if name == TOPIC and config.topic is not None else _column(schema, name, problems, name in avro)
        for name in _EXPECTED}
    for options in config.formats:
        column = columns[options.side]
        if options.avro and column is not None:
            try:
                field = schema.fields[column.index]
                columns[f"{options.side}_encoder"] = column_encoder(options, field.dataType, field.nullable)
            except SchemaError as error:
                problems.append(str(error))
    if problems:
        count = f"{len(problems)} problem{'s' if len(problems) > 1 else ''}"
        raise SchemaError(f"the DataFrame cannot be written to Kafka ({count}):\n"
                          + "\n".join(f"  - {problem}" for problem in problems))
    return WriteSchema(**columns)


# column -> the types it may have, as errors show them (and the order errors come in)
_EXPECTED = {
    "value": "string or binary", "key": "string or binary", "topic": "string", "partition": "int",
    "headers": HEADERS_TYPE, "timestamp": "timestamp",
}
_MISSING = {
    "value": "value: required column not found; expected string or binary",
    "topic": ("topic: no 'topic' column and no 'topic' option; add a string 'topic' column or set "
              "the 'topic' option"),
}
_HINTS = {
    "value": ("; convert it with to_json(), cast('string') or cast('binary'), or write it as Avro "
              "with value.format=avro"),
    "key": ("; convert it with to_json(), cast('string') or cast('binary'), or write it as Avro "
            "with key.format=avro"),
    "partition": "; cast it with col('partition').cast('int')",
    "headers": ("; build it with array(struct(lit('k').alias('key'), col('v').cast('binary')"
                ".alias('value')), ...)"),
    "timestamp": "; cast it with col('timestamp').cast('timestamp')",
}
_NTZ_HINT = ("; timestamp_ntz names no instant: convert it with to_utc_timestamp(col, zone), or "
             "cast('timestamp') to read it in the session time zone")


def _column(schema: StructType, name: str, problems: list[str], avro: bool = False) -> Column | None:
    """The first field named exactly ``name`` if its type fits; else ``None``, and any problem."""
    index = next((i for i, field in enumerate(schema.fields) if field.name == name), None)
    if index is None:
        variants = [field.name for field in schema.fields if field.name.lower() == name]
        if variants:
            problems.append(f"{name}: no column named exactly {name!r}, but {', '.join(map(repr, variants))} "
                            f"differs only in case; the sink matches column names exactly (as Spark's "
                            f"Kafka sink does), so rename it to {name!r}")
        elif name in _MISSING:
            problems.append(_MISSING[name].replace("string or binary", "any type (value.format=avro)")
                            if avro else _MISSING[name])
        return None
    field = schema.fields[index]
    if avro:
        return Column(field.name, index, Kind.AVRO)
    kind = _kind(name, field.dataType)
    if kind is None:
        hint = _NTZ_HINT if isinstance(field.dataType, TimestampNTZType) else _HINTS.get(name, "")
        problems.append(f"{name}: column {field.name!r} has type {field.dataType.simpleString()}; "
                        f"expected {_EXPECTED[name]}{hint}")
        return None
    return Column(field.name, index, kind)


def _kind(name: str, data_type: DataType) -> Kind | None:
    """The kind ``data_type`` gives column ``name``, or ``None`` if the sink cannot write it."""
    if name in ("value", "key"):
        if isinstance(data_type, StringType):
            return Kind.STRING
        return Kind.BINARY if isinstance(data_type, BinaryType) else None
    if name == "topic":
        return Kind.STRING if isinstance(data_type, StringType) else None
    if name == "partition":
        return Kind.INT if isinstance(data_type, IntegerType) else None
    if name == "headers":
        return Kind.HEADERS if _is_headers(data_type) else None
    return Kind.TIMESTAMP if isinstance(data_type, TimestampType) else None


def _is_headers(data_type: DataType) -> bool:
    """``array<struct<key:string,value:binary>>``, ignoring nullability and field-name case."""
    if not isinstance(data_type, ArrayType) or not isinstance(data_type.elementType, StructType):
        return False
    fields = data_type.elementType.fields
    return (len(fields) == 2
            and fields[0].name.lower() == "key" and isinstance(fields[0].dataType, StringType)
            and fields[1].name.lower() == "value" and isinstance(fields[1].dataType, BinaryType))
