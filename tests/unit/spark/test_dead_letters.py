"""The per-record error policy without a broker: the dead-letter record, the rows-mode task with a
fake producer, the options."""

from __future__ import annotations

import logging

import pytest
from pyspark.sql import Row

from spark_kafka_sink.errors import (ConfigError, InvalidRecordError, MessageTooLargeError,
                                     NotLeaderOrFollowerError, RecordTooLargeError)
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.spark.dead_letters import (CONVERT, HEADER_PREFIX, LOG_BURST, LOG_PERIOD_MS,
                                                 BadRecord, DeadLetterError, DeadLetters,
                                                 TaskContext)
from spark_kafka_sink.spark.options import ErrorPolicy, SinkConfig
from spark_kafka_sink.spark.partition_writer import PartitionWriteError
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock
from .test_partition_writer import OPTIONS, FakeProducer, make_writer

DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}


def letters(**policy) -> DeadLetters:
    return DeadLetters(ErrorPolicy("all", **policy), TaskContext(7, 3, 1), 1000)


def bad(error=None, value=b"v", **fields) -> BadRecord:
    return BadRecord(fields.pop("stage", CONVERT), fields.pop("topic", "t"), fields.pop("partition", 2),
                     b"k", value, [("h", b"1")], error or InvalidRecordError("no key"), 5)


def test_a_dead_letter_keeps_the_record_and_says_what_went_wrong_where():
    key, value, headers = letters(dlq_topic="dlq").dead_letter(bad())
    assert (key, value) == (b"k", b"v")
    named = dict(headers)
    assert headers[0] == ("h", b"1")
    assert named[HEADER_PREFIX + "topic"] == b"t" and named[HEADER_PREFIX + "partition"] == b"2"
    assert named[HEADER_PREFIX + "exception.class.name"] == b"spark_kafka_sink.errors.InvalidRecordError"
    assert b"no key" in named[HEADER_PREFIX + "exception.message"]
    assert named[HEADER_PREFIX + "stage"] == b"convert"
    assert (named[HEADER_PREFIX + "spark.batch.id"], named[HEADER_PREFIX + "spark.partition.id"],
            named[HEADER_PREFIX + "spark.attempt"]) == (b"7", b"3", b"1")


def test_without_context_headers_only_the_originals_go_and_an_unknown_partition_is_left_out():
    assert letters(dlq_topic="dlq", context_headers=False).dead_letter(bad())[2] == [("h", b"1")]
    names = dict(letters(dlq_topic="dlq").dead_letter(bad(partition=None))[2])
    assert HEADER_PREFIX + "partition" not in names and HEADER_PREFIX + "topic" in names


def test_a_record_too_large_for_the_dead_letter_topic_keeps_its_headers_and_says_so():
    dead = letters(dlq_topic="dlq")
    key, value, headers = dead.dead_letter(bad(RecordTooLargeError("big"), value=b"x" * 5000))
    assert key is None and value == b""
    note = dict(headers)[HEADER_PREFIX + "value.dropped"].decode()
    assert "value (5000 bytes) were dropped" in note and "larger than 1000 bytes" in note
    assert ("h", b"1") in headers and dead.stripped == 1
    assert RecordBatchBuilder.estimate_size_upper_bound(key, value, headers) <= 1000


class Producer(FakeProducer):
    """Completes at once; ``refuse``: values the broker refuses one by one (kept by a tally that
    keeps refused records, else failed)."""

    def __init__(self, refuse=(), raise_at=None, **kwargs):
        super().__init__(complete_at_once=True, **kwargs)
        self.refuse = set(refuse)
        self.raise_on_call = raise_at
        self.calls = 0

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        self.calls += 1
        if self.calls - 1 == self.raise_on_call:
            raise RecordTooLargeError("too big")
        if (topic != "dlq" and value in self.refuse and isinstance(callback, DeliveryTally)
                and callback.keep_refused):
            self.sent.append((topic, value, key, partition, timestamp_ms, headers))
            record = type("R", (), {"timestamp_ms": 0, "key": key, "value": value,
                                    "headers": tuple(headers or ())})
            callback.batch_refused(TopicPartition(topic, 0), [record], InvalidRecordError("refused"))
            return None
        return super().send(topic, value, key, partition, timestamp_ms, headers, callback)


