"""OAUTHBEARER, sans broker: the RFC 7628 message, token sources, the refreshing cache, the
config's choice of source, and OIDC client credentials against the testing kit's endpoint."""

from __future__ import annotations

import base64
import json
import random
import time

import pytest

from spark_kafka_sink.client.auth.jaas import credentials_from_config
from spark_kafka_sink.client.auth.oauth import (CallbackTokenSource, TokenCache, UnsecuredJwtSource,
                                           import_provider, parse_extensions)
from spark_kafka_sink.client.auth.oauth_token import OAuthToken
from spark_kafka_sink.client.auth.oidc import OidcTokenSource, jwt_claims
from spark_kafka_sink.client.auth.sasl import OAuthBearerMechanism, SaslError
from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import AuthenticationError, ConfigError
from spark_kafka_sink.testing import TokenEndpoint

from ..fakes import FakeClock

SECRET = "Cl1ent-S3cret-77"
NOW_S = 1_700_000_000


def jwt(claims: dict) -> str:
    def part(value):
        return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
    return f"{part({'alg': 'none'})}.{part(claims)}."


def token_provider(config):
    """Importable as tests.unit.client.test_oauth:token_provider."""
    return jwt({"sub": "provided", "exp": NOW_S + 600}), NOW_S + 600


# --- the mechanism ------------------------------------------------------------------------------

def test_the_client_message_is_rfc_7628_as_kafka_writes_it():
    token = OAuthToken("eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.", 1, "a", {"logicalCluster": "lkc-1", "pool": "p x"})
    mechanism = OAuthBearerMechanism(token)
    assert mechanism.initial_response() == (
        b"n,,\x01auth=Bearer eyJhbGciOiJub25lIn0.eyJzdWIiOiJhIn0.\x01logicalCluster=lkc-1\x01pool=p x\x01\x01")
    assert not mechanism.complete
    assert mechanism.evaluate(b"") is None and mechanism.complete


def test_a_refusal_is_acknowledged_then_named_by_its_status_never_the_token():
    mechanism = OAuthBearerMechanism(OAuthToken("abc.def.", 1))
    mechanism.initial_response()
    assert mechanism.evaluate(b'{"status":"invalid_token","scope":"write"}') == b"\x01"
    assert mechanism.refusal == "status invalid_token, scope write" and not mechanism.complete
    with pytest.raises(SaslError, match="invalid_token") as info:
        mechanism.evaluate(b"")
    assert "abc.def" not in str(info.value)


@pytest.mark.parametrize("value", ["has space", "", "a\x01b", "é"])
def test_a_token_must_be_a_bearer_token(value):
    with pytest.raises(ValueError, match="bearer token"):
        OAuthToken(value, 1)


@pytest.mark.parametrize("extensions, message", [
    ({"auth": "x"}, "not 'auth'"), ({"bad-name": "x"}, "letters only"), ({"k": "\x00"}, "printable"),
])
def test_extensions_are_checked_as_kafka_checks_them(extensions, message):
    with pytest.raises(ValueError, match=message):
        OAuthToken("t", 1, None, extensions)


def test_extensions_parse_from_librdkafkas_form():
    assert parse_extensions("logicalCluster=lkc-1, identityPoolId=pool-2") == {
        "logicalCluster": "lkc-1", "identityPoolId": "pool-2"}
    with pytest.raises(ConfigError, match="sasl.oauthbearer.extensions.*without '='"):
        parse_extensions("logicalCluster")


# --- sources ------------------------------------------------------------------------------------

def test_a_callback_gets_the_config_string_and_may_return_principal_and_extensions():
    seen = []

    def callback(config):
        seen.append(config)
        return jwt({"sub": "x"}).encode(), NOW_S + 60.5, "x", {"traceId": "t1"}
    token = CallbackTokenSource(callback, "scope=write", "oauth_cb test").fetch(0)
    assert seen == ["scope=write"]
    assert (token.expires_at_ms, token.principal, dict(token.extensions)) == (
        (NOW_S + 60.5) * 1000, "x", {"traceId": "t1"})


