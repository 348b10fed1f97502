"""Sans-I/O Kafka RecordBatch v2 (magic 2): builder, reader, CRC-32C and compression codecs.

Nothing here touches sockets, threads or clocks: bytes and timestamps go in, bytes or decoded
objects come out. The wire layout is written out at the top of :mod:`.layout`. The checksum is
``spark_kafka_sink.record.crc32c.crc32c`` (the submodule keeps its name; it is not re-exported).
"""

from .builder import AppendResult, RecordBatchBuilder
from .codecs import Codec, CompressionType, codec_for
from .layout import TimestampType
from .reader import Header, Record, RecordBatch, read_batch, read_batches

__all__ = [
    "AppendResult",
    "Codec",
    "CompressionType",
    "Header",
    "Record",
    "RecordBatch",
    "RecordBatchBuilder",
    "TimestampType",
    "codec_for",
    "read_batch",
    "read_batches",
]
