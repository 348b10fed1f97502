"""The codec registry: lookups, levels, round trips, Java framing, missing libraries, bad input."""

from __future__ import annotations

import gzip
import random
import sys

import cramjam
import lz4.frame as lz4_frame
import pytest
import zstandard
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.errors import CodecUnavailableError, CorruptRecordError, UnknownCodecError
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.record.codecs import (
    GZIP_HEADER,
    XERIAL_BLOCK_SIZE,
    XERIAL_HEADER,
    CompressionType,
    codec_for,
)


ALL = list(CompressionType)
COMPRESSED = [t for t in CompressionType if t is not CompressionType.NONE]

# 100 KiB of mixed data: over lz4's 64 KiB block and snappy's 32 KiB block, partly compressible.
BIG = (random.Random(0).randbytes(20_000) + b"kafka " * 10_000 + bytes(range(256)) * 200)[: 100 * 1024]
assert len(BIG) == 100 * 1024


# --- lookups ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "ctype"), [
    ("none", CompressionType.NONE), ("gzip", CompressionType.GZIP), ("snappy", CompressionType.SNAPPY),
    ("lz4", CompressionType.LZ4), ("zstd", CompressionType.ZSTD), ("LZ4", CompressionType.LZ4),
])
def test_lookup_by_java_name_and_id(name, ctype):
    assert codec_for(name).type is ctype
    assert codec_for(int(ctype)).type is ctype
    assert codec_for(ctype).name == ctype.java_name == name.lower()


@pytest.mark.parametrize("codec_id", [5, 6, 7, -1, 99])
def test_unknown_codec_id_names_the_id(codec_id):
    with pytest.raises(UnknownCodecError, match=f"id {codec_id}"):
        codec_for(codec_id)
    assert issubclass(UnknownCodecError, CorruptRecordError)


def test_unknown_codec_name_lists_valid_names():
    with pytest.raises(ValueError, match="brotli.*none, gzip, snappy, lz4, zstd"):
        codec_for("brotli")
    with pytest.raises(TypeError):
        codec_for(True)


# --- levels (Java: GzipCompression, Lz4Compression, ZstdCompression) ------------------------------

@pytest.mark.parametrize(("name", "default", "lo", "hi"), [
    ("gzip", -1, 1, 9), ("lz4", 9, 1, 17), ("zstd", 3, -131072, 22),
])
def test_level_ranges_match_java(name, default, lo, hi):
    codec = codec_for(name)
    assert (codec.default_level, codec.min_level, codec.max_level) == (default, lo, hi)
    assert codec.validate_level(None) == default
    assert codec.validate_level(default) == default
    assert codec.validate_level(lo) == lo and codec.validate_level(hi) == hi
    for bad in (lo - 1, hi + 1):
        with pytest.raises(ValueError, match=f"{lo}..{hi}"):
            codec.validate_level(bad)


@pytest.mark.parametrize("name", ["none", "snappy"])
def test_levelless_codecs_reject_a_level(name):
    assert codec_for(name).validate_level(None) is None
    with pytest.raises(ValueError, match="takes no level"):
        codec_for(name).validate_level(3)


@pytest.mark.parametrize(("name", "level"), [
    ("gzip", 1), ("gzip", 9), ("gzip", -1), ("lz4", 1), ("lz4", 3), ("lz4", 17),
    ("zstd", -131072), ("zstd", -5), ("zstd", 1), ("zstd", 19),
])
def test_round_trip_at_levels(name, level):
    codec = codec_for(name)
    data = BIG[:20_000]
    assert codec.decompress(codec.compress(data, level)) == data


# --- round trips --------------------------------------------------------------------------------

@pytest.mark.parametrize("ctype", ALL, ids=lambda t: t.java_name)
@pytest.mark.parametrize("data", [b"", b"x", b"hello kafka" * 10, BIG, b"\x00" * 300_000],
                         ids=["empty", "one", "small", "100KiB", "300KiB-zeros"])
def test_round_trip(ctype, data):
    codec = codec_for(ctype)
    compressed = codec.compress(data)
    assert isinstance(compressed, bytes)
    assert codec.decompress(compressed) == data
    assert codec.decompress(memoryview(compressed)) == data
    assert codec.decompress(bytearray(compressed)) == data


@pytest.mark.parametrize("ctype", ALL, ids=lambda t: t.java_name)
def test_compress_accepts_any_buffer(ctype):
    codec = codec_for(ctype)
    for data in (bytearray(b"abc" * 50), memoryview(b"--abc--" * 50)[2:-2]):
        assert codec.decompress(codec.compress(data)) == bytes(data)


@settings(max_examples=25, deadline=None)
@given(ctype=st.sampled_from(ALL), data=st.binary(max_size=2000))
def test_round_trip_property(ctype, data):
    codec = codec_for(ctype)
    assert codec.decompress(codec.compress(data)) == data


