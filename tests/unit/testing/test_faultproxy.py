"""spark_kafka_sink.testing.FaultProxy against a tiny echo server on 127.0.0.1: forwarding and
every fault on demand, timed (stall/refuse for N seconds) and until undone."""

from __future__ import annotations

import os
import socket
import threading
import time

import pytest

from spark_kafka_sink.testing import DOWNSTREAM, FaultProxy, advertise_through

pytestmark = pytest.mark.timeout(60)

_IO_TIMEOUT_S = 5.0


class EchoServer:
    """Echoes every byte back; records how many bytes each connection received."""

    def __init__(self):
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(0.1)
        self.port = self._listener.getsockname()[1]
        self.received: list[int] = []  # per connection, in accept order
        self.ended: list[bool] = []
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._acceptor = threading.Thread(target=self._accept_loop, name="echo-accept")

    def __enter__(self) -> EchoServer:
        self._acceptor.start()
        return self

    def __exit__(self, *exc_info) -> None:
        self._stop.set()
        self._acceptor.join(_IO_TIMEOUT_S)
        for thread in self._threads:
            thread.join(_IO_TIMEOUT_S)
        self._listener.close()

    def _accept_loop(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            index = len(self.received)
            self.received.append(0)
            self.ended.append(False)
            thread = threading.Thread(target=self._echo, args=(conn, index), name=f"echo-{index}")
            self._threads.append(thread)
            thread.start()

    def _echo(self, conn: socket.socket, index: int) -> None:
        conn.settimeout(0.1)
        with conn:
            while not self._stop.is_set():
                try:
                    data = conn.recv(65536)
                except socket.timeout:
                    continue
                except OSError:
                    break
                if not data:
                    break
                self.received[index] += len(data)
                try:
                    conn.sendall(data)
                except OSError:
                    break
        self.ended[index] = True


def _connect(proxy: FaultProxy) -> socket.socket:
    return socket.create_connection(("127.0.0.1", proxy.port), timeout=_IO_TIMEOUT_S)


def _recv_exactly(sock: socket.socket, n: int) -> bytes:
    out = bytearray()
    while len(out) < n:
        chunk = sock.recv(n - len(out))
        if not chunk:
            raise EOFError(f"connection closed after {len(out)} of {n} bytes")
        out += chunk
    return bytes(out)


def _wait_for(check, what: str, timeout_s: float = _IO_TIMEOUT_S):
    deadline = time.monotonic() + timeout_s
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def _round_trip(sock: socket.socket, payload: bytes) -> bytes:
    sock.sendall(payload)
    return _recv_exactly(sock, len(payload))


@pytest.fixture
def echo():
    with EchoServer() as server:
        yield server


@pytest.fixture
def proxy(echo):
    with FaultProxy("127.0.0.1", echo.port) as p:
        yield p


def test_forwards_both_ways_and_counts(proxy, echo):
    payload = os.urandom(300_000)
    with _connect(proxy) as sock:
        assert _round_trip(sock, payload) == payload
    assert proxy.address == f"127.0.0.1:{proxy.port}" and proxy.port != echo.port
    assert proxy.connections_total == 1
    # the proxy thread counts right after its send(), so the client may be a moment ahead
    _wait_for(lambda: proxy.bytes_up == proxy.bytes_down == len(payload), "the counters")


def test_half_close_is_passed_on(proxy):
    with _connect(proxy) as sock:
        sock.sendall(b"last words")
        sock.shutdown(socket.SHUT_WR)
        assert _recv_exactly(sock, 10) == b"last words"
        assert sock.recv(10) == b""  # the echo server saw our FIN and closed
    _wait_for(lambda: proxy.active_connections == 0, "the link to close")


def test_cut_resets_current_connections_and_keeps_accepting(proxy):
    first, second = _connect(proxy), _connect(proxy)
    with first, second:
        assert _round_trip(first, b"a") == b"a" and _round_trip(second, b"b") == b"b"
        proxy.cut()
        for sock in (first, second):
            with pytest.raises(ConnectionResetError):
                sock.recv(1)
    assert proxy.active_connections == 0 and proxy.cuts == 1
    with _connect(proxy) as again:
        assert _round_trip(again, b"still here") == b"still here"


def test_cut_after_forwards_exactly_n_bytes_mid_stream_then_resets(proxy, echo):
    with _connect(proxy) as sock:
        assert _round_trip(sock, b"warm-up") == b"warm-up"
        proxy.cut_after(1000)
        sock.sendall(b"x" * 5000)  # one "request" the cut lands in the middle of
        with pytest.raises(ConnectionResetError):
            while sock.recv(65536):  # whatever was echoed before the cut, then the RST
                pass
    _wait_for(lambda: echo.ended[0], "the echo server to see the cut")
    assert echo.received[0] == len(b"warm-up") + 1000
    assert proxy.bytes_up == len(b"warm-up") + 1000 and proxy.cuts == 1
    with _connect(proxy) as again:  # one-shot: the next connection is not cut
        assert _round_trip(again, b"y" * 5000) == b"y" * 5000


def test_cut_after_downstream(proxy):
    with _connect(proxy) as sock:
        proxy.cut_after(10, direction=DOWNSTREAM)
        sock.sendall(b"0123456789abcdef")
        assert _recv_exactly(sock, 10) == b"0123456789"
        with pytest.raises(ConnectionResetError):
            sock.recv(16)
    with pytest.raises(ValueError, match="direction"):
        proxy.cut_after(1, direction="sideways")


def test_stall_holds_bytes_without_closing_and_resume_delivers_them(proxy):
    with _connect(proxy) as sock:
        assert _round_trip(sock, b"before") == b"before"
        proxy.stall()
        sock.sendall(b"held")
        sock.settimeout(0.3)
        with pytest.raises(socket.timeout):
            sock.recv(4)
        assert proxy.active_connections == 1 and proxy.bytes_up == len(b"before")
        late = _connect(proxy)  # still accepted while stalled, but silent
        with late:
            late.sendall(b"new")
            late.settimeout(0.2)
            with pytest.raises(socket.timeout):
                late.recv(3)
            proxy.resume()
            late.settimeout(_IO_TIMEOUT_S)
            assert _recv_exactly(late, 3) == b"new"
        sock.settimeout(_IO_TIMEOUT_S)
        assert _recv_exactly(sock, 4) == b"held"


def test_delay_slows_every_chunk_each_way(proxy):
    with _connect(proxy) as sock:
        proxy.delay(150)
        began = time.monotonic()
        assert _round_trip(sock, b"slow") == b"slow"
        assert time.monotonic() - began >= 0.29  # 150 ms up, 150 ms down
        proxy.delay(0)
        began = time.monotonic()
        assert _round_trip(sock, b"fast") == b"fast"
        assert time.monotonic() - began < 0.15
    with pytest.raises(ValueError, match="delay"):
        proxy.delay(-1)


def test_latency_is_the_old_name_of_delay(proxy):
    with _connect(proxy) as sock:
        proxy.latency(100)
        began = time.monotonic()
        assert _round_trip(sock, b"slow") == b"slow"
        assert time.monotonic() - began >= 0.19


def test_timed_stall_resumes_by_itself(proxy):
    with _connect(proxy) as sock:
        assert _round_trip(sock, b"before") == b"before"
        began = time.monotonic()
        proxy.stall(0.5)
        assert proxy.stalled
        sock.sendall(b"held")
        sock.settimeout(0.25)
        with pytest.raises(socket.timeout):
            sock.recv(4)
        sock.settimeout(_IO_TIMEOUT_S)
        assert _recv_exactly(sock, 4) == b"held"
        waited = time.monotonic() - began
        assert 0.45 <= waited < 3.0, waited
        assert not proxy.stalled


def test_resume_ends_a_timed_stall_early_and_a_new_stall_replaces_the_timer(proxy):
    with _connect(proxy) as sock:
        proxy.stall(30)
        proxy.resume()
        assert _round_trip(sock, b"at once") == b"at once"
        proxy.stall(0.2)
        proxy.stall()  # until resume(): the 0.2 s timer is gone
        sock.sendall(b"x")
        sock.settimeout(0.6)
        with pytest.raises(socket.timeout):
            sock.recv(1)
        proxy.resume()
        sock.settimeout(_IO_TIMEOUT_S)
        assert _recv_exactly(sock, 1) == b"x"
    with pytest.raises(ValueError, match="stall seconds"):
        proxy.stall(0)


def test_refuse_and_accept_new_connections_on_the_same_port(proxy):
    port = proxy.port
    with _connect(proxy) as existing:
        proxy.refuse()
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=_IO_TIMEOUT_S)
        assert _round_trip(existing, b"unaffected") == b"unaffected"
        proxy.accept()
        assert proxy.port == port
        with _connect(proxy) as again:
            assert _round_trip(again, b"back") == b"back"
    assert proxy.connections_total == 2


