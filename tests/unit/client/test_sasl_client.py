"""The network client's SASL step and authentication failures, over the FakeSelector: a fake
broker answers SaslHandshake/SaslAuthenticate for PLAIN and SCRAM (server side from the RFC)."""

from __future__ import annotations

import logging
import pickle
import threading
import time

import pytest

from spark_kafka_sink.client.connection_states import ConnectionState
from spark_kafka_sink.client.auth.jaas import SaslCredentials
from spark_kafka_sink.client.auth.oauth import TokenCache
from spark_kafka_sink.client.auth.oauth_token import OAuthToken
from spark_kafka_sink.client.selector import PollResult
from spark_kafka_sink.errors import (
    AuthenticationError, SaslAuthenticationFailedError, SslAuthenticationError,
    UnsupportedSaslMechanismError,
)
from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.protocol import API_VERSIONS, METADATA, PRODUCE
from spark_kafka_sink.protocol.apis import SASL_AUTHENTICATE, SASL_HANDSHAKE

from ..fakes import FakeClock
from .fake_selector import FakeSelector
from .test_network_client import Harness
from .test_oauth import Middle
from .test_sasl import ScramServer

PASSWORD = "Correct-Horse-77"
WRONG = "Wrong-Horse-13"


class SaslBroker:
    """SaslHandshake + SaslAuthenticate for one user; ``password`` may change between tests."""

    def __init__(self, mechanisms=("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"), password=PASSWORD):
        self.mechanisms = list(mechanisms)
        self.password = password
        self.mechanism = None
        self.scram = None

    def install(self, broker) -> None:
        broker.handlers[SASL_HANDSHAKE.api_key] = self.handshake
        broker.handlers[SASL_AUTHENTICATE.api_key] = self.authenticate

    def handshake(self, request):
        self.mechanism = request.body.mechanism
        error = 0 if self.mechanism in self.mechanisms else 33
        return {"error_code": error, "mechanisms": self.mechanisms}

    def authenticate(self, request):
        token = bytes(request.body.auth_bytes)
        if self.mechanism == "PLAIN":
            ok = token == b"\0alice\0" + self.password.encode()
            return self._answer(b"" if ok else None)
        if token.startswith(b"n,,"):
            self.scram = ScramServer("sha512" if self.mechanism.endswith("512") else "sha256", self.password)
            return self._answer(self.scram.first(token))
        final = self.scram.final(token)
        return self._answer(None if final.startswith(b"e=") else final)

    def _answer(self, token):
        if token is None:
            message = f"Authentication failed: Invalid username or password ({self.mechanism})"
            return {"error_code": 58, "auth_bytes": b"", "error_message": message}
        return {"error_code": 0, "error_message": None, "auth_bytes": token, "session_lifetime_ms": 0}


def harness(mechanism: str, password: str = PASSWORD, **broker_kw) -> tuple[Harness, SaslBroker]:
    h = Harness(brokers=[(1, "b1", 9092)], sasl=SaslCredentials(mechanism, "alice", password))
    sasl = SaslBroker(**broker_kw)
    sasl.install(h.brokers[1])
    return h, sasl


