"""Selector: non-blocking sockets to many brokers, driven by one thread (the only socket code).

The network client talks to it through a small seam (:class:`Selectable`)::

    connect(node_id, host, port, *, send_buffer_bytes, receive_buffer_bytes)
    send(node_id, data)       queue one request's bytes; written during later polls
    poll(timeout_ms)          -> PollResult(connected, disconnected, completed_sends, received)
    wakeup()                  make a blocked poll return now (safe from any thread)
    close(node_id) / close()  one connection / everything

so tests replace it with a scripted fake. ``received`` carries raw bytes per node: splitting them
into responses is the connection's job (``client.connection``).

Writes go through memoryviews: a partial write keeps a view of the rest, never a copy. A node is
reported in ``completed_sends`` once per ``send`` whose last byte went out, in order. A peer
close, a reset or a failed connect reports the node in ``disconnected`` with a reason, after any
bytes that arrived before it. ``close(node_id)`` reports nothing (the caller knows). Connections
with no traffic for ``connections.max.idle.ms`` are closed and reported as disconnected.

Each socket is wrapped in a transport made by ``transport_factory(sock, host)``: plain TCP
(:class:`PlainTransport`), or TLS (``client.tls.TlsTransport``). Once the TCP connect completes the
transport's handshake runs on socket events (``wanted_events``), and "connected" is reported only
when it is done. A failed TLS handshake reports the node in ``disconnected`` and also in
``handshake_failures`` (the network client treats it as an authentication failure). A transport may
hold encrypted bytes the socket did not take yet: the selector keeps waiting for "writable" until
``flush`` wrote them, so a send counts as completed once the transport took all its bytes.
"""

from __future__ import annotations

import errno
import logging
import os
import selectors
import socket
from collections import deque
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping, Protocol

from ..clock import SYSTEM_CLOCK, Clock
from ..errors import IllegalStateError, KafkaConnectionError
from .tls import TLS_PROTOCOLS, TlsHandshakeError, TlsTransport, build_ssl_context

log = logging.getLogger(__name__)

Buffer = bytes | bytearray | memoryview
"""What a request's parts may be."""

DEFAULT_RECEIVE_CHUNK = 256 * 1024
_READS_PER_EVENT = 8
_CONNECT_IN_PROGRESS = {0, errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN}
_MAX_WAIT_MS = 2**31 - 1
_WAKE_READ = 4096


@dataclass(frozen=True)
class PollResult:
    """What one poll saw. ``disconnected`` maps node -> reason; ``received`` node -> chunks;
    ``handshake_failures`` node -> reason for the disconnected nodes whose TLS handshake failed."""

    connected: tuple[int, ...] = ()
    disconnected: Mapping[int, str] = field(default_factory=dict)
    completed_sends: tuple[int, ...] = ()
    received: Mapping[int, list[bytes]] = field(default_factory=dict)
    handshake_failures: Mapping[int, str] = field(default_factory=dict)


class Selectable(Protocol):
    """The I/O seam between the network client and the sockets (see module doc)."""

    def connect(self, node_id: int, host: str, port: int, *, send_buffer_bytes: int,
                receive_buffer_bytes: int) -> None: ...

    def send(self, node_id: int, data: bytes | tuple[Buffer, ...]) -> None: ...

    def poll(self, timeout_ms: int) -> PollResult: ...

    def wakeup(self) -> None: ...

    def close(self, node_id: int | None = None) -> None: ...


class Transport(Protocol):
    """How the selector moves bytes over one connected socket (see the module docstring)."""

    sock: socket.socket

    def handshake(self) -> bool: ...            # advance the handshake; True once it is done

    def wanted_events(self) -> int: ...         # what the handshake waits for

    def send(self, data: memoryview) -> int: ...   # bytes taken; BlockingIOError: none now

    def recv(self, size: int) -> bytes: ...     # b"": end of stream; BlockingIOError: none now

    def flush(self) -> bool: ...                # write held bytes; True when none are left

    def wants_write(self) -> bool: ...          # bytes are held for the socket


