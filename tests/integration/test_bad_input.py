"""The bad-input matrix for the producer API (``send`` and ``send_arrow``) against the embedded
Apache Kafka, read back with confluent-kafka (issue 6; docs/reliability.md, "Bad input").

Each case either raises at once, with an error naming the argument, column, option or row at
fault, and nothing is queued (the partitions' end offsets do not move), or has a documented
behaviour whose records are all read back. Cases already covered elsewhere are not repeated
here: a row over ``max.request.size`` and the empty input in ``send_arrow``
(``test_send_arrow.py::test_errors_are_raised_before_anything_is_queued``), and a too-large row
in a later chunk (``test_send_arrow.py``).
"""

from __future__ import annotations

import resource
import time
import uuid
from pathlib import Path

import pyarrow as pa
import pytest

from spark_kafka_sink import KafkaProducer
from spark_kafka_sink.errors import (InvalidPartitionError, InvalidTopicExceptionError,
                                     RecordTooLargeError)
from spark_kafka_sink.producer.arrow.input import ArrowSendError

from ..helpers import create_topic
from ..verify import consume_all, end_offsets

pytestmark = pytest.mark.broker

PARTITIONS = 2
HEADERS = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


@pytest.fixture(scope="module")
def topic(kafka):
    """One 2-partition topic that every refused send is aimed at: it must stay empty."""
    name = unique("bad-input")
    create_topic(kafka.bootstrap_servers, name, PARTITIONS)
    return name


@pytest.fixture(scope="module")
def producer(kafka):
    with KafkaProducer({"bootstrap.servers": kafka.bootstrap_servers, "max.block.ms": 10_000,
                        "max.request.size": 10_000}) as made:
        yield made


def _generator_headers():
    yield ("h", b"v")


# case -> (send arguments, error type, regex the message must match)
BAD_SENDS = {
    "value int": (dict(value=42), TypeError, "value must be bytes, str or None, not int"),
    "value float": (dict(value=1.5), TypeError, "value must be bytes, str or None, not float"),
    "value dict": (dict(value={"a": 1}), TypeError, "value must be bytes, str or None, not dict"),
    "value list": (dict(value=[1]), TypeError, "value must be bytes, str or None, not list"),
    "value bool": (dict(value=True), TypeError, "value must be bytes, str or None, not bool"),
    "key int": (dict(key=7), TypeError, "key must be bytes, str or None, not int"),
    "key float": (dict(key=3.5), TypeError, "key must be bytes, str or None, not float"),
    "key dict": (dict(key={"k": 1}), TypeError, "key must be bytes, str or None, not dict"),
    "topic None": (dict(topic=None), TypeError, "a topic must be a string, got NoneType"),
    "topic int": (dict(topic=5), TypeError, "a topic must be a string, got int"),
    "topic bytes": (dict(topic=b"events"), TypeError, "a topic must be a string, got bytes"),
    "topic empty": (dict(topic=""), InvalidTopicExceptionError, "a topic name must not be empty"),
    "topic '.'": (dict(topic="."), InvalidTopicExceptionError, "a topic cannot be named '.'"),
    "topic '..'": (dict(topic=".."), InvalidTopicExceptionError, r"a topic cannot be named '\.\.'"),
    "topic with a blank": (dict(topic="bad topic!"), InvalidTopicExceptionError,
                           "topic 'bad topic!' has characters other than ASCII letters"),
    "topic of 250 chars": (dict(topic="t" * 250), InvalidTopicExceptionError,
                           "at most 249 characters, got 250"),
    "partition -1": (dict(partition=-1), InvalidPartitionError,
                     "invalid partition -1 for topic '{topic}': it has 2 partition"),
    "partition 2 of 2": (dict(partition=2), InvalidPartitionError, "invalid partition 2 for topic '{topic}'"),
    "partition str": (dict(partition="1"), TypeError, "partition must be an int, got str"),
    "partition float": (dict(partition=1.0), TypeError, "partition must be an int, got float"),
    "over max.request.size": (dict(value=b"x" * 10_001), RecordTooLargeError,
                              "a record for topic '{topic}' is \\d+ bytes .* larger than 10000, the "
                              "value of the max.request.size configuration"),
    "headers str": (dict(headers="h"), TypeError, "headers must be a list or tuple of .* not str"),
    "headers dict": (dict(headers={"h": b"v"}), TypeError, "headers must be a list or tuple of .* not dict"),
    "headers generator": (dict(headers=_generator_headers()), TypeError,
                          "headers must be a list or tuple of .* not generator"),
    "header not a pair": (dict(headers=[("h",)]), TypeError, r"header 0 must be a \(key, value\) pair"),
    "header None": (dict(headers=[("a", b"1"), None]), TypeError, r"header 1 must be a \(key, value\) pair"),
    "header key int": (dict(headers=[(1, b"v")]), TypeError, "header 0 key must be str, got int"),
    "header key None": (dict(headers=[(None, b"v")]), TypeError, "header 0 key must be str, got NoneType"),
    "header value str": (dict(headers=[("h", "text")]), TypeError,
                         r"header 0 \('h'\) value must be bytes, bytearray, memoryview or None, got str"),
    "header value int": (dict(headers=[("h", 1)]), TypeError, r"header 0 \('h'\) value must be bytes"),
}