def test_rows_mode_sends_bad_rows_to_the_dead_letter_topic_and_the_rest_to_theirs():
    producer = Producer(refuse={b"v3"}, raise_at=1)
    writer, _ = make_writer(producer, options={**OPTIONS, **DLQ})
    data = [Row(key="k0", value="v0", topic="t"), Row(key="k1", value="v1", topic="t"),
            Row(key="k2", value="v2", topic=None), Row(key="k3", value="v3", topic="t"),
            Row(key="k4", value="v4", topic="t")]
    stats = writer(data)
    to_dlq = [(s[1], dict(s[5])[HEADER_PREFIX + "stage"]) for s in producer.sent if s[0] == "dlq"]
    assert to_dlq == [(b"v1", b"convert"), (b"v2", b"convert"), (b"v3", b"produce")]
    assert [s[1] for s in producer.sent if s[0] == "t"] == [b"v0", b"v3", b"v4"]
    metrics = stats.metrics.as_dict()
    assert (metrics["record-send-total"], metrics["record-error-total"],
            metrics["dlq-record-send-total"], metrics["record-skip-total"]) == (2, 3, 3, 0)
    assert metrics["error.RowError.record-error-total"] == 1
    assert metrics["error.MessageTooLargeError.record-error-total"] == 1
    assert metrics["error.InvalidRecordError.record-error-total"] == 1


def test_rows_mode_without_a_dead_letter_topic_skips_and_counts():
    producer = Producer(raise_at=0)
    writer, _ = make_writer(producer, options={**OPTIONS, "errors.tolerance": "all"})
    metrics = writer([Row(key="k0", value="v0", topic="t"), Row(key="k1", value="v1", topic="t")]
                     ).metrics.as_dict()
    assert [s[0] for s in producer.sent] == ["t"]
    assert (metrics["record-skip-total"], metrics["record-error-total"]) == (1, 1)


def test_bad_records_are_counted_per_error_class():
    dead = letters()                                            # skipped: no dead-letter topic
    for error in (InvalidRecordError("a"), MessageTooLargeError("b"), InvalidRecordError("c")):
        dead.handle(None, bad(error))
    assert dead.figures() == {"bad": 3, "dead_lettered": 0, "skipped": 3, "errors_by_class": {
        "InvalidRecordError": 2, "MessageTooLargeError": 1}}

def test_a_fatal_error_still_fails_the_task_whatever_the_policy():
    producer = FakeProducer(fail_at={0})
    writer, _ = make_writer(producer, options={**OPTIONS, **DLQ})
    with pytest.raises(PartitionWriteError, match="NotLeaderOrFollowerError"):
        writer([Row(key="k0", value="v0", topic="t")])
    assert not [s for s in producer.sent if s[0] == "dlq"]


def test_a_failed_dead_letter_write_fails_the_task():
    producer = Producer(raise_at=0, fail_at={0})            # the dead letter's send fails
    writer, _ = make_writer(producer, options={**OPTIONS, **DLQ})
    with pytest.raises(DeadLetterError, match="could not be written to the dead-letter topic 'dlq'"):
        writer([Row(key="k0", value="v0", topic="t")])