# --- gzip ---------------------------------------------------------------------------------------

def test_gzip_is_a_standard_member_with_javas_header():
    compressed = codec_for("gzip").compress(BIG)
    assert compressed[:10] == GZIP_HEADER  # 1f 8b, deflate, no flags, mtime 0, OS 255
    assert gzip.decompress(compressed) == BIG


def test_gzip_reads_multi_member_streams():
    stream = gzip.compress(b"abc") + gzip.compress(b"def")
    assert codec_for("gzip").decompress(stream) == b"abcdef"


# --- snappy -------------------------------------------------------------------------------------

def _xerial_blocks(stream: bytes) -> list[bytes]:
    """The raw snappy blocks of a xerial stream (parsed independently of the codec)."""
    assert stream[:16] == XERIAL_HEADER
    blocks, pos = [], 16
    while pos < len(stream):
        length = int.from_bytes(stream[pos:pos + 4], "big")
        blocks.append(stream[pos + 4:pos + 4 + length])
        pos += 4 + length
    assert pos == len(stream)
    return blocks


def test_snappy_writes_xerial_framing_in_32k_blocks():
    assert XERIAL_HEADER == b"\x82SNAPPY\x00" + b"\x00\x00\x00\x01" + b"\x00\x00\x00\x01"
    blocks = _xerial_blocks(codec_for("snappy").compress(BIG))
    sizes = [len(bytes(cramjam.snappy.decompress_raw(block))) for block in blocks]
    assert sizes == [XERIAL_BLOCK_SIZE] * 3 + [len(BIG) - 3 * XERIAL_BLOCK_SIZE]
    assert b"".join(bytes(cramjam.snappy.decompress_raw(b)) for b in blocks) == BIG


def test_snappy_empty_input_is_header_only():
    assert codec_for("snappy").compress(b"") == XERIAL_HEADER
    assert codec_for("snappy").decompress(XERIAL_HEADER) == b""


def test_snappy_reads_raw_snappy():
    raw = bytes(cramjam.snappy.compress_raw(BIG))
    assert codec_for("snappy").decompress(raw) == BIG


def test_snappy_reads_concatenated_xerial_streams():
    codec = codec_for("snappy")
    assert codec.decompress(codec.compress(b"abc") + codec.compress(b"def")) == b"abcdef"


@pytest.mark.parametrize("stream", [
    XERIAL_HEADER[:12],
    XERIAL_HEADER + b"\x00\x00",
    XERIAL_HEADER + b"\x00\x00\x00\x09abc",
    XERIAL_HEADER + b"\xff\xff\xff\xff",
    XERIAL_HEADER + b"\x00\x00\x00\x03\xff\xff\xff",
])
def test_snappy_bad_xerial_framing(stream):
    with pytest.raises(CorruptRecordError):
        codec_for("snappy").decompress(stream)


# --- lz4 ----------------------------------------------------------------------------------------

def xxh32(data: bytes, seed: int = 0) -> int:
    """XXH32 for inputs under 16 bytes (all an LZ4 frame descriptor needs), from the spec."""
    assert len(data) < 16
    p1, p2, p3, p4, p5 = 2654435761, 2246822519, 3266489917, 668265263, 374761393
    mask = 0xFFFFFFFF

    def rotl(x: int, r: int) -> int:
        return ((x << r) | (x >> (32 - r))) & mask

    h = (seed + p5 + len(data)) & mask
    pos = 0
    while pos + 4 <= len(data):
        h = (h + int.from_bytes(data[pos:pos + 4], "little") * p3) & mask
        h = (rotl(h, 17) * p4) & mask
        pos += 4
    for byte in data[pos:]:
        h = (h + byte * p5) & mask
        h = (rotl(h, 11) * p1) & mask
    h ^= h >> 15
    h = (h * p2) & mask
    h ^= h >> 13
    h = (h * p3) & mask
    return h ^ (h >> 16)


def test_xxh32_reference_vectors():
    assert xxh32(b"") == 0x02CC5D05
    assert xxh32(b"a") == 0x550D7456
    assert xxh32(b"abc") == 0x32D153FF


