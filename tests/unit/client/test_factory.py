"""The client factory (``client.factory.build_client``): each setting of a producer configuration
reaches the part that uses it: the selector's idle timeout (over a loopback socket), the
metadata's topic expiry and refresh age, the network client's settings and client id, and the
observers."""

from __future__ import annotations

import socket

from spark_kafka_sink.client.factory import ClientObservers, build_client
from spark_kafka_sink.client.network_client import NetworkSettings
from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.protocol import METADATA

from ..fakes import FakeClock
from .fake_selector import FakeBroker, FakeSelector, metadata_body

BROKERS = [(1, "b1", 9092)]


def config(**properties) -> ProducerConfig:
    return ProducerConfig({"bootstrap.servers": "b1:9092", **properties})


def metadata_response(topics: dict[str, int]):
    data = METADATA.encode_response(12, metadata_body(BROKERS, topics))
    return METADATA.decode_response(12, data)


def test_the_network_client_gets_the_configs_settings_and_client_id():
    cfg = config(**{"request.timeout.ms": 7_000, "reconnect.backoff.ms": 77,
                    "connections.max.idle.ms": 1_234, "max.in.flight.requests.per.connection": 3})
    stack = build_client(cfg, clock=FakeClock(), default_client_id="fallback",
                         selector=FakeSelector())
    try:
        assert stack.settings == NetworkSettings.from_config(cfg, client_id="fallback")
        assert (stack.settings.request_timeout_ms, stack.settings.reconnect_backoff_ms,
                stack.settings.connections_max_idle_ms) == (7_000, 77, 1_234)
    finally:
        stack.close()
    named = build_client(config(**{"client.id": "mine"}), clock=FakeClock(),
                         default_client_id="fallback", selector=FakeSelector())
    named.close()
    assert named.settings.client_id == "mine"


def test_the_metadata_forgets_topics_unused_for_metadata_max_idle_ms():
    cfg = config(**{"metadata.max.idle.ms": 5_000, "metadata.max.age.ms": 60_000})
    stack = build_client(cfg, clock=FakeClock(), default_client_id="c", selector=FakeSelector())
    metadata = stack.metadata
    try:
        metadata.add_topic("t", 0)
        metadata.update(metadata_response({"t": 1}), 100)
        assert metadata.time_to_next_update(100) == 60_000          # metadata.max.age.ms
        metadata.update(metadata_response({"t": 1}), 4_999)
        assert metadata.topics == ("t",)
        metadata.update(metadata_response({"t": 1}), 5_000)          # unused for 5 s
        assert metadata.topics == ()
    finally:
        stack.close()


def test_the_selector_it_builds_closes_connections_idle_for_connections_max_idle_ms():
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    clock = FakeClock()
    stack = build_client(ProducerConfig({"bootstrap.servers": f"127.0.0.1:{port}",
                                         "connections.max.idle.ms": 1_000}),
                         clock=clock, default_client_id="c")
    client = stack.client
    try:
        node = next(iter(stack.metadata.snapshot.nodes))             # the bootstrap address
        client.ready(node, clock.monotonic_ms())
        for _ in range(5):                       # connected, ApiVersions written (never answered)
            client.poll(10, clock.monotonic_ms())
        assert client.in_flight_request_count(node) == 1 and not client.connection_failed(node)
        clock.advance(1_001)                                         # nothing read or written
        client.poll(0, clock.monotonic_ms())
        assert client.connection_failed(node)
    finally:
        stack.close()
        listener.close()


def test_observers_hear_every_throttle_time():
    heard = []
    selector = FakeSelector()
    selector.add_broker("b1", 9092, FakeBroker(
        1, metadata=lambda request: {**metadata_body(BROKERS, {}), "throttle_time_ms": 25}))
    clock = FakeClock()
    observers = ClientObservers(throttle=lambda api, ms, now: heard.append((api.name, ms)))
    stack = build_client(config(), clock=clock, default_client_id="c", selector=selector,
                         observers=observers)
    try:
        for _ in range(20):
            stack.client.poll(0, clock.monotonic_ms())
            if ("Metadata", 25) in heard:
                break
        assert heard == [("ApiVersions", 0), ("Metadata", 25)]
    finally:
        stack.close()