@pytest.mark.parametrize("answer, message", [
    ("just-a-token", "must return"), (("t",), "must return"), (("t", "soon"), "epoch seconds"),
    (("t", True), "epoch seconds"), (("bad token", 1), "unusable token"),
])
def test_a_callbacks_bad_answer_is_an_authentication_error(answer, message):
    with pytest.raises(AuthenticationError, match=message):
        CallbackTokenSource(lambda config: answer, None, "oauth_cb test").fetch(0)


def test_a_failing_callback_is_named_and_its_config_string_hidden():
    def callback(config):
        raise RuntimeError(f"cannot use {config}")
    with pytest.raises(AuthenticationError) as info:
        CallbackTokenSource(callback, "secret=hunter2", "oauth_cb my.fn").fetch(0)
    assert str(info.value) == "oauth_cb my.fn failed: RuntimeError: cannot use [hidden]"


def test_an_unsecured_jwt_carries_librdkafkas_options():
    source = UnsecuredJwtSource("principal=alice scope=read,write lifeSeconds=600 extension_traceId=abc")
    token = source.fetch(NOW_S * 1000 + 999)
    claims = jwt_claims(token.value)
    assert claims == {"sub": "alice", "iat": NOW_S, "exp": NOW_S + 600, "scope": ["read", "write"]}
    assert token.value.endswith(".") and json.loads(base64.urlsafe_b64decode(
        token.value.split(".")[0] + "==")) == {"alg": "none"}
    assert (token.expires_at_ms, token.principal, dict(token.extensions)) == (
        (NOW_S + 600) * 1000, "alice", {"traceId": "abc"})


@pytest.mark.parametrize("config, message", [
    ("", "principal=<name>"), ("principal=a lifeSeconds=0", "lifeSeconds"),
    ("principal=a colour=red", "unknown option"), ("principal=a junk", "no '='"),
])
def test_an_unsecured_jwt_config_is_checked(config, message):
    with pytest.raises(ConfigError, match=message):
        UnsecuredJwtSource(config)


def test_a_provider_is_imported_by_path():
    assert import_provider("tests.unit.client.test_oauth:token_provider") is token_provider
    with pytest.raises(ConfigError, match="module:function"):
        import_provider("no_colon_here")
    with pytest.raises(ConfigError, match="cannot be imported: ModuleNotFoundError"):
        import_provider("no_such_module_here:fn")
    with pytest.raises(ConfigError, match="not callable"):
        import_provider("tests.unit.client.test_oauth:SECRET")


# --- the cache ----------------------------------------------------------------------------------

class Counting:
    def __init__(self, clock, life_s=100):
        self.clock, self.life_s, self.calls, self.fail = clock, life_s, 0, False

    def describe(self):
        return "the counting source"

    def fetch(self, now_ms):
        self.calls += 1
        if self.fail:
            raise AuthenticationError("the counting source is down")
        return OAuthToken(f"t{self.calls}", now_ms + self.life_s * 1000)


class Middle(random.Random):
    def uniform(self, a, b):
        return (a + b) / 2


def now_spawn(work):
    """Runs the background refresh at once, in the caller's thread (deterministic tests)."""
    work()


def first_token(cache, works) -> OAuthToken:
    """The first token of a cache whose fetches wait in ``works`` until run by hand."""
    assert cache.poll().pending and len(works) == 1
    works.pop()()
    return cache.poll().token


def test_the_cache_refreshes_at_80_percent_of_the_lifetime_in_the_background():
    clock = FakeClock()
    source = Counting(clock)
    works = []
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=works.append)
    assert first_token(cache, works).value == "t1"
    clock.advance(79_999)
    assert cache.token(5).value == "t1" and source.calls == 1 and not works
    clock.advance(1)
    assert cache.token(5).value == "t1" and len(works) == 1   # the held token; the refresh started
    works.pop()()                                             # ... and ran beside it
    assert cache.token(5).value == "t2" and cache.fetches == 2


