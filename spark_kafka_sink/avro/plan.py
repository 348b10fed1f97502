"""A schema checked against an Arrow type, as a tree of encoders: :func:`compile_plan`.

The rules are Spark's ``to_avro`` (``AvroSerializer``), with what the issue adds:

- ``boolean`` from ``bool``; ``int`` from 8-32 bit integers and ``date32``; ``long`` from any
  integer up to 64 bits (``uint32`` included) and from timestamps; ``float`` from ``float32``,
  ``double`` from ``float64``; ``string`` and ``enum`` from strings; ``bytes`` and ``fixed`` from
  binaries (``fixed`` from ``fixed_size_binary`` of its size too); the ``decimal`` logical type
  (on ``bytes`` or ``fixed``) from decimals of the same scale, or of a smaller one that widens
  exactly (a value with more digits than the schema's precision fails its row);
- a timestamp column as ``long``: ``timestamp-micros``/``-millis``/``-nanos`` for a column with
  a time zone, ``local-timestamp-*`` for one without, and a ``long`` with no logical type in
  milliseconds (as Spark writes it);
- ``record`` from a struct: fields matched by name (exactly, else ignoring case when only one
  matches); a column field the record lacks is refused, a record field the column lacks is
  written as null if its type is a union with ``null`` and refused otherwise;
- ``array`` from lists; ``map`` from maps with string keys, and from lists of
  ``struct<key: string, value>``; ``null`` from a null column;
- a union: a column nullable or not into ``[T, "null"]`` (either order), or into the branch
  of a larger union its type fits (its own Avro type first: an ``int64`` column into
  ``["int", "long"]`` takes ``long``); a struct of ``member0``, ``member1``, ... into a union of
  as many non-null types (Spark's complex unions), each row in its first member set.

Anything else raises :class:`~spark_kafka_sink.errors.AvroSchemaError` naming the field path
(``value.address.zip``) and both types. Plans are cached per schema, Arrow type and column name.
"""

from __future__ import annotations

import functools

import numpy as np
import pyarrow as pa

from ..errors import AvroSchemaError
from .derive import derive_schema, is_binary_type, is_string_type
from .encoders import (ArrayEncoder, BooleanEncoder, BytesEncoder, ConstantEncoder, DecimalEncoder, Encoder,
                       EnumEncoder, FixedEncoder, FloatEncoder, IntEncoder, MapEncoder, MemberUnionEncoder,
                       NullEncoder, RecordEncoder, TimestampEncoder, UnionEncoder, varint)
from .schema import (AvroArray, AvroEnum, AvroFixed, AvroMap, AvroPrimitive, AvroRecord, AvroSchema, AvroUnion,
                     to_json)

__all__ = ["compile_plan", "describe"]

_UNIT_EXPONENT = {"s": 0, "ms": 3, "us": 6, "ns": 9}
_TARGET_EXPONENT = {"millis": 3, "micros": 6, "nanos": 9}
_INTS = {  # Arrow integer type -> (numpy dtype, the narrowest Avro type that holds all its values)
    pa.int8(): (np.int8, "int"), pa.int16(): (np.int16, "int"), pa.int32(): (np.int32, "int"),
    pa.uint8(): (np.uint8, "int"), pa.uint16(): (np.uint16, "int"),
    pa.int64(): (np.int64, "long"), pa.uint32(): (np.uint32, "long"),
}


@functools.lru_cache(maxsize=256)
def compile_plan(schema: AvroSchema, arrow_type: pa.DataType, column: str = "value") -> Encoder:
    """The encoder tree writing a column of ``arrow_type`` with ``schema`` (its root is the
    column ``column``, the first name of every path); ``AvroSchemaError`` if they do not fit."""
    return _compile(schema, arrow_type, column)


def describe(schema: AvroSchema) -> str:
    """A short name of an Avro type for messages: ``"long" (timestamp-micros)``, ``record R``."""
    if isinstance(schema, AvroPrimitive):
        logical = f" ({schema.logical})" if schema.logical else ""
        return f'"{schema.type}"{logical}'
    if isinstance(schema, (AvroRecord, AvroEnum, AvroFixed)):
        return f"{schema.type} {schema.fullname}"
    if isinstance(schema, AvroUnion):
        return to_json(schema)
    return schema.type


def _arrow(kind: pa.DataType) -> str:
    if pa.types.is_struct(kind):
        return "struct"
    if pa.types.is_list(kind) or pa.types.is_large_list(kind) or pa.types.is_fixed_size_list(kind):
        return "list"
    if pa.types.is_map(kind):
        return "map"
    return str(kind)


