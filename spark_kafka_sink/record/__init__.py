"""Sans-I/O Kafka RecordBatch v2 (magic 2): builder, reader, CRC-32C and compression codecs.

Nothing here touches sockets, threads or clocks: bytes and timestamps go in, bytes or decoded
objects come out. The wire layout is written out at the top of :mod:`.layout`. The checksum is
``spark_kafka_sink.record.crc32c.crc32c`` (the submodule keeps its name; it is not re-exported).

The Arrow encoder (:mod:`.arrow`: ``encode_batches`` and its parts) is exported lazily: importing
this package does not import pyarrow or numpy, which the per-record path never needs.
"""

from typing import Any

from .builder import AppendResult, RecordBatchBuilder
from .codecs import Codec, CompressionType, codec_for
from .layout import TimestampType
from .reader import Header, Record, RecordBatch, read_batch, read_batches

_ARROW_EXPORTS = ("ArrowRecords", "BatchPlan", "EncodedBatch", "encode_batches", "encode_prepared",
                  "encode_records", "plan_batches", "prepare_records")

__all__ = [
    "AppendResult",
    "ArrowRecords",
    "BatchPlan",
    "Codec",
    "CompressionType",
    "EncodedBatch",
    "Header",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "codec_for",
    "encode_batches",
    "encode_prepared",
    "encode_records",
    "plan_batches",
    "prepare_records",
    "read_batch",
    "read_batches",
]


def __getattr__(name: str) -> Any:
    """The Arrow encoder's names, imported on first use (PEP 562)."""
    if name in _ARROW_EXPORTS:
        from . import arrow

        return getattr(arrow, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