@pytest.mark.parametrize("mechanism", ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"])
def test_a_sasl_connection_authenticates_before_it_is_ready(mechanism):
    h, _ = harness(mechanism)
    seen = []
    for _ in range(10):
        h.poll()
        seen.append(h.state(-1))
        if h.metadata.update_version:
            break
    assert h.metadata.update_version == 1
    assert ConnectionState.AUTHENTICATING in seen
    apis = [r.api for r in h.brokers[1].requests]
    rounds = 1 if mechanism == "PLAIN" else 2
    assert apis == [API_VERSIONS, SASL_HANDSHAKE] + [SASL_AUTHENTICATE] * rounds + [METADATA]
    handshake = h.brokers[1].requests[1]
    assert handshake.version == 1 and handshake.body.mechanism == mechanism
    assert h.brokers[1].requests[2].version == SASL_AUTHENTICATE.max_version
    h.connect(1)
    assert h.client.authentication_error(1) is None


def test_a_wrong_password_fails_waiters_at_once_and_backs_off(caplog):
    caplog.set_level(logging.DEBUG)
    h, _ = harness("SCRAM-SHA-512", password=WRONG)
    for _ in range(5):
        h.poll()
    error = h.client.authentication_error(-1)
    assert isinstance(error, SaslAuthenticationFailedError) and isinstance(error, AuthenticationError)
    assert str(error) == ("[Error 58] SASL_AUTHENTICATION_FAILED: SASL SCRAM-SHA-512 authentication of user "
                          "'alice' with b1:9092 was refused: Authentication failed: Invalid username or "
                          "password (SCRAM-SHA-512)")
    with pytest.raises(SaslAuthenticationFailedError):
        h.metadata.await_topic("t2", 60_000, h.clock)      # no wait for max.block.ms
    assert h.state(-1) is ConnectionState.DISCONNECTED
    # 5 s of a busy caller: the reconnect backoff (50 ms doubling to 1 s) bounds the attempts
    for _ in range(500):
        h.clock.advance(10)
        h.poll()
        h.client.ready(-1, h.now)
    assert 5 <= h.brokers[1].connections <= 10
    text = caplog.text + repr(error) + repr(h.client._settings)
    assert WRONG not in text and PASSWORD not in text


def test_an_unsupported_mechanism_names_the_enabled_ones():
    h, _ = harness("SCRAM-SHA-256", mechanisms=("PLAIN",))
    for _ in range(4):
        h.poll()
    error = h.client.authentication_error(-1)
    assert isinstance(error, UnsupportedSaslMechanismError) and isinstance(error, AuthenticationError)
    assert "the broker enables the SASL mechanisms: PLAIN" in str(error)


def test_authentication_recovers_once_the_broker_accepts_the_password():
    h, sasl = harness("PLAIN", password=WRONG)
    for _ in range(4):
        h.poll()
    assert h.client.authentication_error(-1) is not None
    sasl.password = WRONG                 # e.g. the user was (re)created with this password
    h.clock.advance(1000)
    h.bootstrap()
    assert h.client.authentication_error(-1) is None and h.state(-1) is ConnectionState.READY
    assert h.metadata.await_topic("t", 1000, h.clock).partition_count("t") == 3


class HandshakeFailingSelector(FakeSelector):
    """Reports the next connection's TLS handshake as failed."""

    def poll(self, timeout_ms):
        result = super().poll(timeout_ms)
        if not result.connected:
            return result
        reason = "TLS handshake with b1 failed: certificate verify failed: unable to get local issuer"
        failed = dict.fromkeys(result.connected, reason)
        for node_id in result.connected:
            self.close(node_id)
        return PollResult((), failed, result.completed_sends, {}, failed)


def test_a_failed_tls_handshake_is_an_authentication_error():
    h = Harness(brokers=[(1, "b1", 9092)])
    sel = HandshakeFailingSelector()
    sel.brokers = h.sel.brokers
    h.client._selector = sel
    h.poll()
    h.poll()
    error = h.client.authentication_error(-1)
    assert isinstance(error, SslAuthenticationError)
    assert str(error) == ("node -1 (b1:9092): TLS handshake with b1 failed: certificate verify failed: "
                          "unable to get local issuer")
    with pytest.raises(SslAuthenticationError):
        h.metadata.await_topic("t2", 60_000, h.clock)
    assert h.client.connection_delay(-1, h.now) > 0


def test_authentication_errors_pickle_unchanged_for_spark():
    for error in (SaslAuthenticationFailedError("SASL PLAIN authentication of user 'alice' was refused"),
                  UnsupportedSaslMechanismError("enables: PLAIN"), SslAuthenticationError("bad cert")):
        copy = pickle.loads(pickle.dumps(error))
        assert type(copy) is type(error) and str(copy) == str(error)
        assert isinstance(copy, AuthenticationError)


# --- KIP-368: logging in again on a live connection -----------------------------------------------

class LifetimeBroker(SaslBroker):
    """Gives every successful login a session lifetime."""

    def __init__(self, lifetime_ms: int, **kw):
        super().__init__(**kw)
        self.lifetime_ms = lifetime_ms

    def _answer(self, token):
        answer = super()._answer(token)
        if answer["error_code"] == 0:
            answer["session_lifetime_ms"] = self.lifetime_ms
        return answer


def reauth_harness(lifetime_ms: int = 10_000):
    seen = []
    h = Harness(brokers=[(1, "b1", 9092)], sasl=SaslCredentials("PLAIN", "alice", PASSWORD))
    h.client._auth_observer = lambda again, ok: seen.append((again, ok))
    sasl = LifetimeBroker(lifetime_ms)
    sasl.install(h.brokers[1])
    h.bootstrap()
    h.connect(1)
    return h, sasl, seen


def test_a_session_with_a_lifetime_logs_in_again_on_the_same_connection_before_it_ends():
    h, sasl, seen = reauth_harness(10_000)
    broker = h.brokers[1]
    connections = broker.connections
    logins = len(broker.requests_for(SASL_HANDSHAKE))
    h.clock.advance(8_499)                          # before 85% of the session: nothing yet
    h.poll()
    assert len(broker.requests_for(SASL_HANDSHAKE)) == logins
    h.clock.advance(1_001)                          # past 95%: due whatever the random share
    h.poll()
    h.poll()
    assert len(broker.requests_for(SASL_HANDSHAKE)) == logins + 2   # the -1 and node 1 connections
    assert broker.connections == connections        # the same connections, none closed
    assert h.client.is_ready(1, h.now) and seen.count((True, True)) == 2


def test_requests_wait_for_the_new_login_and_those_in_flight_complete_first():
    h, sasl, seen = reauth_harness(10_000)
    broker = h.brokers[1]
    h.client._close_connection(-1, [], h.now)        # only node 1's session from here on
    broker.hold = True                               # the broker records, and we answer by hand
    first = len(broker.requests)
    h.client.send(h.request(1), h.now)
    h.poll()                                         # the produce is written, in flight
    h.clock.advance(9_600)
    h.poll()                                         # due: the new login goes out behind it
    held = broker.requests[first:]
    assert [r.api for r in held] == [PRODUCE, SASL_HANDSHAKE]
    assert not h.client.is_ready(1, h.now)           # nothing new until the login completes
    with pytest.raises(IllegalStateError):
        h.client.send(h.request(1), h.now)
    server = h.sel._server[1][1]
    for request in held:                             # the broker answers in order
        h.sel.inject(1, broker.answer(server, request))
    broker.hold = False
    responses = []
    for _ in range(4):
        responses += h.poll()
    assert [r.request.api for r in responses] == [PRODUCE] and not responses[0].disconnected
    assert h.client.is_ready(1, h.now) and seen[-1] == (True, True)
    assert broker.connections == 2                   # bootstrap and node 1: no reconnect
    assert broker.requests[first + 2].api is SASL_AUTHENTICATE       # the login completes, then the rest


def test_a_refused_new_login_closes_the_connection_and_counts_as_failed():
    h, sasl, seen = reauth_harness(10_000)
    sasl.password = WRONG                            # the broker no longer takes our password
    h.clock.advance(9_600)
    for _ in range(4):
        h.poll()
    assert (True, False) in seen
    assert h.state(1) is ConnectionState.DISCONNECTED or h.state(-1) is ConnectionState.DISCONNECTED
    assert "re-authentication of user 'alice'" in str(h.client.authentication_error(1)
                                                       or h.client.authentication_error(-1))


def test_no_lifetime_means_no_new_login():
    h, sasl, seen = reauth_harness(0)
    logins = len(h.brokers[1].requests_for(SASL_HANDSHAKE))
    h.clock.advance(3_600_000)
    h.poll()
    assert len(h.brokers[1].requests_for(SASL_HANDSHAKE)) == logins


def test_under_full_load_a_due_login_stops_new_requests_until_the_pipeline_drains():
    h, sasl, seen = reauth_harness(10_000)
    broker = h.brokers[1]
    h.client._close_connection(-1, [], h.now)
    broker.hold = True
    first = len(broker.requests)
    while h.client.is_ready(1, h.now):               # fill the pipeline: 5 produces in flight
        h.client.send(h.request(1), h.now)
        h.poll()
    assert h.client.in_flight_request_count(1) == 5
    h.clock.advance(9_600)                           # the new login is due, but nothing can go
    h.poll()
    assert not h.client.is_ready(1, h.now)
    assert SASL_HANDSHAKE not in [r.api for r in broker.requests[first:]]
    server = h.sel._server[1][1]
    h.sel.inject(1, broker.answer(server, broker.requests[first]))   # one answer: room for one
    h.poll()
    h.poll()
    assert [r.api for r in broker.requests[first:]][-1] is SASL_HANDSHAKE   # the login, not a produce
    assert not h.client.is_ready(1, h.now)


class OncePerSecondBroker(LifetimeBroker):
    """Kafka's rule for a new login on a live connection (KafkaChannel.
    maybeBeginServerReauthentication): one begun less than a second after the previous one began
    is not a re-authentication; the request handler answers its SaslHandshake ILLEGAL_SASL_STATE."""

    def __init__(self, lifetime_ms: int, clock, **kw):
        super().__init__(lifetime_ms, **kw)
        self.clock = clock
        self.last_start_ms = None   # set by the test once only the live connection is left
        self.refused = 0

    def handshake(self, request):
        now = self.clock.monotonic_ms()
        if self.last_start_ms is not None and now - self.last_start_ms < 1_000:
            self.refused += 1
            return {"error_code": 34, "mechanisms": []}
        if self.last_start_ms is not None:
            self.last_start_ms = now
        return super().handshake(request)


def test_a_session_shorter_than_a_second_never_logs_in_again_sooner_than_the_broker_takes():
    h = Harness(brokers=[(1, "b1", 9092)], sasl=SaslCredentials("PLAIN", "alice", PASSWORD))
    seen = []
    h.client._auth_observer = lambda again, ok: seen.append((again, ok))
    sasl = OncePerSecondBroker(500, h.clock)          # a token near its end: a session of 0.5 s
    sasl.install(h.brokers[1])
    h.bootstrap()
    h.connect(1)
    h.client._close_connection(-1, [], h.now)        # node 1's connection alone from here on
    sasl.last_start_ms = h.clock.monotonic_ms()      # its login counts as the previous start
    for _ in range(80):                              # 4 s in steps of 50 ms
        h.clock.advance(50)
        h.poll()
    assert sasl.refused == 0 and (True, False) not in seen
    assert h.client.authentication_error(1) is None and h.brokers[1].connections == 2
    assert seen.count((True, True)) >= 3             # still logged in again, once a second or so


def test_a_closed_connection_is_not_an_unreachable_cluster():
    from .test_network_client import BROKERS, Harness as PlainHarness

    h = PlainHarness(brokers=BROKERS[:1])
    h.bootstrap()
    h.connect(1)
    h.sel.drop(1, "closed by the broker (idle)")     # an ordinary close, the broker still there
    for _ in range(5):
        h.poll()
        h.clock.advance(10)
    assert h.metadata.rebootstraps == 0


# --- OAUTHBEARER: a token fetch never runs on the network thread ------------------------------------

class OAuthBroker(LifetimeBroker):
    """OAUTHBEARER: takes any bearer token, records each, gives the session ``lifetime_ms``."""

    def __init__(self, lifetime_ms: int):
        super().__init__(lifetime_ms, mechanisms=("OAUTHBEARER",))
        self.tokens = []

    def authenticate(self, request):
        message = bytes(request.body.auth_bytes).decode()
        self.tokens.append(message.split("auth=Bearer ", 1)[1].split("\x01", 1)[0])
        return self._answer(b"")


class GatedSource:
    """Tokens of ``life_s``; every fetch after the first waits for ``release`` (a stuck endpoint)."""

    def __init__(self, clock, life_s: int = 100):
        self.clock = clock
        self.life_s = life_s
        self.calls = 0
        self.fail = False
        self.release = threading.Event()

    def describe(self):
        return "the gated endpoint"

    def fetch(self, now_ms):
        self.calls += 1
        if self.fail:
            raise AuthenticationError("the gated endpoint is down")
        if self.calls > 1:
            self.release.wait(30)
        return OAuthToken(f"tok{self.calls}", self.clock.now_ms() + self.life_s * 1000)


def oauth_harness(lifetimes: dict[int, int], *, spawn=None, **settings):
    clock = FakeClock()
    source = GatedSource(clock)
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=spawn)
    brokers = [(node_id, f"b{node_id}", 9092) for node_id in lifetimes]
    h = Harness(brokers=brokers, clock=clock, sasl=SaslCredentials("OAUTHBEARER", "", "", cache), **settings)
    sasl = {}
    for node_id, lifetime_ms in lifetimes.items():
        sasl[node_id] = OAuthBroker(lifetime_ms)
        sasl[node_id].install(h.brokers[node_id])
    return h, sasl, source, cache