def _refuse(schema: AvroSchema, kind: pa.DataType, path: str, why: str = "") -> AvroSchemaError:
    return AvroSchemaError(path, f"an Arrow {_arrow(kind)} column cannot be written as Avro {describe(schema)}"
                                 + (f": {why}" if why else ""))


def _compile(schema: AvroSchema, kind: pa.DataType, path: str) -> Encoder:
    if pa.types.is_dictionary(kind):
        kind = kind.value_type
    if isinstance(schema, AvroUnion):
        return _union(schema, kind, path)
    if pa.types.is_null(kind):
        if isinstance(schema, AvroPrimitive) and schema.type == "null":
            return NullEncoder(path)
        raise _refuse(schema, kind, path, "the column is always null; only null or a union with null holds it")
    if isinstance(schema, AvroPrimitive):
        return _primitive(schema, kind, path)
    if isinstance(schema, AvroFixed):
        return _fixed(schema, kind, path)
    if isinstance(schema, AvroEnum) and is_string_type(kind):
        return EnumEncoder(path, schema.symbols, schema.fullname)
    if isinstance(schema, AvroRecord) and pa.types.is_struct(kind):
        return _record(schema, kind, path)
    if isinstance(schema, AvroArray) and (pa.types.is_list(kind) or pa.types.is_large_list(kind)
                                          or pa.types.is_fixed_size_list(kind)):
        return ArrayEncoder(path, _compile(schema.items, kind.value_type, f"{path}[]"))
    if isinstance(schema, AvroMap) and pa.types.is_map(kind):
        if not is_string_type(kind.key_type):
            raise _refuse(schema, kind, path, f"its keys are {kind.key_type}; an Avro map's keys are strings")
        return MapEncoder(path, _compile(schema.values, kind.item_type, f"{path}{{}}"))
    if isinstance(schema, AvroMap) and _entries(kind) is not None:
        key, value = _entries(kind)
        entry = kind.value_type
        return MapEncoder(path, _compile(schema.values, entry.field(value).type, f"{path}{{}}"), (key, value))
    raise _refuse(schema, kind, path)


def _entries(kind: pa.DataType) -> tuple[int, int] | None:
    """For a list of ``struct<key: string, value>`` (a map as some Arrow writers give it), the
    key's and the value's child index."""
    if not (pa.types.is_list(kind) or pa.types.is_large_list(kind)) or not pa.types.is_struct(kind.value_type):
        return None
    entry = kind.value_type
    names = [entry.field(i).name for i in range(entry.num_fields)]
    if sorted(names) != ["key", "value"] or not is_string_type(entry.field(names.index("key")).type):
        return None
    return names.index("key"), names.index("value")


def _primitive(schema: AvroPrimitive, kind: pa.DataType, path: str) -> Encoder:
    avro = schema.type
    if avro == "boolean" and pa.types.is_boolean(kind):
        return BooleanEncoder(path)
    if avro in ("int", "long") and kind in _INTS:
        dtype, narrowest = _INTS[kind]
        if avro == "int" and narrowest == "long":
            raise _refuse(schema, kind, path, 'its values may not fit an int; "long" holds them')
        return IntEncoder(path, dtype)
    if avro == "int" and pa.types.is_date32(kind):
        return IntEncoder(path, np.int32)
    if avro == "long" and pa.types.is_timestamp(kind):
        return _timestamp(schema, kind, path)
    if avro == "float" and pa.types.is_float32(kind):
        return FloatEncoder(path, np.float32)
    if avro == "double" and pa.types.is_float64(kind):
        return FloatEncoder(path, np.float64)
    if avro == "string" and is_string_type(kind):
        return BytesEncoder(path)
    if avro == "bytes" and schema.logical == "decimal" and pa.types.is_decimal(kind):
        return _decimal(schema, kind, path, None)
    if avro == "bytes" and is_binary_type(kind):
        return BytesEncoder(path)
    raise _refuse(schema, kind, path)


def _timestamp(schema: AvroPrimitive, kind: pa.TimestampType, path: str) -> Encoder:
    logical = schema.logical
    local = kind.tz is None
    if logical is None:
        target = "millis"  # Spark writes a timestamp into a plain long in milliseconds
    elif logical.startswith("timestamp-") and not local:
        target = logical[len("timestamp-"):]
    elif logical.startswith("local-timestamp-") and local:
        target = logical[len("local-timestamp-"):]
    else:
        why = ("a timestamp without a time zone is written as local-timestamp-*" if local
               else "a timestamp with a time zone is written as timestamp-*")
        raise _refuse(schema, kind, path, why)
    exponent = _TARGET_EXPONENT[target] - _UNIT_EXPONENT[kind.unit]
    return TimestampEncoder(path, exponent, logical or "milliseconds")