def test_a_dead_letter_refused_as_too_large_goes_again_as_its_headers_alone():
    producer = Producer(raise_at=0)
    writer, _ = make_writer(producer, options={**OPTIONS, **DLQ})
    original = producer.send

    def send(topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None, callback=None):
        if topic == "dlq" and value == b"v0":
            record = type("R", (), {"timestamp_ms": 0, "key": key, "value": value,
                                    "headers": tuple(headers or ())})
            callback.batch_refused(TopicPartition(topic, 0), [record], MessageTooLargeError("big"))
            return None
        return original(topic, value, key, partition, timestamp_ms, headers, callback)

    producer.send = send
    metrics = writer([Row(key="k0", value="v0", topic="t")]).metrics.as_dict()
    stripped = [s for s in producer.sent if s[0] == "dlq"]
    assert len(stripped) == 1 and stripped[0][1] == b"" and stripped[0][2] is None
    assert "dead-letter topic refused it as too large" in dict(stripped[0][5])[
        HEADER_PREFIX + "value.dropped"].decode()
    assert metrics["dlq-record-send-total"] == 1


def test_bad_records_are_logged_rate_limited_without_their_bytes(caplog):
    clock = FakeClock()
    dead = DeadLetters(ErrorPolicy("all", log=True), TaskContext(7, 3, 1), 1000, clock=clock)
    with caplog.at_level(logging.WARNING, logger="spark_kafka_sink.spark.dead_letters"):
        for _ in range(LOG_BURST + 5):
            dead.handle(None, bad(value=b"SECRET-BYTES"))
        assert len(caplog.records) == LOG_BURST and dead.skipped == LOG_BURST + 5
        clock.advance(LOG_PERIOD_MS)                       # a new window: the held-back count
        dead.handle(None, bad())
    assert len(caplog.records) == LOG_BURST + 1 and "(5 more not logged)" in caplog.records[-1].getMessage()
    assert all("SECRET-BYTES" not in r.getMessage() for r in caplog.records)
    assert "-> skipped: InvalidRecordError: [Error 87] INVALID_RECORD: no key" in caplog.records[0].getMessage()


@pytest.mark.parametrize("options, message", [
    ({"errors.tolerance": "some"}, "'errors.tolerance' must be 'none' or 'all'"),
    ({"errors.deadletterqueue.topic.name": "dlq"}, "set errors.tolerance=all"),
    ({**DLQ, "errors.deadletterqueue.topic.name": "bad name"}, "errors.deadletterqueue.topic.name"),
    ({**DLQ, "errors.deadletterqueue.topic.replication.factor": "0"}, "from 1 to 32767"),
    ({**DLQ, "errors.deadletterqueue.topic.replication.factor": "three"}, "must be an integer"),
    ({"errors.tolerance": "all", "errors.deadletterqueue.topic.replication.factor": "1"},
     "'errors.deadletterqueue.topic.name' is not"),
    ({"errors.log.enable": "yes"}, "'errors.log.enable' must be true or false"),
    ({"preflight": "maybe"}, "'preflight' must be true or false"),
])
def test_bad_policy_options_are_refused_by_name(options, message):
    with pytest.raises(ConfigError, match=message):
        SinkConfig.from_options({**OPTIONS, **options})


def test_policy_options_parse_and_show_in_the_redacted_view():
    config = SinkConfig.from_options({**OPTIONS, **DLQ, "ERRORS.LOG.ENABLE": "TRUE",
                                      "errors.deadletterqueue.context.headers.enable": "false",
                                      "errors.deadletterqueue.topic.replication.factor": "3",
                                      "preflight": False})
    assert config.error_policy == ErrorPolicy("all", "dlq", False, 3, True)
    assert not config.preflight
    shown = config.redacted()
    assert shown["errors.tolerance"] == "all" and shown["preflight"] is False
    assert SinkConfig.from_options(OPTIONS).error_policy == ErrorPolicy()


def test_other_failures_are_not_turned_into_dead_letters():
    tally = DeliveryTally(keep_refused=True)
    tally.batch_completed(TopicPartition("t", 0), 3, NotLeaderOrFollowerError("gone"))
    assert tally.failed == 3 and tally.refused == 0 and tally.take_refused() == []
