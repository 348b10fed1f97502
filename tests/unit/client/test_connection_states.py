"""Connection state table, reconnect backoff (growth, jitter, cap) and setup timeouts."""

from __future__ import annotations

import random

import pytest

from spark_kafka_sink.client.backoff import ExponentialBackoff
from spark_kafka_sink.client.connection_states import (
    FOREVER_MS, TRANSITIONS, ConnectionState, ConnectionStates,
)
from spark_kafka_sink.errors import IllegalStateError

S = ConnectionState


class NoJitter:
    """Pins the jitter factor to 1.0 (the middle of its range)."""

    def uniform(self, a, b):
        return (a + b) / 2


class Extremes:
    """Alternates the lowest and highest jitter factors."""

    def __init__(self):
        self.high = False

    def uniform(self, a, b):
        self.high = not self.high
        return b if self.high else a


def states(**kw) -> ConnectionStates:
    defaults = dict(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000, setup_timeout_ms=10_000,
                    setup_timeout_max_ms=30_000, rng=NoJitter())
    return ConnectionStates(**{**defaults, **kw})


def test_the_table_has_the_handshake_path_and_every_state_can_disconnect():
    assert TRANSITIONS[S.DISCONNECTED] == {S.CONNECTING}
    assert S.CHECKING_API_VERSIONS in TRANSITIONS[S.CONNECTING]
    assert {S.READY, S.AUTHENTICATING} <= TRANSITIONS[S.CHECKING_API_VERSIONS]
    assert TRANSITIONS[S.AUTHENTICATING] == {S.READY, S.DISCONNECTED}
    assert all(S.DISCONNECTED in targets for state, targets in TRANSITIONS.items()
               if state is not S.DISCONNECTED)


def test_happy_path_moves_through_the_handshake():
    cs = states()
    assert cs.state(1) is S.DISCONNECTED and cs.can_connect(1, 0)
    cs.connecting(1, 100, "h:1")
    assert cs.is_connecting(1) and cs.is_preparing(1) and not cs.can_connect(1, 10_000)
    cs.checking_api_versions(1)
    assert cs.is_connected(1) and cs.is_preparing(1) and not cs.is_ready(1)
    cs.ready(1)
    assert cs.is_ready(1) and not cs.is_preparing(1)
    assert cs.connection_delay(1, 200) == FOREVER_MS


@pytest.mark.parametrize("steps", [
    ["ready"],                                   # CONNECTING -> READY skips ApiVersions
    ["checking_api_versions", "checking_api_versions"],
    ["checking_api_versions", "ready", "authenticating"],
])
def test_moves_outside_the_table_raise(steps):
    cs = states()
    cs.connecting(1, 0, "h:1")
    with pytest.raises(IllegalStateError, match="node 1: cannot move"):
        for step in steps:
            getattr(cs, step)(1)


def test_transitions_on_unknown_node_raise():
    with pytest.raises(IllegalStateError, match="no connection state for node 7"):
        states().ready(7)


def test_reconnect_backoff_doubles_per_failure_up_to_the_cap():
    cs = states(reconnect_backoff_ms=50, reconnect_backoff_max_ms=1000)
    now = 1_000
    seen = []
    for _ in range(8):
        cs.connecting(1, now, "h:1")
        cs.disconnected(1, now)
        seen.append(cs.reconnect_backoff_ms(1))
        assert not cs.can_connect(1, now + seen[-1] - 1)
        assert cs.is_blacked_out(1, now + seen[-1] - 1)
        assert cs.connection_delay(1, now + 10) == seen[-1] - 10
        assert cs.can_connect(1, now + seen[-1])
        now += seen[-1]
    assert seen == [50, 100, 200, 400, 800, 1000, 1000, 1000]


def test_ready_resets_the_backoff():
    cs = states()
    for now in (0, 1000, 2000):
        cs.connecting(1, now, "h:1")
        cs.disconnected(1, now)
    assert cs.reconnect_backoff_ms(1) == 200
    cs.connecting(1, 3000, "h:1")
    cs.checking_api_versions(1)
    cs.ready(1)
    cs.disconnected(1, 4000)
    assert cs.reconnect_backoff_ms(1) == 50


