"""The per-record error policy without a broker: the dead-letter record, the rows-mode task with a
fake producer, the options."""

from __future__ import annotations

import datetime
import decimal
import json
import logging

import pytest
from pyspark.sql import Row

from spark_kafka_sink.errors import (ConfigError, InvalidRecordError, MessageTooLargeError,
                                     NotLeaderOrFollowerError, RecordTooLargeError)
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.spark.dead_letters import (CONTEXT_VALUE_MAX, CONVERT, HEADER_PREFIX, LOG_BURST,
                                                 LOG_PERIOD_MS, PRODUCE, BadRecord, DeadLetter,
                                                 DeadLetterError, DeadLetters, TaskContext, as_bytes)
from spark_kafka_sink.spark.options import ErrorPolicy, SinkConfig
from spark_kafka_sink.spark.task import PartitionWriteError
from spark_kafka_sink.structs import TopicPartition

from ..fakes import FakeClock
from .test_partition_writer import OPTIONS, FakeProducer, make_writer

DLQ = {"errors.tolerance": "all", "errors.deadletterqueue.topic.name": "dlq"}


def letters(**policy) -> DeadLetters:
    return DeadLetters(ErrorPolicy("all", **policy), TaskContext(7, 3, 1), 1000)


def bad(error=None, value=b"v", **fields) -> BadRecord:
    return BadRecord(fields.pop("stage", CONVERT), fields.pop("topic", "t"), fields.pop("partition", 2),
                     fields.pop("key", b"k"), value, fields.pop("headers", [("h", b"1")]),
                     error or InvalidRecordError("no key"), 5)


def size(letter: DeadLetter) -> int:
    return RecordBatchBuilder.estimate_size_upper_bound(letter.key, letter.value, letter.headers)


def test_a_dead_letter_keeps_the_record_and_says_what_went_wrong_where():
    letter = letters(dlq_topic="dlq").dead_letter(bad())
    assert (letter.key, letter.value, letter.dropped) == (b"k", b"v", ())
    named = dict(letter.headers)
    assert letter.headers[0] == ("h", b"1") and letter.headers[1][0] == HEADER_PREFIX + "topic"
    assert named[HEADER_PREFIX + "topic"] == b"t" and named[HEADER_PREFIX + "partition"] == b"2"
    assert named[HEADER_PREFIX + "exception.class.name"] == b"spark_kafka_sink.errors.InvalidRecordError"
    assert b"no key" in named[HEADER_PREFIX + "exception.message"]
    assert named[HEADER_PREFIX + "stage"] == b"convert"
    assert (named[HEADER_PREFIX + "spark.batch.id"], named[HEADER_PREFIX + "spark.partition.id"],
            named[HEADER_PREFIX + "spark.attempt"]) == (b"7", b"3", b"1")


def test_without_context_headers_only_the_originals_go_and_an_unknown_partition_is_left_out():
    assert letters(dlq_topic="dlq", context_headers=False).dead_letter(bad()).headers == (("h", b"1"),)
    names = dict(letters(dlq_topic="dlq").dead_letter(bad(partition=None)).headers)
    assert HEADER_PREFIX + "partition" not in names and HEADER_PREFIX + "topic" in names
    names = dict(letters(dlq_topic="dlq").dead_letter(bad(topic=None)).headers)
    assert names[HEADER_PREFIX + "topic"] is None             # a null topic: a null value, first


def test_a_record_too_large_for_the_dead_letter_topic_drops_its_value_first_and_says_so():
    letter = letters(dlq_topic="dlq").dead_letter(bad(RecordTooLargeError("big"), value=b"x" * 5000))
    assert (letter.key, letter.value, letter.dropped) == (b"k", b"", ("value",))
    note = dict(letter.headers)[HEADER_PREFIX + "value.dropped"].decode()
    assert note.startswith("5000 bytes: ") and "larger than 1000 bytes" in note
    assert ("h", b"1") in letter.headers and size(letter) <= 1000


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
    notes = dict(stripped[0][5])
    assert notes[HEADER_PREFIX + "value.dropped"] == (
        b"2 bytes: the dead-letter topic refused the dead letter as too large")
    assert notes[HEADER_PREFIX + "key.dropped"].startswith(b"2 bytes: ")
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


# --- dead letters that must fit --------------------------------------------------------------------

