"""TLS: the SSLContext built from the properties, and the selector's TLS transport against a
Python TLS server on 127.0.0.1 (certificates generated per test module)."""

from __future__ import annotations

import os
import socket
import ssl
import threading
import time
from dataclasses import dataclass

import pytest

from spark_kafka_sink.client.selector import PlainTransport, Selector, transport_factory_for
from spark_kafka_sink.client.tls import TlsTransport, build_ssl_context
from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import ConfigError

from .tls_certs import KEY_PASSWORD, make_certs


@pytest.fixture(scope="module")
def certs(tmp_path_factory):
    return make_certs(tmp_path_factory.mktemp("tls"))


@pytest.fixture(scope="module")
def other_certs(tmp_path_factory):
    """A second CA, and a server certificate for a name that is not ours."""
    return make_certs(tmp_path_factory.mktemp("tls-other"), dns=("broker.example",), ips=(), prefix="o-")


def config(**props) -> ProducerConfig:
    return ProducerConfig({"bootstrap.servers": "127.0.0.1:1", "security.protocol": "SSL", **props})


# --- the context ----------------------------------------------------------------------------------

def test_context_trusts_the_ca_checks_host_names_and_needs_tls12(certs):
    context = build_ssl_context(config(**{"ssl.ca.location": str(certs.ca)}))
    assert context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED
    assert context.minimum_version is ssl.TLSVersion.TLSv1_2
    assert [c["subject"] for c in context.get_ca_certs()] == [((("commonName", "test CA"),),)]


@pytest.mark.parametrize("algorithm", ["", "none"])
def test_host_name_check_can_be_turned_off(certs, algorithm):
    context = build_ssl_context(config(**{"ssl.ca.location": str(certs.ca),
                                          "ssl.endpoint.identification.algorithm": algorithm}))
    assert not context.check_hostname and context.verify_mode is ssl.CERT_REQUIRED


def test_pem_truststore_and_inline_certificates(certs):
    by_store = build_ssl_context(config(**{"ssl.truststore.location": str(certs.ca),
                                           "ssl.truststore.type": "PEM"}))
    inline = build_ssl_context(config(**{"ssl.truststore.certificates": certs.ca.read_text(),
                                         "ssl.truststore.type": "PEM"}))
    assert by_store.get_ca_certs() == inline.get_ca_certs() and len(inline.get_ca_certs()) == 1


def test_client_certificate_with_an_encrypted_key(certs):
    build_ssl_context(config(**{"ssl.ca.location": str(certs.ca),
                                "ssl.certificate.location": str(certs.client_cert),
                                "ssl.key.location": str(certs.client_key),
                                "ssl.key.password": KEY_PASSWORD}))


def test_a_wrong_key_password_is_a_config_error_without_the_password(certs):
    with pytest.raises(ConfigError) as info:
        build_ssl_context(config(**{"ssl.certificate.location": str(certs.client_cert),
                                    "ssl.key.location": str(certs.client_key),
                                    "ssl.key.password": "Wr0ng-pass"}))
    assert str(info.value).startswith("ssl.certificate.location and ssl.key.location (")
    assert "Wr0ng-pass" not in str(info.value) and KEY_PASSWORD not in str(info.value)


def test_an_encrypted_key_without_its_password_is_a_config_error_not_a_prompt(certs):
    with pytest.raises(ConfigError, match=r"ssl.key.password if the key is encrypted"):
        build_ssl_context(config(**{"ssl.certificate.location": str(certs.client_cert),
                                    "ssl.key.location": str(certs.client_key)}))


def test_missing_and_non_pem_files_name_the_property(certs, tmp_path):
    with pytest.raises(ConfigError, match=r"^ssl.ca.location: file not found: .*nope.pem"):
        build_ssl_context(config(**{"ssl.ca.location": str(tmp_path / "nope.pem")}))
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate")
    with pytest.raises(ConfigError, match=r"^ssl.truststore.location \(.*junk.pem\) must be a PEM file"):
        build_ssl_context(config(**{"ssl.truststore.location": str(junk), "ssl.truststore.type": "PEM"}))


