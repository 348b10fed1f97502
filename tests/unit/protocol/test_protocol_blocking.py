"""BlockingConnection against a tiny fake broker on 127.0.0.1 built on ServerFraming."""

from __future__ import annotations

import socket
import threading

import pytest

from spark_kafka_sink.client.blocking import BlockingConnection
from spark_kafka_sink.errors import (
    KafkaConnectionError, ProtocolError, UnsupportedVersionError, UnknownServerErrorError,
)
from spark_kafka_sink.protocol import API_VERSIONS, METADATA, PRODUCE, ServerFraming, VersionRange

RANGES = {18: (0, 4), 3: (0, 13), 0: (3, 12)}
METADATA_REPLY = {"brokers": [{"node_id": 1, "host": "127.0.0.1", "port": 9092}],
                  "cluster_id": "fake", "controller_id": 1, "topics": []}


def api_versions_reply(ranges=RANGES, error_code=0):
    return {"error_code": error_code, "api_keys": [
        {"api_key": key, "min_version": low, "max_version": high}
        for key, (low, high) in ranges.items()]}


class HangUp(bytes):
    """Bytes the fake broker sends before hanging up."""


class FakeBroker:
    """Accepts one connection and answers each request with ``handler(request, server)``:
    bytes to send, None to stay silent, "close" to hang up, or HangUp(bytes) to send and hang up.
    """

    def __init__(self, handler):
        self.handler = handler
        self.requests = []
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(5)
        self.port = self._listener.getsockname()[1]
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        try:
            conn, _ = self._listener.accept()
        except OSError:
            return
        server = ServerFraming()
        with conn:
            conn.settimeout(5)
            while True:
                try:
                    data = conn.recv(65536)
                except OSError:
                    return
                server.receive_data(data)
                if not data:
                    return
                while (request := server.next_request()) is not None:
                    self.requests.append(request)
                    reply = self.handler(request, server)
                    if reply == "close":
                        return
                    if reply is not None:
                        conn.sendall(reply)
                    if isinstance(reply, HangUp):
                        return

    def close(self):
        self._listener.close()
        self._thread.join(timeout=5)
        assert not self._thread.is_alive()


@pytest.fixture
def broker_factory():
    brokers = []

    def start(handler):
        broker = FakeBroker(handler)
        brokers.append(broker)
        return broker

    yield start
    for broker in brokers:
        broker.close()


def normal(request, server):
    if request.api is API_VERSIONS:
        return server.respond(request, api_versions_reply())
    if request.api is METADATA:
        return server.respond(request, METADATA_REPLY)
    return None


def test_negotiates_then_requests(broker_factory):
    broker = broker_factory(normal)
    with BlockingConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        assert conn.broker_versions[3] == VersionRange(0, 13)
        assert conn.version_for(METADATA) == 13 and conn.version_for(PRODUCE) == 12
        conn.send_oneway(PRODUCE, {"acks": 0, "timeout_ms": 100, "topic_data": []})
        resp = conn.request(METADATA, {"topics": None})
        assert resp.cluster_id == "fake" and resp.brokers[0].port == 9092
        assert conn.request(METADATA, {"topics": []}, version=9).controller_id == 1
    first = broker.requests[0]
    assert (first.api, first.version) == (API_VERSIONS, 4)
    assert first.body.client_software_name == "spark-kafka-sink"
    assert [(r.api.name, r.version) for r in broker.requests[1:]] == [
        ("Produce", 12), ("Metadata", 13), ("Metadata", 9)]


def _old_broker(max_api_versions, advertise=True):
    def handler(request, server):
        if request.api is API_VERSIONS and request.version > max_api_versions:
            ranges = {18: (0, max_api_versions)} if advertise else {}
            return server.respond(request, api_versions_reply(ranges, 35), version=0)
        return normal(request, server)
    return handler


def test_retries_api_versions_at_the_version_the_broker_names(broker_factory):
    broker = broker_factory(_old_broker(2))
    with BlockingConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        assert conn.version_for(METADATA) == 13
    assert [r.version for r in broker.requests] == [4, 2]


def test_retries_api_versions_at_v0_without_a_hint(broker_factory):
    broker = broker_factory(_old_broker(2, advertise=False))
    with BlockingConnection("127.0.0.1", broker.port, timeout_s=5):
        pass
    assert [r.version for r in broker.requests] == [4, 0]


def test_api_versions_error_is_raised(broker_factory):
    broker = broker_factory(lambda req, srv: srv.respond(req, api_versions_reply({}, -1)))
    with pytest.raises(UnknownServerErrorError, match="ApiVersions from 127.0.0.1"):
        BlockingConnection("127.0.0.1", broker.port, timeout_s=5)


def test_unsupported_api_is_reported(broker_factory):
    broker = broker_factory(lambda req, srv: srv.respond(req, api_versions_reply({18: (0, 4)})))
    with BlockingConnection("127.0.0.1", broker.port, timeout_s=5) as conn:
        with pytest.raises(UnsupportedVersionError, match="does not support Metadata"):
            conn.request(METADATA, {})


def test_connection_refused_names_the_address():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]
    with pytest.raises(KafkaConnectionError, match=f"connect 127.0.0.1:{port} failed"):
        BlockingConnection("127.0.0.1", port, timeout_s=2)


def test_silent_broker_times_out(broker_factory):
    broker = broker_factory(lambda req, srv: None)
    with pytest.raises(KafkaConnectionError, match=r"127\.0\.0\.1:\d+ timed out after 0.2 s"):
        BlockingConnection("127.0.0.1", broker.port, timeout_s=0.2)


def test_broker_hanging_up_is_a_connection_error(broker_factory):
    broker = broker_factory(lambda req, srv: "close")
    with pytest.raises(KafkaConnectionError, match="closed the connection while 1 request"):
        BlockingConnection("127.0.0.1", broker.port, timeout_s=5)


def test_broker_hanging_up_mid_frame_is_a_protocol_error(broker_factory):
    def handler(request, server):
        return HangUp(server.respond(request, api_versions_reply())[:-2])

    broker = broker_factory(handler)
    with pytest.raises(ProtocolError, match=r"127\.0\.0\.1:\d+: connection closed mid-frame"):
        BlockingConnection("127.0.0.1", broker.port, timeout_s=5)


def test_closed_connection_refuses_requests(broker_factory):
    broker = broker_factory(normal)
    conn = BlockingConnection("127.0.0.1", broker.port, timeout_s=5)
    conn.close()
    conn.close()
    with pytest.raises(KafkaConnectionError, match="is closed"):
        conn.request(METADATA, {})
