"""read_batches: golden batches from a broker and from Java, partial tails, and every kind of
malformed input raising CorruptRecordError (never IndexError or struct.error, never a hang)."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from spark_kafka_sink.errors import CorruptRecordError, UnknownCodecError
from spark_kafka_sink.record import (
    CompressionType,
    Header,
    RecordBatchBuilder,
    TimestampType,
    read_batch,
    read_batches,
)
from spark_kafka_sink.record.crc32c import crc32c
from spark_kafka_sink.record.layout import ATTRIBUTES_OFFSET, CRC_OFFSET, HEADER_SIZE

from .golden import (
    JAVA_BATCHES,
    JAVA_RECORDS,
    KAFKA_PYTHON_CONTROL_BATCH,
    KAFKA_PYTHON_V2_BATCHES,
    KAFKA_PYTHON_V2_RECORDS,
)


def with_crc(batch: bytes | bytearray) -> bytes:
    """``batch`` with its CRC recomputed, so a test reaches the checks after the CRC."""
    batch = bytearray(batch)
    batch[CRC_OFFSET:ATTRIBUTES_OFFSET] = crc32c(memoryview(batch)[ATTRIBUTES_OFFSET:]).to_bytes(4, "big")
    return bytes(batch)


def patched(batch: bytes, offset: int, new: bytes) -> bytes:
    """``batch`` with ``new`` written at ``offset`` and a fresh CRC."""
    return with_crc(batch[:offset] + new + batch[offset + len(new):])


def sample_batch(codec: str = "none", records: int = 3) -> bytes:
    builder = RecordBatchBuilder(compression_type=codec)
    for i in range(records):
        builder.append(1000 + i, b"key%d" % i, b"value" * i, [("h", b"%d" % i)])
    return builder.build()


# --- golden input -------------------------------------------------------------------------------

def test_reads_batches_stored_by_a_real_broker():
    batches = list(read_batches(b"".join(KAFKA_PYTHON_V2_BATCHES), allow_partial_tail=False))
    assert [b.partition_leader_epoch for b in batches] == [1, 2, 2, 0]
    for batch, (base_offset, records) in zip(batches, KAFKA_PYTHON_V2_RECORDS):
        assert batch.base_offset == base_offset
        assert batch.compression_type is CompressionType.NONE
        assert batch.timestamp_type is TimestampType.CREATE_TIME
        assert (batch.producer_id, batch.producer_epoch, batch.base_sequence) == (-1, -1, -1)
        assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
            (base_offset + i, ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(records)
        ]
    assert batches[3].records[0].headers == (Header("hkey", b"hval"),)
    assert batches[3].records[0].headers[0].key == "hkey"


@pytest.mark.parametrize("codec", sorted(JAVA_BATCHES))
def test_reads_batches_written_by_the_java_client(codec):
    batch = read_batch(JAVA_BATCHES[codec])
    assert batch.compression_type.java_name == codec
    assert batch.record_count == len(batch.records) == 4
    assert (batch.base_timestamp, batch.max_timestamp) == (1700000000000, 1700000001000)
    assert [(r.offset, r.timestamp_ms, r.key, r.value, r.headers) for r in batch.records] == [
        (i, ts, k, v, tuple(h)) for i, (ts, k, v, h) in enumerate(JAVA_RECORDS)
    ]


def test_control_batch():
    # kafka-python's hand-made control batch carries a CRC that does not match its bytes.
    with pytest.raises(CorruptRecordError, match="CRC mismatch: stored 0x6597ffd0, computed 0xd56b5fb4"):
        read_batch(KAFKA_PYTHON_CONTROL_BATCH)
    batch = read_batch(KAFKA_PYTHON_CONTROL_BATCH, check_crc=False)
    assert batch.is_control and not batch.is_transactional
    (record,) = batch.records
    assert record.key == b"\x00\x00\x00\x00"  # version 0, type 0 (ABORT)
    assert read_batch(with_crc(KAFKA_PYTHON_CONTROL_BATCH)).is_control


def test_log_append_time_batches_report_max_timestamp():
    data = sample_batch()
    attributes = int.from_bytes(data[21:23], "big") | 0x08
    batch = read_batch(patched(data, 35, (424242).to_bytes(8, "big")))
    assert [r.timestamp_ms for r in batch.records] == [1000, 1001, 1002]
    log_append = patched(patched(data, 35, (424242).to_bytes(8, "big")), 21, attributes.to_bytes(2, "big"))
    batch = read_batch(log_append)
    assert batch.timestamp_type is TimestampType.LOG_APPEND_TIME
    assert [r.timestamp_ms for r in batch.records] == [424242] * 3


def test_accepts_bytes_bytearray_and_memoryview():
    data = sample_batch("lz4")
    expected = read_batch(data)
    assert read_batch(bytearray(data)) == expected
    assert read_batch(memoryview(b"xx" + data)[2:]) == expected


def test_batch_properties():
    batch = read_batch(patched(sample_batch(), 0, (100).to_bytes(8, "big")))
    assert batch.last_offset == 102
    assert batch.size_in_bytes == len(sample_batch())
    assert [r.offset for r in batch.records] == [100, 101, 102]
    assert not batch.has_delete_horizon


# --- partial tails ------------------------------------------------------------------------------

def test_stops_before_a_partial_trailing_batch():
    whole = sample_batch() + sample_batch("gzip")
    for cut in range(1, len(sample_batch())):
        data = whole + sample_batch()[:cut]
        assert len(list(read_batches(data))) == 2
        with pytest.raises(CorruptRecordError, match="truncated batch"):
            list(read_batches(data, allow_partial_tail=False))


def test_empty_buffer():
    assert list(read_batches(b"")) == []
    with pytest.raises(CorruptRecordError, match="empty buffer"):
        read_batch(b"")


def test_read_batch_rejects_trailing_bytes():
    with pytest.raises(CorruptRecordError, match="3 bytes follow the batch"):
        read_batch(sample_batch() + b"abc")


# --- malformed input ----------------------------------------------------------------------------

@settings(max_examples=60, deadline=None)
@given(codec=st.sampled_from(list(CompressionType)), data=st.data())
def test_any_flipped_byte_after_the_crc_field_fails_the_crc(codec, data):
    batch = bytearray(sample_batch(codec.java_name))
    index = data.draw(st.integers(CRC_OFFSET, len(batch) - 1), label="index")
    batch[index] ^= data.draw(st.integers(1, 255), label="xor")
    crc_message = "CRC mismatch: stored 0x[0-9a-f]{8}, computed 0x[0-9a-f]{8}"
    with pytest.raises(CorruptRecordError, match=crc_message):
        read_batch(batch)


def test_bad_magic():
    data = bytearray(sample_batch())
    data[16] = 1
    with pytest.raises(CorruptRecordError, match="magic 1 is not 2"):
        list(read_batches(bytes(data)))
    # even a partial batch whose magic byte is visible is rejected
    with pytest.raises(CorruptRecordError, match="magic 1"):
        list(read_batches(bytes(data[:20])))


@pytest.mark.parametrize("length", [0, 48, -1, -(2**31)])
def test_batch_length_shorter_than_the_header(length):
    data = sample_batch()
    bad = data[:8] + length.to_bytes(4, "big", signed=True) + data[12:]
    with pytest.raises(CorruptRecordError, match=f"batch_length {length} is shorter than the 49-byte header"):
        list(read_batches(bad))


@pytest.mark.parametrize("codec_id", [5, 6, 7])
def test_unknown_codec_id_after_a_valid_crc(codec_id):
    data = patched(sample_batch(), 21, codec_id.to_bytes(2, "big"))
    with pytest.raises(UnknownCodecError, match=f"id {codec_id}"):
        read_batch(data)


def test_record_count_mismatch():
    data = sample_batch()
    with pytest.raises(CorruptRecordError, match="record count mismatch: header says 4, found 3"):
        read_batch(patched(data, 57, (4).to_bytes(4, "big")))
    with pytest.raises(CorruptRecordError, match="bytes left after the 2 records"):
        read_batch(patched(data, 57, (2).to_bytes(4, "big")))
    with pytest.raises(CorruptRecordError, match="negative record count"):
        read_batch(patched(data, 57, (-1).to_bytes(4, "big", signed=True)))


def test_oversized_record_length():
    data = sample_batch()
    huge = b"\xfe\xff\xff\xff\x07"  # a first-record length of 2**30 - 1 bytes (zig-zag varint)
    bad = with_crc(data[:HEADER_SIZE] + huge + data[HEADER_SIZE + 1:])
    bad = patched(bad, 8, (len(bad) - 12).to_bytes(4, "big"))
    with pytest.raises(CorruptRecordError, match="record length .* overruns"):
        read_batch(bad)


def test_record_fields_overrunning_the_record_length():
    builder = RecordBatchBuilder()
    builder.append(0, b"key", b"value")
    data = builder.build()
    assert data[HEADER_SIZE] == 28  # zig-zag 14: attributes .. header count
    shorter = patched(data, HEADER_SIZE, b"\x18")  # claims 12: the value overruns its record
    with pytest.raises(CorruptRecordError, match="value of 5 bytes overruns the 4 bytes left"):
        read_batch(shorter)


def test_garbage_compressed_section():
    data = sample_batch("gzip")
    bad = with_crc(data[:HEADER_SIZE] + b"\x1f\x8b" + b"\x00" * (len(data) - HEADER_SIZE - 2))
    with pytest.raises(CorruptRecordError, match="invalid gzip data"):
        read_batch(bad)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    codec=st.sampled_from(list(CompressionType)),
    edits=st.lists(st.tuples(st.integers(0, 10_000), st.integers(0, 255)), min_size=1, max_size=4),
    cut=st.integers(0, 10_000),
)
def test_mutated_batches_only_ever_raise_corrupt_record_error(codec, edits, cut):
    """Random byte edits and truncation, CRC checks off so decoding goes as deep as it can."""
    data = bytearray(sample_batch(codec.java_name) + sample_batch())
    for index, value in edits:
        data[index % len(data)] = value
    data = bytes(data[: max(1, len(data) - cut % 40)])
    for check_crc in (True, False):
        try:
            for batch in read_batches(data, check_crc=check_crc):
                assert batch.record_count == len(batch.records)
        except CorruptRecordError:
            pass