def java_lz4_accepts(frame: bytes) -> bytes:
    """Apply the checks of Kafka's Lz4BlockInputStream (clients/.../compress/) and return the
    block payloads: magic, FLG (reserved 0, independent blocks, version 1), BD (reserved 0,
    block size 4..7), descriptor checksum, then blocks no larger than the declared maximum."""
    assert int.from_bytes(frame[0:4], "little") == 0x184D2204, "NOT_SUPPORTED (magic)"
    flg, bd = frame[4], frame[5]
    assert flg & 0x03 == 0, "Reserved bits must be 0"
    assert (flg >> 5) & 1 == 1, "Dependent block stream is unsupported"
    assert (flg >> 6) & 3 == 1, "Version is unsupported"
    assert bd & 0x0F == 0 and bd >> 7 == 0, "BD reserved bits must be 0"
    assert 4 <= (bd >> 4) & 7 <= 7, "Block size value must be between 4 and 7"
    max_block = 1 << (2 * ((bd >> 4) & 7) + 8)
    descriptor_end = 6 + (8 if flg & 0x08 else 0)
    assert frame[descriptor_end] == (xxh32(frame[4:descriptor_end]) >> 8) & 0xFF, "DESCRIPTOR_HASH_MISMATCH"
    pos, blocks = descriptor_end + 1, []
    while True:
        size = int.from_bytes(frame[pos:pos + 4], "little")
        pos += 4
        if size == 0:
            break
        size &= 0x7FFFFFFF
        assert size <= max_block, "Block size exceeded max"
        blocks.append(frame[pos:pos + size])
        pos += size + (4 if flg & 0x10 else 0)
    pos += 4 if flg & 0x04 else 0
    assert pos == len(frame)
    return b"".join(blocks)


@pytest.mark.parametrize("level", [None, 1, 12, 17])
def test_lz4_frame_is_what_java_writes_and_reads(level):
    frame = codec_for("lz4").compress(BIG, level)
    # Lz4BlockOutputStream's header: FLG 0x60 (version 1, independent blocks, no checksums,
    # no content size), BD 0x40 (64 KiB blocks), header checksum 0x82.
    assert frame[:7] == bytes.fromhex("04224d18604082")
    java_lz4_accepts(frame)


def test_lz4_empty_frame_is_accepted_by_java_checks():
    frame = codec_for("lz4").compress(b"")
    assert java_lz4_accepts(frame) == b""


@pytest.mark.parametrize("options", [
    {},  # lz4.frame's defaults: linked blocks, content size
    {"block_linked": True, "content_checksum": True, "block_checksum": True},
    {"block_size": 7, "store_size": True},  # 4 MB blocks
    {"block_linked": False, "store_size": False, "compression_level": 9},
])
def test_lz4_decompresses_any_valid_frame(options):
    if "block_size" in options:
        options = {**options, "block_size": lz4_frame.BLOCKSIZE_MAX4MB}
    assert codec_for("lz4").decompress(lz4_frame.compress(BIG, **options)) == BIG


# --- zstd ---------------------------------------------------------------------------------------

def test_zstd_writes_the_content_size():
    frame = codec_for("zstd").compress(BIG)
    assert zstandard.get_frame_parameters(frame).content_size == len(BIG)


def test_zstd_reads_frames_without_content_size():
    frame = zstandard.ZstdCompressor(write_content_size=False).compress(BIG)
    assert zstandard.get_frame_parameters(frame).content_size == zstandard.CONTENTSIZE_UNKNOWN
    assert codec_for("zstd").decompress(frame) == BIG


def test_zstd_reads_streamed_and_concatenated_frames():
    streamed = zstandard.ZstdCompressor().compressobj()
    frame = streamed.compress(BIG) + streamed.flush()
    codec = codec_for("zstd")
    assert codec.decompress(frame + codec.compress(b"tail")) == BIG + b"tail"


# --- corrupt input ------------------------------------------------------------------------------

@pytest.mark.parametrize("ctype", COMPRESSED, ids=lambda t: t.java_name)
def test_truncated_or_garbage_input_is_corrupt_record_error(ctype):
    codec = codec_for(ctype)
    compressed = codec.compress(BIG)
    for bad in (b"", compressed[: len(compressed) // 2], b"\x00garbage" * 10):
        with pytest.raises(CorruptRecordError, match=ctype.java_name):
            codec.decompress(bad)


# --- missing libraries --------------------------------------------------------------------------

@pytest.mark.parametrize(("name", "module", "hint"), [
    ("zstd", "zstandard", "pip install 'spark-kafka-sink[zstd]'"),
    ("snappy", "cramjam", "pip install 'spark-kafka-sink[snappy]'"),
    ("lz4", "lz4.frame", "pip install lz4"),
])
def test_missing_library_names_the_extra(monkeypatch, name, module, hint):
    monkeypatch.setitem(sys.modules, module, None)  # makes `import module` raise ImportError
    codec = codec_for(name)  # looking a codec up never needs its library
    for call in (lambda: codec.compress(b"x"), lambda: codec.decompress(b"x"), codec.check_available,
                 lambda: RecordBatchBuilder(compression_type=name)):
        with pytest.raises(CodecUnavailableError) as info:
            call()
        assert hint in str(info.value)
