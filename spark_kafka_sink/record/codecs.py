"""The compression codecs of Kafka record batches, as a registry keyed by codec id.

Attributes bits 0-2 of a batch name its codec. Each codec compresses the whole records section
of a batch as one stream, in the framing the Java client writes and reads:

  id 0  none    the records as they are.
  id 1  gzip    one RFC 1952 member with java.util.zip.GZIPOutputStream's header (mtime 0,
                OS 255). Levels 1..9, default -1 (zlib's 6). Library: zlib.
  id 2  snappy  xerial framing, as SnappyOutputStream writes it:
                  b"\x82SNAPPY\x00" + int32 version 1 + int32 compatible version 1,
                  then [int32 length][raw snappy block] per 32 KiB of input.
                Reading also accepts raw (unframed) snappy and concatenated xerial streams.
                No levels. Library: cramjam (extra ``snappy``).
  id 3  lz4     one LZ4 frame as Lz4BlockOutputStream writes it: FLG 0x60 (version 1,
                independent blocks, no block or content checksum, no content size), BD 0x40
                (64 KiB blocks), descriptor checksum byte (xxh32(FLG, BD) >> 8) & 0xFF = 0x82.
                Lz4BlockInputStream rejects linked blocks; reading here accepts any frame.
                Levels 1..17, default 9; like Java, the default uses lz4's fast compressor and
                other levels the HC compressor (lz4.frame runs 1 and 2 as fast too, and caps
                HC at 12 as lz4 itself does). Library: lz4.
  id 4  zstd    one zstd frame, with its content size. Reading accepts frames with or without
                it (zstd-jni streams frames without) and concatenated frames.
                Levels -131072..22, default 3. Library: zstandard (extra ``zstd``).

At default levels, none, gzip, snappy and lz4 output is byte-identical to kafka-clients 4.1.

``codec_for(x)`` takes a :class:`CompressionType`, an id or a Java name and returns a :class:`Codec`.
An unknown id raises :class:`UnknownCodecError`; a codec whose library is not installed raises
:class:`CodecUnavailableError` naming the pip extra, on first use. ``decompress`` raises
:class:`CorruptRecordError` on bad input, whatever the library raised.
"""

from __future__ import annotations

import enum
import gzip
import importlib
import zlib
from dataclasses import dataclass
from types import ModuleType
from typing import Callable, Union

from ..errors import CodecUnavailableError, CorruptRecordError, UnknownCodecError

Buffer = Union[bytes, bytearray, memoryview]


class CompressionType(enum.IntEnum):
    """Codec ids as stored in attributes bits 0-2 (Java ``CompressionType``)."""

    NONE = 0
    GZIP = 1
    SNAPPY = 2
    LZ4 = 3
    ZSTD = 4

    @property
    def java_name(self) -> str:
        """The name used by the ``compression.type`` property: ``none``, ``gzip``, ..."""
        return self.name.lower()

    @classmethod
    def from_name(cls, name: str) -> "CompressionType":
        """The type for a Java ``compression.type`` value (case-insensitive)."""
        try:
            return cls[name.strip().upper()]
        except KeyError:
            valid = ", ".join(t.java_name for t in cls)
            raise ValueError(f"unknown compression type {name!r}; expected one of: {valid}") from None

    @classmethod
    def from_id(cls, codec_id: int) -> "CompressionType":
        """The type for a codec id; :class:`UnknownCodecError` names an id that does not exist."""
        try:
            return cls(codec_id)
        except ValueError:
            raise UnknownCodecError(f"unknown compression codec id {codec_id}") from None


