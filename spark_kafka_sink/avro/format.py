"""The formats a key or value column is written in: the seam the sink picks by ``value.format``.

A format is built once where the column's type is known (on the driver, for the sink), which is
where a schema that does not fit is refused, and is then a small frozen value that pickles to the
executors; there ``encode(column)`` turns each Arrow batch's column into the record bytes and the
rows that could not be encoded (:class:`~.encoding.EncodeResult`), which the producer's error
policy takes from there.

- :class:`BytesFormat` (``bytes``, the default): the column's bytes as they are (binary or
  string), nothing to fail;
- :class:`AvroFormat` (``avro``): Avro bodies with a given or derived schema, framed in the
  Confluent wire format when it has a schema id.

Another format (Protobuf, JSON Schema) is one more class with ``name`` and ``encode``, and one
more entry in :data:`FORMATS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Protocol

import pyarrow as pa

from ..errors import ConfigError
from ..record.arrow_columns import as_binary
from .derive import TOP_LEVEL_RECORD, derive_schema, is_binary_type, is_string_type
from .encoding import EncodeResult, as_column, confluent_header, encode_column
from .plan import compile_plan
from .schema import SCHEMA_TYPES, AvroSchema, parse_schema, to_json

__all__ = ["AvroFormat", "BytesFormat", "FORMATS", "Format", "format_named"]


class Format(Protocol):
    """What the sink asks of a format: its name and one batch's column encoded."""

    name: str

    def encode(self, column: Any) -> EncodeResult:
        """Every row of ``column`` as record bytes, and the rows that could not be encoded."""


@dataclass(frozen=True)
class BytesFormat:
    """The column's bytes as they are: binary or string (strings as UTF-8), nulls kept."""

    column: str = "value"
    name = "bytes"

    def encode(self, column: Any) -> EncodeResult:
        array = as_column(column)
        if pa.types.is_null(array.type):
            return EncodeResult(pa.nulls(len(array), pa.binary()))
        if not (is_binary_type(array.type) or is_string_type(array.type)):
            raise TypeError(f"the {self.column} column must be binary or string for format bytes, got {array.type}")
        return EncodeResult(as_binary(array))


@dataclass(frozen=True)
class AvroFormat:
    """Avro bodies of ``schema`` for columns of ``arrow_type``; framed in the Confluent wire
    format with ``schema_id``, plain bodies without. Build it with :meth:`for_type`, which
    checks the schema against the type."""

    schema: AvroSchema
    arrow_type: pa.DataType
    schema_id: int | None = None
    column: str = "value"
    name = "avro"

    @classmethod
    def for_type(cls, arrow_type: pa.DataType | pa.Schema, schema: AvroSchema | str | dict | list | None = None, *,
                 schema_id: int | None = None, record_name: str = TOP_LEVEL_RECORD, namespace: str = "",
                 column: str = "value") -> AvroFormat:
        """The format for a column of ``arrow_type``: ``schema`` (parsed, or JSON) checked
        against it, or ``None`` to derive one by Spark's rules (the top-level record named
        ``record_name`` in ``namespace``). ``AvroSchemaError`` names the field that does not fit."""
        if isinstance(arrow_type, pa.Schema):
            arrow_type = pa.struct(list(arrow_type))
        if schema is None:
            schema = derive_schema(arrow_type, record_name=record_name, namespace=namespace, column=column)
        elif not isinstance(schema, SCHEMA_TYPES):
            schema = parse_schema(schema)
        if schema_id is not None:
            confluent_header(schema_id)  # checks the id
        compile_plan(schema, arrow_type, column)
        return cls(schema, arrow_type, schema_id, column)

    @property
    def schema_json(self) -> str:
        """The schema as a registry stores it (compact JSON, as Java's ``Schema.toString()``)."""
        return to_json(self.schema)

    def with_schema_id(self, schema_id: int) -> AvroFormat:
        """The same format, framed with ``schema_id`` (once the registry gave it)."""
        confluent_header(schema_id)
        return AvroFormat(self.schema, self.arrow_type, schema_id, self.column)

    def encode(self, column: Any) -> EncodeResult:
        array = as_column(column)
        return encode_column(compile_plan(self.schema, array.type, self.column), array, self.schema_id)


FORMATS = {"bytes": BytesFormat, "avro": AvroFormat}
"""Each format's class by the name ``value.format`` and ``key.format`` take."""


def format_named(name: str) -> type:
    """The format class for ``name``; ``ConfigError`` naming the formats for any other name."""
    try:
        return FORMATS[name]
    except (KeyError, TypeError):
        raise ConfigError(f"unknown format {name!r}: the formats are {', '.join(sorted(FORMATS))}") from None
