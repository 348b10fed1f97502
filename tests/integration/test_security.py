"""TLS and SASL end to end: our producer (and admin) against the embedded broker's secured
listeners, records verified with confluent-kafka's consumer over the same listener.

One broker for the module (``client_auth="required"``: every TLS connection presents the
generated client certificate, and one without it is refused with SslAuthenticationError). It
proves:

- produce over SSL, SASL_PLAINTEXT (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER) and SASL_SSL
  (the four mechanisms), with the topic created over the same listener (BlockingConnection TLS +
  SASL); more OAUTHBEARER in test_oauthbearer.py;
- credentials given as a Java ``sasl.jaas.config`` line;
- host name verification: a name the certificate lacks is refused, unless
  ``ssl.endpoint.identification.algorithm`` is empty;
- a CA that did not sign the broker's certificate: send() raises SslAuthenticationError
  ("certificate verify failed") at once, not after ``max.block.ms``; admin calls raise the same
  errors as the producer (untrusted certificate, wrong password);
- a wrong password: send() raises AuthenticationError at once, flush() returns, and the
  reconnects stay bounded by the reconnect backoff (no retry storm);
- the passwords and the JAAS line appear in no log record, stderr output, exception or repr.
"""

from __future__ import annotations

import logging
import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.admin import create_topic
from spark_kafka_sink.client.selector import Selector, transport_factory_for
from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import (
    AuthenticationError, SaslAuthenticationFailedError, SslAuthenticationError,
)

from ..unit.client.tls_certs import make_certs
from ..verify import consume_all

pytestmark = pytest.mark.broker

RECORDS = 2_000
PARTITIONS = 3
WRONG_PASSWORD = "Not-The-Password-4242"


@pytest.fixture
def secured(secured_kafka):
    """The session's secured broker (tests/conftest.py)."""
    return secured_kafka


def producer_config(kafka, protocol: str, mechanism: str | None = None, **more) -> dict:
    return {"bootstrap.servers": kafka.bootstrap_for(protocol), "linger.ms": 5,
            **kafka.client_properties(protocol, mechanism), **more}


def consume(kafka, protocol: str, mechanism: str | None, topic: str, expected: int,
            timeout_s: float = 60.0) -> list[tuple[bytes, bytes]]:
    """(key, value) of every record, read by confluent-kafka over the same secured listener."""
    records = consume_all(kafka.bootstrap_for(protocol), topic, PARTITIONS, expected_count=expected,
                          timeout_s=timeout_s, security=kafka.client_properties(protocol, mechanism))
    return [(r.key, r.value) for part in records.values() for r in part]


def produce_and_verify(kafka, protocol: str, mechanism: str | None, **more) -> None:
    topic = f"sec-{protocol.lower()}-{(mechanism or 'tls').lower()}-{uuid.uuid4().hex[:6]}"
    props = producer_config(kafka, protocol, mechanism, **more)
    created = create_topic(props["bootstrap.servers"], topic, PARTITIONS, config=props)
    assert created.partitions == PARTITIONS
    with KafkaProducer(props) as producer:
        futures = [producer.send(topic, f"value-{i}".encode(), key=f"k{i % 10}".encode())
                   for i in range(RECORDS)]
        producer.flush()
        offsets = [f.result(30).offset for f in futures]
    assert len(offsets) == RECORDS
    got = consume(kafka, protocol, mechanism, topic, RECORDS)
    assert sorted(v for _, v in got) == sorted(f"value-{i}".encode() for i in range(RECORDS))


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SSL", None),
    ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-256"),
    ("SASL_PLAINTEXT", "SCRAM-SHA-512"),
    ("SASL_SSL", "PLAIN"),
    ("SASL_SSL", "SCRAM-SHA-256"),
    ("SASL_SSL", "SCRAM-SHA-512"),
    ("SASL_PLAINTEXT", "OAUTHBEARER"),   # unsigned JWTs made by each client (librdkafka's option)
    ("SASL_SSL", "OAUTHBEARER"),
])
def test_produce_over_each_secured_listener(secured, protocol, mechanism):
    produce_and_verify(secured, protocol, mechanism)