def test_the_refresh_time_is_jittered_within_5_percent():
    clock = FakeClock()
    times = set()
    for seed in range(30):
        cache = TokenCache(Counting(clock), clock=clock, rng=random.Random(seed))
        cache.token(5)
        times.add(cache._refresh_at_ms - clock.now_ms())
    assert min(times) >= 75_000 and max(times) <= 85_000 and len(times) > 20


def test_a_failed_refresh_keeps_the_valid_token_and_backs_off_then_fails_once_it_expired(caplog):
    clock = FakeClock()
    source = Counting(clock)
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=now_spawn)
    cache.token(5)
    source.fail = True
    clock.advance(80_000)
    assert cache.token(5).value == "t1" and source.calls == 2       # refresh failed, kept the valid one
    assert "refreshing the OAuth token failed" in caplog.text
    clock.advance(500)
    assert cache.token(5).value == "t1" and source.calls == 2       # backing off (1 s)
    clock.advance(500)
    assert cache.token(5).value == "t1" and source.calls == 3       # tried again, failed again
    clock.advance(19_000)                                          # the token expired
    with pytest.raises(AuthenticationError, match="no OAuth token: the counting source is down"):
        cache.token(5)
    source.fail = False
    with pytest.raises(AuthenticationError, match="the counting source is down"):
        cache.token(5)                                             # backing off (4 s): no fetch
    assert source.calls == 4
    clock.advance(4_000)
    assert cache.token(5).value == "t5"


def test_a_slow_refresh_never_holds_up_a_login():
    import threading

    clock = FakeClock()
    release = threading.Event()

    class Slow(Counting):
        def fetch(self, now_ms):
            if self.calls:                   # the refresh, not the first token
                release.wait(10)
            return super().fetch(now_ms)
    source = Slow(clock)
    cache = TokenCache(source, clock=clock, rng=Middle())       # a real background thread
    cache.token(5)
    clock.advance(80_000)
    started = time.monotonic()
    for _ in range(5):
        assert cache.token(5).value == "t1"    # at once, while the refresh waits on its "IdP"
    assert time.monotonic() - started < 1.0
    release.set()
    deadline = time.monotonic() + 10
    while cache.token(5).value != "t2" and time.monotonic() < deadline:
        time.sleep(0.01)
    assert cache.token(5).value == "t2" and source.calls == 2     # one refresh, not one per login


def test_an_already_expired_token_is_refused():
    clock = FakeClock()
    source = Counting(clock, life_s=-5)
    with pytest.raises(AuthenticationError, match="expired 5 s ago"):
        TokenCache(source, clock=clock).token(5)


# --- the config chooses one source ------------------------------------------------------------

BASE = {"bootstrap.servers": "localhost:9092", "security.protocol": "SASL_SSL",
        "sasl.mechanism": "OAUTHBEARER"}


def source_of(**props):
    return credentials_from_config(ProducerConfig({**BASE, **props})).token_cache


def error_of(**props) -> str:
    with pytest.raises(ConfigError) as info:
        ProducerConfig({**BASE, **props})
    assert SECRET not in str(info.value)
    return str(info.value)


def test_oauthbearer_needs_exactly_one_source():
    assert "needs a token source" in error_of()
    assert "one token source, but these are all set: oauth_cb; enable.sasl.oauthbearer.unsecure.jwt" in error_of(
        oauth_cb=token_provider, **{"enable.sasl.oauthbearer.unsecure.jwt": True,
                                    "sasl.oauthbearer.config": "principal=a"})
    assert "are for PLAIN and SCRAM" in error_of(**{"sasl.username": "u", "sasl.password": SECRET,
                                                     "oauth_cb": token_provider})


