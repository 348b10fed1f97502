"""RecordBatchBuilder: golden bytes, batch-full behaviour, producer state, sizes, validation."""

from __future__ import annotations

import pytest
import zstandard
from hypothesis import given
from hypothesis import strategies as st

from spark_kafka_sink.record import AppendResult, CompressionType, RecordBatchBuilder, read_batch
from spark_kafka_sink.record.crc32c import crc32c_pure
from spark_kafka_sink.record.layout import HEADER_SIZE

from .golden import JAVA_BATCHES, JAVA_RECORDS, KAFKA_PYTHON_V2_BATCHES, KAFKA_PYTHON_V2_RECORDS


def build(records, **options) -> bytes:
    builder = RecordBatchBuilder(batch_size=1 << 20, **options)
    for record in records:
        assert builder.append(*record) is not None
    return builder.build()


def as_producer_wrote_it(broker_batch: bytes) -> bytes:
    """A broker-stored batch with base_offset 0 and partition_leader_epoch -1, as a producer
    sends it; both fields lie outside the CRC, so the stored CRC still applies."""
    return bytes(8) + broker_batch[8:12] + b"\xff\xff\xff\xff" + broker_batch[16:]


# --- golden bytes -------------------------------------------------------------------------------

@pytest.mark.parametrize("index", range(len(KAFKA_PYTHON_V2_BATCHES)))
def test_matches_batches_stored_by_a_real_broker(index):
    _, records = KAFKA_PYTHON_V2_RECORDS[index]
    expected = as_producer_wrote_it(KAFKA_PYTHON_V2_BATCHES[index])
    assert build([(ts, k, v, h) for ts, k, v, h in records]) == expected


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4"])
def test_byte_identical_to_the_java_client(codec):
    """Apache Kafka's MemoryRecordsBuilder wrote these batches; we write the same bytes,
    compressed sections included (same gzip header, xerial framing and LZ4 frame settings)."""
    assert build(JAVA_RECORDS, compression_type=codec) == JAVA_BATCHES[codec]


def test_zstd_reads_like_java_and_adds_the_content_size():
    """zstd-jni streams its frame (no content size); we write a one-shot frame with the size."""
    ours = build(JAVA_RECORDS, compression_type="zstd")
    assert read_batch(ours).records == read_batch(JAVA_BATCHES["zstd"]).records
    assert zstandard.get_frame_parameters(ours[HEADER_SIZE:]).content_size > 0
    java_frame = JAVA_BATCHES["zstd"][HEADER_SIZE:]
    assert zstandard.get_frame_parameters(java_frame).content_size == zstandard.CONTENTSIZE_UNKNOWN


def test_hand_computed_batch():
    """One record, every header field spelled out from the grammar in record/layout.py."""
    builder = RecordBatchBuilder(producer_id=7, producer_epoch=3, base_sequence=42, is_transactional=True)
    builder.append(1_700_000_000_000, b"k", b"", [("h", None)])
    record = bytes([
        0x14,                   # length 10 (zig-zag)
        0x00,                   # attributes
        0x00,                   # timestamp delta 0
        0x00,                   # offset delta 0
        0x02, ord("k"),         # key length 1, key
        0x00,                   # value length 0: empty, not null
        0x02,                   # 1 header
        0x02, ord("h"), 0x01,   # key "h", value null (-1)
    ])
    header_tail = b"".join([
        (0x0010).to_bytes(2, "big"),                 # attributes: transactional, codec none
        (0).to_bytes(4, "big"),                      # last offset delta
        (1_700_000_000_000).to_bytes(8, "big") * 2,  # base and max timestamp
        (7).to_bytes(8, "big"),                      # producer id
        (3).to_bytes(2, "big"),                      # producer epoch
        (42).to_bytes(4, "big"),                     # base sequence
        (1).to_bytes(4, "big"),                      # record count
    ])
    crc = crc32c_pure(header_tail + record)
    expected = b"".join([
        bytes(8),                                    # base offset 0
        (49 + len(record)).to_bytes(4, "big"),       # batch length
        b"\xff\xff\xff\xff",                         # partition leader epoch -1
        b"\x02",                                     # magic
        crc.to_bytes(4, "big"),
        header_tail,
        record,
    ])
    assert builder.build() == expected
    assert len(expected) == builder.estimated_size == HEADER_SIZE + 11


