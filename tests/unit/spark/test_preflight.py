"""The driver's preflight without a broker: its decisions over described topics, and its steps
(describe, create, ask again) over a fake cluster and a fake clock."""

from __future__ import annotations

import pytest

from spark_kafka_sink.admin import TopicDescription
from spark_kafka_sink.spark.options import DLQ_TOPIC, TOPIC, SinkConfig
from spark_kafka_sink.spark.preflight import (MISSING_WAIT_MS, PreflightError, PreflightResult,
                                              plan_topics, preflight, size_problem)

from ..fakes import FakeClock

BOOTSTRAP = "127.0.0.1:9092"


class FakeCluster:
    """Topics by name -> max.message.bytes; ``auto_create``: the broker creates a missing topic a
    Metadata request allows it to (with ``default_limit``); ``late``: topics the answering broker
    learns of only after that many more questions."""

    def __init__(self, topics=None, *, auto_create=False, default_limit=1_048_588, late=None):
        self.topics = dict(topics or {})
        self.auto_create = auto_create
        self.default_limit = default_limit
        self.late = dict(late or {})
        self.describes: list[tuple[tuple[str, ...], bool]] = []
        self.timeouts: list[float] = []
        self.created: list[tuple[str, int, int]] = []

    def describe(self, bootstrap, names, *, config_names, timeout_s, auto_create, config):
        assert bootstrap == BOOTSTRAP and config_names == ["max.message.bytes"] and timeout_s <= 10
        self.describes.append((tuple(names), auto_create))
        self.timeouts.append(timeout_s)
        found = {}
        for name in names:
            if self.late.get(name, 0) > 0:
                self.late[name] -= 1
                found[name] = TopicDescription(name, False)
                continue
            if name not in self.topics and auto_create and self.auto_create:
                self.topics[name] = self.default_limit
            if name in self.topics:
                found[name] = TopicDescription(name, True, 1, {"max.message.bytes": str(self.topics[name])})
            else:
                found[name] = TopicDescription(name, False)
        return found

    def create(self, bootstrap, name, partitions, *, replication_factor, exist_ok, timeout_s, config):
        self.created.append((name, partitions, replication_factor))
        self.topics.setdefault(name, 1_048_588)


def config(**options) -> SinkConfig:
    return SinkConfig.from_options({"kafka.bootstrap.servers": BOOTSTRAP, **options})


def run(cluster: FakeCluster, sink: SinkConfig, clock: FakeClock | None = None) -> PreflightResult:
    clock = clock or FakeClock()
    return preflight(sink, describe=cluster.describe, create=cluster.create, clock=clock,
                     sleep=clock.sleep)


DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}


# --- the decisions -------------------------------------------------------------------------------

@pytest.mark.parametrize("limit, ok", [(1_000_000, True), (999_999, False), (2_000_000, True)])
def test_max_request_size_may_equal_the_topics_max_message_bytes_but_not_exceed_it(limit, ok):
    described = TopicDescription("t", True, 1, {"max.message.bytes": str(limit)})
    problem = size_problem("t", TOPIC, described, 1_000_000)
    assert (problem is None) is ok
    if not ok:
        assert problem.startswith("kafka.max.request.size=1000000 exceeds the max.message.bytes="
                                  "999999 of topic 't' (option 'topic')")
    sink = config(topic="t", **{"kafka.max.request.size": "1000000"})
    cluster = FakeCluster({"t": limit})
    if ok:
        assert run(cluster, sink) == PreflightResult()
    else:
        with pytest.raises(PreflightError, match="exceeds the max.message.bytes=999999"):
            run(cluster, sink)


def test_a_topic_whose_configuration_cannot_be_read_is_an_error_naming_the_option():
    from spark_kafka_sink.errors import TopicAuthorizationFailedError

    described = TopicDescription("t", True, 1, config_error=TopicAuthorizationFailedError("no"))
    assert "option 'topic': cannot read the configuration of topic 't'" in size_problem(
        "t", TOPIC, described, 1)


def test_the_plan_asks_the_broker_to_create_topics_on_demand_except_a_dead_letter_topic_we_create():
    plan = plan_topics(config(topic="t", **DLQ))
    assert dict(plan.named) == {"t": TOPIC, "dlq": DLQ_TOPIC} and plan.auto_create == ("t", "dlq")
    assert plan.create is None
    plan = plan_topics(config(topic="t", **DLQ, **{"errors.deadletterqueue.topic.replication.factor": "3"}))
    assert (plan.auto_create, plan.plain, plan.create, plan.factor) == (("t",), ("dlq",), "dlq", 3)
    plan = plan_topics(config(**DLQ))                     # a topic column: only the dead-letter topic
    assert dict(plan.named) == {"dlq": DLQ_TOPIC}


# --- the steps -----------------------------------------------------------------------------------

