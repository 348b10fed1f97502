"""A loopback TCP fault proxy for resilience tests: stalls, delays, cuts, refused connections.

    with FaultProxy("127.0.0.1", broker_port) as proxy:
        client connects to proxy.address ...
        proxy.stall(2.0)            # forward nothing for 2 s (stall() alone: until resume())
        proxy.delay(50)             # every chunk forwarded 50 ms late (0: off)
        proxy.cut()                 # RST every live connection; new ones are accepted
        proxy.cut_after(10_000)     # RST every connection once 10,000 more bytes went upstream
        proxy.refuse(3.0)           # connection refused for 3 s (refuse() alone: until accept())

It listens on 127.0.0.1:<free port> and forwards bytes both ways to one target, from a single
selector thread (plus a socketpair to wake it). Faults act on demand:

- ``cut()``: abort every current connection on both sides with an RST (``SO_LINGER`` 0); new
  connections are still accepted.
- ``cut_after(n, direction)``: forward exactly ``n`` more bytes in ``direction`` ("upstream" =
  client → target, "downstream" = target → client), then ``cut()``. One-shot. This is the
  "connection cut mid-request" case.
- ``stall(seconds=None)`` / ``resume()``: stop forwarding (and reading) in both directions without
  closing anything; new connections are accepted and connected upstream but stay silent too.
  With ``seconds`` the proxy resumes by itself after that long.
- ``delay(ms)``: each chunk read is forwarded ``ms`` later (0: none). ``latency`` is an alias.
- ``refuse(seconds=None)`` / ``accept()``: close / re-open the listening socket on the same port,
  so new connections get ECONNREFUSED; current connections are untouched. With ``seconds`` the
  proxy accepts again by itself after that long.
- Counters: ``connections_total`` (accepted), ``active_connections``, ``bytes_up``, ``bytes_down``
  (bytes written to the far side), ``cuts``; ``stalled`` and ``refusing`` tell the current state.

``close()`` closes every socket and joins the thread (bounded); nothing is left behind.

**Kafka needs the broker to advertise the proxy.** A client bootstrapped through the proxy reads
the broker's advertised listener from Metadata and connects there directly, bypassing the proxy
after the first request. The broker must therefore advertise the proxy's address:
``KafkaCluster(proxied=True)`` (``spark_kafka_sink.testing``) does that for every node. For one
embedded node by hand, choose the broker port first (``embedded.ports.free_ports``), start the
proxy in front of it, then ``EmbeddedKafka(1, ports=[broker_port],
extra_properties=advertise_through(proxy))``. The launcher's readiness probe talks to the
broker's port directly and only checks node ids, so it is not affected.
"""

from __future__ import annotations

import errno
import queue
import selectors
import socket
import struct
import threading
import time
from collections import deque
from collections.abc import Callable
from dataclasses import dataclass, field

HOST = "127.0.0.1"
UPSTREAM = "upstream"
DOWNSTREAM = "downstream"

_CHUNK = 64 * 1024
_MAX_BUFFERED = 1 << 20  # per direction: stop reading while this much is waiting to be written
_TICK_S = 0.2  # the selector never waits longer than this
_COMMAND_TIMEOUT_S = 5.0
_LINGER_RST = struct.pack("ii", 1, 0)


def advertise_through(proxy: FaultProxy) -> dict[str, str]:
    """``extra_properties`` for a single embedded node whose PLAINTEXT listener is behind ``proxy``."""
    return {"advertised.listeners": f"PLAINTEXT://{HOST}:{proxy.port}"}


def _abort(sock: socket.socket) -> None:
    """Close ``sock`` with an RST instead of a FIN."""
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RST)
    except OSError:
        pass
    sock.close()


@dataclass(eq=False)
class _Pipe:
    """One direction of one connection: bytes read from ``src`` waiting to be written to ``dst``."""

    direction: str
    src: socket.socket
    dst: socket.socket
    out: bytearray = field(default_factory=bytearray)
    delayed: deque = field(default_factory=deque)  # (due monotonic time, bytes)
    eof: bool = False  # src sent FIN
    done: bool = False  # FIN passed on to dst

    def pending(self) -> int:
        return len(self.out) + sum(len(chunk) for _, chunk in self.delayed)


