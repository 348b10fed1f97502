"""The driver's preflight against a broker that creates topics on demand
(``auto.create.topics.enable=true``, ``num.partitions=3``): a missing dead-letter topic is created
by the broker with its defaults, as the tasks' producer would have it created, unless a
replication factor is set: then the sink creates it (one partition), never the broker. Checked
with ``describe_topics`` (no auto-creation); no Spark is needed for the preflight."""

from __future__ import annotations

import uuid

import pytest

from spark_kafka_sink.admin import describe_topics
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.preflight import preflight

pytestmark = pytest.mark.broker


@pytest.fixture(scope="module")
def auto_creating_kafka(tmp_path_factory):
    from spark_kafka_sink.embedded import EmbeddedKafka

    from ..conftest import _started

    cluster = EmbeddedKafka(1, heap="256m", work_dir=tmp_path_factory.mktemp("kafka-autocreate"),
                            extra_properties={"auto.create.topics.enable": "true", "num.partitions": 3})
    yield from _started(cluster, "the embedded Apache Kafka with auto.create.topics.enable")


def partitions(bootstrap: str, name: str) -> int:
    found = describe_topics(bootstrap, [name])[name]
    assert found.exists, name
    return found.partitions


@pytest.mark.parametrize("factor, expected", [(None, 3), ("1", 1)])
def test_a_missing_dead_letter_topic_is_created_by_the_broker_unless_a_factor_is_set(
        auto_creating_kafka, factor, expected):
    bootstrap = auto_creating_kafka.bootstrap_servers
    topic, dlq = (f"preflight-{name}-{uuid.uuid4().hex[:8]}" for name in ("target", "dlq"))
    options = {"kafka.bootstrap.servers": bootstrap, "topic": topic, "errors.tolerance": "all",
               "errors.deadletterqueue.topic.name": dlq}
    if factor is not None:
        options["errors.deadletterqueue.topic.replication.factor"] = factor
    result = preflight(SinkConfig.from_options(options))
    assert partitions(bootstrap, topic) == 3                     # the broker's defaults
    assert partitions(bootstrap, dlq) == expected
    assert result.dlq_max_message_bytes is not None and result.dlq_max_message_bytes > 0