def test_the_dead_letter_topics_limit_reaches_the_tasks_config():
    sink = config(topic="t", **DLQ)
    result = run(FakeCluster({"t": 2_000_000, "dlq": 4096}), sink)
    assert result == PreflightResult(4096)
    assert result.applied(sink).error_policy.dlq_max_message_bytes == 4096
    assert result.applied(sink).error_policy.dlq_topic == "dlq"
    assert PreflightResult().applied(sink) is sink


def test_a_missing_dead_letter_topic_on_a_broker_that_creates_topics_is_created_by_it():
    cluster = FakeCluster({"t": 2_000_000}, auto_create=True)
    run(cluster, config(topic="t", **DLQ))
    assert "dlq" in cluster.topics and cluster.created == []


def test_a_missing_dead_letter_topic_on_a_broker_that_does_not_is_an_error_with_the_hint():
    with pytest.raises(PreflightError, match="option 'errors.deadletterqueue.topic.name': topic 'dlq' "
                                             "does not exist .* or set errors.deadletterqueue.topic."
                                             "replication.factor to let the sink create it"):
        run(FakeCluster({"t": 2_000_000}), config(topic="t", **DLQ))


def test_with_a_replication_factor_the_sink_creates_the_dead_letter_topic_not_the_broker():
    """The broker creates topics on demand, with its own defaults: the factor asked for would be
    ignored if the dead-letter topic were described with auto-creation allowed."""
    cluster = FakeCluster({"t": 2_000_000}, auto_create=True)
    run(cluster, config(topic="t", **DLQ, **{"errors.deadletterqueue.topic.replication.factor": "3"}))
    assert cluster.created == [("dlq", 1, 3)]
    assert all(not auto for names, auto in cluster.describes if "dlq" in names)


def test_the_dead_letter_topic_the_sink_created_is_described_at_once_without_a_wait():
    """Right after creating it the sink describes it again (its limit goes to the tasks); it does
    not wait out a backoff as for a topic someone else may be creating."""
    clock = FakeClock()
    start = clock.monotonic_ms()
    cluster = FakeCluster({"t": 2_000_000})
    result = run(cluster, config(topic="t", **DLQ, **{"errors.deadletterqueue.topic.replication.factor": "3"}),
                 clock)
    assert result == PreflightResult(1_048_588) and cluster.created == [("dlq", 1, 3)]
    assert cluster.describes == [(("t",), True), (("dlq",), False), (("dlq",), False)]
    assert clock.monotonic_ms() == start


def test_a_topic_created_a_moment_before_is_asked_for_again_before_it_is_reported_missing():
    clock = FakeClock()
    cluster = FakeCluster({"t": 2_000_000, "dlq": 1_000_000}, late={"dlq": 3})
    assert run(cluster, config(topic="t", **DLQ), clock) == PreflightResult(1_000_000)
    assert [names for names, _ in cluster.describes] == [("t", "dlq"), ("dlq",), ("dlq",), ("dlq",)]


@pytest.mark.parametrize("max_block_ms, bound_ms", [(60_000, MISSING_WAIT_MS), (1_000, 1_000)])
def test_a_topic_still_missing_is_reported_within_a_short_bound(max_block_ms, bound_ms):
    clock = FakeClock()
    start = clock.monotonic_ms()
    sink = config(topic="t", **{"kafka.max.block.ms": str(max_block_ms)})
    with pytest.raises(PreflightError, match="option 'topic': topic 't' does not exist"):
        run(FakeCluster(), sink, clock)
    assert 0 < clock.monotonic_ms() - start <= bound_ms


def test_preflight_false_asks_nothing():
    cluster = FakeCluster()
    assert run(cluster, config(topic="t", preflight="false")) == PreflightResult()
    assert cluster.describes == []


def test_a_dead_letter_topic_below_max_request_size_is_accepted_and_its_limit_passed_on():
    """Dead letters are sized against the dead-letter topic's own limit, so it need not take a
    batch of max.request.size; the target topic must."""
    result = run(FakeCluster({"t": 2_000_000, "dlq": 4096}), config(topic="t", **DLQ))
    assert result.dlq_max_message_bytes == 4096
    with pytest.raises(PreflightError, match="max.message.bytes=4096 of topic 'dlq' \\(option 'topic'\\)"):
        run(FakeCluster({"dlq": 4096}), config(topic="dlq", **DLQ))


@pytest.mark.parametrize(("max_block_ms", "timeout_s"), [(None, 10.0), ("3000", 3.0), ("10", 1.0)])
def test_each_question_waits_at_most_max_block_ms_and_never_under_a_second(max_block_ms, timeout_s):
    cluster = FakeCluster({"t": 2_000_000})
    options = {"kafka.max.block.ms": max_block_ms} if max_block_ms else {}
    run(cluster, config(topic="t", **options))
    assert cluster.timeouts == [timeout_s]
