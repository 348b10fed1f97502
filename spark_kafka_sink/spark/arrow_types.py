"""The Arrow type of a Spark column, as Spark's Arrow conversion hands it to Python.

The driver needs a column's Arrow type before any task runs, to derive or check an Avro schema
for it (``value.format=avro``); :func:`arrow_type` gives it from the ``StructField``'s
``DataType``, with the nullability of every nested field, list item and map value kept:

- boolean, byte, short, int, long, float, double -> ``bool``, ``int8`` ... ``int64``,
  ``float32``, ``float64``; string (collated too), char, varchar -> ``string``; binary -> ``binary``;
- decimal(p, s) -> ``decimal128(p, s)``; date -> ``date32``;
- timestamp -> ``timestamp[us, tz=UTC]`` (an instant: the tasks get the session's zone, the same
  instant); timestamp_ntz -> ``timestamp[us]``;
- array -> ``list``; map -> ``map``; struct -> ``struct``; null (``lit(None)``) -> ``null``.

Anything else (intervals, variant, a user-defined type) raises
:class:`~spark_kafka_sink.errors.SchemaError` naming the field by its path (``value.items[]``).
Spark may hand the tasks wider variants (``large_string`` and the like): the encoder compiles its
plan for the type it is given, so those are fine.
"""

from __future__ import annotations

import pyarrow as pa
from pyspark.sql import types as T

from ..errors import SchemaError

__all__ = ["arrow_type"]

_PRIMITIVES = (
    (T.BooleanType, pa.bool_()), (T.ByteType, pa.int8()), (T.ShortType, pa.int16()),
    (T.IntegerType, pa.int32()), (T.LongType, pa.int64()), (T.FloatType, pa.float32()),
    (T.DoubleType, pa.float64()), (T.StringType, pa.string()), (T.BinaryType, pa.binary()),
    (T.DateType, pa.date32()), (T.NullType, pa.null()),
)
_OPTIONAL = (("CharType", pa.string()), ("VarcharType", pa.string()),
             ("TimestampNTZType", pa.timestamp("us")))


def arrow_type(data_type: T.DataType, path: str = "value") -> pa.DataType:
    """The Arrow type of a column of ``data_type``; ``path`` names it in errors."""
    for spark, arrow in _PRIMITIVES:
        if isinstance(data_type, spark):
            return arrow
    for name, arrow in _OPTIONAL:  # not in every PySpark
        spark = getattr(T, name, None)
        if spark is not None and isinstance(data_type, spark):
            return arrow
    if isinstance(data_type, T.TimestampType):
        return pa.timestamp("us", tz="UTC")
    if isinstance(data_type, T.DecimalType):
        return pa.decimal128(data_type.precision, data_type.scale)
    if isinstance(data_type, T.ArrayType):
        item = arrow_type(data_type.elementType, f"{path}[]")
        return pa.list_(pa.field("element", item, nullable=data_type.containsNull))
    if isinstance(data_type, T.MapType):
        key = arrow_type(data_type.keyType, f"{path}{{key}}")
        item = arrow_type(data_type.valueType, f"{path}{{}}")
        return pa.map_(pa.field("key", key, nullable=False),
                       pa.field("value", item, nullable=data_type.valueContainsNull))
    if isinstance(data_type, T.StructType):
        return pa.struct([pa.field(field.name, arrow_type(field.dataType, f"{path}.{field.name}"),
                                   nullable=field.nullable) for field in data_type.fields])
    raise SchemaError(f"{path}: column type {data_type.simpleString()} cannot be written as Avro "
                      f"(Spark's to_avro has no Avro type for it either); convert it first")
