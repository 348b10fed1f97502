"""Topic names checked before they reach the producer's metadata (``producer/topics.py``), and
the other argument checks ``send``/``send_arrow`` make before anything is queued. No broker: the
metadata is injected and the sender thread only ever sees a refused connection."""

from __future__ import annotations

import pyarrow as pa
import pytest

from spark_kafka_sink.client.cluster_snapshot import ClusterSnapshot, PartitionInfo
from spark_kafka_sink.errors import InvalidTopicExceptionError
from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.producer.topics import MAX_TOPIC_LENGTH, check_topic, topic_name_problem
from spark_kafka_sink.structs import Node

BAD_NAMES = {
    "": "must not be empty",
    ".": "cannot be named '.'",
    "..": "cannot be named '..'",
    "bad topic!": "characters other than ASCII letters",
    "é": "characters other than ASCII letters",
    "x" * 250: "at most 249 characters, got 250",
}


@pytest.mark.parametrize("name", ["t", "events.v1_x-2", "a" * MAX_TOPIC_LENGTH, "...", "_-."])
def test_names_kafka_allows(name):
    assert topic_name_problem(name) is None
    check_topic(name)


@pytest.mark.parametrize("name", list(BAD_NAMES), ids=lambda n: repr(n[:12]))
def test_names_kafka_refuses_raise_the_brokers_error_with_the_rule(name):
    assert BAD_NAMES[name] in topic_name_problem(name)
    with pytest.raises(InvalidTopicExceptionError, match=BAD_NAMES[name]) as info:
        check_topic(name)
    assert info.value.code == 17


@pytest.mark.parametrize("name", [None, 5, b"t", ["t"]])
def test_a_topic_that_is_not_a_str_is_a_type_error(name):
    with pytest.raises(TypeError, match=f"a topic must be a string, got {type(name).__name__}"):
        check_topic(name)


@pytest.fixture
def producer():
    made = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                          "reconnect.backoff.ms": 1_000})
    made._metadata.snapshot = ClusterSnapshot(
        [Node(1, "127.0.0.1", 1)], [PartitionInfo("t", p, 1) for p in range(3)])
    yield made
    made.close(0)


@pytest.mark.parametrize("topic, error", [(None, TypeError), (7, TypeError), (b"t", TypeError),
                                          ("bad topic!", InvalidTopicExceptionError),
                                          ("", InvalidTopicExceptionError)])
def test_send_refuses_a_bad_topic_at_once_and_keeps_it_out_of_the_metadata(producer, topic, error):
    """Before: a None topic waited max.block.ms, then broke every later metadata request (the
    sender sorted None with str); a bad name was asked of the broker at every refresh."""
    with pytest.raises(error):
        producer.send(topic, b"v", partition=0)
    with pytest.raises(error):
        producer.send_arrow(topic, pa.table({"value": [b"v"]}))
    assert producer._metadata.topics == ()
    assert producer.send("t", b"v", partition=0) is not None  # the producer still works


@pytest.mark.parametrize("headers", ["ab", b"ab", {"h": b"v"}, (pair for pair in [("h", b"v")])],
                         ids=["str", "bytes", "dict", "generator"])
def test_send_refuses_headers_that_are_not_a_list_or_tuple(producer, headers):
    """A generator would be consumed by the size estimate and its headers lost; a str or dict
    gave a misleading "header 0 must be a (key, value) pair, got 'a'"."""
    with pytest.raises(TypeError, match=f"headers must be a list or tuple of .* not {type(headers).__name__}"):
        producer.send("t", b"v", headers=headers, partition=0)
    assert producer.send("t", b"v", headers=(("h", b"v"),), partition=0) is not None
