"""Selector on loopback sockets: connect, echo, partial writes, wakeup, idle expiry, no fd leak."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from spark_kafka_sink.client.selector import Selector
from spark_kafka_sink.errors import IllegalStateError, KafkaConnectionError

from ..fakes import FakeClock


def open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


@pytest.fixture
def server():
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(5)
    yield listener
    listener.close()


@pytest.fixture
def selector():
    sel = Selector()
    yield sel
    sel.close()


def poll_until(sel: Selector, check, *, timeout_s: float = 5.0):
    """Poll (10 ms at a time) until ``check(result)`` is true; returns the results seen."""
    seen = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        result = sel.poll(10)
        seen.append(result)
        if check(result):
            return seen
    raise AssertionError(f"not seen within {timeout_s} s: {seen[-3:]}")


def connect(sel: Selector, server, node_id: int = 1, **buffers) -> socket.socket:
    sel.connect(node_id, "127.0.0.1", server.getsockname()[1],
                send_buffer_bytes=buffers.get("send", -1),
                receive_buffer_bytes=buffers.get("receive", -1))
    poll_until(sel, lambda r: node_id in r.connected)
    peer, _ = server.accept()
    peer.settimeout(5)
    return peer


def start_reading(peer: socket.socket, size: int, into: bytearray) -> threading.Thread:
    """A thread reading ``size`` bytes (or to end of stream) from ``peer`` into ``into``."""
    def read_all():
        while len(into) < size:
            chunk = peer.recv(1 << 16)
            if not chunk:
                return
            into.extend(chunk)
    reader = threading.Thread(target=read_all, daemon=True)
    reader.start()
    return reader


def test_connect_send_and_receive(selector, server):
    peer = connect(selector, server)
    assert selector.is_connected(1)
    selector.send(1, b"ping")
    poll_until(selector, lambda r: r.completed_sends == (1,))
    assert peer.recv(100) == b"ping"
    peer.sendall(b"pong")
    results = poll_until(selector, lambda r: 1 in r.received)
    assert b"".join(results[-1].received[1]) == b"pong"
    sock = selector._channels[1].sock
    assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY)
    peer.close()


def test_socket_buffer_sizes_are_applied_when_positive(selector, server):
    peer = connect(selector, server, send=8192, receive=16384)
    sock = selector._channels[1].sock
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF) >= 8192   # Linux doubles it
    assert sock.getsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF) >= 16384
    peer.close()


def test_partial_writes_go_through_memoryviews_until_complete(selector, server):
    peer = connect(selector, server, send=16384)
    payload = os.urandom(1024 * 1024)
    selector.send(1, payload)
    first = selector.poll(0)
    assert first.completed_sends == ()                     # the peer is not reading yet
    pending = selector._channels[1].out[0]
    assert isinstance(pending, memoryview) and pending.obj is payload   # a view, not a copy
    assert 0 < len(pending) < len(payload)
    got = bytearray()
    reader = start_reading(peer, len(payload), got)
    poll_until(selector, lambda r: r.completed_sends == (1,), timeout_s=20)
    reader.join(10)
    assert bytes(got) == payload
    peer.close()


def test_sends_complete_once_each_in_order(selector, server):
    peer = connect(selector, server)
    for i in range(3):
        selector.send(1, bytes([i]) * 10)
    results = poll_until(selector, lambda r: r.completed_sends)
    assert sum((r.completed_sends for r in results), ()) == (1, 1, 1)
    peer.close()


def test_a_request_in_parts_is_written_in_order_uncopied_and_completes_once(selector, server):
    peer = connect(selector, server, send=16384)
    batch = bytearray(os.urandom(512 * 1024))
    parts = (b"head", memoryview(batch).toreadonly(), b"middle", bytes(100), b"tail")
    selector.send(1, parts)
    selector.send(1, b"next")
    first = selector.poll(0)
    assert first.completed_sends == ()                      # the peer is not reading yet
    assert any(view.obj is batch for view in selector._channels[1].out)   # not copied
    expected = b"".join(parts) + b"next"
    got = bytearray()
    reader = start_reading(peer, len(expected), got)
    results = poll_until(selector, lambda r: not selector._channels[1].out, timeout_s=20)
    reader.join(10)
    assert bytes(got) == expected
    assert sum((r.completed_sends for r in [first, *results]), ()) == (1, 1)   # one per request
    assert not selector._channels[1].ends
    peer.close()


def test_peer_close_delivers_the_data_then_the_disconnect(selector, server):
    peer = connect(selector, server)
    peer.sendall(b"last words")
    peer.close()
    results = poll_until(selector, lambda r: 1 in r.disconnected)
    data = b"".join(b"".join(r.received.get(1, [])) for r in results)
    assert data == b"last words"
    assert "closed" in results[-1].disconnected[1]
    assert not selector.is_connected(1) and selector.connection_ids() == ()


def test_refused_connection_is_reported_with_a_reason(selector):
    probe = socket.create_server(("127.0.0.1", 0))
    port = probe.getsockname()[1]
    probe.close()                                           # nothing listens there now
    selector.connect(5, "127.0.0.1", port, send_buffer_bytes=-1, receive_buffer_bytes=-1)
    results = poll_until(selector, lambda r: 5 in r.disconnected)
    assert "refused" in results[-1].disconnected[5].lower()


def test_send_on_an_unknown_connection_reports_it_disconnected(selector):
    selector.send(9, b"x")
    assert 9 in selector.poll(0).disconnected


def test_wakeup_from_another_thread_returns_poll_early(selector):
    timer = threading.Timer(0.05, selector.wakeup)
    started = time.monotonic()
    timer.start()
    result = selector.poll(10_000)
    assert time.monotonic() - started < 2
    assert result.received == {} and result.disconnected == {}
    for _ in range(10_000):                                  # a full wakeup pipe never blocks
        selector.wakeup()
    selector.poll(0)


def test_idle_connections_are_closed_and_reported():
    clock = FakeClock()
    listener = socket.create_server(("127.0.0.1", 0))
    sel = Selector(clock=clock, connections_max_idle_ms=1_000)
    try:
        peer = connect(sel, listener)
        clock.advance(1_000)
        assert 1 not in sel.poll(0).disconnected
        clock.advance(1)
        result = sel.poll(0)
        assert "idle for more than 1000 ms" in result.disconnected[1]
        peer.close()
    finally:
        sel.close()
        listener.close()


def test_close_one_connection_reports_nothing(selector, server):
    peer = connect(selector, server)
    selector.close(1)
    assert selector.poll(0).disconnected == {}
    assert peer.recv(10) == b""                             # the peer sees the close
    peer.close()


def test_close_releases_every_file_descriptor(server):
    before = open_fds()
    sel = Selector()
    peers = [connect(sel, server, node_id=n) for n in range(1, 4)]
    sel.connect(7, "127.0.0.1", server.getsockname()[1], send_buffer_bytes=-1,
                receive_buffer_bytes=-1)                    # one still connecting
    sel.send(1, b"queued")
    assert open_fds() > before
    sel.close()
    sel.close()
    for peer in peers:
        peer.close()
    assert open_fds() == before
    with pytest.raises(IllegalStateError):
        sel.poll(0)
    sel.wakeup()                                            # harmless after close


def test_connect_twice_to_the_same_node_is_refused(selector, server):
    peer = connect(selector, server)
    with pytest.raises(IllegalStateError, match="already has a connection"):
        selector.connect(1, "127.0.0.1", server.getsockname()[1], send_buffer_bytes=-1,
                         receive_buffer_bytes=-1)
    peer.close()


def test_each_attempt_takes_the_next_resolved_address(selector, server, monkeypatch):
    probe = socket.create_server(("127.0.0.1", 0))
    dead_port = probe.getsockname()[1]
    probe.close()
    live = ("127.0.0.1", server.getsockname()[1])
    entries = [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", dead_port)),
               (socket.AF_INET, socket.SOCK_STREAM, 6, "", live)]
    monkeypatch.setattr(socket, "getaddrinfo", lambda *args, **kw: list(entries))
    selector.connect(1, "broker", 9092, send_buffer_bytes=-1, receive_buffer_bytes=-1)
    poll_until(selector, lambda r: 1 in r.disconnected)      # the first address refuses
    selector.connect(1, "broker", 9092, send_buffer_bytes=-1, receive_buffer_bytes=-1)
    poll_until(selector, lambda r: 1 in r.connected)         # the second one answers
    server.accept()[0].close()


def test_a_name_that_does_not_resolve_fails_at_once(selector, monkeypatch):
    def fail(*args, **kw):
        raise socket.gaierror(socket.EAI_NONAME, "Name or service not known")
    monkeypatch.setattr(socket, "getaddrinfo", fail)
    with pytest.raises(KafkaConnectionError, match="node 4 at nowhere:9092 failed"):
        selector.connect(4, "nowhere", 9092, send_buffer_bytes=-1, receive_buffer_bytes=-1)
    assert selector.connection_ids() == ()


def test_wakeups_are_coalesced_until_the_pipe_is_drained(selector, monkeypatch):
    writes = []
    real_send = selector._wake_w.send
    monkeypatch.setattr(selector, "_wake_w", _Recorder(real_send, writes))
    selector.wakeup()
    selector.wakeup()                                     # a byte is already pending
    assert len(writes) == 1
    started = time.monotonic()
    selector.poll(10_000)                                 # returns at once and drains the pipe
    assert time.monotonic() - started < 2
    selector.wakeup()                                     # drained: the next wakeup writes again
    assert len(writes) == 2
    started = time.monotonic()
    selector.poll(10_000)
    assert time.monotonic() - started < 2


class _Recorder:
    def __init__(self, send, writes):
        self._send, self._writes = send, writes

    def send(self, data):
        self._writes.append(data)
        return self._send(data)

    def close(self):
        pass
