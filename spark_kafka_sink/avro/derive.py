"""The Avro schema of an Arrow type, by Spark's rules (``to_avro``, ``SchemaConverters.toAvroType``).

:func:`derive_schema` maps a column's Arrow type (what Spark's Arrow conversion gives for a
DataFrame column) to the schema Spark's ``to_avro`` would write it with, so a subject registered
by a Spark job with ``to_avro`` and one registered from here hold the same schema:

- ``bool`` -> ``boolean``; ``int8``/``int16``/``int32`` -> ``int``; ``int64`` -> ``long``;
  ``float32`` -> ``float``; ``float64`` -> ``double``; strings -> ``string``; binaries -> ``bytes``;
- ``decimal128(p, s)`` -> a ``fixed`` of the fewest bytes for ``p`` digits with the ``decimal``
  logical type, named ``<namespace>.<record name>.fixed`` as Spark names it;
- ``date32`` -> ``int`` ``date``; ``timestamp`` with a time zone -> ``long`` ``timestamp-micros``;
  without -> ``long`` ``local-timestamp-micros`` (values of other units are converted);
- ``struct`` -> ``record``: the top level is ``topLevelRecord`` (``record_name``) in ``namespace``;
  a nested struct is a record named after its field, in the namespace of its parent's full name;
- ``list`` -> ``array``; ``map`` with string keys -> ``map``; ``null`` -> ``null``;
- a nullable field, list item or map value -> the union ``[T, "null"]`` (Spark's order).

Beyond Spark's types: ``uint8``/``uint16`` -> ``int``, ``uint32`` -> ``long``, large and view
variants as their plain types, dictionaries as their values. Anything else (intervals, times,
``uint64``, a map with non-string keys, a field name Avro does not allow) is refused with an
:class:`~spark_kafka_sink.errors.AvroSchemaError` naming the field.
"""

from __future__ import annotations

import pyarrow as pa

from ..errors import AvroSchemaError
from ..record.arrow_columns import is_binary_view, is_string_view
from .schema import (TOP_LEVEL_RECORD, AvroArray, AvroField, AvroFixed, AvroMap, AvroPrimitive, AvroRecord, AvroSchema, AvroUnion,
                     decimal_bytes_for_precision, valid_name)

__all__ = ["TOP_LEVEL_RECORD", "derive_schema", "is_binary_type", "is_string_type"]

_NULL = AvroPrimitive("null")


def derive_schema(arrow_type: pa.DataType | pa.Schema, *, nullable: bool = False,
                  record_name: str = TOP_LEVEL_RECORD, namespace: str = "",
                  column: str = "value") -> AvroSchema:
    """The schema Spark's ``to_avro`` gives a column of ``arrow_type`` (a ``pa.Schema`` is the
    struct of its fields); ``nullable``: the column itself may be null (a union with null at the
    top, as ``to_avro`` of a nullable column). ``column`` names the column in errors."""
    if isinstance(arrow_type, pa.Schema):
        arrow_type = pa.struct(list(arrow_type))
    for part in [record_name] + (namespace.split(".") if namespace else []):
        if not valid_name(part):
            raise AvroSchemaError(column, f"{part!r} is not a valid Avro name for the record or its namespace")
    return _derive(arrow_type, nullable, record_name, namespace, column)


def _derive(kind: pa.DataType, nullable: bool, record_name: str, namespace: str, path: str) -> AvroSchema:
    schema = _base(kind, record_name, namespace, path)
    if nullable and not pa.types.is_null(kind):
        return AvroUnion((schema, _NULL))
    return schema


def _base(kind: pa.DataType, record_name: str, namespace: str, path: str) -> AvroSchema:
    types = pa.types
    if types.is_dictionary(kind):
        return _base(kind.value_type, record_name, namespace, path)
    if types.is_null(kind):
        return _NULL
    if types.is_boolean(kind):
        return AvroPrimitive("boolean")
    if types.is_int8(kind) or types.is_int16(kind) or types.is_int32(kind) or types.is_uint8(kind) \
            or types.is_uint16(kind):
        return AvroPrimitive("int")
    if types.is_int64(kind) or types.is_uint32(kind):
        return AvroPrimitive("long")
    if types.is_float32(kind):
        return AvroPrimitive("float")
    if types.is_float64(kind):
        return AvroPrimitive("double")
    if is_string_type(kind):
        return AvroPrimitive("string")
    if is_binary_type(kind):
        return AvroPrimitive("bytes")
    if types.is_decimal(kind):
        if kind.precision > 38:
            raise AvroSchemaError(path, f"an Arrow {kind} column has more than 38 digits, more than Spark's decimals")
        fullname = f"{namespace}.{record_name}.fixed" if namespace else f"{record_name}.fixed"
        space, _, name = fullname.rpartition(".")
        size = decimal_bytes_for_precision(kind.precision)
        return AvroFixed(name, space, size, "decimal", kind.precision, kind.scale)
    if types.is_date32(kind):
        return AvroPrimitive("int", "date")
    if types.is_timestamp(kind):
        return AvroPrimitive("long", "timestamp-micros" if kind.tz is not None else "local-timestamp-micros")
    if types.is_list(kind) or types.is_large_list(kind) or types.is_fixed_size_list(kind):
        item = kind.value_field
        return AvroArray(_derive(item.type, item.nullable, record_name, namespace, f"{path}[]"))
    if types.is_map(kind):
        if not is_string_type(kind.key_type):
            raise AvroSchemaError(path, f"an Arrow map with {kind.key_type} keys cannot be written as Avro "
                                        "(an Avro map's keys are strings)")
        item = kind.item_field
        return AvroMap(_derive(item.type, item.nullable, record_name, namespace, f"{path}{{}}"))
    if types.is_struct(kind):
        return _record(kind, record_name, namespace, path)
    raise AvroSchemaError(path, f"an Arrow {kind} column has no Avro type in Spark's mapping")


def _record(kind: pa.StructType, record_name: str, namespace: str, path: str) -> AvroRecord:
    child_namespace = f"{namespace}.{record_name}" if namespace else record_name
    fields, seen = [], set()
    for index in range(kind.num_fields):
        child = kind.field(index)
        child_path = f"{path}.{child.name}"
        if not valid_name(child.name):
            raise AvroSchemaError(child_path, f"the field name {child.name!r} is not a valid Avro name "
                                              "(a letter or _, then letters, digits or _)")
        if child.name in seen:
            raise AvroSchemaError(child_path, "the struct has two fields of this name")
        seen.add(child.name)
        child_schema = _derive(child.type, child.nullable, child.name, child_namespace, child_path)
        fields.append(AvroField(child.name, child_schema))
    return AvroRecord(record_name, namespace, tuple(fields))


def is_string_type(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds strings: string, large_string or string_view."""
    return (pa.types.is_string(kind) or pa.types.is_large_string(kind)
            or is_string_view(kind))


def is_binary_type(kind: pa.DataType) -> bool:
    """Whether ``kind`` holds bytes: binary, large_binary, binary_view or fixed_size_binary."""
    return (pa.types.is_binary(kind) or pa.types.is_large_binary(kind) or pa.types.is_fixed_size_binary(kind)
            or is_binary_view(kind))
