"""Avro for whole Arrow columns: schemas, Spark's type mapping, and a column-wise encoder.

The modules, from the bottom up:

- :mod:`.schema`: Avro schemas as frozen values, parsed from JSON and written back (no pyarrow);
- :mod:`.derive`: the schema Spark's ``to_avro`` gives an Arrow type (``topLevelRecord``);
- :mod:`.columns` and :mod:`.encoders`: every row's bytes over whole columns, one encoder per
  kind of Avro value (numpy and Arrow kernels, no loop over rows);
- :mod:`.plan`: a schema checked against an Arrow type, as a tree of encoders;
- :mod:`.encoding`: ``encode(data, schema, schema_id=None)``: one binary array of bodies (framed
  in the Confluent wire format with a schema id) and the rows that could not be encoded;
- :mod:`.format`: the formats the sink picks by ``value.format`` (``bytes``, ``avro``).

The package imports nothing else of spark_kafka_sink but ``errors`` and the record layer's
Arrow column helpers (``record.arrow_columns``). Its names are exported
lazily (PEP 562): importing it does not import pyarrow or numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "AvroFormat",
    "BytesFormat",
    "EncodeResult",
    "FORMATS",
    "FailedRow",
    "Format",
    "compile_plan",
    "confluent_header",
    "derive_schema",
    "encode",
    "format_named",
    "parse_schema",
    "to_json",
]

_EXPORTS = {
    "AvroFormat": "format",
    "BytesFormat": "format",
    "FORMATS": "format",
    "Format": "format",
    "format_named": "format",
    "EncodeResult": "encoding",
    "FailedRow": "encoding",
    "confluent_header": "encoding",
    "encode": "encoding",
    "compile_plan": "plan",
    "derive_schema": "derive",
    "parse_schema": "schema",
    "to_json": "schema",
}


def __getattr__(name: str) -> Any:
    """The package's names, each imported from its module on first use (PEP 562)."""
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{module}"), name)