class PlainTransport:
    """Plain TCP: no handshake, nothing held back."""

    __slots__ = ("sock",)

    def __init__(self, sock: socket.socket, host: str | None = None):
        self.sock = sock

    def handshake(self) -> bool:
        return True

    def wanted_events(self) -> int:
        return selectors.EVENT_READ

    def send(self, data: memoryview) -> int:
        return self.sock.send(data)

    def recv(self, size: int) -> bytes:
        return self.sock.recv(size)

    def flush(self) -> bool:
        return True

    def wants_write(self) -> bool:
        return False


class _Channel:
    """One socket and its queue of unwritten sends (private to the selector)."""

    __slots__ = ("node_id", "sock", "transport", "connecting", "tcp_up", "out", "ends", "last_active_ms",
                 "events")

    def __init__(self, node_id: int, sock: socket.socket, transport: Transport, now_ms: int):
        self.node_id = node_id
        self.sock = sock
        self.transport = transport
        self.connecting = True       # until the TCP connect and the transport's handshake are done
        self.tcp_up = False
        self.out: deque[memoryview] = deque()   # the buffers to write, in order
        self.ends: deque[int] = deque()         # per request queued: its buffers still in ``out``
        self.last_active_ms = now_ms
        self.events = selectors.EVENT_WRITE


class _PollBuilder:
    """Collects one poll's events."""

    def __init__(self) -> None:
        self.connected: list[int] = []
        self.disconnected: dict[int, str] = {}
        self.completed_sends: list[int] = []
        self.received: dict[int, list[bytes]] = {}
        self.handshake_failures: dict[int, str] = {}

    def result(self) -> PollResult:
        return PollResult(tuple(self.connected), self.disconnected, tuple(self.completed_sends),
                          self.received, self.handshake_failures)