def test_transport_factory_follows_the_protocol(certs):
    plain = ProducerConfig({"bootstrap.servers": "127.0.0.1:1"})
    assert transport_factory_for(plain) is PlainTransport
    with socket.socket() as sock:
        made = transport_factory_for(config(**{"ssl.ca.location": str(certs.ca)}))(sock, "127.0.0.1")
        assert isinstance(made, TlsTransport)


# --- the transport over a real socket --------------------------------------------------------------

@dataclass
class TlsServer:
    """Accepts one TLS client at a time on 127.0.0.1 and echoes what it reads."""

    context: ssl.SSLContext
    listener: socket.socket
    errors: list
    peer_certs: list

    @property
    def port(self) -> int:
        return self.listener.getsockname()[1]


@pytest.fixture
def tls_server(request):
    def start(cert, key, *, client_ca=None):
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(cert, key)
        if client_ca is not None:
            context.verify_mode = ssl.CERT_REQUIRED
            context.load_verify_locations(client_ca)
        listener = socket.create_server(("127.0.0.1", 0))
        listener.settimeout(10)
        server = TlsServer(context, listener, [], [])
        thread = threading.Thread(target=_serve, args=(server,), daemon=True)
        thread.start()
        request.addfinalizer(lambda: (listener.close(), thread.join(5)))
        return server
    return start


def _serve(server: TlsServer) -> None:
    try:
        raw, _ = server.listener.accept()
    except OSError:
        return
    with raw:
        raw.settimeout(10)
        try:
            with server.context.wrap_socket(raw, server_side=True) as tls:
                server.peer_certs.append(tls.getpeercert())
                while data := tls.recv(65536):
                    tls.sendall(data)
        except (ssl.SSLError, OSError) as exc:
            server.errors.append(exc)


def connect_and_poll(context_config: ProducerConfig, port: int, host: str = "127.0.0.1",
                     *, until, deadline_s: float = 10.0):
    selector = Selector(transport_factory=transport_factory_for(context_config))
    selector.connect(1, host, port)
    results = []
    end = time.monotonic() + deadline_s
    while time.monotonic() < end and not until(results):
        results.append(selector.poll(100))
    return selector, results


def connected(results) -> bool:
    return any(r.connected or r.disconnected for r in results)


def test_handshake_then_a_large_echo_round_trip(certs, tls_server):
    server = tls_server(certs.server_cert, certs.server_key)
    selector, results = connect_and_poll(config(**{"ssl.ca.location": str(certs.ca)}), server.port,
                                         until=connected)
    try:
        assert results[-1].connected == (1,) and not results[-1].disconnected
        payload = os.urandom(3 * 1024 * 1024 + 17)     # many TLS records, partial socket writes
        selector.send(1, payload)
        selector.send(1, b"tail")
        received, sends = bytearray(), 0
        end = time.monotonic() + 20
        while len(received) < len(payload) + 4 and time.monotonic() < end:
            result = selector.poll(100)
            assert not result.disconnected
            sends += len(result.completed_sends)
            for chunk in result.received.get(1, []):
                received += chunk
        assert bytes(received) == payload + b"tail" and sends == 2
    finally:
        selector.close()