def _decimal(schema: AvroPrimitive | AvroFixed, kind: pa.DataType, path: str, size: int | None) -> Encoder:
    precision, scale = kind.precision, kind.scale
    if schema.scale < scale:
        raise _refuse(schema, kind, path, f"the column has scale {scale}, the schema {schema.scale}: "
                                          "its values would lose digits")
    widened = precision + schema.scale - scale
    if widened > 38:
        raise _refuse(schema, kind, path, f"scale {schema.scale} needs {widened} digits for this column, "
                                          "more than 38")
    target = pa.decimal128(widened, schema.scale)
    return DecimalEncoder(path, schema.precision, size, None if kind == target else target)


def _fixed(schema: AvroFixed, kind: pa.DataType, path: str) -> Encoder:
    if schema.logical == "decimal" and pa.types.is_decimal(kind):
        return _decimal(schema, kind, path, schema.size)
    if pa.types.is_fixed_size_binary(kind) and kind.byte_width != schema.size:
        raise _refuse(schema, kind, path, f"the fixed has {schema.size} bytes")
    if is_binary_type(kind):
        return FixedEncoder(path, schema.size, schema.fullname)
    raise _refuse(schema, kind, path)


def _record(schema: AvroRecord, kind: pa.StructType, path: str) -> Encoder:
    names = [kind.field(i).name for i in range(kind.num_fields)]
    if len(set(names)) != len(names):
        raise AvroSchemaError(path, "the struct has two fields of the same name")
    by_field: dict[int, int] = {}  # record field -> column field
    for index, name in enumerate(names):
        found = [i for i, f in enumerate(schema.fields) if f.name == name]
        if not found:
            found = [i for i, f in enumerate(schema.fields) if f.name.lower() == name.lower()]
        if len(found) > 1:
            raise AvroSchemaError(f"{path}.{name}", f"record {schema.fullname} has {len(found)} fields "
                                                    "of this name when case is ignored")
        if not found:
            raise AvroSchemaError(f"{path}.{name}", f"record {schema.fullname} has no field {name!r}")
        if found[0] in by_field:
            raise AvroSchemaError(f"{path}.{name}", f"another field of the column is written to the record's "
                                                    f"field {schema.fields[found[0]].name!r} already")
        by_field[found[0]] = index
    encoders = []
    for field_index, field in enumerate(schema.fields):
        column_index = by_field.get(field_index)
        if column_index is None:
            encoders.append((None, _absent(field.type, f"{path}.{field.name}")))
        else:
            child = kind.field(column_index)
            encoders.append((column_index, _compile(field.type, child.type, f"{path}.{child.name}")))
    return RecordEncoder(path, encoders)


def _absent(schema: AvroSchema, path: str) -> Encoder:
    """A record field the column lacks: its union's null branch, or refused."""
    null_index = schema.null_index if isinstance(schema, AvroUnion) else None
    if null_index is None:
        raise AvroSchemaError(path, f"the column has no such field, and Avro {describe(schema)} "
                                    "has no null to write instead")
    return ConstantEncoder(path, varint(null_index))


def _union(schema: AvroUnion, kind: pa.DataType, path: str) -> Encoder:
    null_index = schema.null_index
    branches = [(i, b) for i, b in enumerate(schema.branches) if i != null_index]
    if pa.types.is_null(kind):
        if null_index is None:
            raise _refuse(schema, kind, path, "the column is always null and the union has no null")
        return UnionEncoder(path, null_index, null_index, NullEncoder(path))
    if not branches:
        raise _refuse(schema, kind, path, "the union holds only null")
    if len(branches) == 1:
        index, branch = branches[0]
        return UnionEncoder(path, index, null_index, _compile(branch, kind, path))
    members = [f"member{i}" for i in range(len(branches))]
    if pa.types.is_struct(kind) and [kind.field(i).name for i in range(kind.num_fields)] == members:
        encoders = [(index, _compile(branch, kind.field(position).type, f"{path}.member{position}"))
                    for position, (index, branch) in enumerate(branches)]
        return MemberUnionEncoder(path, encoders, null_index)
    own = _own_type(kind)
    reasons = []
    for index, branch in sorted(branches, key=lambda item: item[1].type != own):  # its own type first
        try:
            return UnionEncoder(path, index, null_index, _compile(branch, kind, path))
        except AvroSchemaError as error:
            reasons.append(error.detail)
    raise _refuse(schema, kind, path, f"no branch of the union holds it ({'; '.join(reasons)})")


def _own_type(kind: pa.DataType) -> str | None:
    """The Avro type the column would have by Spark's rules (``record`` for a struct)."""
    try:
        return derive_schema(kind).type
    except AvroSchemaError:
        return None