class SizedDlq(Producer):
    """``send`` raises MessageTooLargeError over ``max_record_size`` (the real producer's check);
    the dead-letter topic refuses as too large any record over ``topic_limit``."""

    def __init__(self, max_record_size=1_048_576, topic_limit=None, **kwargs):
        super().__init__(**kwargs)
        self.max_record_size, self.topic_limit = max_record_size, topic_limit

    def send(self, topic, value=None, key=None, partition=None, timestamp_ms=None, headers=None,
             callback=None):
        bound = RecordBatchBuilder.estimate_size_upper_bound(key, value, headers)
        if bound > self.max_record_size:
            raise RecordTooLargeError(f"{bound} bytes")
        if topic == "dlq" and self.topic_limit is not None and bound > self.topic_limit:
            self.sent.append((topic, value, key, partition, timestamp_ms, headers))
            if len(self.sent) > 20:
                raise AssertionError("the dead letter is sent again and again")
            record = type("R", (), {"timestamp_ms": 0, "key": key, "value": value,
                                    "headers": tuple(headers or ())})
            callback.batch_refused(TopicPartition(topic, 0), [record], MessageTooLargeError(f"{bound}"))
            return None
        return super().send(topic, value, key, partition, timestamp_ms, headers, callback)


def dlq_sends(producer):
    return [s for s in producer.sent if s[0] == "dlq"]


@pytest.mark.parametrize("stage", [CONVERT, PRODUCE])
def test_a_topic_larger_than_max_request_size_is_cut_in_its_header_and_the_dead_letter_fits(stage):
    """An invalid ``topic`` value of 2 MB (a mis-mapped column) used to be copied whole into the
    topic header, so the dead letter itself was too large and send() raised out of handle()."""
    huge = "x" * 2_000_000
    dead = DeadLetters(ErrorPolicy("all", dlq_topic="dlq"), TaskContext(7, 3, 1), 1_048_576)
    producer = SizedDlq(max_record_size=1_048_576)
    dead.handle(producer, bad(topic=huge, stage=stage, value=b"v" * 10))
    dead.settle(producer, ())
    dead.check()
    (_, value, key, _, _, headers), = dlq_sends(producer)
    topic = dict(headers)[HEADER_PREFIX + "topic"]
    assert len(topic) == CONTEXT_VALUE_MAX and topic.endswith(b"...[truncated, 2000000 bytes]")
    assert topic.startswith(b"xxxx") and (key, value) == (b"k", b"v" * 10)
    assert all(len(v or b"") <= CONTEXT_VALUE_MAX for k, v in headers if k.startswith(HEADER_PREFIX))
    assert dead.dead_lettered == 1


def test_a_long_exception_message_is_capped_in_its_context_header_though_the_letter_would_fit():
    """Every context value is capped at CONTEXT_VALUE_MAX, not only when the dead letter is too
    large: a 100 KB error message fits the limit, yet its header carries its start and size."""
    dead = DeadLetters(ErrorPolicy("all", dlq_topic="dlq"), TaskContext(7, 3, 1), 1_048_576)
    error = InvalidRecordError("m" * 100_000)
    letter = dead.dead_letter(bad(error))
    message = dict(letter.headers)[HEADER_PREFIX + "exception.message"]
    assert len(message) == CONTEXT_VALUE_MAX and message.startswith(str(error)[:100].encode())
    assert message.endswith(f"...[truncated, {len(str(error))} bytes]".encode())
    assert letter.dropped == ()


def test_a_dead_letter_is_sized_against_the_dead_letter_topics_own_limit():
    """A 2,500-byte row with 4 KB of its own headers, a dead-letter topic of 2,000 bytes: the
    value, the key, then the row's headers go; the context headers stay; each drop is noted."""
    policy = ErrorPolicy("all", dlq_topic="dlq", dlq_max_message_bytes=2000)
    dead = DeadLetters(policy, TaskContext(7, 3, 1), 1_048_576)
    row_headers = [(f"h{i}", b"y" * 400) for i in range(10)]
    letter = dead.dead_letter(bad(value=b"v" * 2500, key=b"k" * 100, headers=row_headers))
    assert letter.dropped == ("value", "key", "headers") and size(letter) <= 2000
    assert (letter.key, letter.value) == (None, b"")
    named = dict(letter.headers)
    assert not any(name.startswith("h") for name in named)
    assert named[HEADER_PREFIX + "headers.dropped"].startswith(b"10 header(s), 4020 bytes: ")
    assert named[HEADER_PREFIX + "key.dropped"].startswith(b"100 bytes: the dead letter would be "
                                                           b"larger than 2000 bytes")
    assert named[HEADER_PREFIX + "stage"] == b"convert"
    small = dead.dead_letter(bad(value=b"v" * 1900, key=b"k" * 100, headers=[("h", b"1")]))
    assert small.dropped == ("value",) and small.key == b"k" * 100 and size(small) <= 2000


