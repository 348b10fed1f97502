# Kafka RecordBatch v2 (magic 2), the format this package writes and reads.
#
# RecordBatch (all fixed-width integers big-endian):
#
#   offset  field                   type     notes
#   0       base_offset             int64    0 from a producer; the broker assigns the real one
#   8       batch_length            int32    bytes from partition_leader_epoch to the end
#   12      partition_leader_epoch  int32    -1 from a producer
#   16      magic                   int8     2
#   17      crc                     uint32   CRC-32C of bytes 21..end (attributes to the end);
#                                            so base_offset, batch_length and the epoch can be
#                                            rewritten by the broker without a new CRC
#   21      attributes              int16    bits 0-2 codec id (0 none, 1 gzip, 2 snappy, 3 lz4,
#                                            4 zstd) | bit 3 timestamp type (0 create, 1 log
#                                            append) | bit 4 transactional | bit 5 control |
#                                            bit 6 base_timestamp holds a delete horizon
#   23      last_offset_delta       int32    offset delta of the last record (count - 1 when built)
#   27      base_timestamp          int64    timestamp of the first record
#   35      max_timestamp           int64    largest record timestamp
#   43      producer_id             int64    -1 without idempotence
#   51      producer_epoch          int16    -1 without idempotence
#   53      base_sequence           int32    sequence of the first record, -1 without idempotence
#   57      record_count            int32
#   61      records                 Record * record_count, the whole section compressed as one
#                                            stream when the codec id is not 0
#
# Record:
#   length           varint   bytes after this field
#   attributes       int8     unused, 0
#   timestamp_delta  varlong  timestamp - base_timestamp
#   offset_delta     varint   offset - base_offset
#   key_length       varint   -1 for a null key (0 is an empty key)
#   key              bytes
#   value_length     varint   -1 for a null value
#   value            bytes
#   header_count     varint
#   headers          Header * header_count
#
# Header:
#   key_length       varint   >= 0
#   key              bytes    UTF-8
#   value_length     varint   -1 for a null value
#   value            bytes
#
# varint / varlong: zig-zag encoded ((n << 1) ^ (n >> 63)), then base-128 little-endian groups of
# 7 bits, high bit set on every byte but the last; at most 5 bytes (int32) / 10 bytes (int64).

"""The RecordBatch v2 (magic 2) wire layout: one header struct, field offsets and attribute bits.

The grammar above is the reference for :mod:`.builder` and :mod:`.reader`.
"""

from __future__ import annotations

import enum
import struct

from ..bytecodec import INT16_MAX, INT32_MAX, INT32_MIN, INT64_MAX, INT64_MIN

HEADER = struct.Struct(">qiibIhiqqqhii")
"""The 61-byte batch header, fields in wire order (see the grammar above)."""

HEADER_SIZE = HEADER.size  # 61
LOG_OVERHEAD = 12  # base_offset + batch_length: bytes not counted by batch_length
BATCH_LENGTH_OFFSET = 8
MAGIC_OFFSET = 16
CRC_OFFSET = 17
ATTRIBUTES_OFFSET = 21  # the CRC covers from here to the end
MIN_BATCH_LENGTH = HEADER_SIZE - LOG_OVERHEAD  # 49: a batch with no records

MAGIC = 2

COMPRESSION_MASK = 0x07
TIMESTAMP_TYPE_FLAG = 0x08
TRANSACTIONAL_FLAG = 0x10
CONTROL_FLAG = 0x20
DELETE_HORIZON_FLAG = 0x40

NO_PRODUCER_ID = -1
NO_PRODUCER_EPOCH = -1
NO_SEQUENCE = -1
NO_PARTITION_LEADER_EPOCH = -1
INVALID_OFFSET = -1  # no offset known (acks=0; Java's ProduceResponse.INVALID_OFFSET)

MAX_RECORD_OVERHEAD = 21  # length(5) + attributes(1) + timestamp delta(10) + offset delta(5)
NULL_VARINT_SIZE = 1  # -1 encodes in one byte

INT16_RANGE = (-(1 << 15), INT16_MAX)
INT32_RANGE = (INT32_MIN, INT32_MAX)
INT64_RANGE = (INT64_MIN, INT64_MAX)


class TimestampType(enum.IntEnum):
    """Attributes bit 3: who set the record timestamps."""

    CREATE_TIME = 0
    LOG_APPEND_TIME = 1


def in_range(value: int, bounds: tuple[int, int]) -> bool:
    """Whether ``value`` is an int (not a bool) within the inclusive ``bounds``."""
    return isinstance(value, int) and not isinstance(value, bool) and bounds[0] <= value <= bounds[1]