@pytest.mark.parametrize("case", list(BAD_SENDS))
def test_send_refuses_bad_input_at_once_and_queues_nothing(kafka, producer, topic, case):
    arguments, error, message = BAD_SENDS[case]
    arguments = {"topic": topic, "value": b"v", **arguments}
    started = time.monotonic()
    with pytest.raises(error, match=message.format(topic=topic)):
        producer.send(arguments.pop("topic"), arguments.pop("value"), **arguments)
    assert time.monotonic() - started < 5, "refused at once, not after max.block.ms (10 s)"
    producer.flush(30)
    assert end_offsets(kafka.bootstrap_servers, topic, PARTITIONS) == {0: 0, 1: 0}
    assert producer.metrics()["buffer-available-bytes"] == producer.config.buffer_memory
    assert set(producer._metadata.topics) <= {topic}, "a refused topic reached the metadata"


BAD_ARROW = {
    "no value column": (pa.table({"v": [b"a"]}), {}, ValueError,
                        r"the value column 'value' is not in the input; its columns are \['v'\]"),
    "value=None": (pa.table({"value": [b"a"]}), {"value": None}, ValueError, "send_arrow needs a value column"),
    "named value column missing": (pa.table({"value": [b"a"]}), {"value": "payload"}, ValueError,
                                   "the value column 'payload' is not in the input"),
    "value int64": (pa.table({"value": [1, 2]}), {}, TypeError,
                    "the value column has type int64; expected binary or string"),
    "value double": (pa.table({"value": [1.5]}), {}, TypeError, "the value column has type double"),
    "value struct": (pa.table({"value": [{"a": 1}]}), {}, TypeError, "the value column has type struct<a: int64>"),
    "value list": (pa.table({"value": [[1]]}), {}, TypeError, "the value column has type list<item: int64>"),
    "value dictionary": (pa.table({"value": pa.array(["a"]).dictionary_encode()}), {}, TypeError,
                         "the value column has type dictionary<values=string"),
    "key int64": (pa.table({"value": [b"a"], "key": [1]}), {}, TypeError, "the key column has type int64"),
    "key struct": (pa.table({"value": [b"a"], "key": [{"id": 1}]}), {}, TypeError,
                   "the key column has type struct<id: int64>"),
    "partition string": (pa.table({"value": [b"a"], "partition": ["0"]}), {}, TypeError,
                         "the partition column has type string; expected an integer type"),
    "partition 2 of 2": (pa.table({"value": [b"a", b"b"], "partition": [0, 2]}), {}, InvalidPartitionError,
                         "row 1: invalid partition 2"),
    "partition -1": (pa.table({"value": [b"a", b"b", b"c"], "partition": [0, 1, -1]}), {}, InvalidPartitionError,
                     "row 2: invalid partition -1"),
    "headers list<string>": (pa.table({"value": [b"a"], "headers": [["h"]]}), {}, TypeError,
                             "the headers column has type list<item: string>; expected "
                             "list<struct<key: string, value: binary>>"),
    "headers key int": (pa.table({"value": [b"a"], "headers": pa.array(
                            [[{"key": 1, "value": b"v"}]],
                            pa.list_(pa.struct([("key", pa.int32()), ("value", pa.binary())])))}),
                        {}, TypeError, "the headers column has type list<item: struct<key: int32"),
    "header with a null key": (pa.table({"value": [b"a", b"b", b"c"], "partition": pa.array([1, 1, 0]),
                                         "headers": pa.array([[], [(None, b"v")], []], HEADERS)}),
                               {}, ValueError, "headers: row 1 of the input has a header with a null key"),
    "null header": (pa.table({"value": [b"a", b"b"], "headers": pa.array([[], [None]], HEADERS)}), {},
                    ValueError, "headers: row 1 of the input has a null header"),
    "timestamp string": (pa.table({"value": [b"a"], "timestamp": ["now"]}), {}, TypeError,
                         "the timestamp column has type string; expected a timestamp or int64"),
    "not a table": ({"value": [b"a"]}, {}, TypeError, "send_arrow takes a pyarrow RecordBatch or Table, got dict"),
    "topic None": (pa.table({"value": [b"a"]}), {"topic": None}, TypeError, "a topic must be a string, got NoneType"),
    "topic empty": (pa.table({"value": [b"a"]}), {"topic": ""}, InvalidTopicExceptionError,
                    "a topic name must not be empty"),
    "topic '..'": (pa.table({"value": [b"a"]}), {"topic": ".."}, InvalidTopicExceptionError,
                   r"a topic cannot be named '\.\.'"),
    "topic with a blank": (pa.table({"value": [b"a"]}), {"topic": "bad topic!"}, InvalidTopicExceptionError,
                           "has characters other than ASCII letters"),
    "topic of 250 chars": (pa.table({"value": [b"a"]}), {"topic": "t" * 250}, InvalidTopicExceptionError,
                           "at most 249 characters, got 250"),
}