class Selector:
    """Non-blocking sockets over :class:`selectors.DefaultSelector`; see module doc."""

    def __init__(self, *, clock: Clock = SYSTEM_CLOCK, connections_max_idle_ms: int = -1,
                 receive_chunk_bytes: int = DEFAULT_RECEIVE_CHUNK,
                 transport_factory: Callable[[socket.socket, str], Transport] = PlainTransport):
        self._clock = clock
        self._idle_ms = connections_max_idle_ms
        self._chunk = receive_chunk_bytes
        self._transport_factory = transport_factory
        self._selector = selectors.DefaultSelector()
        self._channels: dict[int, _Channel] = {}
        self._failed_sends: dict[int, str] = {}
        self._address_turns: dict[tuple[str, int], int] = {}
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._wakeup_pending = False  # a wakeup byte is in the pipe, not yet drained
        self._closed = False

    # --- the seam -------------------------------------------------------------------------------

    def connect(self, node_id: int, host: str, port: int, *, send_buffer_bytes: int = -1,
                receive_buffer_bytes: int = -1) -> None:
        """Start a non-blocking connect; KafkaConnectionError when it fails at once."""
        self._ensure_open()
        if node_id in self._channels:
            raise IllegalStateError(f"node {node_id} already has a connection")
        try:
            address = self._next_address(host, port)
            sock = _start_connect(address, send_buffer_bytes, receive_buffer_bytes)
        except OSError as exc:
            raise KafkaConnectionError(
                f"connecting to node {node_id} at {host}:{port} failed: {exc}") from exc
        try:
            transport = self._transport_factory(sock, host)
        except BaseException:
            sock.close()
            raise
        channel = _Channel(node_id, sock, transport, self._clock.monotonic_ms())
        self._channels[node_id] = channel
        self._selector.register(sock, channel.events, channel)   # writable once connected

    def send(self, node_id: int, data: bytes | tuple[Buffer, ...]) -> None:
        """Queue ``data`` (one whole request: a buffer, or a tuple of buffers written in order,
        which are not copied) for ``node_id``."""
        self._ensure_open()
        channel = self._channels.get(node_id)
        if channel is None:
            self._failed_sends[node_id] = "send on a closed connection"
            return
        parts = data if isinstance(data, tuple) else (data,)
        channel.out.extend(memoryview(part) for part in parts)
        channel.ends.append(len(parts))
        if not channel.connecting:
            self._want(channel, selectors.EVENT_READ | selectors.EVENT_WRITE)

    def poll(self, timeout_ms: int) -> PollResult:
        """Wait up to ``timeout_ms`` for I/O (0: do not block), then do all the I/O possible."""
        self._ensure_open()
        out = _PollBuilder()
        out.disconnected.update(self._failed_sends)
        self._failed_sends.clear()
        wait_s = 0 if out.disconnected else min(max(timeout_ms, 0), _MAX_WAIT_MS) / 1000
        events = self._selector.select(wait_s)
        now_ms = self._clock.monotonic_ms()
        for key, mask in events:
            channel = key.data
            if channel is None:
                self._drain_wakeup()
            elif self._owns(channel):
                self._handle_events(channel, mask, now_ms, out)
        self._expire_idle(now_ms, out)
        return out.result()

    def wakeup(self) -> None:
        """Make the current or next ``poll`` return at once. Safe from any thread.

        Coalesced: while a byte written by an earlier call is still in the pipe, the next
        ``poll`` returns at once anyway, so no second byte (and no syscall) is needed. The flag
        is cleared only after the pipe is drained (:meth:`_drain_wakeup`), so a wakeup is never
        lost: one that saw the flag set happened before that drain, hence before the poll
        returned to its caller."""
        if self._wakeup_pending:
            return
        self._wakeup_pending = True
        try:
            self._wake_w.send(b"\x00")
        except OSError:        # the pipe is full (a wakeup is pending anyway) or closed
            pass

    def close(self, node_id: int | None = None) -> None:
        """Close one connection (not reported as disconnected), or everything when None."""
        if node_id is not None:
            channel = self._channels.pop(node_id, None)
            if channel is not None:
                self._discard(channel)
            return
        if self._closed:
            return
        self._closed = True
        for channel in list(self._channels.values()):
            self._discard(channel)
        self._channels.clear()
        self._selector.close()
        self._wake_r.close()
        self._wake_w.close()

    # --- extras for the client and tests (not part of the seam) -----------------------------------

    def is_connected(self, node_id: int) -> bool:
        channel = self._channels.get(node_id)
        return channel is not None and not channel.connecting

    def connection_ids(self) -> tuple[int, ...]:
        return tuple(self._channels)

    # --- internals ------------------------------------------------------------------------------

    def _handle_events(self, channel: _Channel, mask: int, now_ms: int, out: _PollBuilder) -> None:
        try:
            if channel.connecting:
                if channel.tcp_up or mask & selectors.EVENT_WRITE:
                    self._finish_connect(channel, out.connected)
                    channel.last_active_ms = now_ms
                return
            if mask & selectors.EVENT_READ:
                self._read(channel, now_ms, out)
            if mask & selectors.EVENT_WRITE and self._owns(channel):
                self._write(channel, now_ms, out)
            elif self._owns(channel) and channel.transport.wants_write():
                self._want(channel, channel.events | selectors.EVENT_WRITE)
        except TlsHandshakeError as exc:
            self._drop(channel, _describe(exc), out)
            out.handshake_failures[channel.node_id] = _describe(exc)
        except OSError as exc:
            self._drop(channel, _describe(exc), out)

    def _finish_connect(self, channel: _Channel, connected: list[int]) -> None:
        if not channel.tcp_up:
            err = channel.sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if err:
                raise OSError(err, f"connect failed: {os.strerror(err)}")
            channel.tcp_up = True
        if not channel.transport.handshake():
            self._want(channel, channel.transport.wanted_events())
            return
        channel.connecting = False
        connected.append(channel.node_id)
        events = selectors.EVENT_READ | (selectors.EVENT_WRITE if channel.out
                                         or channel.transport.wants_write() else 0)
        self._want(channel, events)

    def _read(self, channel: _Channel, now_ms: int, out: _PollBuilder) -> None:
        for _ in range(_READS_PER_EVENT):
            try:
                data = channel.transport.recv(self._chunk)
            except (BlockingIOError, InterruptedError):
                return
            if not data:
                self._drop(channel, "the broker closed the connection", out)
                return
            channel.last_active_ms = now_ms
            out.received.setdefault(channel.node_id, []).append(data)
            if len(data) < self._chunk:
                return

    def _write(self, channel: _Channel, now_ms: int, out: _PollBuilder) -> None:
        if not channel.transport.flush():
            return
        while channel.out:
            view = channel.out[0]
            try:
                written = channel.transport.send(view)
            except (BlockingIOError, InterruptedError):
                return
            channel.last_active_ms = now_ms
            if written < view.nbytes:
                channel.out[0] = view[written:]
                return
            channel.out.popleft()
            channel.ends[0] -= 1
            if not channel.ends[0]:  # the request's last buffer
                channel.ends.popleft()
                out.completed_sends.append(channel.node_id)
        held = channel.transport.wants_write()
        self._want(channel, selectors.EVENT_READ | (selectors.EVENT_WRITE if held else 0))

    def _expire_idle(self, now_ms: int, out: _PollBuilder) -> None:
        if self._idle_ms < 0:
            return
        for channel in list(self._channels.values()):
            if not channel.connecting and now_ms - channel.last_active_ms > self._idle_ms:
                self._drop(channel, f"idle for more than {self._idle_ms} ms", out)

    def _drop(self, channel: _Channel, reason: str, out: _PollBuilder) -> None:
        log.debug("connection to node %s closed: %s", channel.node_id, reason)
        self._channels.pop(channel.node_id, None)
        self._discard(channel)
        out.disconnected[channel.node_id] = reason

    def _discard(self, channel: _Channel) -> None:
        try:
            self._selector.unregister(channel.sock)
        except (KeyError, ValueError):
            pass
        channel.sock.close()
        channel.out.clear()
        channel.ends.clear()

    def _want(self, channel: _Channel, events: int) -> None:
        if channel.events != events:
            channel.events = events
            self._selector.modify(channel.sock, events, channel)

    def _drain_wakeup(self) -> None:
        try:  # a short read took all there was: no second recv (and no BlockingIOError) needed
            while len(self._wake_r.recv(_WAKE_READ)) == _WAKE_READ:
                pass
        except (BlockingIOError, InterruptedError):
            pass
        self._wakeup_pending = False  # after the drain: see wakeup

    def _next_address(self, host: str, port: int) -> tuple:
        """Resolve ``host`` and take its addresses in turn, one per connection attempt, so a
        name with an unreachable address (say ::1 for a broker on IPv4 only) still connects."""
        addresses = list(dict.fromkeys(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)))
        turn = self._address_turns.get((host, port), 0)
        self._address_turns[(host, port)] = turn + 1
        return addresses[turn % len(addresses)]

    def _owns(self, channel: _Channel) -> bool:
        """Whether ``channel`` is still open (a read in this poll may have dropped it)."""
        return self._channels.get(channel.node_id) is channel

    def _ensure_open(self) -> None:
        if self._closed:
            raise IllegalStateError("the selector is closed")


def transport_factory_for(config: Any) -> Callable[[socket.socket, str], Transport]:
    """The transport for ``config.security_protocol``: TLS for SSL and SASL_SSL (its context
    built now, so a bad certificate file fails here), plain TCP otherwise."""
    if getattr(config, "security_protocol", "PLAINTEXT") in TLS_PROTOCOLS:
        return TlsTransport.factory(build_ssl_context(config))
    return PlainTransport


def _start_connect(resolved: tuple, send_buffer_bytes: int,
                   receive_buffer_bytes: int) -> socket.socket:
    family, kind, proto, _, address = resolved
    sock = socket.socket(family, kind, proto)
    try:
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        if send_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, send_buffer_bytes)
        if receive_buffer_bytes > 0:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, receive_buffer_bytes)
        rc = sock.connect_ex(address)
        if rc not in _CONNECT_IN_PROGRESS:
            raise OSError(rc, os.strerror(rc))
    except BaseException:
        sock.close()
        raise
    return sock


def _describe(exc: OSError) -> str:
    return exc.strerror or str(exc) or type(exc).__name__