@dataclass(eq=False)
class _Link:
    """A client connection and its upstream connection to the target."""

    client: socket.socket
    upstream: socket.socket
    up: _Pipe
    down: _Pipe
    connecting: bool = True

    def pipes(self) -> tuple[_Pipe, _Pipe]:
        return self.up, self.down


class FaultProxy:
    """A TCP proxy on 127.0.0.1 in front of ``target_host:target_port``; a context manager.

    ``target`` may be reassigned while the proxy runs (new connections go there); ``port`` picks
    the listening port (0: a free one).
    """

    def __init__(self, target_host: str, target_port: int, *, port: int = 0):
        self.target = (target_host, target_port)
        self._requested_port = port
        self.port: int | None = None
        self.connections_total = 0
        self.bytes_up = 0
        self.bytes_down = 0
        self.cuts = 0
        self._links: list[_Link] = []
        self._listener: socket.socket | None = None
        self._selector: selectors.BaseSelector | None = None
        self._wake_r: socket.socket | None = None
        self._wake_w: socket.socket | None = None
        self._commands: queue.Queue = queue.Queue()
        self._thread: threading.Thread | None = None
        self._stopping = False
        self._stalled = False
        self._stall_until: float | None = None  # monotonic time of an automatic resume()
        self._refuse_until: float | None = None  # monotonic time of an automatic accept()
        self._latency_s = 0.0
        self._cut_after: dict[str, int] = {}
        self._cut_due = False

    # --- lifecycle -------------------------------------------------------------------------

    @property
    def address(self) -> str:
        """``127.0.0.1:<port>``: what clients bootstrap from."""
        if self.port is None:
            raise RuntimeError("the proxy is not started")
        return f"{HOST}:{self.port}"

    @property
    def active_connections(self) -> int:
        return len(self._links)

    def __enter__(self) -> FaultProxy:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> FaultProxy:
        if self._thread is not None:
            raise RuntimeError("already started")
        self._selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._selector.register(self._wake_r, selectors.EVENT_READ, None)
        self._listen(self._requested_port)
        self._thread = threading.Thread(target=self._run, name=f"faultproxy-{self.port}", daemon=True)
        self._thread.start()
        return self

    def close(self, timeout_s: float = _COMMAND_TIMEOUT_S) -> None:
        """Close every socket and join the thread; idempotent."""
        thread, self._thread = self._thread, None
        if thread is None:
            return
        self._stopping = True
        self._wake()
        thread.join(timeout_s)
        if thread.is_alive():
            raise RuntimeError(f"fault proxy thread did not stop within {timeout_s} s")
        self._selector.close()
        for sock in (self._wake_r, self._wake_w):
            sock.close()

    # --- faults ----------------------------------------------------------------------------

    def cut(self) -> None:
        """Abort every current connection (RST both sides); keep accepting new ones."""
        self._call(self._cut_all)

    def cut_after(self, n_bytes: int, direction: str = UPSTREAM) -> None:
        """Forward exactly ``n_bytes`` more in ``direction`` over all connections, then ``cut()``."""
        if direction not in (UPSTREAM, DOWNSTREAM):
            raise ValueError(f"direction must be {UPSTREAM!r} or {DOWNSTREAM!r}, got {direction!r}")
        if n_bytes < 0:
            raise ValueError(f"n_bytes must be >= 0, got {n_bytes}")

        def arm() -> None:
            self._cut_after[direction] = n_bytes
            self._cut_due = self._cut_due or n_bytes == 0
        self._call(arm)

    def stall(self, seconds: float | None = None) -> None:
        """Stop forwarding in both directions without closing anything.

        ``seconds=None``: until :meth:`resume`; otherwise the proxy resumes by itself after that
        long (an earlier ``resume()`` or a new ``stall()`` replaces the timer).
        """
        until = self._deadline(seconds, "stall")

        def arm() -> None:
            self._stalled = True
            self._stall_until = until
        self._call(arm)

    def resume(self) -> None:
        """Forward again after :meth:`stall`."""
        def clear() -> None:
            self._stalled = False
            self._stall_until = None
        self._call(clear)

    def delay(self, ms: float) -> None:
        """Delay every chunk by ``ms`` milliseconds, both directions (0 turns it off)."""
        if ms < 0:
            raise ValueError(f"delay must be >= 0 ms, got {ms}")
        self._call(lambda: setattr(self, "_latency_s", ms / 1000.0))

    latency = delay  # the earlier name

    def refuse(self, seconds: float | None = None) -> None:
        """New connections are refused (the listening socket is closed); live ones stay.

        ``seconds=None``: until :meth:`accept`; otherwise the proxy listens again, on the same
        port, after that long.
        """
        until = self._deadline(seconds, "refuse")

        def arm() -> None:
            self._unlisten()
            self._refuse_until = until
        self._call(arm)

    def accept(self) -> None:
        """New connections are accepted again, on the same port."""
        self._call(self._relisten)

    @property
    def stalled(self) -> bool:
        return self._stalled

    @property
    def refusing(self) -> bool:
        return self._thread is not None and self._listener is None

    @staticmethod
    def _deadline(seconds: float | None, what: str) -> float | None:
        if seconds is None:
            return None
        if seconds <= 0:
            raise ValueError(f"{what} seconds must be > 0 (or None: until undone), got {seconds}")
        return time.monotonic() + seconds

    # --- commands run on the proxy thread ----------------------------------------------------

    def _call(self, fn: Callable[[], None]) -> None:
        if self._thread is None:
            raise RuntimeError("the proxy is not running")
        done = threading.Event()
        box: list[BaseException] = []
        self._commands.put((fn, done, box))
        self._wake()
        if not done.wait(_COMMAND_TIMEOUT_S):
            raise RuntimeError(f"fault proxy did not run the command within {_COMMAND_TIMEOUT_S} s")
        if box:
            raise box[0]

    def _wake(self) -> None:
        try:
            self._wake_w.send(b"x")
        except OSError:  # buffer full: it is awake anyway
            pass

    def _run_commands(self) -> None:
        while True:
            try:
                fn, done, box = self._commands.get_nowait()
            except queue.Empty:
                return
            try:
                fn()
            except BaseException as exc:  # noqa: BLE001 - handed back to the caller
                box.append(exc)
            done.set()

    # --- the loop --------------------------------------------------------------------------

    def _run(self) -> None:
        try:
            while not self._stopping:
                self._run_commands()
                now = time.monotonic()
                self._run_timers(now)
                self._release_delayed(now)
                self._maybe_cut()
                self._update_interest()
                for key, events in self._selector.select(self._timeout(now)):
                    self._dispatch(key, events)
        finally:
            self._run_commands()  # release waiting callers
            for link in list(self._links):
                self._close_link(link, rst=False)
            self._unlisten()

    def _run_timers(self, now: float) -> None:
        """The automatic ends of ``stall(seconds)`` and ``refuse(seconds)``."""
        if self._stall_until is not None and now >= self._stall_until:
            self._stalled = False
            self._stall_until = None
        if self._refuse_until is not None and now >= self._refuse_until:
            self._relisten()

    def _relisten(self) -> None:
        self._refuse_until = None
        if self._listener is None:
            self._listen(self.port)

    def _timeout(self, now: float) -> float:
        dues = [p.delayed[0][0] for link in self._links for p in link.pipes() if p.delayed]
        dues += [t for t in (self._stall_until, self._refuse_until) if t is not None]
        return max(0.0, min([now + _TICK_S, *dues]) - now)

    def _dispatch(self, key: selectors.SelectorKey, events: int) -> None:
        if key.fileobj is self._wake_r:
            try:
                self._wake_r.recv(4096)
            except OSError:
                pass
        elif key.fileobj is self._listener:
            self._accept_one()
        else:
            link: _Link = key.data
            if link not in self._links:
                return  # closed earlier in this round
            if link.connecting:
                self._finish_connect(link)
            else:
                self._on_ready(link, key.fileobj, events)

    # --- connections -----------------------------------------------------------------------

    def _listen(self, port: int) -> None:
        sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((HOST, port))
            sock.listen(64)
            sock.setblocking(False)
        except OSError:
            sock.close()
            raise
        self._listener = sock
        self.port = sock.getsockname()[1]
        self._selector.register(sock, selectors.EVENT_READ, None)

    def _unlisten(self) -> None:
        sock, self._listener = self._listener, None
        if sock is not None:
            self._selector.unregister(sock)
            sock.close()

    def _accept_one(self) -> None:
        try:
            client, _ = self._listener.accept()
        except (BlockingIOError, InterruptedError):
            return
        self.connections_total += 1
        client.setblocking(False)
        upstream = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        upstream.setblocking(False)
        for sock in (client, upstream):
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        code = upstream.connect_ex(self.target)
        link = _Link(client, upstream, _Pipe(UPSTREAM, client, upstream), _Pipe(DOWNSTREAM, upstream, client))
        self._links.append(link)
        if code not in (0, errno.EINPROGRESS):
            self._close_link(link, rst=True)
            return
        self._selector.register(upstream, selectors.EVENT_WRITE, link)

    def _finish_connect(self, link: _Link) -> None:
        if link.upstream.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR) != 0:
            self._close_link(link, rst=True)  # the target refused: refuse the client too
            return
        link.connecting = False
        self._selector.modify(link.upstream, selectors.EVENT_READ, link)
        self._selector.register(link.client, selectors.EVENT_READ, link)

    def _close_link(self, link: _Link, rst: bool) -> None:
        if link in self._links:
            self._links.remove(link)
        for sock in (link.client, link.upstream):
            try:
                self._selector.unregister(sock)
            except (KeyError, ValueError):
                pass
            if rst:
                _abort(sock)
            else:
                sock.close()

    def _cut_all(self) -> None:
        self.cuts += 1
        self._cut_after.clear()
        self._cut_due = False
        for link in list(self._links):
            self._close_link(link, rst=True)

    def _maybe_cut(self) -> None:
        """After ``cut_after`` ran out: cut once the last allowed bytes were written."""
        if self._cut_due and not any(p.pending() for link in self._links for p in link.pipes()
                                     if p.direction in self._cut_after):
            self._cut_all()

    # --- forwarding ------------------------------------------------------------------------

    def _update_interest(self) -> None:
        for link in self._links:
            if link.connecting:
                continue
            for sock in (link.client, link.upstream):
                reading = link.up if sock is link.client else link.down
                writing = link.down if sock is link.client else link.up
                events = 0
                if not self._stalled and not reading.eof and reading.pending() < _MAX_BUFFERED \
                        and not self._cut_due:
                    events |= selectors.EVENT_READ
                if not self._stalled and writing.out:
                    events |= selectors.EVENT_WRITE
                self._set_events(sock, events, link)

    def _set_events(self, sock: socket.socket, events: int, link: _Link) -> None:
        try:
            current = self._selector.get_key(sock).events
        except KeyError:
            current = 0
        if events == current:
            return
        if events == 0:
            self._selector.unregister(sock)
        elif current == 0:
            self._selector.register(sock, events, link)
        else:
            self._selector.modify(sock, events, link)

    def _on_ready(self, link: _Link, sock: socket.socket, events: int) -> None:
        reading = link.up if sock is link.client else link.down
        writing = link.down if sock is link.client else link.up
        try:
            if events & selectors.EVENT_READ:
                self._read(reading)
            if events & selectors.EVENT_WRITE:
                self._write(writing)
            for pipe in link.pipes():
                if pipe.eof and not pipe.done and not pipe.pending():
                    pipe.dst.shutdown(socket.SHUT_WR)
                    pipe.done = True
        except OSError:
            self._close_link(link, rst=True)  # a reset on one side resets the other
            return
        if link.up.done and link.down.done:
            self._close_link(link, rst=False)

    def _read(self, pipe: _Pipe) -> None:
        try:
            chunk = pipe.src.recv(_CHUNK)
        except (BlockingIOError, InterruptedError):
            return
        if not chunk:
            pipe.eof = True
            return
        budget = self._cut_after.get(pipe.direction)
        if budget is not None:
            chunk = chunk[:budget]
            self._cut_after[pipe.direction] = budget - len(chunk)
            if budget - len(chunk) == 0:
                self._cut_due = True
        if self._latency_s > 0:
            pipe.delayed.append((time.monotonic() + self._latency_s, chunk))
        else:
            pipe.out += chunk

    def _write(self, pipe: _Pipe) -> None:
        try:
            sent = pipe.dst.send(pipe.out)
        except (BlockingIOError, InterruptedError):
            return
        del pipe.out[:sent]
        if pipe.direction == UPSTREAM:
            self.bytes_up += sent
        else:
            self.bytes_down += sent

    def _release_delayed(self, now: float) -> None:
        for link in self._links:
            for pipe in link.pipes():
                while pipe.delayed and pipe.delayed[0][0] <= now:
                    pipe.out += pipe.delayed.popleft()[1]