# the cases whose error names a row: it is also the error's ``.row`` (the Spark sink maps it
# to the row's position in its partition)
ROW_OF = {"partition 2 of 2": 1, "partition -1": 2, "header with a null key": 1, "null header": 1}


@pytest.mark.parametrize("case", list(BAD_ARROW))
def test_send_arrow_refuses_bad_input_before_queuing_anything(kafka, producer, topic, case):
    data, arguments, error, message = BAD_ARROW[case]
    arguments = dict(arguments)
    target = arguments.pop("topic", topic)
    with pytest.raises(error, match=message) as info:
        producer.send_arrow(target, data, **arguments)
    if case in ROW_OF:
        assert info.value.row == ROW_OF[case]
    producer.flush(30)
    assert end_offsets(kafka.bootstrap_servers, topic, PARTITIONS) == {0: 0, 1: 0}


def test_nulls_strings_and_bytes_likes_are_written_as_documented(kafka):
    """A null value is a tombstone, a null key means no key (sticky partitioner); str is
    written as UTF-8; bytearray and memoryview as their bytes; header values may be None,
    bytearray or memoryview. Both APIs; every record read back."""
    bootstrap = kafka.bootstrap_servers
    name = unique("good-odd-input")
    create_topic(bootstrap, name, 1)
    sent = [  # (value, key, headers) -> what confluent-kafka reads back
        ((None, b"k-tomb", None), (None, b"k-tomb", [])),
        ((b"no key", None, None), (b"no key", None, [])),
        ((None, None, None), (None, None, [])),
        (("text é", "key é", None), ("text é".encode(), "key é".encode(), [])),
        ((bytearray(b"ba"), memoryview(b"mv-key"), None), (b"ba", b"mv-key", [])),
        ((b"", b"", [("n", None), ("b", bytearray(b"x")), ("m", memoryview(b"y"))]),
         (b"", b"", [("n", None), ("b", b"x"), ("m", b"y")])),
    ]
    with KafkaProducer({"bootstrap.servers": bootstrap}) as producer:
        futures = [producer.send(name, value, key=key, headers=headers) for (value, key, headers), _ in sent]
        assert [f.result(30).offset for f in futures] == list(range(len(sent)))
        table = pa.table({"value": pa.array([None, "s", None], pa.string()),
                          "key": pa.array([b"k", None, None], pa.binary()),
                          "headers": pa.array([None, [("n", None)], []], HEADERS)})
        result = producer.send_arrow(name, table).raise_for_errors(30)
        assert result.acked == 3
    expected = [want for _, want in sent] + [(None, b"k", []), (b"s", None, [("n", None)]), (None, None, [])]
    records = consume_all(bootstrap, name, 1, expected_count=len(expected))[0]
    assert [(r.value, r.key, r.headers) for r in records] == expected


