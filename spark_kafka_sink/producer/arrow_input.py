"""Moved to :mod:`spark_kafka_sink.producer.arrow.input`; this name stays for code that imports
``ArrowSendResult`` or ``ArrowSendError`` from it (they are not exported anywhere else)."""
from .arrow.input import (DEFAULT, ArrowColumns, ArrowSendError, ArrowSendResult,  # noqa: F401
                          OffsetRange, resolve_columns, timestamps_ms)

__all__ = ["DEFAULT", "ArrowColumns", "ArrowSendError", "ArrowSendResult", "OffsetRange",
           "resolve_columns", "timestamps_ms"]