def test_each_source_is_built_from_its_settings():
    assert "oauth_cb tests.unit.client.test_oauth.token_provider" in source_of(oauth_cb=token_provider).describe()
    cache = source_of(**{"sasl.oauthbearer.token.provider": "tests.unit.client.test_oauth:token_provider",
                         "sasl.oauthbearer.extensions": "logicalCluster=lkc-9"})
    token = cache.source.fetch(0)
    assert token.principal is None and dict(token.extensions) == {"logicalCluster": "lkc-9"}
    unsecured = source_of(**{"enable.sasl.oauthbearer.unsecure.jwt": "true",
                             "sasl.oauthbearer.config": "principal=bob"})
    assert jwt_claims(unsecured.source.fetch(0).value)["sub"] == "bob"
    java = source_of(**{"sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule "
                                            "required unsecuredLoginStringClaim_sub=\"carol\" extension_pool=\"p1\";"})
    token = java.source.fetch(0)
    assert jwt_claims(token.value)["sub"] == "carol" and dict(token.extensions) == {"pool": "p1"}


def test_a_provider_path_is_checked_without_import_until_the_producer_needs_it():
    ProducerConfig({**BASE, "sasl.oauthbearer.token.provider": "only_on_executors:fn"})   # no import yet
    assert "module:function" in error_of(**{"sasl.oauthbearer.token.provider": "not a path"})
    with pytest.raises(ConfigError, match="cannot be imported"):
        source_of(**{"sasl.oauthbearer.token.provider": "only_on_executors:fn"})


def test_oidc_settings_are_checked_and_the_secret_never_shown():
    message = error_of(**{"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.secret": SECRET})
    assert message == ("OAUTHBEARER with OIDC needs sasl.oauthbearer.token.endpoint.url, the client id "
                       "(sasl.oauthbearer.client.id and sasl.oauthbearer.client.secret)")
    assert "must be an https:// URL" in error_of(**{
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": "http://idp.example/token",
        "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": SECRET})
    config = ProducerConfig({**BASE, "sasl.oauthbearer.method": "oidc",
                             "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token",
                             "sasl.oauthbearer.client.id": "c", "sasl.oauthbearer.client.secret": SECRET,
                             "sasl.oauthbearer.config": "x=" + SECRET})
    cache = credentials_from_config(config).token_cache
    for text in (repr(config), str(config.redacted()), repr(cache), repr(cache.source),
                 repr(credentials_from_config(config))):
        assert SECRET not in text
    assert cache.describe() == "OIDC client 'c' at https://idp.example/token"


# --- OIDC against the testing kit's endpoint (plain HTTP on loopback) ---------------------------

def test_oidc_client_credentials_get_a_token_with_its_lifetime_and_principal():
    with TokenEndpoint({"sink": SECRET}, lifetime_s=120) as idp:
        source = OidcTokenSource(idp.url, "sink", SECRET, scope="kafka", extensions={"pool": "p1"})
        token = source.fetch(0)
        claims = jwt_claims(token.value)
        assert claims["sub"] == "sink" and claims["scope"] == "kafka"
        assert token.expires_at_ms == claims["exp"] * 1000 and token.principal == "sink"
        assert dict(token.extensions) == {"pool": "p1"} and idp.issued == 1


def test_a_wrong_secret_is_named_by_the_endpoint_and_the_oauth_error_not_the_secret():
    with TokenEndpoint({"sink": SECRET}) as idp:
        url = idp.url
        with pytest.raises(AuthenticationError) as info:
            OidcTokenSource(url, "sink", "wrong-" + SECRET).fetch(0)
    assert str(info.value) == (f"OIDC client 'sink' at {url} refused the client credentials: HTTP 401: "
                               "invalid_client (unknown client or wrong secret)")
    assert SECRET not in str(info.value)


def test_an_unreachable_endpoint_and_a_failing_one_are_retried_by_the_cache():
    clock = FakeClock(wall_ms=NOW_S * 1000)
    with TokenEndpoint({"sink": SECRET}, lifetime_s=60) as idp:
        url = idp.url
        cache = TokenCache(OidcTokenSource(url, "sink", SECRET), clock=clock, rng=Middle())
        idp.fail_next(1, 503)
        with pytest.raises(AuthenticationError, match="HTTP 503: temporarily_unavailable"):
            cache.token(5)
        clock.advance(1_000)
        assert jwt_claims(cache.token(5).value)["sub"] == "sink" and idp.issued == 1
    with pytest.raises(AuthenticationError, match="cannot be reached"):
        OidcTokenSource(url, "sink", SECRET, timeout_s=2).fetch(0)