def test_timed_refuse_listens_again_by_itself_on_the_same_port(proxy):
    port = proxy.port
    proxy.refuse(0.5)
    assert proxy.refusing
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", port), timeout=_IO_TIMEOUT_S)
    _wait_for(lambda: not proxy.refusing, "the proxy to listen again")
    assert proxy.port == port
    with _connect(proxy) as again:
        assert _round_trip(again, b"back") == b"back"
    with pytest.raises(ValueError, match="refuse seconds"):
        proxy.refuse(-1)


def test_cut_resets_a_stalled_connection(proxy):
    with _connect(proxy) as sock:
        proxy.stall()
        sock.sendall(b"stuck")
        proxy.cut()
        with pytest.raises(ConnectionResetError):
            sock.recv(5)
    proxy.resume()
    with _connect(proxy) as again:
        assert _round_trip(again, b"ok") == b"ok"


def test_a_refusing_target_resets_the_client():
    with socket.create_server(("127.0.0.1", 0)) as placeholder:
        dead_port = placeholder.getsockname()[1]
    with FaultProxy("127.0.0.1", dead_port) as proxy:
        with pytest.raises((ConnectionResetError, EOFError)):  # the RST may beat connect() back
            with _connect(proxy) as sock:
                if not sock.recv(1):
                    raise EOFError
        assert proxy.connections_total == 1
        _wait_for(lambda: proxy.active_connections == 0, "the link to close")


def _open_fds() -> int:
    return len(os.listdir("/proc/self/fd"))


def test_close_joins_its_thread_and_closes_every_socket():
    threads_before, fds_before = threading.active_count(), _open_fds()
    with EchoServer() as echo:
        proxy = FaultProxy("127.0.0.1", echo.port).start()
        socks = [_connect(proxy) for _ in range(3)]
        for sock in socks:
            assert _round_trip(sock, b"hi") == b"hi"
        proxy.stall()  # closing works in every state
        proxy.close()
        proxy.close()  # idempotent
        for sock in socks:
            sock.close()
    assert not [t for t in threading.enumerate() if t.name.startswith("faultproxy")]
    assert threading.active_count() == threads_before
    assert _open_fds() == fds_before
    with pytest.raises(RuntimeError, match="not running"):
        proxy.cut()


def test_advertise_through_names_the_proxy_port(proxy):
    assert advertise_through(proxy) == {"advertised.listeners": f"PLAINTEXT://127.0.0.1:{proxy.port}"}
