"""KafkaSink over TLS + SASL: Spark executors write through a SASL_SSL listener (SCRAM-SHA-512,
hostname verification on) in both modes, given only ``kafka.*`` options; confluent-kafka reads
the records back over the same listener. A wrong password fails the write with an
AuthenticationError, and the password appears neither in the error nor in the sink's repr.

The secured broker is the session's (``secured_kafka``: client certificates required, so the
executors also present the generated client certificate).
"""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import KafkaSink
from spark_kafka_sink.admin import create_topic

from ..verify import consume_all, end_offsets

pytestmark = [pytest.mark.spark, pytest.mark.broker]

PROTOCOL = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
PARTITIONS = 2
ROWS = 3_000
WRONG_PASSWORD = "Wrong-Password-7310"


@pytest.fixture
def secured(secured_kafka):
    """The session's secured broker (tests/conftest.py)."""
    return secured_kafka


def _client(secured) -> dict[str, str]:
    return {"bootstrap.servers": secured.bootstrap_for(PROTOCOL),
            **secured.client_properties(PROTOCOL, mechanism=MECHANISM)}


def _sink_options(client: dict[str, str], topic: str) -> dict[str, str]:
    return {"topic": topic, **{f"kafka.{name}": value for name, value in client.items()}}


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_the_sink_writes_over_sasl_ssl(spark, secured, mode):
    client = _client(secured)
    topic = f"secured-{mode}-{uuid.uuid4().hex[:8]}"
    create_topic(client["bootstrap.servers"], topic, PARTITIONS, config=client)
    df = spark.range(ROWS).selectExpr("cast(id as string) as key", "concat('v-', id) as value")

    sink = KafkaSink(_sink_options(client, topic), mode=mode)
    assert client["sasl.password"] not in repr(sink)
    sink.write(df.repartition(2))

    records = consume_all(client["bootstrap.servers"], topic, PARTITIONS, expected_count=ROWS,
                          security={k: v for k, v in client.items() if k != "bootstrap.servers"})
    got = sorted(int(r.key) for part in records.values() for r in part)
    assert got == list(range(ROWS)), "every row exactly once"
    assert all(r.value == f"v-{int(r.key)}".encode() for part in records.values() for r in part)


def test_a_wrong_password_fails_the_write_without_showing_it(spark, secured):
    client = _client(secured)
    topic = f"secured-denied-{uuid.uuid4().hex[:8]}"
    create_topic(client["bootstrap.servers"], topic, 1, config=client)
    options = _sink_options({**client, "sasl.password": WRONG_PASSWORD}, topic)
    df = spark.range(10).selectExpr("cast(id as string) as value")

    with pytest.raises(Exception) as raised:
        KafkaSink(options, **{"kafka.max.block.ms": "20000"}).write(df.coalesce(1))
    message = str(raised.value)
    assert "AuthenticationError" in message or "Authentication failed" in message, message[-2000:]
    assert WRONG_PASSWORD not in message
    plain = {"bootstrap.servers": secured.bootstrap_servers}
    assert end_offsets(plain["bootstrap.servers"], topic, 1) == {0: 0}


OIDC_SECRET = "oidc-Spark-Secret-41d7"


def test_the_sink_authenticates_with_oidc_client_credentials(spark, secured):
    """Every executor's producer gets its token from the token endpoint (the testing kit's, over
    HTTPS on loopback) with only string options, as a Data Source or a notebook would give them."""
    from spark_kafka_sink.testing import TokenEndpoint

    client = {"bootstrap.servers": secured.bootstrap_for(PROTOCOL),
              **{k: v for k, v in secured.client_properties(PROTOCOL, mechanism="OAUTHBEARER").items()
                 if not k.startswith(("enable.sasl.oauthbearer", "sasl.oauthbearer"))}}
    topic = f"secured-oidc-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap_servers, topic, PARTITIONS)
    with TokenEndpoint({"spark-sink": OIDC_SECRET}, tls=secured.tls, lifetime_s=300) as idp:
        options = {**_sink_options(client, topic), "kafka.sasl.oauthbearer.method": "oidc",
                   "kafka.sasl.oauthbearer.token.endpoint.url": idp.url,
                   "kafka.sasl.oauthbearer.client.id": "spark-sink",
                   "kafka.sasl.oauthbearer.client.secret": OIDC_SECRET,
                   "kafka.https.ca.location": str(secured.tls.ca_path)}   # the endpoint's own CAs
        sink = KafkaSink(options)
        assert OIDC_SECRET not in repr(sink)
        sink.write(spark.range(ROWS).selectExpr("cast(id as string) as value").repartition(2))
        assert idp.issued_to("spark-sink") >= 1
    records = consume_all(secured.bootstrap_servers, topic, PARTITIONS, expected_count=ROWS)
    assert sorted(int(r.value) for part in records.values() for r in part) == list(range(ROWS))


def test_the_sink_authenticates_with_a_token_callback(spark, secured):
    """``kafka.oauth_cb``: the function travels to the executors as PySpark ships functions (a
    closure, by value) and each executor's producer calls it for its token."""
    subject = "spark-callback"

    def token(config):
        import base64
        import json
        import time as clock
        now = int(clock.time())

        def part(value):
            return base64.urlsafe_b64encode(json.dumps(value).encode()).rstrip(b"=").decode()
        return f"{part({'alg': 'none'})}.{part({'sub': subject, 'iat': now, 'exp': now + 300})}.", now + 300

    client = {"bootstrap.servers": secured.bootstrap_for(PROTOCOL),
              **{k: v for k, v in secured.client_properties(PROTOCOL, mechanism="OAUTHBEARER").items()
                 if not k.startswith(("enable.sasl.oauthbearer", "sasl.oauthbearer"))}}
    topic = f"secured-oauth-cb-{uuid.uuid4().hex[:8]}"
    create_topic(secured.bootstrap_servers, topic, PARTITIONS)
    KafkaSink({**_sink_options(client, topic), "kafka.oauth_cb": token}).write(
        spark.range(ROWS).selectExpr("cast(id as string) as value").repartition(2))
    records = consume_all(secured.bootstrap_servers, topic, PARTITIONS, expected_count=ROWS)
    assert sorted(int(r.value) for part in records.values() for r in part) == list(range(ROWS))