def test_jitter_stays_within_20_percent_and_never_exceeds_the_cap():
    backoff = ExponentialBackoff(100, 1000, rng=Extremes())
    assert [backoff.backoff(0), backoff.backoff(0)] == [120, 80]
    assert [backoff.backoff(1), backoff.backoff(1)] == [240, 160]
    assert backoff.backoff(10) == 1000          # 1000 * 1.2 is capped
    assert backoff.backoff(10) == 800           # the low side still jitters
    real = ExponentialBackoff(100, 1000, rng=random.Random(7))
    values = [real.backoff(2) for _ in range(500)]
    assert min(values) >= 320 and max(values) <= 480 and len(set(values)) > 50


def test_a_max_below_the_base_gives_a_constant_max():
    backoff = ExponentialBackoff(500, 200, rng=Extremes())
    assert {backoff.backoff(n) for n in range(5)} == {200}


def test_setup_timeout_grows_with_failed_connects_and_resets_on_connect():
    cs = states(setup_timeout_ms=10_000, setup_timeout_max_ms=30_000)
    cs.connecting(1, 0, "h:1")
    assert cs.setup_timeout_ms(1) == 10_000
    assert cs.connection_delay(1, 5) == 10_000
    assert cs.nodes_with_setup_timeout(10_000) == []
    assert cs.nodes_with_setup_timeout(10_001) == [1]
    assert cs.next_setup_deadline_ms() == 10_000
    cs.disconnected(1, 10_001)
    assert cs.setup_timeout_ms(1) == 20_000
    cs.connecting(1, 20_000, "h:1")
    cs.disconnected(1, 40_001)
    assert cs.setup_timeout_ms(1) == 30_000          # capped
    cs.connecting(1, 50_000, "h:1")
    cs.checking_api_versions(1)
    assert cs.setup_timeout_ms(1) == 10_000          # reset once connected
    assert cs.next_setup_deadline_ms() is None


def test_a_new_address_starts_over_and_remove_forgets():
    cs = states()
    for now in (0, 1000):
        cs.connecting(1, now, "old:1")
        cs.disconnected(1, now)
    assert cs.reconnect_backoff_ms(1) == 100
    cs.connecting(1, 1001, "new:1")                  # inside the backoff, but a new address
    assert cs.is_connecting(1)
    cs.disconnected(1, 1001)
    assert cs.reconnect_backoff_ms(1) == 50
    cs.remove(1)
    assert cs.can_connect(1, 1001) and not cs.is_disconnected(1)


def test_disconnected_twice_is_harmless():
    cs = states()
    cs.connecting(1, 0, "h:1")
    cs.disconnected(1, 0)
    cs.disconnected(1, 5)
    assert cs.reconnect_backoff_ms(1) == 50 and cs.last_attempt_ms(1) == 0


def test_a_throttle_holds_a_ready_node_back_never_regresses_and_outlives_a_reconnect():
    cs = states()
    cs.throttle(1, 500)                       # no entry: ignored
    assert cs.throttle_delay(1, 0) == 0
    cs.connecting(1, 0, "a:1")
    cs.checking_api_versions(1)
    cs.ready(1)
    cs.throttle(1, 300)
    cs.throttle(1, 200)                       # an earlier end never shortens the throttle
    assert not cs.is_ready(1, 100) and cs.is_ready(1) and cs.is_ready(1, 300)
    assert cs.throttle_delay(1, 100) == 200 and cs.poll_delay(1, 100) == 200
    assert cs.poll_delay(1, 300) == FOREVER_MS          # connected, no longer throttled
    cs.disconnected(1, 120)
    assert cs.poll_delay(1, 130) == cs.connection_delay(1, 130)   # disconnected: the backoff
    cs.connecting(1, 200, "a:1")
    cs.checking_api_versions(1)
    cs.ready(1)
    assert not cs.is_ready(1, 250) and cs.is_ready(1, 300)   # the broker's quota, not the socket's