def test_a_record_over_the_topics_max_message_bytes(kafka):
    """The broker refuses a record over the topic's ``max.message.bytes`` (2048 here) that
    passed the producer's own ``max.request.size`` check: its future fails with
    RecordTooLargeError (MESSAGE_TOO_LARGE) naming the partition, the records before and after
    it are delivered, and the error is counted. A batch holding it and others is split (as
    Java's producer does): the others are delivered, only the too-large record fails, none is
    dropped silently (more in test_batch_split.py)."""
    bootstrap = kafka.bootstrap_servers
    name = unique("max-message-bytes")
    create_topic(bootstrap, name, 1, configs={"max.message.bytes": "2048"})
    with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 0}) as producer:
        before = [producer.send(name, f"before-{i}".encode()) for i in range(3)]
        producer.flush(30)
        too_large = producer.send(name, b"x" * 3_000)
        producer.flush(30)
        after = [producer.send(name, f"after-{i}".encode()) for i in range(3)]
        producer.flush(30)
        error = too_large.exception(0)
        assert isinstance(error, RecordTooLargeError) and error.code == 10
        assert f"partition {name}-0, 1 record(s)" in str(error)
        assert [f.result(0).offset for f in before + after] == list(range(6))
        assert producer.metrics()["record-error-total"] == 1

        # a batch holding the too-large record and others: split; only the too-large one fails
        with KafkaProducer({"bootstrap.servers": bootstrap, "linger.ms": 60_000}) as batching:
            mixed = [batching.send(name, v) for v in (b"ok-1", b"y" * 3_000, b"ok-2")]
            batching.flush(30)
            errors = [f.exception(0) for f in mixed]
            assert batching.metrics()["batch-split-total"] >= 1
        assert errors[0] is None and errors[2] is None
        assert isinstance(errors[1], RecordTooLargeError) and errors[1].code == 10
        assert f"partition {name}-0, 1 record(s)" in str(errors[1])
        assert [f.result(0).offset for f in (mixed[0], mixed[2])] == [6, 7]

        # send_arrow: the refused batch is split too; the result counts the one row that failed
        result = producer.send_arrow(name, pa.table({"value": [b"a", b"z" * 3_000, b"c"]}))
        assert result.wait(30) and result.failed == 1 and result.acked == 2
        with pytest.raises(ArrowSendError, match=f"1 of 3 rows failed.*{name}-0.*MESSAGE_TOO_LARGE"):
            result.raise_for_errors(0)
        producer.send_arrow(name, pa.table({"value": [b"last"]})).raise_for_errors(30)
    records = consume_all(bootstrap, name, 1, expected_count=11)[0]
    assert [r.value for r in records] == [f"before-{i}".encode() for i in range(3)] + [
        f"after-{i}".encode() for i in range(3)] + [b"ok-1", b"ok-2", b"a", b"c", b"last"]


def _peak_rss_kb() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def test_two_million_tiny_rows_through_a_1_mb_buffer(kafka):
    """``send_arrow`` of 2,000,000 rows with ``buffer.memory`` of 1 MB: it waits for memory
    (backpressure) instead of failing, every row is written, and the process's peak RSS grows
    by a bounded amount: one encoding pass (at most 8 MB or 131,072 rows) plus some 50 bytes of
    bookkeeping per input row (partition, size, timestamp), never the whole encoded input.
    Measured: +118 MB (it was +300 MB before passes were capped by rows)."""
    bootstrap = kafka.bootstrap_servers
    name = unique("arrow-2m")
    create_topic(bootstrap, name, PARTITIONS)
    rows = 2_000_000
    data = pa.table({"value": pa.array([b"v%d" % (i % 10) for i in range(rows)], pa.binary())})
    Path("/proc/self/clear_refs").write_text("5")  # reset VmHWM to the current RSS
    start_kb = _peak_rss_kb()
    started = time.monotonic()
    with KafkaProducer({"bootstrap.servers": bootstrap, "buffer.memory": 1 << 20,
                        "max.block.ms": 60_000}) as producer:
        result = producer.send_arrow(name, data).raise_for_errors(120)
        metrics = producer.metrics()
    elapsed = time.monotonic() - started
    grown_mb = (_peak_rss_kb() - start_kb) / 1024
    assert result.acked == rows and result.failed == 0
    assert metrics["bufferpool-wait-time-ns-total"] > 0, "the 1 MB buffer never made it wait"
    assert metrics["record-error-total"] == 0
    bound_mb = 64 + rows * 64 / (1 << 20)  # a pass, plus 64 B per row: 186 MB here
    assert grown_mb < bound_mb, f"peak RSS grew by {grown_mb:.0f} MB (bound {bound_mb:.0f} MB)"
    assert sum(end_offsets(bootstrap, name, PARTITIONS).values()) == rows
    print(f"2M rows via send_arrow in {elapsed:.1f} s, peak RSS +{grown_mb:.0f} MB")