def poll_for(h, check, seconds: float = 5.0):
    """Poll (a fetch on another thread may need real time to end) until ``check()``."""
    deadline = time.monotonic() + seconds
    while not check():
        assert time.monotonic() < deadline, "condition not met in time"
        h.poll()
        time.sleep(0.001)


def test_a_login_waiting_for_a_stuck_token_never_blocks_the_network_thread_or_other_nodes():
    h, sasl, source, cache = oauth_harness({1: 100_000, 2: 0})    # node 1's session: the token's life
    try:
        poll_for(h, lambda: h.metadata.update_version >= 1)
        poll_for(h, lambda: h.client.ready(1, h.now) and h.client.ready(2, h.now))
        h.client._close_connection(-1, [], h.now)      # the bootstrap connection aside
        h.clock.advance(80_001)                         # the refresh starts, and its endpoint is stuck
        h.poll()
        assert source.calls == 2
        h.clock.advance(10_000)                         # node 1 logs in again; the token is late
        polled = threading.Thread(target=h.poll, daemon=True)
        polled.start()
        polled.join(2)
        assert not polled.is_alive(), "the network thread waits for the token endpoint"
        assert not h.client.is_ready(1, h.now) and 1 in h.client._awaiting_token
        assert h.client.ready(2, h.now)                 # the other node goes on
        h.client.send(h.request(2), h.now)
        responses = []
        poll_for(h, lambda: responses.extend(h.poll()) or responses)
        assert [r.request.api for r in responses] == [PRODUCE] and not responses[0].disconnected
        source.release.set()                            # the endpoint answers: node 1's login resumes
        poll_for(h, lambda: h.client.is_ready(1, h.now))
        assert sasl[1].tokens[-1] == "tok2" and h.client.authentication_error(1) is None
        assert h.brokers[1].connections == 2            # the same connection logged in again
    finally:
        source.release.set()