def test_a_late_refresh_makes_the_next_login_wait_for_a_new_token():
    clock = FakeClock()
    source = Counting(clock)
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=now_spawn)
    cache.token(5)
    source.fail = True
    clock.advance(85_000)
    assert cache.token(5).value == "t1" and source.calls == 2     # the refresh failed, backing off
    source.fail = False
    clock.advance(5_000)                                          # 90%: a session would be moments
    assert cache.token(5).value == "t3" and source.calls == 3     # this login fetched it itself


def test_the_refresh_starts_on_schedule_without_a_login():
    clock = FakeClock()
    source = Counting(clock)
    started = []
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=lambda work: started.append(work))
    first_token(cache, started)
    cache.maybe_refresh()
    assert not started                                  # not due yet
    clock.advance(80_000)
    cache.maybe_refresh()
    cache.maybe_refresh()                               # one refresh at a time
    assert len(started) == 1
    started[0]()
    assert cache.token(5).value == "t2"


def test_a_late_login_waits_for_the_running_refresh_instead_of_fetching_again():
    import threading

    clock = FakeClock()
    source = Counting(clock)
    works = []
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=works.append)
    first_token(cache, works)
    clock.advance(85_000)
    cache.maybe_refresh()                               # running (not yet finished)
    clock.advance(5_000)                                # 90%: late
    threading.Timer(0.2, works[0]).start()              # the refresh finishes a little later
    assert cache.token(5).value == "t2" and source.calls == 2


def test_a_login_that_needs_a_session_of_some_length_waits_for_a_token_that_lives_that_long():
    clock = FakeClock()
    source = Counting(clock)                            # 100 s tokens
    works = []
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=works.append)
    first_token(cache, works)
    clock.advance(70_000)                               # 30 s left, before the refresh is due
    assert cache.poll().token.value == "t1" and not works
    assert cache.poll(min_life_ms=40_000).pending and len(works) == 1   # a new one is fetched
    assert cache.poll().token.value == "t1"             # a login content with 30 s still has it
    works.pop()()
    assert cache.poll(min_life_ms=40_000).token.value == "t2"
    short = TokenCache(Counting(clock, life_s=60), clock=clock, rng=Middle(), spawn=works.append)
    first_token(short, works)
    clock.advance(30_000)                               # its tokens never live twice 40 s: no help
    assert short.poll(min_life_ms=40_000).token.value == "t1" and not works


def test_whatever_a_source_raises_becomes_an_authentication_error_and_the_refresh_recovers():
    clock = FakeClock()

    class Buggy(Counting):
        def fetch(self, now_ms):
            if self.fail:
                raise OverflowError("exp out of range")
            return super().fetch(now_ms)
    source = Buggy(clock)
    cache = TokenCache(source, clock=clock, rng=Middle(), spawn=now_spawn)
    source.fail = True
    with pytest.raises(AuthenticationError, match="the counting source failed: OverflowError"):
        cache.token(5)
    source.fail = False
    clock.advance(1_000)                                # the backoff after a failed fetch
    assert cache.token(5).value == "t1"
    source.fail = True
    clock.advance(80_000)
    assert cache.token(5).value == "t1"                 # refresh failed in the background, no leak
    assert cache._fetching is False


def test_a_callback_echoing_one_setting_of_its_config_string_does_not_leak_it():
    def callback(config):
        raise RuntimeError("bad client_secret=Hunter2-Secret")
    with pytest.raises(AuthenticationError) as info:
        CallbackTokenSource(callback, "client_id=me client_secret=Hunter2-Secret", "oauth_cb x").fetch(0)
    assert "Hunter2-Secret" not in str(info.value)