def test_context_headers_too_large_even_alone_are_cut_further_to_fit():
    policy = ErrorPolicy("all", dlq_topic="dlq", dlq_max_message_bytes=1000)
    dead = DeadLetters(policy, TaskContext(7, 3, 1), 1_048_576)
    letter = dead.dead_letter(bad(InvalidRecordError("m" * 5000), topic="t" * 5000))
    assert size(letter) <= 1000 and dict(letter.headers)[HEADER_PREFIX + "stage"] == b"convert"


def test_without_the_topics_limit_a_refused_dead_letter_goes_again_as_its_context_headers():
    """preflight=false: the tasks do not know the dead-letter topic's limit. A row with 4 KB of
    its own headers refused there as too large goes again without them (they used to be kept,
    compared with max.request.size only, so it was refused again and failed the task)."""
    producer = SizedDlq(topic_limit=2000)
    dead = DeadLetters(ErrorPolicy("all", dlq_topic="dlq"), TaskContext(7, 3, 1), 1_048_576)
    dead.handle(producer, bad(value=b"v" * 2500, headers=[(f"h{i}", b"y" * 400) for i in range(10)]))
    dead.settle(producer, ())
    dead.check()
    first, again = dlq_sends(producer)
    assert len(first[5]) > 10 and again[1] == b"" and again[2] is None
    named = dict(again[5])
    assert set(named) >= {HEADER_PREFIX + "value.dropped", HEADER_PREFIX + "key.dropped",
                          HEADER_PREFIX + "headers.dropped", HEADER_PREFIX + "topic"}
    assert not any(name.startswith("h") for name in named) and dead.dead_lettered == 1


def test_a_dead_letter_cut_to_its_headers_and_refused_again_is_not_sent_for_ever():
    producer = SizedDlq(topic_limit=100)                   # below even the context headers
    dead = DeadLetters(ErrorPolicy("all", dlq_topic="dlq"), TaskContext(7, 3, 1), 1_048_576)
    dead.handle(producer, bad())
    dead.settle(producer, ())
    assert len(dlq_sends(producer)) == 2
    with pytest.raises(DeadLetterError, match="1 bad record.*MessageTooLargeError"):
        dead.check()


def test_a_replayed_dead_letters_headers_are_the_records_not_ours():
    """A dead letter written back through the sink carries this sink's headers, a
    ``value.dropped`` among them, as its own. Refused as too large, it goes again cut to the
    headers this write added (it used to be taken for one already cut, and failed the task)."""
    replayed = [("h", b"1")] + [(HEADER_PREFIX + name, value) for name, value in (
        ("topic", b"t"), ("partition", b"2"), ("exception.class.name", b"x.RecordTooLargeError"),
        ("exception.message", b"big"), ("stage", b"convert"), ("spark.batch.id", b"1"),
        ("spark.partition.id", b"0"), ("spark.attempt", b"0"),
        ("value.dropped", b"5000 bytes: the dead letter would be larger than 1000 bytes"))]
    producer = SizedDlq(topic_limit=1500)
    dead = DeadLetters(ErrorPolicy("all", dlq_topic="dlq"), TaskContext(7, 3, 1), 1_048_576)
    dead.handle(producer, bad(value=b"v" * 600, headers=replayed, error=InvalidRecordError("again")))
    dead.settle(producer, ())
    dead.check()
    first, again = dlq_sends(producer)
    named = dict(again[5])
    assert [name for name, _ in again[5]].count(HEADER_PREFIX + "topic") == 1
    assert named[HEADER_PREFIX + "exception.message"].endswith(b"again")
    assert named[HEADER_PREFIX + "spark.batch.id"] == b"7"
    assert named[HEADER_PREFIX + "value.dropped"].startswith(b"600 bytes: ")
    assert named[HEADER_PREFIX + "headers.dropped"].startswith(b"10 header(s)")
    assert dead.dead_lettered == 1


def test_the_dead_letters_flushes_are_bounded_like_the_tasks():
    """settle() flushes until every dead letter has an outcome: each flush is bounded
    (delivery.timeout.ms plus the task's margin), so a stuck producer fails the task."""
    from spark_kafka_sink.spark.task import FLUSH_MARGIN_S

    class Recording(Producer):
        def __init__(self, **kwargs):
            super().__init__(**kwargs)
            self.timeouts = []

        def flush(self, timeout=None):
            self.timeouts.append(timeout)
            return super().flush(timeout)

    producer = Recording(raise_at=0)
    writer, _ = make_writer(producer, options={**OPTIONS, **DLQ, "kafka.delivery.timeout.ms": "40000"})
    writer([Row(key="k0", value="v0", topic="t")])
    assert producer.timeouts and set(producer.timeouts) == {40 + FLUSH_MARGIN_S}