@dataclass(frozen=True, slots=True)
class Codec:
    """One compression codec: its id, level range, and compress/decompress functions.

    ``min_level``/``max_level``/``default_level`` are ``None`` for codecs without levels. The
    default level is always accepted, even outside the range (gzip's -1, as in Java).
    """

    type: CompressionType
    default_level: int | None
    min_level: int | None
    max_level: int | None
    _compress: Callable[[Buffer, int | None], bytes]
    _decompress: Callable[[Buffer], bytes]
    _library: Callable[[], ModuleType] | None = None

    @property
    def name(self) -> str:
        """The Java name: ``none``, ``gzip``, ``snappy``, ``lz4`` or ``zstd``."""
        return self.type.java_name

    def validate_level(self, level: int | None) -> int | None:
        """``level`` checked against the codec's range; ``None`` becomes the default level."""
        if level is None or level == self.default_level:
            return self.default_level
        if self.min_level is None or self.max_level is None:
            raise ValueError(f"compression type {self.name} takes no level, got {level}")
        if isinstance(level, bool) or not isinstance(level, int):
            raise TypeError(f"compression level must be an int, got {type(level).__name__}")
        if not self.min_level <= level <= self.max_level:
            raise ValueError(
                f"compression level {level} is out of range for {self.name}: "
                f"{self.min_level}..{self.max_level} (default {self.default_level})"
            )
        return level

    def check_available(self) -> None:
        """Raise :class:`CodecUnavailableError` (naming the pip extra) if the library is missing."""
        if self._library is not None:
            self._library()

    def compress(self, data: Buffer, level: int | None = None) -> bytes:
        """``data`` compressed as one stream at ``level`` (``None``: the default level)."""
        return self._compress(data, self.validate_level(level))

    def decompress(self, data: Buffer) -> bytes:
        """The bytes compressed in ``data``; :class:`CorruptRecordError` if it is not valid."""
        if self.type is not CompressionType.NONE and len(data) == 0:
            raise CorruptRecordError(f"empty {self.name} stream")
        return self._decompress(data)


def _require(module: str, codec: str, pip_hint: str) -> ModuleType:
    """Import ``module`` or raise :class:`CodecUnavailableError` saying what to install."""
    try:
        return importlib.import_module(module)
    except ImportError:
        raise CodecUnavailableError(
            f"{codec} compression needs the {module.split('.')[0]!r} package, which is not "
            f"installed: {pip_hint}"
        ) from None


def _corrupt(codec: str, error: Exception) -> CorruptRecordError:
    """A :class:`CorruptRecordError` wrapping a library's decompression error."""
    return CorruptRecordError(f"invalid {codec} data: {type(error).__name__}: {error}")


# --- none ---------------------------------------------------------------------------------------

def _copy(data: Buffer, level: int | None = None) -> bytes:
    return bytes(data)


# --- gzip ---------------------------------------------------------------------------------------

# The 10-byte member header java.util.zip.GZIPOutputStream writes: magic 1f 8b, method 8
# (deflate), no flags, mtime 0, no extra flags, OS 255 (unknown).
GZIP_HEADER = b"\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff"


def _gzip_compress(data: Buffer, level: int | None) -> bytes:
    """One gzip member laid out as Java writes it: header, raw deflate, CRC-32 and size (LE)."""
    deflater = zlib.compressobj(level, zlib.DEFLATED, -zlib.MAX_WBITS)
    body = deflater.compress(data) + deflater.flush()
    size = memoryview(data).nbytes & 0xFFFFFFFF  # ISIZE: input size modulo 2**32
    return GZIP_HEADER + body + zlib.crc32(data).to_bytes(4, "little") + size.to_bytes(4, "little")


def _gzip_decompress(data: Buffer) -> bytes:
    try:
        return gzip.decompress(data)
    except (OSError, EOFError, zlib.error) as error:
        raise _corrupt("gzip", error) from None


# --- snappy (xerial framing) --------------------------------------------------------------------

XERIAL_MAGIC = b"\x82SNAPPY\x00"
XERIAL_HEADER = XERIAL_MAGIC + (1).to_bytes(4, "big") + (1).to_bytes(4, "big")
XERIAL_BLOCK_SIZE = 32 * 1024  # SnappyOutputStream's default block size


def _cramjam() -> ModuleType:
    return _require("cramjam", "snappy", "pip install 'spark-kafka-sink[snappy]'")


def _snappy_compress(data: Buffer, level: int | None) -> bytes:
    snappy = _cramjam().snappy
    view = memoryview(data).cast("B")
    out = bytearray(XERIAL_HEADER)
    for start in range(0, len(view), XERIAL_BLOCK_SIZE):
        block = bytes(snappy.compress_raw(view[start:start + XERIAL_BLOCK_SIZE]))
        out += len(block).to_bytes(4, "big")
        out += block
    return bytes(out)


