"""Splitting a byte stream into size-delimited Kafka frames.

    frame => size INT32 (big-endian; counts the bytes after itself), then size bytes
             (a request or response header followed by the body)

A FrameBuffer takes bytes as they arrive and hands back whole frames. It rejects a size over the
maximum (or negative) as soon as the 4 size bytes arrive, before buffering the body, and treats
end of stream in the middle of a frame as an error.
"""

from __future__ import annotations

from ..errors import FrameTooLargeError, ProtocolError
from .primitives import INT32

DEFAULT_MAX_FRAME_BYTES = 100 * 1024 * 1024
_COMPACT_AFTER = 64 * 1024


class FrameBuffer:
    """Buffers stream bytes; ``next_frame()`` returns complete frames without their size prefix."""

    def __init__(self, max_frame_bytes: int = DEFAULT_MAX_FRAME_BYTES):
        self._max = max_frame_bytes
        self._buf = bytearray()
        self._start = 0          # bytes before _start are already handed out
        self._eof = False

    @property
    def eof(self) -> bool:
        """True once ``feed(b"")`` signalled the end of the stream."""
        return self._eof

    @property
    def buffered(self) -> int:
        """Bytes received but not yet returned as frames."""
        return len(self._buf) - self._start

    def feed(self, data: bytes | bytearray | memoryview) -> None:
        """Add bytes from the stream; ``b""`` means end of stream."""
        if self._eof:
            raise ProtocolError("data received after the end of the stream")
        if not data:
            self._eof = True
            self._check_eof()
            return
        self._buf += data
        self._check_head()

    def next_frame(self) -> bytes | None:
        """The next complete frame (without its size prefix), or None if none is complete."""
        size = self._head_size()
        start = self._start
        if size is None or len(self._buf) - start - 4 < size:
            if self._eof:
                self._check_eof()
            return None
        frame = bytes(self._buf[start + 4:start + 4 + size])
        self._start = start + 4 + size
        self._compact()
        self._check_head()
        return frame

    def _head_size(self) -> int | None:
        if len(self._buf) - self._start < 4:
            return None
        return INT32.unpack_from(self._buf, self._start)[0]

    def _check_head(self) -> None:
        size = self._head_size()
        if size is not None and not 0 <= size <= self._max:
            raise FrameTooLargeError(
                f"frame size {size} bytes is outside the allowed 0..{self._max} bytes "
                f"(max_frame_bytes={self._max})")

    def _check_eof(self) -> None:
        have = self.buffered
        if have == 0:
            return
        size = self._head_size()
        if size is None:
            raise ProtocolError(f"connection closed mid-frame: got {have} of 4 size bytes")
        if have - 4 < size:
            raise ProtocolError(
                f"connection closed mid-frame: got {have - 4} of {size} bytes")

    def _compact(self) -> None:
        if self._start == len(self._buf):
            self._buf.clear()
            self._start = 0
        elif self._start > _COMPACT_AFTER and self._start * 2 > len(self._buf):
            del self._buf[:self._start]
            self._start = 0