def test_an_oidc_endpoint_is_shown_without_user_info_or_query():
    source = OidcTokenSource("https://user:pw@idp.example:8443/token?api_key=K3y-abcdef", "c", SECRET)
    assert source.describe() == "OIDC client 'c' at https://idp.example:8443/token"
    assert "K3y" not in repr(source) and "pw" not in repr(source)


def test_a_redirect_is_not_followed_and_is_named_without_user_info_or_query():
    with TokenEndpoint({"sink": SECRET}) as idp, TokenEndpoint({"sink": SECRET}) as elsewhere:
        url, thief = idp.url, elsewhere.url
        idp.redirect_next(thief + "?leak=Q-Secret-1")
        with pytest.raises(AuthenticationError) as info:
            OidcTokenSource(url, "sink", SECRET).fetch(0)
        assert elsewhere.credentials_received == 0     # the client secret was not sent there
        idp.redirect_next("https://u:Pw-9z@idp.example/other?code=Q-Secret-2#f", status=307)
        with pytest.raises(AuthenticationError) as with_user:
            OidcTokenSource(url, "sink", SECRET).fetch(0)
        idp.redirect_next("/relative?code=Q-Secret-3", status=301)
        with pytest.raises(AuthenticationError) as relative:
            OidcTokenSource(url, "sink", SECRET).fetch(0)
    assert str(info.value) == (
        f"OIDC client 'sink' at {url} answered HTTP 302, a redirect to {thief}: redirects "
        "are not followed (the request carries the client secret); set "
        "sasl.oauthbearer.token.endpoint.url to the URL that issues the tokens")
    assert "HTTP 307, a redirect to https://idp.example/other:" in str(with_user.value)
    assert f"HTTP 301, a redirect to {url.rsplit('/', 1)[0]}/relative:" in str(relative.value)
    for text in (str(info.value), str(with_user.value), str(relative.value)):
        assert "Q-Secret" not in text and "Pw-9z" not in text and SECRET not in text


def test_a_stalled_endpoint_fails_the_fetch_at_its_whole_deadline():
    import threading

    outcome = []

    def fetch(source):
        started = time.monotonic()
        try:
            source.fetch(0)
        except AuthenticationError as exc:
            outcome.append((exc, time.monotonic() - started))
    with TokenEndpoint({"sink": SECRET}) as idp:
        url = idp.url
        idp.stall(byte_every_s=0.1)                    # each read gets a byte well within 1 s
        thread = threading.Thread(target=fetch, args=(OidcTokenSource(idp.url, "sink", SECRET, timeout_s=1),),
                                  daemon=True)
        thread.start()
        thread.join(5)
        assert not thread.is_alive(), "the fetch is still reading the trickle"
        assert idp.stalled == 1
    error, took = outcome[0]
    assert str(error) == f"OIDC client 'sink' at {url} did not answer within 1 s"
    assert 0.9 < took < 2.5


# --- the token endpoint's own trust (https.ca.location), never the broker's ----------------------

def oidc_config(url: str, **more) -> ProducerConfig:
    return ProducerConfig({**BASE, "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": url,
                           "sasl.oauthbearer.client.id": "sink", "sasl.oauthbearer.client.secret": SECRET, **more})