def _snappy_decompress(data: Buffer) -> bytes:
    cramjam = _cramjam()
    view = memoryview(data).cast("B")
    try:
        if view[:len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            return _xerial_blocks(cramjam.snappy, view)
        return bytes(cramjam.snappy.decompress_raw(view))
    except cramjam.DecompressionError as error:
        raise _corrupt("snappy", error) from None


def _xerial_blocks(snappy: ModuleType, view: memoryview) -> bytes:
    """Decode xerial-framed snappy; a repeated header (concatenated streams) is skipped."""
    out = bytearray()
    pos = 0
    while pos < len(view):
        if view[pos:pos + len(XERIAL_MAGIC)] == XERIAL_MAGIC:
            if len(view) - pos < len(XERIAL_HEADER):
                raise CorruptRecordError("truncated xerial snappy header")
            pos += len(XERIAL_HEADER)
            continue
        if len(view) - pos < 4:
            raise CorruptRecordError("truncated xerial snappy block length")
        length = int.from_bytes(view[pos:pos + 4], "big", signed=True)
        pos += 4
        if length < 0 or length > len(view) - pos:
            raise CorruptRecordError(f"xerial snappy block of {length} bytes overruns the stream")
        out += snappy.decompress_raw(view[pos:pos + length])
        pos += length
    return bytes(out)


# --- lz4 (frame) --------------------------------------------------------------------------------

LZ4_DEFAULT_LEVEL = 9


def _lz4_frame() -> ModuleType:
    return _require("lz4.frame", "lz4", "pip install lz4 (a core dependency of spark-kafka-sink)")


def _lz4_compress(data: Buffer, level: int | None) -> bytes:
    frame = _lz4_frame()
    # Java uses lz4's fast compressor at the default level and the HC compressor otherwise.
    # lz4.frame levels 0-2 are the fast compressor, 3+ are HC (clamped by the library).
    py_level = 0 if level == LZ4_DEFAULT_LEVEL else level
    return frame.compress(
        data,
        compression_level=py_level,
        block_size=frame.BLOCKSIZE_MAX64KB,
        block_linked=False,
        content_checksum=False,
        block_checksum=False,
        store_size=False,
    )


def _lz4_decompress(data: Buffer) -> bytes:
    frame = _lz4_frame()
    try:
        return frame.decompress(data)
    except (RuntimeError, ValueError) as error:
        raise _corrupt("lz4", error) from None


# --- zstd ---------------------------------------------------------------------------------------

def _zstd() -> ModuleType:
    return _require("zstandard", "zstd", "pip install 'spark-kafka-sink[zstd]'")


def _zstd_compress(data: Buffer, level: int | None) -> bytes:
    zstd = _zstd()
    return zstd.ZstdCompressor(level=level, write_content_size=True).compress(data)


def _zstd_decompress(data: Buffer) -> bytes:
    """Decode one or more concatenated frames, each with or without a content size."""
    zstd = _zstd()
    dctx = zstd.ZstdDecompressor()
    out = bytearray()
    rest = bytes(data)
    try:
        while rest:
            frame = dctx.decompressobj()
            out += frame.decompress(rest)
            if not frame.eof:
                raise CorruptRecordError("truncated zstd frame")
            rest = frame.unused_data
    except zstd.ZstdError as error:
        raise _corrupt("zstd", error) from None
    return bytes(out)


# --- the registry -------------------------------------------------------------------------------

ZSTD_MIN_LEVEL = -131072  # zstd's ZSTD_minCLevel(), Java ZstdCompression.MIN_LEVEL

_CODECS: dict[CompressionType, Codec] = {
    codec.type: codec
    for codec in (
        Codec(CompressionType.NONE, None, None, None, _copy, _copy),
        Codec(CompressionType.GZIP, -1, 1, 9, _gzip_compress, _gzip_decompress),
        Codec(CompressionType.SNAPPY, None, None, None, _snappy_compress, _snappy_decompress, _cramjam),
        Codec(CompressionType.LZ4, LZ4_DEFAULT_LEVEL, 1, 17, _lz4_compress, _lz4_decompress, _lz4_frame),
        Codec(CompressionType.ZSTD, 3, ZSTD_MIN_LEVEL, 22, _zstd_compress, _zstd_decompress, _zstd),
    )
}


def codec_for(compression: CompressionType | int | str) -> Codec:
    """The codec for a :class:`CompressionType`, a codec id, or a Java name such as ``"lz4"``."""
    if isinstance(compression, str):
        return _CODECS[CompressionType.from_name(compression)]
    if isinstance(compression, bool) or not isinstance(compression, int):
        raise TypeError(f"compression must be a CompressionType, id or name, got {compression!r}")
    return _CODECS[CompressionType.from_id(compression)]