@pytest.mark.parametrize("protocol", ["SSL", "SASL_SSL"])
def test_without_the_required_client_certificate_the_broker_refuses_us_clearly(secured, protocol):
    """The produce tests above present the client certificate; this shows it is really required."""
    props = producer_config(secured, protocol, "PLAIN" if protocol == "SASL_SSL" else None,
                            **{"max.block.ms": 30_000})
    for name in ("ssl.certificate.location", "ssl.key.location", "ssl.key.password"):
        del props[name]
    start = time.monotonic()
    with KafkaProducer(props) as producer:
        with pytest.raises(SslAuthenticationError,
                           match="TLS handshake with 127.0.0.1 failed: .*refused the client certificate"):
            producer.send("any-topic", b"x")
    assert time.monotonic() - start < 10
    with pytest.raises(SslAuthenticationError, match="CERTIFICATE"):
        create_topic(props["bootstrap.servers"], "never-created", 1, config=props)


def test_credentials_from_a_java_jaas_line(secured):
    props = secured.client_properties("SASL_SSL", "SCRAM-SHA-256")
    user, password = props.pop("sasl.username"), props.pop("sasl.password")
    jaas = (f'org.apache.kafka.common.security.scram.ScramLoginModule required '
            f'username="{user}" password="{password}";')
    topic = f"sec-jaas-{uuid.uuid4().hex[:6]}"
    config = {"bootstrap.servers": secured.bootstrap_for("SASL_SSL"), **props, "sasl.jaas.config": jaas}
    create_topic(config["bootstrap.servers"], topic, PARTITIONS, config=config)
    with KafkaProducer(config) as producer:
        producer.send(topic, b"via-jaas").result(30)
    assert consume(secured, "SASL_SSL", "SCRAM-SHA-256", topic, 1) == [(None, b"via-jaas")]


def test_an_untrusted_broker_certificate_fails_fast_and_clearly(secured, tmp_path):
    other_ca = make_certs(tmp_path, prefix="other-").ca
    props = producer_config(secured, "SSL", **{"ssl.ca.location": str(other_ca), "max.block.ms": 30_000})
    start = time.monotonic()
    with KafkaProducer(props) as producer:
        with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
            producer.send("any-topic", b"x").result(10)
    assert time.monotonic() - start < 10


def test_admin_over_a_secured_listener_reports_authentication_errors(secured, tmp_path):
    """BlockingConnection (admin, probes): the same errors as the producer, at once."""
    wrong_password = producer_config(secured, "SASL_SSL", "SCRAM-SHA-256",
                                     **{"sasl.password": WRONG_PASSWORD})
    with pytest.raises(SaslAuthenticationFailedError,
                       match="SCRAM-SHA-256 authentication of user 'alice'") as info:
        create_topic(wrong_password["bootstrap.servers"], "never-created", 1, config=wrong_password)
    assert WRONG_PASSWORD not in str(info.value)
    untrusted = producer_config(secured, "SSL", **{"ssl.ca.location": str(make_certs(tmp_path).ca)})
    with pytest.raises(SslAuthenticationError, match="certificate verify failed"):
        create_topic(untrusted["bootstrap.servers"], "never-created", 1, config=untrusted)