def test_the_token_endpoint_is_trusted_through_its_own_setting_not_the_brokers_ca(tmp_path):
    import ssl
    from types import SimpleNamespace

    from .tls_certs import make_certs

    broker = make_certs(tmp_path, prefix="broker-")      # a private-CA cluster
    idp_certs = make_certs(tmp_path, prefix="idp-")
    tls = SimpleNamespace(server_cert_path=idp_certs.server_cert, server_key_path=idp_certs.server_key)
    with TokenEndpoint({"sink": SECRET}, tls=tls) as idp:
        own = credentials_from_config(oidc_config(idp.url, **{
            "ssl.ca.location": str(broker.ca), "https.ca.location": str(idp_certs.ca)})).token_cache
        assert jwt_claims(own.source.fetch(0).value)["sub"] == "sink"
        pem = credentials_from_config(oidc_config(idp.url, **{
            "ssl.ca.location": str(broker.ca), "https.ca.pem": idp_certs.ca.read_text()})).token_cache
        assert jwt_claims(pem.source.fetch(0).value)["sub"] == "sink"
        java = credentials_from_config(oidc_config(idp.url, **{
            "sasl.oauthbearer.method": "default", "sasl.oauthbearer.client.id": None,
            "sasl.oauthbearer.client.secret": None, "ssl.ca.location": str(broker.ca),
            "sasl.jaas.config": "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
                                f'clientId="sink" clientSecret="{SECRET}" ssl.truststore.type="PEM" '
                                f'ssl.truststore.location="{idp_certs.ca}";'})).token_cache
        assert jwt_claims(java.source.fetch(0).value)["sub"] == "sink"
        brokers_ca = credentials_from_config(oidc_config(idp.url, **{"ssl.ca.location": str(idp_certs.ca)})).token_cache
        with pytest.raises(AuthenticationError, match="CERTIFICATE_VERIFY_FAILED"):
            brokers_ca.source.fetch(0)          # the broker's CA setting does not vouch for the endpoint
        assert idp.issued == 3
    system = brokers_ca.source.trust.context().cert_store_stats()
    assert system == ssl.create_default_context().cert_store_stats()     # unset: the system CAs


@pytest.mark.parametrize("props, message", [
    ({"https.ca.location": "/a.pem", "https.ca.pem": "-----BEGIN CERTIFICATE-----"},
     "set only one of https.ca.location, https.ca.pem"),
    ({"https.ca.pem": "not a certificate"}, "https.ca.pem must hold PEM certificates"),
    ({"https.ca.location": " "}, "https.ca.location is empty"),
])
def test_the_token_endpoint_trust_is_checked(props, message):
    assert message in error_of(**{"sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.client.id": "c",
                                  "sasl.oauthbearer.client.secret": SECRET,
                                  "sasl.oauthbearer.token.endpoint.url": "https://idp.example/token", **props})


def test_the_token_endpoint_trust_is_refused_without_a_token_endpoint_and_in_java_form_must_be_pem():
    assert "name the CAs of an OIDC token endpoint, but the token source is oauth_cb" in error_of(
        oauth_cb=token_provider, **{"https.ca.location": "/idp-ca.pem"})
    jaas = ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required clientId=\"c\" "
            f"clientSecret=\"{SECRET}\" ssl.truststore.location=\"/idp.jks\";")
    url = {"sasl.oauthbearer.token.endpoint.url": "https://idp.example/token"}
    assert "ssl.truststore.location needs ssl.truststore.type=PEM" in error_of(**{"sasl.jaas.config": jaas, **url})
    keystore = jaas.replace("ssl.truststore.location", "ssl.keystore.location")
    assert "ssl.keystore.location is not supported" in error_of(**{"sasl.jaas.config": keystore, **url})
    both = jaas.replace('";', '" ssl.truststore.type="PEM";')
    assert "set only one of https.ca.location, ssl.truststore.location (sasl.jaas.config)" in error_of(
        **{"sasl.jaas.config": both, "https.ca.location": "/b.pem", **url})


def test_a_blocking_caller_waits_for_a_stuck_fetch_no_longer_than_its_timeout():
    import threading

    clock = FakeClock()
    release = threading.Event()

    class Stuck(Counting):
        def fetch(self, now_ms):
            release.wait(30)
            return super().fetch(now_ms)
    cache = TokenCache(Stuck(clock), clock=clock, rng=Middle())     # a real fetching thread
    try:
        started = time.monotonic()
        with pytest.raises(AuthenticationError) as info:
            cache.token(0.3)
        assert time.monotonic() - started < 2
        assert str(info.value) == "no OAuth token: the counting source gave none within 0.3 s"
        assert cache.poll().pending                   # the fetch goes on, one at a time
        release.set()
        assert cache.token(5).value == "t1"
    finally:
        release.set()