# --- batch full -----------------------------------------------------------------------------------

def test_first_record_is_always_accepted():
    builder = RecordBatchBuilder(batch_size=100)
    result = builder.append(0, None, b"x" * 500)
    assert result == AppendResult(offset_delta=0, size=result.size, batch_full=True)
    assert builder.estimated_size > 100 and builder.is_full
    assert builder.append(0, None, b"") is None
    assert builder.record_count == 1
    assert len(builder.build()) == builder.estimated_size


def test_append_returns_none_once_batch_size_would_be_exceeded():
    builder = RecordBatchBuilder(batch_size=1024)
    results = []
    while (result := builder.append(1000, b"key", b"v" * 50)) is not None:
        results.append(result)
        assert builder.estimated_size <= 1024
    assert [r.offset_delta for r in results] == list(range(len(results)))
    assert builder.estimated_size + results[-1].size > 1024  # the refused record did not fit
    assert builder.record_count == len(results)
    assert read_batch(builder.build()).record_count == len(results)


def test_a_record_that_fits_exactly_is_accepted():
    first = RecordBatchBuilder(batch_size=1 << 20)
    size = first.append(0, None, b"a").size
    builder = RecordBatchBuilder(batch_size=HEADER_SIZE + 2 * size)
    assert builder.append(0, None, b"a") is not None
    assert builder.append(0, None, b"b") is not None  # exactly batch_size now
    assert builder.estimated_size == HEADER_SIZE + 2 * size and builder.is_full
    assert builder.append(0, None, b"c") is None


def test_compressed_batches_are_sized_before_compression():
    builder = RecordBatchBuilder(compression_type=CompressionType.LZ4, batch_size=2000)
    while builder.append(0, None, b"z" * 100) is not None:
        pass
    assert builder.estimated_size <= 2000
    assert len(builder.build()) < builder.estimated_size


# --- producer state, rebuilds -------------------------------------------------------------------

def test_producer_state_set_after_appends_and_rebuilt_after_build():
    builder = RecordBatchBuilder(compression_type="gzip")
    builder.append(5, b"k", b"v")
    builder.set_producer_state(1234, 5, 77, True)
    first = read_batch(builder.build())
    state = (first.producer_id, first.producer_epoch, first.base_sequence, first.is_transactional)
    assert state == (1234, 5, 77, True)
    builder.set_producer_state(1234, 6, 0, False)  # a retry after an epoch bump
    second = read_batch(builder.build())
    assert (second.producer_epoch, second.base_sequence, second.is_transactional) == (6, 0, False)
    assert second.records == first.records
    assert builder.build() == builder.build()


def test_no_append_after_build():
    builder = RecordBatchBuilder()
    builder.append(0, None, b"v")
    builder.build()
    with pytest.raises(RuntimeError, match="after build"):
        builder.append(0, None, b"v")


def test_headers_none_means_no_headers():
    builder = RecordBatchBuilder()
    builder.append(0, None, b"v", None)
    assert read_batch(builder.build()).records[0].headers == ()
    assert RecordBatchBuilder.estimate_size_upper_bound(None, b"v", None) == 61 + 21 + 1 + 2 + 1


def test_empty_builder_cannot_build():
    with pytest.raises(ValueError, match="no records"):
        RecordBatchBuilder().build()


def test_timestamps_base_and_max():
    builder = RecordBatchBuilder()
    for ts in (500, 900, 100, 0, 700):
        builder.append(ts, None, b"")
    batch = read_batch(builder.build())
    assert (batch.base_timestamp, batch.max_timestamp) == (500, 900)
    assert [r.timestamp_ms for r in batch.records] == [500, 900, 100, 0, 700]
    assert batch.last_offset_delta == 4


# --- estimate_size_upper_bound ------------------------------------------------------------------