# --- as_bytes: a bad record's key or value, an Avro side's as JSON ------------------------------

def test_as_bytes_keeps_bytes_and_null_and_writes_text_as_utf8():
    assert as_bytes(b"\x00\xff") == b"\x00\xff" and as_bytes(None) is None
    assert as_bytes("héllo") == "héllo".encode("utf-8")
    assert as_bytes(bytearray(b"ab")) == b"ab" and as_bytes(memoryview(b"cd")) == b"cd"


def test_as_bytes_writes_anything_else_as_json_with_exact_decimals_iso_times_and_base64():
    value = {"price": decimal.Decimal("10.50"), "day": datetime.date(2024, 2, 29),
             "at": datetime.datetime(2024, 1, 2, 3, 4, 5, 6, tzinfo=datetime.timezone.utc),
             "wall": datetime.datetime(2024, 1, 2, 3, 4, 5), "raw": b"\x00\xff",
             "items": [{"sku": "é", "blob": b"x", "qty": None}], "tags": {"a": [1.5, True]}}
    text = as_bytes(value)
    assert json.loads(text) == {"price": "10.50", "day": "2024-02-29", "at": "2024-01-02T03:04:05.000006+00:00",
                                "wall": "2024-01-02T03:04:05", "raw": "AP8=",
                                "items": [{"sku": "é", "blob": "eA==", "qty": None}], "tags": {"a": [1.5, True]}}
    assert "é".encode("utf-8") in text and b" " not in text               # compact, not escaped
    assert as_bytes(5) == b"5" and as_bytes([1, None]) == b"[1,null]"


def test_as_bytes_writes_a_row_by_its_field_names_nested_rows_too():
    value = Row(id=1, inner=Row(a=decimal.Decimal("2.0")), items=[Row(b=b"\x01"), None],
                by_name={"k": Row(c=3)}, day=datetime.date(2024, 1, 1))
    assert json.loads(as_bytes(value)) == {"id": 1, "inner": {"a": "2.0"}, "items": [{"b": "AQ=="}, None],
                                           "by_name": {"k": {"c": 3}}, "day": "2024-01-01"}


def test_as_bytes_writes_rows_in_a_list_or_map_column_by_their_field_names():
    assert json.loads(as_bytes([Row(a=1), Row(a=2)])) == [{"a": 1}, {"a": 2}]
    assert json.loads(as_bytes({"k": Row(a=1)})) == {"k": {"a": 1}}


def test_rows_mode_sends_an_avro_row_it_cannot_encode_to_the_dead_letters_as_json():
    from pyspark.sql import types as T

    from spark_kafka_sink.spark.schema import validate_schema

    user = T.StructType([T.StructField("id", T.LongType(), False), T.StructField("name", T.StringType(), True)])
    schema = ('{"type":"record","name":"User","fields":[{"name":"id","type":"long"},'
              '{"name":"name","type":"string"}]}')
    options = {**OPTIONS, **DLQ, "value.format": "avro", "value.avro.framing": "none", "value.avro.schema": schema}
    frame = T.StructType([T.StructField("key", T.StringType()), T.StructField("value", user),
                          T.StructField("topic", T.StringType())])
    written = validate_schema(frame, SinkConfig.from_options(options))
    producer = Producer()
    writer, _ = make_writer(producer, schema=written, options=options)
    stats = writer([Row(key="k0", value=Row(id=1, name="a"), topic="t"),
                    Row(key="k1", value=Row(id=2, name=None), topic="t"),
                    Row(key="k2", value=Row(id=3, name="c"), topic=None)])
    assert [(s[0], s[1]) for s in producer.sent if s[0] == "t"] == [("t", b"\x02\x02a")]
    letters_sent = dlq_sends(producer)
    assert [(json.loads(s[1]), s[2]) for s in letters_sent] == [({"id": 2, "name": None}, b"k1"),
                                                                ({"id": 3, "name": "c"}, b"k2")]
    first = dict(letters_sent[0][5])
    assert first[HEADER_PREFIX + "exception.class.name"] == b"spark_kafka_sink.errors.SerializationError"
    assert first[HEADER_PREFIX + "exception.message"].startswith(b"row 1: value.name: ")
    assert stats.metrics.as_dict()["error.SerializationError.record-error-total"] == 1


def test_as_bytes_writes_floats_json_has_no_number_for_as_strings():
    value = {"ratio": float("nan"), "high": float("inf"), "low": [float("-inf"), 1.5]}
    assert json.loads(as_bytes(value)) == {"ratio": "nan", "high": "inf", "low": ["-inf", 1.5]}
