"""SASL/OAUTHBEARER end to end against the embedded broker's OAUTHBEARER listeners (Kafka's
unsecured validator), records verified with confluent-kafka over the PLAINTEXT listener:

- tokens from a callback (``oauth_cb``), from an import path (``sasl.oauthbearer.token.provider``)
  and from OIDC client credentials against the testing kit's token endpoint over HTTPS (its
  certificate from the broker's test CA, trusted through the endpoint's own ``https.ca.location``);
- a token the broker refuses fails the send at once, naming the token's source, never the token.
"""

from __future__ import annotations

import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.admin import create_topic
from spark_kafka_sink.client.auth.oauth import UnsecuredJwtSource
from spark_kafka_sink.errors import AuthenticationError
from spark_kafka_sink.testing import TokenEndpoint

from ..verify import consume_all

pytestmark = pytest.mark.broker

RECORDS = 500
CLIENT_SECRET = "oidc-Secret-5c2e"


def unsigned_jwt(subject: str, life_s: int = 600) -> tuple[str, float]:
    """``(token, expiry in epoch seconds)``: an unsigned JWT as the package's own source makes it."""
    token = UnsecuredJwtSource(f"principal={subject} lifeSeconds={life_s}").fetch(time.time_ns() // 1_000_000)
    return token.value, token.expires_at_ms / 1000


CALLS: list[str | None] = []


def token_callback(config: str | None) -> tuple[str, float]:
    """Importable as tests.integration.test_oauthbearer:token_callback."""
    CALLS.append(config)
    return unsigned_jwt("callback-user")


def oauth_props(kafka, protocol: str = "SASL_PLAINTEXT", **more) -> dict:
    props = {key: value for key, value in kafka.client_properties(protocol, "OAUTHBEARER").items()
             if not key.startswith(("enable.sasl.oauthbearer", "sasl.oauthbearer"))}
    return {**props, "bootstrap.servers": kafka.bootstrap_for(protocol), "linger.ms": 5, **more}


def produce_and_verify(kafka, props: dict) -> None:
    topic = f"oauth-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    with KafkaProducer(props) as producer:
        futures = [producer.send(topic, b"%06d" % i, key=b"k%d" % (i % 7)) for i in range(RECORDS)]
        producer.flush(60)
        for future in futures:
            future.result(0)
    consumed = consume_all(kafka.bootstrap_servers, topic, 2, expected_count=RECORDS)
    assert sorted(int(m.value) for records in consumed.values() for m in records) == list(range(RECORDS))


def test_tokens_from_a_callback_get_the_config_string(secured_kafka):
    CALLS.clear()
    produce_and_verify(secured_kafka, oauth_props(secured_kafka, oauth_cb=token_callback,
                                                  **{"sasl.oauthbearer.config": "scope=write"}))
    assert CALLS and set(CALLS) == {"scope=write"}


def test_tokens_from_an_import_path(secured_kafka):
    CALLS.clear()
    produce_and_verify(secured_kafka, oauth_props(secured_kafka, **{
        "sasl.oauthbearer.token.provider": "tests.integration.test_oauthbearer:token_callback"}))
    assert CALLS == [None]        # one producer, one token: its connections share it


def test_tokens_from_oidc_client_credentials_over_https(secured_kafka):
    with TokenEndpoint({"sink-client": CLIENT_SECRET}, tls=secured_kafka.tls, lifetime_s=300) as idp:
        props = oauth_props(secured_kafka, "SASL_SSL", **{
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.client.id": "sink-client", "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "https.ca.location": str(secured_kafka.tls.ca_path),
            "sasl.oauthbearer.scope": "kafka", "sasl.oauthbearer.extensions": "logicalCluster=lkc-test"})
        assert idp.url.startswith("https://127.0.0.1:")
        produce_and_verify(secured_kafka, props)
        assert idp.issued_to("sink-client") == 1


def test_a_refused_token_fails_the_send_at_once_naming_its_source(secured_kafka, caplog):
    def bad_token(config):
        return "not-a-jwt-" + "x" * 20, time.time() + 60
    props = oauth_props(secured_kafka, oauth_cb=bad_token, **{"max.block.ms": 30_000})
    start = time.monotonic()
    with KafkaProducer(props) as producer:
        with pytest.raises(AuthenticationError) as info:
            producer.send("any-topic", b"x").result(10)
    assert time.monotonic() - start < 10
    message = str(info.value)
    assert "SASL OAUTHBEARER authentication with the token of oauth_cb" in message
    assert "bad_token" in message and "invalid_token" in message
    assert "not-a-jwt" not in message and all("not-a-jwt" not in r.getMessage() for r in caplog.records)


# --- KIP-368: a broker that wants a new login every few seconds -----------------------------------

REAUTH_MS = 3_000
TOKEN_LIFE_S = 5


@pytest.fixture(scope="module")
def reauth_kafka(tmp_path_factory):
    """One node whose SASL sessions last at most 3 s (``connections.max.reauth.ms``): a client
    that does not log in again on its connections is cut off."""
    from spark_kafka_sink.embedded import BrokerSecurity, EmbeddedKafka

    from ..conftest import _started

    cluster = EmbeddedKafka(1, security=BrokerSecurity(ssl=False), heap="256m",
                            extra_properties={"connections.max.reauth.ms": REAUTH_MS},
                            work_dir=tmp_path_factory.mktemp("kafka-reauth"))
    yield from _started(cluster, "the embedded Apache Kafka with connections.max.reauth.ms")


@pytest.mark.heavy
def test_a_stream_over_several_token_lifetimes_logs_in_again_and_loses_nothing(reauth_kafka):
    asked = []

    def short_lived(config):
        asked.append(time.monotonic())
        return unsigned_jwt("streamer", TOKEN_LIFE_S)
    topic = f"oauth-reauth-{uuid.uuid4().hex[:8]}"
    create_topic(reauth_kafka.bootstrap_servers, topic, 2)
    props = oauth_props(reauth_kafka, oauth_cb=short_lived, **{"linger.ms": 20})
    sent = 0
    with KafkaProducer(props) as producer:
        producer.send(topic, b"%06d" % sent).result(30)
        sent += 1
        node = next(iter(producer._metadata.snapshot.nodes))
        connection = producer._client.connection_id(node)
        deadline = time.monotonic() + 3 * TOKEN_LIFE_S      # three token lifetimes, five sessions
        futures = []
        while time.monotonic() < deadline and sent < 100_000:
            futures += [producer.send(topic, b"%06d" % i, key=b"k%d" % (i % 5)) for i in range(sent, sent + 50)]
            sent += 50
            time.sleep(0.05)
        producer.flush(60)
        for future in futures:
            future.result(0)
        metrics = producer.metrics()
        assert producer._client.connection_id(node) == connection, "the connection was replaced"
    assert metrics["successful-reauthentication-total"] >= 3, metrics
    assert metrics["failed-reauthentication-total"] == 0 and metrics["record-retry-total"] == 0
    assert len(asked) >= 3, "the token source was not asked again"
    consumed = consume_all(reauth_kafka.bootstrap_servers, topic, 2, expected_count=sent)
    assert sorted(int(m.value) for records in consumed.values() for m in records) == list(range(sent))


# --- a broker that validates signed JWTs against a JWKS -------------------------------------------

@pytest.fixture(scope="module")
def signing_idp():
    with TokenEndpoint({"signed-client": CLIENT_SECRET}, signed=True, lifetime_s=300) as idp:
        yield idp


@pytest.fixture(scope="module")
def jwks_kafka(tmp_path_factory, signing_idp):
    """One node whose OAUTHBEARER listener runs Kafka's OAuthBearerValidatorCallbackHandler: RS256
    signatures checked against the token endpoint's key set (a file:// JWKS), the issuer too."""
    from spark_kafka_sink.embedded import BrokerSecurity, EmbeddedKafka

    from ..conftest import _started

    work = tmp_path_factory.mktemp("kafka-jwks")
    jwks = signing_idp.write_jwks(work / "jwks.json")
    package = "org.apache.kafka.common.security.oauthbearer"
    cluster = EmbeddedKafka(1, security=BrokerSecurity(ssl=False), heap="256m", work_dir=work / "kafka",
                            extra_properties={
                                "listener.name.sasl_plaintext.oauthbearer.sasl.server.callback.handler.class":
                                    f"{package}.OAuthBearerValidatorCallbackHandler",
                                # named: Kafka 4.1's default validator checked no signature here
                                "sasl.oauthbearer.jwt.validator.class": f"{package}.BrokerJwtValidator",
                                "sasl.oauthbearer.jwks.endpoint.url": jwks.as_uri(),
                                "sasl.oauthbearer.expected.issuer": signing_idp.issuer},
                            system_properties={"org.apache.kafka.sasl.oauthbearer.allowed.urls": jwks.as_uri()})
    yield from _started(cluster, "the embedded Apache Kafka validating signed JWTs")


def test_signed_tokens_from_oidc_pass_the_brokers_jwks_validation(jwks_kafka, signing_idp):
    props = oauth_props(jwks_kafka, **{
        "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": signing_idp.url,
        "sasl.oauthbearer.client.id": "signed-client", "sasl.oauthbearer.client.secret": CLIENT_SECRET})
    produce_and_verify(jwks_kafka, props)


def test_the_jwks_broker_refuses_unsigned_forged_and_foreign_tokens(jwks_kafka, signing_idp):
    with TokenEndpoint({"other": CLIENT_SECRET}, signed=True) as stranger:
        foreign = stranger.token_for("other")
    header, claims, signature = signing_idp.token_for("signed-client").split(".")
    forged = f"{header}.{claims}.{signature[:-6]}AAAAAA"
    expiry = time.time() + 300
    for token, what in ((unsigned_jwt("intruder")[0], "unsigned"), (foreign, "signed by another key"),
                        (forged, "its signature altered")):
        props = oauth_props(jwks_kafka, oauth_cb=lambda config, token=token: (token, expiry),
                            **{"max.block.ms": 20_000})
        with KafkaProducer(props) as producer:
            with pytest.raises(AuthenticationError, match="invalid_token") as info:
                producer.send("any-topic", b"x").result(10)
        assert token not in str(info.value), what


def test_oauth_secrets_and_tokens_never_appear_in_logs_errors_or_reprs(secured_kafka, caplog, capfd):
    """Grep everything an OAUTHBEARER producer left behind (DEBUG logs, stdout/stderr, errors,
    reprs, the redacted config) for the client secret, the config string and every token issued."""
    import logging

    from spark_kafka_sink.config import ProducerConfig

    caplog.set_level(logging.DEBUG, logger="spark_kafka_sink")
    config_string = "scope=write secret-in-config=Cfg-Secret-9a1b"
    seen: list[str] = []
    with TokenEndpoint({"grep-client": CLIENT_SECRET}, tls=secured_kafka.tls, lifetime_s=60) as idp:
        good = oauth_props(secured_kafka, "SASL_SSL", **{
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.client.id": "grep-client", "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "https.ca.location": str(secured_kafka.tls.ca_path), "sasl.oauthbearer.config": config_string})
        produce_and_verify(secured_kafka, good)                      # a successful exchange
        tokens = [idp.token_for("grep-client")]
        bad = {**good, "sasl.oauthbearer.client.secret": "wrong-" + CLIENT_SECRET, "max.block.ms": 10_000}
        config = ProducerConfig(bad)
        with KafkaProducer(config) as producer:                      # the endpoint refuses it
            with pytest.raises(AuthenticationError) as info:
                producer.send("any-topic", b"x")
            seen += [str(info.value), repr(info.value), repr(producer), repr(producer.config),
                     str(producer.config.redacted()), repr(producer._client._settings)]
    refused_token = "opaque-Token-5e6f7a8b"          # not a JWT: the broker refuses it

    def refused(config):
        return refused_token, time.time() + 60
    with KafkaProducer(oauth_props(secured_kafka, oauth_cb=refused, **{"max.block.ms": 10_000})) as producer:
        with pytest.raises(AuthenticationError) as info:                # the broker refuses it
            producer.send("any-topic", b"x").result(10)
        seen += [str(info.value), repr(producer)]
    out, err = capfd.readouterr()
    seen += [caplog.text, out, err, *(record.getMessage() for record in caplog.records)]
    text = "\n".join(seen)
    assert "OIDC client 'grep-client'" in text and "invalid_client" in text and caplog.records
    for secret in (CLIENT_SECRET, config_string, "Cfg-Secret-9a1b", refused_token, *tokens):
        assert secret not in text


# --- a token endpoint that stops answering (a trickle defeats per-read timeouts) ------------------

def test_a_stalled_token_endpoint_never_holds_records_past_their_delivery_timeout(reauth_kafka):
    """Sessions of 3 s, tokens of 4 s: once the endpoint trickles, the refresh and then every login
    wait for a token; the network thread goes on and fails each record at its delivery timeout."""
    topic = f"oauth-stall-{uuid.uuid4().hex[:8]}"
    create_topic(reauth_kafka.bootstrap_servers, topic, 2)
    with TokenEndpoint({"sink-client": CLIENT_SECRET}, lifetime_s=4) as idp:
        props = oauth_props(reauth_kafka, **{
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.client.id": "sink-client", "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "request.timeout.ms": 2_000, "delivery.timeout.ms": 3_000, "max.block.ms": 1_000,
            "socket.connection.setup.timeout.ms": 2_000})
        with KafkaProducer(props) as producer:
            producer.send(topic, b"before").result(10)
            idp.stall(byte_every_s=0.5)
            futures = []
            deadline = time.monotonic() + 5                  # past the token's end
            while time.monotonic() < deadline:
                try:
                    futures.append(producer.send(topic, b"during", partition=len(futures) % 2))
                except AuthenticationError:
                    pass                                     # a send may fail at once: no token
                time.sleep(0.02)
            stopped = time.monotonic()
            producer.flush(timeout=3 + 5)                    # delivery.timeout.ms plus a margin
            took = time.monotonic() - stopped
            assert all(future.done() for future in futures)
            failed = [f for f in futures if f.exception(0) is not None]
        assert idp.stalled >= 1 and failed, "the stall was not reached"
    assert took < 3 + 5, f"records stayed pending {took:.1f} s after sending stopped"


def test_the_preflight_bound_holds_with_a_stalled_token_endpoint(secured_kafka):
    import threading

    from spark_kafka_sink.spark.options import SinkConfig
    from spark_kafka_sink.spark.preflight import PreflightError, preflight

    with TokenEndpoint({"sink-client": CLIENT_SECRET}) as idp:
        idp.stall(byte_every_s=0.5)
        props = oauth_props(secured_kafka, **{
            "sasl.oauthbearer.method": "oidc", "sasl.oauthbearer.token.endpoint.url": idp.url,
            "sasl.oauthbearer.client.id": "sink-client", "sasl.oauthbearer.client.secret": CLIENT_SECRET,
            "max.block.ms": 3_000})                          # the preflight's bound: 3 s
        config = SinkConfig.from_options({"topic": "any-topic", **{f"kafka.{k}": v for k, v in props.items()}})
        outcome = []

        def run():
            started = time.monotonic()
            try:
                preflight(config)
            except PreflightError as error:
                outcome.append((error, time.monotonic() - started))
        thread = threading.Thread(target=run, daemon=True)
        thread.start()
        thread.join(15)
        assert not thread.is_alive(), "the preflight is still waiting for the token endpoint"
    error, took = outcome[0]
    assert took < 3 + 2 and "no OAuth token" in str(error) and "within 3 s" in str(error), (took, error)