def test_estimate_size_upper_bound_follows_java():
    # 61 header + 21 max record overhead + key (1 + 10) + value (2 + 100) + 1 header count
    # + header key (1 + 1) + header value (1 + 3)
    estimate = RecordBatchBuilder.estimate_size_upper_bound(b"k" * 10, b"v" * 100, [("a", b"xyz")])
    assert estimate == 61 + 21 + 11 + 102 + 1 + 2 + 4
    assert RecordBatchBuilder.estimate_size_upper_bound(None, None) == 61 + 21 + 1 + 1 + 1


def test_estimate_is_an_upper_bound_of_a_one_record_batch():
    key, value, headers = b"key", memoryview(b"v" * 300), [("h\u00e9", None), ("h", b"1")]
    actual = len(build([(2**40, key, value, headers)]))
    assert actual <= RecordBatchBuilder.estimate_size_upper_bound(key, value, headers) <= actual + 21


_SIZES = st.sampled_from([0, 1, 63, 64, 65, 8191, 8192, 8193, 1 << 20, (1 << 21) + 5])


@given(key_size=st.none() | _SIZES, value_size=st.none() | _SIZES,
       headers=st.sampled_from([None, (), []]))
def test_estimate_fast_path_equals_the_checked_path(key_size, value_size, headers):
    key = None if key_size is None else b"k" * key_size
    value = None if value_size is None else b"v" * value_size
    assert RecordBatchBuilder.estimate_size_upper_bound(key, value, headers) == \
        RecordBatchBuilder._estimate_size_upper_bound_checked(key, value, headers)


@given(sizes=st.lists(st.tuples(st.none() | st.integers(0, 300), st.none() | st.integers(0, 9000)),
                      min_size=1, max_size=12),
       batch_size=st.integers(1, 20000))
def test_append_fast_path_equals_the_checked_path_and_batch_full_is_is_full(sizes, batch_size):
    fast, checked = RecordBatchBuilder(batch_size=batch_size), RecordBatchBuilder(batch_size=batch_size)
    for i, (key_size, value_size) in enumerate(sizes):
        key = None if key_size is None else b"k" * key_size
        value = None if value_size is None else b"v" * value_size
        result = fast.append(1000 + i, key, value)
        assert result == checked._append_checked(1000 + i, key, value, None)
        if result is not None:
            assert result.batch_full == fast.is_full
    assert fast.build() == checked.build()


# --- validation ---------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "value", "headers", "message"), [
    ("text", b"v", (), "key must be bytes"),
    (None, 42, (), "value must be bytes"),
    (None, b"v", [("ok", b"1"), (b"bytes-key", b"2")], "header 1 key must be str"),
    (None, b"v", [("ok", "str-value")], "header 0 .* value must be bytes"),
    (None, b"v", [("a", b"1", "extra")], "header 0 must be a .key, value. pair"),
])
def test_type_errors_name_the_field(key, value, headers, message):
    builder = RecordBatchBuilder()
    with pytest.raises(TypeError, match=message):
        builder.append(0, key, value, headers)
    with pytest.raises(TypeError, match=message):
        RecordBatchBuilder.estimate_size_upper_bound(key, value, headers)
    assert builder.record_count == 0 and builder.estimated_size == HEADER_SIZE


@pytest.mark.parametrize("options", [
    {"batch_size": 0}, {"producer_epoch": 1 << 15}, {"base_sequence": 1 << 31},
    {"producer_id": 1 << 63}, {"compression_type": "lz4", "compression_level": 18},
    {"compression_type": "none", "compression_level": 1},
])
def test_bad_options(options):
    with pytest.raises(ValueError):
        RecordBatchBuilder(**options)


def test_timestamps_must_fit_int64_deltas():
    builder = RecordBatchBuilder()
    with pytest.raises(ValueError, match="int64"):
        builder.append(1 << 63, None, b"")
    builder.append(-(1 << 62) * 2, None, b"")
    # a valid int64 whose delta from this batch's base does not fit: not this batch, the next
    assert builder.append((1 << 63) - 1, None, b"") is None
    assert builder.record_count == 1
    assert RecordBatchBuilder().append((1 << 63) - 1, None, b"") is not None