class CappedOAuthBroker(OAuthBroker):
    """Kafka's OAUTHBEARER sessions: the token's remaining life, capped by
    ``connections.max.reauth.ms``; and its once-a-second rule for a new login on a connection."""

    def __init__(self, cap_ms: int, clock, expiries: dict):
        super().__init__(cap_ms)
        self.clock, self.expiries = clock, expiries
        self.last_start_ms = None
        self.refused = 0
        self.sessions = []

    def handshake(self, request):
        now = self.clock.now_ms()
        if self.last_start_ms is not None:
            if now - self.last_start_ms < 1_000:
                self.refused += 1
                return {"error_code": 34, "mechanisms": []}
            self.last_start_ms = now
        return super().handshake(request)

    def authenticate(self, request):
        answer = super().authenticate(request)
        left = self.expiries[self.tokens[-1]] - self.clock.now_ms()
        answer["session_lifetime_ms"] = min(self.lifetime_ms, left)
        self.sessions.append(answer["session_lifetime_ms"])
        return answer


def test_a_login_never_takes_a_token_too_near_its_end_for_the_broker_to_take_the_next_login():
    h, _, source, cache = oauth_harness({1: 0})         # 100 s tokens; the first fetch at once
    source.life_s = 5
    expiries = {}
    fetch = source.fetch
    source.fetch = lambda now_ms: _record(fetch(now_ms), expiries)
    sasl = CappedOAuthBroker(2_300, h.clock, expiries)  # connections.max.reauth.ms=2300, 5 s tokens
    sasl.install(h.brokers[1])
    try:
        poll_for(h, lambda: h.metadata.update_version >= 1)
        poll_for(h, lambda: h.client.ready(1, h.now))
        h.client._close_connection(-1, [], h.now)
        sasl.last_start_ms = h.clock.now_ms()
        for step in range(160):                         # 8 s in steps of 50 ms
            if step == 84:                              # the refresh is slow: it ends at 4.2 s
                source.release.set()
            h.clock.advance(50)
            h.poll()
            time.sleep(0.001)
        assert sasl.refused == 0 and h.client.authentication_error(1) is None
        assert min(sasl.sessions) >= 1_300, sasl.sessions
        assert h.brokers[1].connections == 2 and sasl.tokens[-1] == "tok2"
    finally:
        source.release.set()


