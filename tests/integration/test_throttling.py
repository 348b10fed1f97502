"""A broker quota throttles our producer (KIP-219): it slows down, nothing fails, and the
throttle shows in ``produce-throttle-time-avg`` / ``-max``. Verified with confluent-kafka."""

from __future__ import annotations

import time
import uuid

import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.admin import alter_client_quotas

from ..helpers import create_topic
from ..verify import consume_all

pytestmark = pytest.mark.broker

RATE = 100 * 1024        # producer_byte_rate of the throttled client id, bytes/s
RECORDS = 2_400
VALUE = 512
# The broker measures a rate over at least 10 of its 11 one-second windows, so a burst is
# throttled once it passes RATE x 10 s (1 MiB); 2,400 x 512 B (1.2 MiB) is then asked to wait
# about (bytes / RATE - 10 s): some seconds in all, spread over the responses.


def test_a_producer_over_its_quota_is_throttled_without_errors(kafka):
    bootstrap = kafka.bootstrap_servers
    topic = f"throttled-{uuid.uuid4().hex[:8]}"
    client_id = f"throttled-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, 2)
    alter_client_quotas(bootstrap, {"client-id": client_id}, {"producer_byte_rate": RATE})
    try:
        with KafkaProducer({"bootstrap.servers": bootstrap, "client.id": client_id,
                            "linger.ms": 5, "batch.size": 65_536}) as producer:
            started = time.monotonic()
            futures = [producer.send(topic, b"%08d" % i + b"v" * (VALUE - 8), key=b"k%d" % (i % 10))
                       for i in range(RECORDS)]
            producer.flush(120)
            elapsed = time.monotonic() - started
            for future in futures:
                future.result(0)                 # every record acknowledged, none failed
            metrics = producer.metrics()
    finally:
        alter_client_quotas(bootstrap, {"client-id": client_id}, {"producer_byte_rate": None})
    assert metrics["produce-throttle-time-max"] > 0, metrics
    assert metrics["produce-throttle-time-avg"] > 0
    assert metrics["record-error-total"] == 0 and metrics["record-retry-total"] == 0
    assert elapsed > 1.0, f"{RECORDS * VALUE} bytes in {elapsed:.2f} s: not slowed down"
    consumed = consume_all(bootstrap, topic, 2, expected_count=RECORDS)
    values = sorted(int(m.value[:8]) for records in consumed.values() for m in records)
    assert values == list(range(RECORDS))
