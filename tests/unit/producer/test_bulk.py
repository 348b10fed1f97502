"""The batch size of bulk writes (``producer/bulk.py``): what ``send_arrow`` and the sink use."""

from __future__ import annotations

import pytest

from spark_kafka_sink.config import ProducerConfig
from spark_kafka_sink.errors import ConfigError
from spark_kafka_sink.producer.bulk import BULK_BATCH_SIZE, bulk_batch_size

BOOT = {"bootstrap.servers": "127.0.0.1:9092"}


def test_is_set_tells_a_given_property_from_a_default():
    config = ProducerConfig({**BOOT, "batch.size": 16384})
    assert config.is_set("batch.size") and config.is_set("bootstrap.servers")
    assert not config.is_set("linger.ms")
    assert config.with_overrides(linger_ms=7).is_set("batch.size")  # kept by derived configs
    with pytest.raises(ConfigError, match="unknown producer property 'batch.sise'"):
        config.is_set("batch.sise")


@pytest.mark.parametrize("settings, expected", [
    ({}, BULK_BATCH_SIZE),
    ({"batch.size": 16384}, 16384),                      # the default's value, but given: kept
    ({"batch.size": 0}, 1),                              # no batching: one record per batch
    ({"batch.size": 2 << 20, "max.request.size": 4 << 20}, 2 << 20),
    ({"max.request.size": 100_000}, 100_000),
    ({"buffer.memory": 2 << 20}, 512 << 10),
    ({"buffer.memory": 20_000}, 16384),                  # never below the plain batch.size
    ({"buffer.memory": 10_000, "batch.size": 8192}, 8192),
])
def test_bulk_batches_are_up_to_1_mib_within_the_request_and_the_buffer(settings, expected):
    assert bulk_batch_size(ProducerConfig({**BOOT, **settings})) == expected