def test_host_name_verification_against_the_name_we_connect_to(secured):
    """The certificate names 127.0.0.1 and localhost. "127.1" reaches the same loopback address
    but is checked as a DNS name the certificate does not carry: refused unless the check is off."""
    port = secured.bootstrap_for("SSL").rsplit(":", 1)[1]
    props = {**producer_config(secured, "SSL", **{"max.block.ms": 30_000}),
             "bootstrap.servers": f"127.1:{port}"}
    with KafkaProducer(props) as producer:
        with pytest.raises(SslAuthenticationError, match="certificate verify failed: Hostname mismatch"):
            producer.send("any-topic", b"x")
    topic = f"sec-no-hostname-check-{uuid.uuid4().hex[:6]}"
    unchecked = {**props, "ssl.endpoint.identification.algorithm": ""}
    create_topic(unchecked["bootstrap.servers"], topic, PARTITIONS, config=unchecked)
    with KafkaProducer(unchecked) as producer:
        producer.send(topic, b"unchecked").result(30)
    assert consume(secured, "SSL", None, topic, 1) == [(None, b"unchecked")]


class CountingSelector(Selector):
    def __init__(self, **kw):
        super().__init__(**kw)
        self.connects = 0

    def connect(self, *args, **kw):
        self.connects += 1
        return super().connect(*args, **kw)


@pytest.mark.parametrize("protocol", ["SASL_PLAINTEXT", "SASL_SSL"])
def test_a_wrong_password_fails_fast_without_a_retry_storm(secured, protocol):
    props = producer_config(secured, protocol, "SCRAM-SHA-512",
                            **{"sasl.password": WRONG_PASSWORD, "max.block.ms": 30_000})
    config = ProducerConfig(props)
    selector = CountingSelector(transport_factory=transport_factory_for(config))
    start = time.monotonic()
    with KafkaProducer(config, selector=selector) as producer:
        with pytest.raises(SaslAuthenticationFailedError) as info:
            producer.send("any-topic", b"x").result(10)
        assert time.monotonic() - start < 10
        assert "SCRAM-SHA-512" in str(info.value) and "'alice'" in str(info.value)
        # keep asking for 4 s: each send fails with the error, none waits max.block.ms
        window_start, connects_before = time.monotonic(), selector.connects
        while time.monotonic() - window_start < 4:
            with pytest.raises(AuthenticationError):
                producer.send("any-topic", b"x")
        flush_start = time.monotonic()
        producer.flush(5)
        assert time.monotonic() - flush_start < 1
        attempts = selector.connects - connects_before
    # reconnect.backoff.ms 50 doubling to reconnect.backoff.max.ms 1000: about 6 in 4 s
    assert 1 <= attempts <= 10, attempts


def test_secrets_never_appear_in_logs_errors_or_reprs(secured, caplog, capfd):
    caplog.set_level(logging.DEBUG, logger="spark_kafka_sink")
    good = secured.client_properties("SASL_SSL", "PLAIN")
    secrets = {good["sasl.password"], good["ssl.key.password"], WRONG_PASSWORD}
    jaas = ('org.apache.kafka.common.security.plain.PlainLoginModule required '
            f'username="{good["sasl.username"]}" password="{WRONG_PASSWORD}";')
    seen: list[str] = []
    # a successful exchange, logged at DEBUG
    produce_and_verify(secured, "SASL_SSL", "PLAIN")
    # a refused one, with the JAAS form
    bad = {k: v for k, v in good.items() if k not in ("sasl.username", "sasl.password")}
    config = ProducerConfig({"bootstrap.servers": secured.bootstrap_for("SASL_SSL"), **bad,
                             "sasl.jaas.config": jaas, "max.block.ms": 10_000})
    with KafkaProducer(config) as producer:
        with pytest.raises(AuthenticationError) as info:
            producer.send("any-topic", b"x")
        seen += [str(info.value), repr(info.value), repr(producer.config), str(producer.config.redacted())]
    seen += [repr(config), str(config.to_properties(redact=True))]
    out, err = capfd.readouterr()
    seen += [caplog.text, out, err]
    seen += [record.getMessage() for record in caplog.records]
    text = "\n".join(seen)
    assert "authentication" in text.lower() and caplog.records       # the checks looked at something
    for secret in secrets | {jaas}:
        assert secret not in text
