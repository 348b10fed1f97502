"""Avro for whole Arrow columns: schemas and Spark's type mapping.

The modules, from the bottom up:

- :mod:`.schema`: Avro schemas as frozen values, parsed from JSON and written back (no pyarrow);
- :mod:`.derive`: the schema Spark's ``to_avro`` gives an Arrow type (``topLevelRecord``).

The package imports nothing else of spark_kafka_sink but ``errors``. Its names are exported
lazily (PEP 562): importing it does not import pyarrow or numpy.
"""

from __future__ import annotations

import importlib
from typing import Any

__all__ = [
    "derive_schema",
    "parse_schema",
    "to_json",
]

_EXPORTS = {
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
