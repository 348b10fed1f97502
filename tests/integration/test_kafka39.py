"""The core integration tests again, against Apache Kafka 3.9 (the last 3.x line, which managed
services and Databricks users still run), beside the 4.x default the rest of the suite uses.

One single-node 3.9 cluster for the module (KRaft, its PLAINTEXT listener behind a FaultProxy, and
the SSL / SASL listeners with client certificates required) runs the tests of the other modules
with it, so the two broker versions are checked by the very same code:

- a round trip per codec (record batches built by ``record/``, read back by confluent-kafka);
- the idempotent producer with zstd, 30,000 records over many batches and requests, exactly once
  in key order (each other codec is on 3.9 in the round trip, and through the idempotent producer
  in ``test_producer.py`` on 4.x; the codec lives in the records section, which the broker's
  producer-state checks never look into, and the producer negotiates its Produce version the
  same way whatever the codec; the uncompressed idempotent producer runs on 3.9 in the
  connection-cut and transaction tests below);
- connection cuts between requests, mid-request and mid-response: exactly once;
- transactions cut mid-stream and at commit: read_committed sees every committed record once and
  no aborted one (3.9's transactions are version 1; ``test_transactions.py`` runs both versions);
- produce over TLS and SASL (SCRAM, OAUTHBEARER) read back over the same listener.
"""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.embedded import BrokerSecurity
from spark_kafka_sink.record import CompressionType
from spark_kafka_sink.testing import KafkaCluster

from ..conftest import TV1_KAFKA_VERSION, _started
from ..helpers import KEEP_FOREVER
from ..verify import consume_all
from . import test_cluster_faults, test_producer, test_roundtrip, test_security

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def kafka39(tmp_path_factory):
    cluster = KafkaCluster(1, version=TV1_KAFKA_VERSION, proxied=True, heap="256m",
                           security=BrokerSecurity(client_auth="required"),
                           work_dir=tmp_path_factory.mktemp("kafka-3.9"))
    yield from _started(cluster, f"the embedded Apache Kafka {TV1_KAFKA_VERSION}")


def test_it_is_a_3_9_broker(kafka39):
    assert kafka39.embedded.version == TV1_KAFKA_VERSION


@pytest.mark.parametrize("codec", list(CompressionType), ids=lambda c: c.name.lower())
def test_round_trip_per_codec(kafka39, codec):
    test_roundtrip.test_produce_batches_read_back_by_confluent_kafka(kafka39, codec)


def test_idempotent_producer_exactly_once_with_zstd(kafka39):
    """zstd: the one codec that needs Produce v7+, so the one whose batches 3.9 would refuse if
    the version negotiated were too old; the module docstring says where the others are."""
    test_producer.test_records_over_many_batches_arrive_exactly_once_in_key_order(
        kafka39, CompressionType.ZSTD)


def test_connection_cuts_lose_and_duplicate_nothing(kafka39):
    test_cluster_faults.test_connection_cuts_mid_stream_lose_and_duplicate_nothing(kafka39)


def test_transactions_cut_mid_stream_and_at_commit_are_all_or_nothing(kafka39):
    topic = f"txn-cuts-{uuid.uuid4().hex[:8]}"
    kafka39.create_topic(topic, 3, config=KEEP_FOREVER)
    proxy = kafka39.proxy(1)
    committed = []
    with KafkaProducer({"bootstrap.servers": kafka39.bootstrap_servers, "linger.ms": 5,
                        "transactional.id": f"cuts-{uuid.uuid4().hex[:8]}", "retry.backoff.ms": 50,
                        "reconnect.backoff.ms": 20}) as producer:
        producer.init_transactions()
        for round_ in range(4):
            values = [b"%d-%05d" % (round_, i) for i in range(3_000)]
            producer.begin_transaction()
            for value in values[:1_500]:
                producer.send(topic, value, key=value[-2:])
            proxy.cut()                                    # mid-stream
            for value in values[1_500:]:
                producer.send(topic, value, key=value[-2:])
            producer.flush(60)
            if round_ == 2:
                producer.abort_transaction()
                continue
            proxy.cut_after(40, direction="downstream")    # cut inside the commit's answer
            producer.commit_transaction()
            committed += values
    consumed = consume_all(kafka39.bootstrap_servers, topic, 3, expected_count=len(committed))
    assert sorted(m.value for records in consumed.values() for m in records) == sorted(committed)
    assert proxy.cuts >= 4


@pytest.mark.parametrize(("protocol", "mechanism"), [
    ("SSL", None), ("SASL_SSL", "SCRAM-SHA-512"), ("SASL_PLAINTEXT", "PLAIN"),
    ("SASL_PLAINTEXT", "OAUTHBEARER"),
])
def test_produce_over_secured_listeners(kafka39, protocol, mechanism):
    test_security.produce_and_verify(kafka39, protocol, mechanism)