def test_many_small_tls_records_in_one_burst_are_all_delivered(certs):
    """The TLS layer may hold decrypted data the socket no longer signals: every read drains it."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(certs.server_cert, certs.server_key)
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    messages = [f"record-{i:04d};".encode() for i in range(300)]

    def burst():
        raw, _ = listener.accept()
        with context.wrap_socket(raw, server_side=True) as tls:
            tls.recv(1)                                   # the client is up
            for message in messages:                      # one TLS record each, back to back
                tls.send(message)
            tls.settimeout(10)
            tls.recv(1)                                   # hold the connection open until told
    thread = threading.Thread(target=burst, daemon=True)
    thread.start()
    selector, results = connect_and_poll(config(**{"ssl.ca.location": str(certs.ca)}),
                                         listener.getsockname()[1], until=connected)
    try:
        selector.send(1, b"go")
        received = bytearray()
        expected = b"".join(messages)
        end = time.monotonic() + 10
        while len(received) < len(expected) and time.monotonic() < end:
            for chunk in selector.poll(200).received.get(1, []):
                received += chunk
        assert bytes(received) == expected
        selector.send(1, b"x")
        selector.poll(100)
    finally:
        selector.close()
        thread.join(5)
        listener.close()


def test_client_certificate_is_presented_when_the_server_requires_one(certs, tls_server):
    server = tls_server(certs.server_cert, certs.server_key, client_ca=certs.ca)
    props = {"ssl.ca.location": str(certs.ca), "ssl.certificate.location": str(certs.client_cert),
             "ssl.key.location": str(certs.client_key), "ssl.key.password": KEY_PASSWORD}
    selector, results = connect_and_poll(config(**props), server.port, until=connected)
    try:
        assert results[-1].connected == (1,)
        selector.send(1, b"ping")                 # TLS 1.3: the server checks the cert after the handshake
        end = time.monotonic() + 10
        echoed = b""
        while echoed != b"ping" and time.monotonic() < end:
            echoed += b"".join(selector.poll(100).received.get(1, []))
        assert echoed == b"ping"
        assert dict(x[0] for x in server.peer_certs[0]["subject"])["commonName"] == "client"
    finally:
        selector.close()


def test_a_server_refusing_our_missing_certificate_is_a_handshake_failure(certs, tls_server):
    server = tls_server(certs.server_cert, certs.server_key, client_ca=certs.ca)
    selector, results = connect_and_poll(config(**{"ssl.ca.location": str(certs.ca)}), server.port,
                                         until=connected)
    try:
        selector.send(1, b"\x00\x00\x00\x00")      # TLS 1.3: the refusal arrives on the first read
        end = time.monotonic() + 10
        while 1 not in results[-1].disconnected and time.monotonic() < end:
            results.append(selector.poll(100))
        reason = results[-1].handshake_failures[1]
        assert reason.startswith("TLS handshake with 127.0.0.1 failed: ")
        assert reason.endswith("the broker refused the client certificate, or its absence "
                               "(ssl.certificate.location, ssl.key.location)")
    finally:
        selector.close()


def test_an_untrusted_certificate_fails_the_handshake_with_the_reason(certs, other_certs, tls_server):
    server = tls_server(certs.server_cert, certs.server_key)
    selector, results = connect_and_poll(config(**{"ssl.ca.location": str(other_certs.ca)}), server.port,
                                         until=connected)
    try:
        result = results[-1]
        assert not result.connected and 1 in result.disconnected
        assert "certificate verify failed" in result.handshake_failures[1]
        assert result.handshake_failures[1] == result.disconnected[1]
    finally:
        selector.close()


def test_a_host_name_mismatch_fails_unless_the_check_is_off(other_certs, tls_server):
    server = tls_server(other_certs.server_cert, other_certs.server_key)    # for broker.example only
    selector, results = connect_and_poll(config(**{"ssl.ca.location": str(other_certs.ca)}), server.port,
                                         until=connected)
    selector.close()
    assert "certificate verify failed: IP address mismatch" in results[-1].handshake_failures[1]

    server = tls_server(other_certs.server_cert, other_certs.server_key)
    off = config(**{"ssl.ca.location": str(other_certs.ca), "ssl.endpoint.identification.algorithm": ""})
    selector, results = connect_and_poll(off, server.port, until=connected)
    selector.close()
    assert results[-1].connected == (1,)


def test_a_plaintext_peer_fails_the_handshake_clearly(certs):
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)

    def answer_plaintext():
        conn, _ = listener.accept()
        with conn:
            conn.recv(4096)
            conn.sendall(b"\x00\x00\x00\x04junk")       # a Kafka-ish frame, not TLS
            time.sleep(0.2)
    thread = threading.Thread(target=answer_plaintext, daemon=True)
    thread.start()
    try:
        selector, results = connect_and_poll(config(**{"ssl.ca.location": str(certs.ca)}),
                                             listener.getsockname()[1], until=connected)
        selector.close()
        reason = results[-1].handshake_failures[1]
        assert reason.startswith("TLS handshake with 127.0.0.1 failed:")
    finally:
        thread.join(5)
        listener.close()
