"""The driver's preflight (``spark.preflight``) over a fake cluster: what it asks the cluster,
when it creates the dead-letter topic, and the errors naming the option at fault. The real
cluster runs in tests/spark/test_bad_input.py and tests/spark/test_error_policy.py."""

from __future__ import annotations

import pytest

from spark_kafka_sink.admin import TopicDescription
from spark_kafka_sink.errors import KafkaError
from spark_kafka_sink.spark import preflight as preflight_module
from spark_kafka_sink.spark.options import SinkConfig
from spark_kafka_sink.spark.preflight import PreflightError, preflight

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "events"}
DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "events-dlq"}


class FakeCluster:
    """``admin.describe_topics`` and ``admin.create_topic`` over a set of topics; the calls."""

    def __init__(self, *topics: str, config_errors=None):
        self.topics = set(topics)
        self.config_errors = dict(config_errors or {})
        self.calls: list[tuple] = []

    def describe_topics(self, bootstrap, topics, *, config_names=None, timeout_s, auto_create=False,
                        config=None):
        self.calls.append(("describe", tuple(topics), timeout_s))
        return {name: TopicDescription(name, name in self.topics, 1 if name in self.topics else 0,
                                       {"max.message.bytes": "1048588"} if name in self.topics else {},
                                       self.config_errors.get(name))
                for name in topics}

    def create_topic(self, bootstrap, name, partitions, *, replication_factor, exist_ok, timeout_s,
                     config=None):
        self.calls.append(("create", name, partitions, replication_factor))
        self.topics.add(name)


@pytest.fixture
def cluster(monkeypatch):
    def install(*topics, **kw):
        fake = FakeCluster(*topics, **kw)
        monkeypatch.setattr(preflight_module.admin, "describe_topics", fake.describe_topics)
        monkeypatch.setattr(preflight_module.admin, "create_topic", fake.create_topic)
        return fake
    return install


def run(options):
    preflight(SinkConfig.from_options(options))


def test_preflight_false_asks_nothing_of_the_cluster(cluster):
    fake = cluster()                                            # every topic missing
    run({**BASE, **DLQ, "preflight": "false"})
    assert fake.calls == []


def test_a_missing_dead_letter_topic_with_a_replication_factor_is_created_then_checked(cluster):
    fake = cluster("events")
    run({**BASE, **DLQ, "errors.deadletterqueue.topic.replication.factor": "1"})
    assert [call[0] for call in fake.calls] == ["describe", "create", "describe"]
    assert fake.calls[1] == ("create", "events-dlq", 1, 1)
    assert fake.calls[2][1] == ("events-dlq",)


@pytest.mark.parametrize(("present", "option", "hint"), [
    ("events", "errors.deadletterqueue.topic.name", "or set errors.deadletterqueue.topic.replication.factor"),
    ("events-dlq", "topic", "create it first"),
])
def test_a_missing_topic_names_its_option(cluster, present, option, hint):
    fake = cluster(present)
    with pytest.raises(PreflightError, match=f"option '{option}': topic .* does not exist.*{hint}"):
        run({**BASE, **DLQ})
    assert [call[0] for call in fake.calls] == ["describe"]     # nothing created


def test_a_topic_whose_configuration_cannot_be_read_is_named(cluster):
    cluster("events", "events-dlq", config_errors={"events-dlq": KafkaError("not allowed")})
    with pytest.raises(PreflightError, match="option 'errors.deadletterqueue.topic.name': cannot "
                                             "read the configuration of topic 'events-dlq': not allowed"):
        run({**BASE, **DLQ})


@pytest.mark.parametrize(("max_block_ms", "timeout_s"), [(None, 10.0), ("3000", 3.0), ("10", 1.0)])
def test_the_preflight_waits_at_most_max_block_ms_and_never_under_a_second(cluster, max_block_ms, timeout_s):
    fake = cluster("events")
    run({**BASE, **({"kafka.max.block.ms": max_block_ms} if max_block_ms else {})})
    assert fake.calls == [("describe", ("events",), timeout_s)]