def _record(token, expiries):
    expiries[token.value] = token.expires_at_ms
    return token


def test_poll_starts_the_scheduled_background_token_refresh():
    works = []
    h, sasl, source, cache = oauth_harness({1: 0}, spawn=works.append)    # no new login ever due
    poll_for(h, lambda: works)
    assert len(works) == 1 and source.calls == 0        # the first token: fetched off this thread
    works.pop()()
    poll_for(h, lambda: h.metadata.update_version >= 1)
    h.clock.advance(79_999)
    h.poll()
    assert not works
    h.clock.advance(1)                                  # 80% of the token's life: no login needs it
    h.poll()
    assert len(works) == 1 and source.calls == 1        # the refresh, started by poll itself


def test_a_login_without_a_token_fails_after_the_setup_timeout_or_at_once_when_the_fetch_failed():
    works = []
    h, sasl, source, cache = oauth_harness({1: 0}, spawn=works.append,
                                           socket_connection_setup_timeout_ms=5_000)
    poll_for(h, lambda: works)
    h.poll()
    assert h.state(-1) is ConnectionState.AUTHENTICATING and len(works) == 1   # the fetch never ends
    h.clock.advance(5_000)
    h.poll()
    error = h.client.authentication_error(-1)
    assert str(error) == ("SASL OAUTHBEARER authentication with b1:9092: no OAuth token from the gated "
                          "endpoint within 5000 ms (socket.connection.setup.timeout.ms)")
    with pytest.raises(AuthenticationError, match="no OAuth token from the gated endpoint"):
        h.metadata.await_topic("t2", 60_000, h.clock)    # waiters fail at once
    assert h.state(-1) is ConnectionState.DISCONNECTED
    source.fail = True
    works.pop()()                                       # the fetch fails, no valid token held
    h.clock.advance(100)                                # the reconnect backoff; the fetch's (1 s) runs
    poll_for(h, lambda: "is down" in str(h.client.authentication_error(-1)))
    assert not works                                    # no new fetch before its backoff
    assert str(h.client.authentication_error(-1)) == (
        "SASL OAUTHBEARER authentication with b1:9092: no OAuth token: the gated endpoint is down")
