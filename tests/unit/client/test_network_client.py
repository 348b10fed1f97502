"""NetworkClient over a FakeSelector and in-memory brokers (ServerFraming): no sockets, no sleep."""

from __future__ import annotations

import logging
import random

import pytest

from spark_kafka_sink.client.connection_states import ConnectionState
from spark_kafka_sink.client.metadata import Metadata
from spark_kafka_sink.client.network_client import NetworkClient, NetworkSettings
from spark_kafka_sink.client.requests import ClientRequest
from spark_kafka_sink.errors import IllegalStateError, MetadataTimeoutError, UnsupportedVersionError
from spark_kafka_sink.protocol import API_VERSIONS, METADATA, PRODUCE, ServerFraming

from ..fakes import FakeClock
from .fake_selector import FakeBroker, FakeSelector, metadata_body, our_ranges

BROKERS = [(1, "b1", 9092), (2, "b2", 9092), (3, "b3", 9092)]
TOPICS = {"t": 3}


class NoJitter(random.Random):
    def uniform(self, a, b):
        return (a + b) / 2


def produce_body(acks: int = -1) -> dict:
    return {"acks": acks, "timeout_ms": 30_000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": None}]}]}


def produce_answer(request) -> dict:
    return {"responses": [{"name": "t", "partition_responses": [
        {"index": 0, "error_code": 0, "base_offset": 42}]}]}


class Harness:
    """A client wired to brokers b1..b3 (node ids 1..3) that all serve the same Metadata."""

    def __init__(self, *, ranges: dict[int, dict] | None = None, brokers=BROKERS,
                 topics=TOPICS, metadata_max_age_ms: int = 300_000, clock: FakeClock | None = None,
                 **settings):
        self.clock = clock or FakeClock()
        self.sel = FakeSelector()
        self.topics = dict(topics)
        self.brokers = {}
        for node_id, host, port in brokers:
            self.brokers[node_id] = self.sel.add_broker(host, port, FakeBroker(
                node_id, ranges=(ranges or {}).get(node_id),
                metadata=lambda req, b=brokers: metadata_body(b, self.topics),
                handlers={PRODUCE.api_key: produce_answer}))
        self.metadata = Metadata([("b1", 9092)], metadata_max_age_ms=metadata_max_age_ms,
                                 rng=NoJitter())
        for topic in topics:
            self.metadata.add_topic(topic, self.clock.monotonic_ms())
        defaults = dict(request_timeout_ms=30_000, reconnect_backoff_ms=50,
                        reconnect_backoff_max_ms=1000)
        self.client = NetworkClient(selector=self.sel, metadata=self.metadata, clock=self.clock,
                                    settings=NetworkSettings(**{**defaults, **settings}),
                                    rng=NoJitter(0))

    @property
    def now(self) -> int:
        return self.clock.monotonic_ms()

    def poll(self, timeout_ms: int = 0):
        return self.client.poll(timeout_ms, self.now)

    def poll_until(self, check, max_polls: int = 20):
        responses = []
        for _ in range(max_polls):
            if check():
                return responses
            responses += self.poll()
        raise AssertionError(f"condition not met after {max_polls} polls")

    def bootstrap(self):
        self.poll_until(lambda: self.metadata.update_version >= 1)

    def connect(self, node_id: int):
        self.poll_until(lambda: self.client.ready(node_id, self.now))

    def request(self, node_id: int, **kw) -> ClientRequest:
        kw.setdefault("body", produce_body())
        return ClientRequest(node_id, PRODUCE, kw.pop("body"), created_ms=self.now, **kw)

    def state(self, node_id: int) -> ConnectionState:
        return self.client._states.state(node_id)


def test_bootstrap_handshake_then_metadata_through_poll():
    h = Harness()
    h.bootstrap()
    b1 = h.brokers[1]
    assert [r.api for r in b1.requests] == [API_VERSIONS, METADATA]
    assert b1.requests[0].version == API_VERSIONS.max_version
    meta = b1.requests[1]
    assert meta.version == METADATA.max_version
    assert [t.name for t in meta.body.topics] == ["t"]
    assert meta.body.allow_auto_topic_creation is False
    snap = h.metadata.snapshot
    assert sorted(snap.nodes) == [1, 2, 3] and snap.partition_count("t") == 3
    assert h.sel.connect_calls[0] == (-1, "b1", 9092, 131_072, 32_768)


def test_ready_connects_checks_api_versions_then_is_ready():
    h = Harness()
    h.bootstrap()
    assert h.client.ready(2, h.now) is False
    assert h.state(2) is ConnectionState.CONNECTING
    h.poll()                                           # connected: ApiVersions queued
    assert h.state(2) is ConnectionState.CHECKING_API_VERSIONS
    assert not h.client.is_ready(2, h.now)
    h.poll()                                           # answered
    assert h.state(2) is ConnectionState.READY and h.client.ready(2, h.now)
    assert [r.api for r in h.brokers[2].requests] == [API_VERSIONS]


def test_versions_are_negotiated_per_connection():
    ranges = {1: {**our_ranges(), PRODUCE.api_key: (3, 9)},
              2: {**our_ranges(), PRODUCE.api_key: (3, 20)},
              3: {k: v for k, v in our_ranges().items() if k != PRODUCE.api_key}}
    h = Harness(ranges=ranges)
    h.bootstrap()
    for node in (1, 2, 3):
        h.connect(node)
    h.client.send(h.request(1), h.now)
    h.client.send(h.request(2), h.now)
    with pytest.raises(UnsupportedVersionError, match="node 3: the broker does not support Prod"):
        h.client.send(h.request(3), h.now)
    h.poll()
    assert h.brokers[1].requests_for(PRODUCE)[0].version == 9
    assert h.brokers[2].requests_for(PRODUCE)[0].version == PRODUCE.max_version


def test_an_explicit_version_must_be_supported_by_both_sides():
    h = Harness(ranges={1: {**our_ranges(), PRODUCE.api_key: (3, 9)}})
    h.bootstrap()
    h.connect(1)
    with pytest.raises(UnsupportedVersionError, match="Produce v11 is not supported by both"):
        h.client.send(h.request(1, version=11), h.now)
    h.client.send(h.request(1, version=7), h.now)
    h.poll()
    assert h.brokers[1].requests_for(PRODUCE)[0].version == 7


def test_max_version_caps_the_negotiated_version_and_a_body_may_depend_on_it():
    h = Harness(ranges={1: {**our_ranges(), PRODUCE.api_key: (3, 12)}})
    h.bootstrap()
    h.connect(1)
    seen = []

    def body(version):
        seen.append(version)
        return produce_body()

    h.client.send(h.request(1, body=body, max_version=11), h.now)
    h.poll()
    h.client.send(h.request(1, body=body), h.now)
    h.poll()
    assert seen == [11, 12]
    assert [r.version for r in h.brokers[1].requests_for(PRODUCE)] == [11, 12]


def test_finalized_features_come_from_the_api_versions_answer():
    h = Harness()
    assert h.client.finalized_features.level("transaction.version") == 0
    h.brokers[1].features = {"transaction.version": 2, "metadata.version": 27}
    h.bootstrap()
    features = h.client.finalized_features
    assert features.epoch == 1 and features.level("transaction.version") == 2
    assert features.level("no.such.feature") == 0


def test_ready_connects_to_a_node_the_metadata_does_not_know_yet():
    from spark_kafka_sink.structs import Node

    h = Harness(brokers=[(1, "b1", 9092)])
    h.sel.add_broker("b9", 9092, FakeBroker(9))
    h.bootstrap()
    assert h.client.ready(9, h.now) is False and h.state(9) is ConnectionState.DISCONNECTED
    h.poll_until(lambda: h.client.ready(9, h.now, Node(9, "b9", 9092)))


def test_api_versions_falls_back_when_the_broker_knows_an_older_version():
    h = Harness()
    h.brokers[1].api_versions_max = 2
    h.bootstrap()
    assert [r.version for r in h.brokers[1].requests_for(API_VERSIONS)] == [4, 2]


def test_api_versions_error_closes_the_connection(caplog):
    h = Harness(ranges={1: {}})
    h.brokers[1].api_versions_max = -1                 # answers UNSUPPORTED_VERSION even to v0
    with caplog.at_level(logging.WARNING):
        h.poll_until(lambda: h.client.connection_failed(-1))
    assert [r.version for r in h.brokers[1].requests] == [4, 0]
    assert "ApiVersions failed" in caplog.text


def test_request_response_runs_the_callback_and_returns_the_response():
    h = Harness()
    h.bootstrap()
    h.connect(1)
    seen = []
    request = h.request(1, callback=seen.append)
    h.client.send(request, h.now)
    assert h.client.in_flight_request_count(1) == 1
    h.clock.advance(7)
    (response,) = h.poll()
    assert response.request is request and seen == [response]
    assert response.body.responses[0].partition_responses[0].base_offset == 42
    assert not response.disconnected and not response.timed_out
    assert response.version == PRODUCE.max_version and response.latency_ms == 7
    assert h.client.in_flight_request_count() == 0


def test_acks0_completes_when_its_bytes_are_written():
    h = Harness()
    h.bootstrap()
    h.connect(1)
    h.sel.stall_writes.add(1)
    h.client.send(h.request(1, body=produce_body(acks=0), expect_response=False), h.now)
    assert h.poll() == [] and h.client.in_flight_request_count(1) == 1
    h.sel.stall_writes.clear()
    (response,) = h.poll()
    assert response.body is None and not response.disconnected
    assert h.client.in_flight_request_count() == 0
    assert h.brokers[1].requests_for(PRODUCE)[0].body.acks == 0


def test_the_in_flight_cap_and_unwritten_bytes_hold_back_sends():
    h = Harness(max_in_flight_requests_per_connection=2)
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.sel.stall_writes.add(1)
    h.client.send(h.request(1), h.now)
    assert not h.client.is_ready(1, h.now)             # still being written
    with pytest.raises(IllegalStateError, match="node 1 is not ready"):
        h.client.send(h.request(1), h.now)
    h.sel.stall_writes.clear()
    h.poll()
    assert h.client.is_ready(1, h.now)
    h.client.send(h.request(1), h.now)
    h.poll()
    assert not h.client.ready(1, h.now)                # two in flight: the cap
    assert h.client.in_flight_request_count(1) == 2


def test_responses_arriving_in_small_pieces_are_reassembled():
    h = Harness()
    h.sel.chunk_size = 3
    h.bootstrap()
    h.connect(1)
    h.client.send(h.request(1), h.now)
    (response,) = h.poll()
    assert response.body.responses[0].name == "t"


def test_request_timeout_closes_the_connection_and_completes_timed_out(caplog):
    h = Harness(request_timeout_ms=1_000)
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.client.send(h.request(1), h.now)
    h.poll()
    h.clock.advance(1_000)
    assert h.poll() == []                             # exactly at the timeout: not yet
    h.clock.advance(1)
    with caplog.at_level(logging.INFO):
        (response,) = h.poll()
    assert response.timed_out and response.disconnected and response.body is None
    assert not h.sel.is_open(1) and h.state(1) is ConnectionState.DISCONNECTED
    assert "request got no response in time" in caplog.text


def test_a_per_request_timeout_overrides_the_default():
    h = Harness(request_timeout_ms=30_000)
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.client.send(h.request(1, request_timeout_ms=100), h.now)
    h.poll()
    assert h.sel.poll_timeouts[-1] <= 101              # the poll does not sleep past it
    h.clock.advance(101)
    (response,) = h.poll()
    assert response.timed_out


def test_disconnect_mid_request_completes_in_flight_then_reconnects_after_backoff():
    h = Harness()
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.client.send(h.request(1), h.now)
    h.poll()
    h.client.send(h.request(1), h.now)
    h.poll()
    h.sel.drop(1)
    responses = h.poll()
    assert [r.disconnected and not r.timed_out for r in responses] == [True, True]
    assert h.client.connection_failed(1) and h.client.in_flight_request_count() == 0
    calls = len(h.sel.connect_calls)
    assert not h.client.ready(1, h.now) and len(h.sel.connect_calls) == calls
    assert h.client.connection_delay(1, h.now) == 50
    first_id = h.client.connection_id(1)
    h.clock.advance(50)
    h.brokers[1].hold = False
    h.connect(1)
    assert h.brokers[1].connections == 3              # bootstrap, the first, the reconnect
    assert h.client.connection_id(1) not in (0, first_id)   # a new connection, a new id
    assert h.client.connection_id(2) == 0               # never connected
    h.client.send(h.request(1), h.now)
    (response,) = h.poll()
    assert response.body is not None


def test_a_disconnect_asks_for_a_metadata_update():
    h = Harness()
    h.bootstrap()
    h.connect(2)
    h.clock.advance(1_000)
    h.sel.drop(2)
    h.poll()
    assert h.metadata.update_requested


def test_protocol_error_closes_the_connection_with_the_reason(caplog):
    h = Harness()
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.client.send(h.request(1), h.now)
    h.poll()
    h.sel.inject(1, b"\x00\x00\x00\x05" b"\x00\x00\x00\x63" b"\x00")   # correlation id 99
    with caplog.at_level(logging.WARNING):
        (response,) = h.poll()
    assert response.disconnected
    assert not h.sel.is_open(1) and h.state(1) is ConnectionState.DISCONNECTED
    assert "node 1: protocol error" in caplog.text and "correlation id" in caplog.text


def test_connection_setup_timeout_gives_up_and_grows():
    h = Harness(socket_connection_setup_timeout_ms=1_000,
                socket_connection_setup_timeout_max_ms=5_000)
    h.bootstrap()
    h.sel.auto_connect = False
    assert not h.client.ready(2, h.now)
    h.poll()
    assert h.state(2) is ConnectionState.CONNECTING
    assert h.client.connection_delay(2, h.now) == 1_000
    h.clock.advance(1_001)
    h.poll()
    assert h.state(2) is ConnectionState.DISCONNECTED and 2 not in h.sel.pending_connects()
    assert h.client._states.setup_timeout_ms(2) == 2_000


def test_a_connect_that_fails_at_once_backs_off():
    h = Harness(brokers=[(1, "b1", 9092), (2, "unresolvable", 9092)])
    h.bootstrap()
    assert not h.client.ready(2, h.now)
    assert h.client.connection_failed(2)
    assert not h.client.ready(2, h.now + 49)
    assert len([c for c in h.sel.connect_calls if c[0] == 2]) == 1


def test_a_refused_connection_is_reported_as_disconnected():
    h = Harness()
    h.bootstrap()
    del h.sel.brokers[("b3", 9092)]
    h.client.ready(3, h.now)
    h.poll()
    assert h.client.connection_failed(3)


def _client_with_states(ready_loads: dict[int, int], connecting=(), backoff=()):
    h = Harness(max_in_flight_requests_per_connection=10)
    h.bootstrap()
    for node, load in ready_loads.items():
        h.connect(node)
        h.brokers[node].hold = True
        for _ in range(load):
            h.client.send(h.request(node), h.now)
            h.poll()
    h.sel.auto_connect = False
    for node in connecting:
        h.client.ready(node, h.now)
    for node in backoff:
        h.client.ready(node, h.now)
        h.sel.fail_connect(node)
        h.poll()
    return h


def test_least_loaded_node_prefers_an_idle_ready_node():
    h = _client_with_states({1: 2, 2: 0})
    assert h.client.least_loaded_node(h.now).node_id == 2


def test_least_loaded_node_picks_the_fewest_in_flight():
    h = _client_with_states({1: 3, 2: 1}, backoff=[3])
    for seed in range(5):
        h.client._rng.seed(seed)
        assert h.client.least_loaded_node(h.now).node_id == 2


def test_least_loaded_node_falls_back_to_connecting_then_connectable_never_backoff():
    h = _client_with_states({}, connecting=[2], backoff=[3])   # node 1: never tried
    assert h.client.least_loaded_node(h.now).node_id == 2
    h = _client_with_states({}, backoff=[2, 3])
    assert h.client.least_loaded_node(h.now).node_id == 1
    h = _client_with_states({}, backoff=[1, 2, 3])
    assert h.client.least_loaded_node(h.now) is None
    h.clock.advance(50)
    assert h.client.least_loaded_node(h.now) is not None


def test_a_due_metadata_update_goes_first_then_nodes_are_ready_again():
    h = Harness(metadata_max_age_ms=10_000)
    h.bootstrap()
    h.connect(1)
    h.metadata.add_topic("new", h.now)
    h.topics["new"] = 2
    assert not h.client.is_ready(1, h.now)            # the refresh is due: it takes priority
    h.poll()
    assert h.metadata.snapshot.partition_count("new") == 2
    assert h.client.is_ready(1, h.now)


def test_periodic_refresh_after_max_age():
    h = Harness(metadata_max_age_ms=10_000)
    h.bootstrap()
    version = h.metadata.update_version
    h.clock.advance(9_999)
    h.poll()
    assert h.metadata.update_version == version
    h.clock.advance(1)
    h.poll_until(lambda: h.metadata.update_version == version + 1)


def test_a_failed_metadata_request_backs_off():
    h = Harness()
    h.bootstrap()
    for broker in h.brokers.values():
        broker.metadata = lambda request: None        # Metadata requests go unanswered
    h.metadata.request_update(h.now)
    h.clock.advance(100)
    for expected_backoff in (100, 200):
        h.poll_until(lambda: h.client._updater.in_progress)
        (node,) = h.client._in_flight.nodes()
        h.sel.drop(node)
        h.poll()
        assert not h.client._updater.in_progress
        assert h.metadata.time_to_next_update(h.now) == expected_backoff
        h.clock.advance(expected_backoff)


def test_metadata_without_brokers_counts_as_a_failure():
    h = Harness(brokers=[(1, "b1", 9092)])
    h.brokers[1].metadata = lambda req: metadata_body([], {})
    h.poll_until(lambda: h.metadata._attempts == 1)
    assert h.metadata.update_version == 0


def test_unsupported_metadata_is_fatal_for_waiters():
    ranges = {k: v for k, v in our_ranges().items() if k != METADATA.api_key}
    h = Harness(ranges={1: ranges}, brokers=[(1, "b1", 9092)])
    h.poll()
    h.poll()
    h.poll()
    with pytest.raises(UnsupportedVersionError, match="Metadata"):
        h.metadata.await_topic("t", 1_000, h.clock)


def test_callback_errors_are_logged_not_raised(caplog):
    h = Harness()
    h.bootstrap()
    h.connect(1)

    def boom(response):
        raise RuntimeError("boom")
    h.client.send(h.request(1, callback=boom), h.now)
    with caplog.at_level(logging.ERROR):
        (response,) = h.poll()
    assert "completion callback" in caplog.text and response.body is not None


def test_wakeup_close_and_use_after_close():
    h = Harness()
    h.bootstrap()
    h.client.wakeup()
    h.metadata.add_topic("other", h.now)              # a new topic wakes the client
    assert h.sel.wakeups == 2
    h.client.close()
    h.client.close()
    assert h.sel.closed
    with pytest.raises(IllegalStateError, match="closed"):
        h.poll()
    with pytest.raises(Exception, match="closed"):
        h.metadata.await_topic("zzz", 1_000, h.clock)


def test_poll_timeout_is_bounded_by_the_metadata_timing():
    h = Harness(metadata_max_age_ms=300_000)
    h.bootstrap()
    h.poll(timeout_ms=60_000)
    assert h.sel.poll_timeouts[-1] == 30_000          # capped by request.timeout.ms
    h.metadata.request_update(h.now)
    h.client.poll(60_000, h.now)
    assert h.sel.poll_timeouts[-1] <= 100             # the refresh backoff


def test_await_topic_with_the_client_polling_elsewhere_times_out():
    h = Harness()
    with pytest.raises(MetadataTimeoutError, match="Topic t not present in metadata after 30 ms"):
        h.metadata.await_topic("t", 30, h.clock)


def test_settings_from_config_reads_attribute_names():
    class Config:
        client_id = "c"
        request_timeout_ms = 5
        linger_ms = 7
    settings = NetworkSettings.from_config(Config(), max_frame_bytes=1024)
    assert settings.client_id == "c" and settings.request_timeout_ms == 5
    assert settings.max_frame_bytes == 1024


def test_wakeup_by_skips_the_wakeup_when_the_poll_in_progress_ends_in_time():
    h = Harness()
    h.bootstrap()
    seen = []

    def poll_and_wake(timeout_ms):                        # a producer thread, mid-poll
        h.client.wakeup_by(h.now + 10)                    # due after this poll ends: no wakeup
        seen.append(h.sel.wakeups)
        h.client.wakeup_by(h.now + 2)                     # due before it ends: wake
        seen.append(h.sel.wakeups)
        return real_poll(timeout_ms)

    real_poll, h.sel.poll = h.sel.poll, poll_and_wake
    before = h.sel.wakeups
    h.client.poll(5, h.now)
    assert seen == [before, before + 1]
    h.sel.poll = real_poll
    h.client.wakeup_by(h.now + 1_000)                     # not polling: always wake
    assert h.sel.wakeups == before + 2


# --- the poll's wait ends at the nearest deadline ---------------------------------------------

def test_a_long_poll_wakes_for_the_nearest_request_deadline():
    # A caller with nothing else to do polls for a minute: the wait must still end when the
    # oldest request times out, not up to a whole request.timeout.ms after it.
    h = Harness(request_timeout_ms=30_000)
    h.bootstrap()
    h.connect(1)
    h.brokers[1].hold = True
    h.client.send(h.request(1), h.now)
    h.poll()
    h.clock.advance(29_000)
    assert h.client.poll(60_000, h.now) == []
    assert h.sel.poll_timeouts[-1] <= 1_001
    h.clock.advance(h.sel.poll_timeouts[-1])                 # the wait ran its course
    (response,) = h.client.poll(60_000, h.now)
    assert response.timed_out


def test_a_long_poll_wakes_for_the_connection_setup_deadline():
    h = Harness(socket_connection_setup_timeout_ms=1_000, request_timeout_ms=30_000)
    h.bootstrap()
    h.sel.auto_connect = False
    assert not h.client.ready(2, h.now)
    h.client.poll(60_000, h.now)
    assert h.state(2) is ConnectionState.CONNECTING
    assert h.sel.poll_timeouts[-1] <= 1_001
    h.clock.advance(h.sel.poll_timeouts[-1])
    h.client.poll(60_000, h.now)
    assert h.state(2) is ConnectionState.DISCONNECTED


# --- broker throttling (KIP-219, client/throttle.py) ----------------------------------------------

def throttled_answer(throttle_ms: int):
    def answer(request) -> dict:
        return {**produce_answer(request), "throttle_time_ms": throttle_ms}
    return answer


def throttle_harness(produce_range: tuple[int, int] | None = None):
    seen = []
    ranges = None if produce_range is None else {2: {**our_ranges(), PRODUCE.api_key: produce_range}}
    h = Harness(ranges=ranges)
    h.client._throttle_observer = lambda api, ms, now: seen.append((api.name, ms))
    h.bootstrap()
    h.connect(2)
    h.brokers[2].handlers[PRODUCE.api_key] = throttled_answer(700)
    return h, seen


def test_a_throttled_produce_response_holds_the_node_back_for_the_time_asked():
    h, seen = throttle_harness()
    h.client.send(h.request(2), h.now)
    responses = h.poll()
    assert [r.body.throttle_time_ms for r in responses] == [700]   # answered at once, no error
    assert ("Produce", 700) in seen
    start = h.now
    assert not h.client.is_ready(2, h.now) and not h.client.ready(2, h.now)
    assert h.client.poll_delay(2, h.now) == 700
    assert h.client.connection_delay(2, h.now) > 700    # connected: "until an event"
    with pytest.raises(IllegalStateError, match="throttled for 700 ms"):
        h.client.send(h.request(2), h.now)
    h.clock.advance(699)
    assert not h.client.is_ready(2, h.now) and h.client.poll_delay(2, h.now) == 1
    h.clock.advance(1)
    assert h.client.is_ready(2, h.now) and h.now - start == 700
    h.connect(3)
    assert h.client.poll_delay(3, h.now) > 700                      # other nodes unaffected


def test_requests_in_flight_get_the_throttled_time_before_they_time_out():
    h, seen = throttle_harness()
    h.brokers[2].hold = True
    h.client.send(h.request(2), h.now)
    h.poll()                                       # written, not answered
    h.client._in_flight.add_throttle(2, 5_000)     # as a throttled answer on this connection does
    h.clock.advance(30_001)                        # past request.timeout.ms, within it + throttle
    assert h.client._in_flight.timed_out_nodes(h.now) == []
    h.clock.advance(5_000)
    assert h.client._in_flight.timed_out_nodes(h.now) == [2]


def test_a_throttled_answer_extends_the_deadline_of_the_requests_already_sent():
    h, seen = throttle_harness()
    h.brokers[2].hold = True
    for _ in range(2):                                    # two requests out, unanswered
        h.client.send(h.request(2), h.now)
        h.poll()
    first = h.brokers[2].requests_for(PRODUCE)[0]         # then the first is answered, throttled
    h.sel.inject(2, ServerFraming.encode_response(first.api, first.version, first.correlation_id,
                                                  throttled_answer(5_000)(first)))
    assert [r.body.throttle_time_ms for r in h.poll()] == [5_000]
    h.clock.advance(30_001)                               # past request.timeout.ms, within + 5 s
    assert h.client.poll(0, h.now) == []
    h.clock.advance(5_000)
    (late,) = h.client.poll(0, h.now)
    assert late.timed_out


def test_a_throttle_time_before_kip_219_is_recorded_but_not_applied_by_the_client():
    h, seen = throttle_harness(produce_range=(3, 5))   # Produce v5: the broker delays instead
    h.client.send(h.request(2), h.now)
    h.poll()
    assert ("Produce", 700) in seen
    assert h.client.is_ready(2, h.now) and h.client.poll_delay(2, h.now) > 700


def test_the_throttle_time_of_every_response_is_observed_zero_included():
    h, seen = throttle_harness()
    assert ("ApiVersions", 0) in seen and ("Metadata", 0) in seen


# --- rebootstrap (KIP-899, KIP-1102) ----------------------------------------------------------------

def poll_ticking(h, check, polls: int = 60, tick_ms: int = 100, *, expect: bool = True) -> None:
    """Poll, moving the clock ``tick_ms`` each time, until ``check()`` (at most ``polls``
    times; ``expect`` False: just poll them all)."""
    for _ in range(polls):
        if check():
            return
        h.poll()
        h.clock.advance(tick_ms)
    assert check() or not expect, f"not reached in {polls} polls"


def forget_b1(h) -> None:
    """b1 stops being listed: the client knows nodes 2 and 3 only (b1 stays the bootstrap)."""
    for broker in h.brokers.values():
        broker.metadata = lambda req: metadata_body(BROKERS[1:], h.topics)
    h.metadata.request_update(h.now)
    poll_ticking(h, lambda: sorted(h.metadata.snapshot.nodes) == [2, 3])


def replace_cluster(h, new_brokers):
    """Every broker the client knows goes away; ``new_brokers`` answer at the bootstrap address."""
    for node_id in list(h.client._connections):
        h.sel.drop(node_id)
    for key in list(h.sel.brokers):
        del h.sel.brokers[key]
    for node_id, host, port in new_brokers:
        h.sel.add_broker(host, port, FakeBroker(
            node_id, metadata=lambda req, b=new_brokers: metadata_body(b, h.topics),
            handlers={PRODUCE.api_key: produce_answer}))


NEW_CLUSTER = [(7, "b1", 9092), (8, "c2", 9092)]   # the bootstrap address now leads to another cluster


def test_when_no_known_broker_can_be_reached_the_client_starts_again_from_bootstrap():
    h = Harness()
    h.bootstrap()
    assert sorted(h.metadata.snapshot.nodes) == [1, 2, 3]
    forget_b1(h)
    replace_cluster(h, NEW_CLUSTER)
    poll_ticking(h, lambda: sorted(h.metadata.snapshot.nodes) == [7, 8])   # through b1:9092 again
    assert h.metadata.rebootstraps == 1
    poll_ticking(h, lambda: h.client.ready(8, h.now))
    h.client.send(h.request(8), h.now)
    responses = []
    poll_ticking(h, lambda: responses or responses.extend(h.poll()) or responses)
    assert [r.body.responses[0].partition_responses[0].base_offset for r in responses] == [42]


def test_no_rebootstrap_while_one_known_broker_can_still_be_reached():
    h = Harness()
    h.bootstrap()
    forget_b1(h)                                          # nodes 2 and 3
    del h.sel.brokers[("b3", 9092)]                       # node 3 refuses connections
    h.client.ready(3, h.now)
    poll_ticking(h, lambda: h.client._states.unreachable(3))
    for _ in range(5):                                    # updates go on through node 2
        version = h.metadata.request_update(h.now)
        poll_ticking(h, lambda: h.metadata.update_version > version)
        h.client.ready(3, h.now)                          # and node 3 keeps failing
    assert h.client._states.unreachable(3)
    assert h.metadata.rebootstraps == 0 and sorted(h.metadata.snapshot.nodes) == [2, 3]


def test_rebootstrap_is_off_with_strategy_none():
    h = Harness(metadata_recovery_strategy="none")
    h.bootstrap()
    forget_b1(h)
    replace_cluster(h, NEW_CLUSTER)
    poll_ticking(h, lambda: False, polls=60, expect=False)
    assert h.metadata.rebootstraps == 0 and sorted(h.metadata.snapshot.nodes) == [2, 3]


def test_a_rebootstrap_required_answer_starts_again_from_bootstrap():
    h = Harness()
    h.bootstrap()
    answers = iter([{"error_code": 129, "brokers": [], "topics": [], "cluster_id": None, "controller_id": -1}])

    def metadata(req):
        return next(answers, None) or metadata_body(BROKERS, h.topics)
    for broker in h.brokers.values():
        broker.metadata = metadata
    h.metadata.request_update(h.now)
    poll_ticking(h, lambda: h.metadata.rebootstraps, polls=20, tick_ms=50)
    assert h.metadata.rebootstraps == 1


def test_updates_failing_for_the_trigger_time_start_again_from_bootstrap():
    h = Harness(metadata_recovery_rebootstrap_trigger_ms=2_000)
    h.bootstrap()
    for broker in h.brokers.values():   # every answer says "no brokers": each update fails
        broker.metadata = lambda req: {**metadata_body(BROKERS, h.topics), "brokers": []}
    h.metadata.request_update(h.now)
    poll_ticking(h, lambda: h.metadata.rebootstraps, polls=100)
    assert h.metadata.rebootstraps == 1 and h.metadata.failing_for_ms(h.now) < 2_000
