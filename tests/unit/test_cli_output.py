"""What the client commands print (``spark_kafka_sink.cli``: records, tail, topics, check), from
values built by hand: no broker. tests/integration/test_cli_tools.py runs them against one."""

from __future__ import annotations

import json

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.admin import (FetchedRecord, PartitionRead, PartitionState, TopicDescription,
                                    TopicListing)
from spark_kafka_sink.cli.arguments import ClientSettings
from spark_kafka_sink.cli.check import found_lines, sink_options
from spark_kafka_sink.cli.records import (bytes_of, json_line, json_value, shown, text_lines,
                                          timestamp_text)
from spark_kafka_sink.cli.tail import select, tail_summary
from spark_kafka_sink.cli.topics import describe_lines, list_lines
from spark_kafka_sink.errors import TopicAuthorizationFailedError
from spark_kafka_sink.record.layout import TimestampType
from spark_kafka_sink.record.reader import Header

CREATE, APPEND = TimestampType.CREATE_TIME, TimestampType.LOG_APPEND_TIME


def record(partition=0, offset=0, timestamp=1_714_564_800_123, key=b"k", value=b"v", headers=(),
           kind=CREATE) -> FetchedRecord:
    return FetchedRecord("events", partition, offset, timestamp, kind, key, value,
                         tuple(Header(k, v) for k, v in headers))


@pytest.mark.parametrize(("data", "text"), [
    (None, "(null)"),
    (b"", "(empty)"),
    (b"order-1", "order-1"),
    ('{"city": "Zürich"}'.encode(), '{"city": "Zürich"}'),
    (b"a\tb\nc\r", "a\\tb\\nc\\r"),
    (b"\x00\xff\x10", "[hex] 00ff10"),            # not UTF-8
    (b"\x00\x01\x02", "[hex] 000102"),            # UTF-8, but control characters
    (b"\x1b[31mred", "[hex] 1b5b33316d726564"),   # an escape sequence never reaches the terminal
])
def test_bytes_show_as_text_only_when_it_is_text(data, text):
    assert shown(data) == text


def test_a_record_in_text_is_a_heading_line_then_key_value_and_each_header():
    lines = text_lines(record(2, 41, key=None, value=b"\xfe\xff",
                              headers=[("trace", b"abc"), ("trace", None), ("raw", b"\x00")]))
    assert lines == ["partition 2, offset 41, CreateTime 2024-05-01 12:00:00.123 UTC",
                     "  key:    (null)",
                     "  value:  [hex] feff",
                     "  header: trace = abc",
                     "  header: trace = (null)",
                     "  header: raw = [hex] 00"]
    assert text_lines(record(kind=APPEND, timestamp=5))[0] == \
        "partition 0, offset 0, LogAppendTime 1970-01-01 00:00:00.005 UTC"
    assert timestamp_text(-1) == "no timestamp"
    assert timestamp_text(253_402_300_800_000) == "253402300800000 ms since the epoch"   # year 10000
    assert timestamp_text(2**63 - 1) == f"{2**63 - 1} ms since the epoch"


def test_a_record_in_json_is_one_line_with_bytes_marked_when_not_utf8():
    line = json_line(record(1, 7, key="clé".encode(), value=b"\x00\xff",
                            headers=[("h", b"x"), ("n", None)]))
    assert "\n" not in line and "clé" in line
    assert json.loads(line) == {
        "topic": "events", "partition": 1, "offset": 7, "timestamp": 1_714_564_800_123,
        "timestamp_type": "CreateTime", "key": "clé", "value": {"base64": "AP8="},
        "headers": [["h", "x"], ["n", None]]}
    assert json.loads(json_line(record(key=None, value=b"")))["key"] is None
    assert json.loads(json_line(record(key=None, value=b"")))["value"] == ""


@settings(max_examples=50, deadline=None)
@given(st.one_of(st.none(), st.binary(max_size=64), st.text(max_size=32).map(str.encode)))
def test_json_values_turn_back_into_the_same_bytes(data):
    assert bytes_of(json.loads(json.dumps(json_value(data)))) == data


def read(partition, records, *, log_start=0, first=0, end=None, high=None, more=False) -> PartitionRead:
    end = len(records) if end is None else end
    return PartitionRead(partition, log_start, first, end, end if high is None else high,
                         tuple(records), more)


def test_tail_merges_partitions_by_timestamp_keeping_each_partitions_order():
    p0 = [record(0, 0, 10), record(0, 1, 30), record(0, 2, 20)]     # out of time order in p0
    p1 = [record(1, 0, 15), record(1, 1, 25)]
    reads = [read(0, p0), read(1, p1)]
    where = [(r.partition, r.offset) for r in select(reads, 10, newest=False)]
    assert where == [(0, 0), (1, 0), (1, 1), (0, 1), (0, 2)]
    assert [(r.partition, r.offset) for r in select(reads, 2, newest=False)] == [(0, 0), (1, 0)]
    assert [(r.partition, r.offset) for r in select(reads, 2, newest=True)] == [(0, 1), (0, 2)]


def test_tail_summary_says_what_was_shown_and_where_more_is():
    full = [read(0, [record(0, 5)], log_start=0, first=5, end=6)]
    assert tail_summary("events", full, 1, newest=True, offset=None, committed=False) == [
        "1 record(s) of topic 'events', partition(s) 0", "older records: --from-beginning or --offset N"]
    assert tail_summary("events", [read(0, [record()], more=True)], 1, newest=False, offset=None,
                   committed=False)[-1] == "more records follow: raise --max-records, or --offset N"
    assert tail_summary("events", [read(0, [record()])], 1, newest=False, offset=None, committed=False) == [
        "1 record(s) of topic 'events', partition(s) 0"]
    lines = tail_summary("events", [read(0, [], log_start=3, first=3, end=3), read(1, [], first=0, end=0)],
                    0, newest=False, offset=9, committed=False)
    assert lines[1:] == ["partition 0: offset 9 is past its end (3)", "partition 1: offset 9 is past its end (0)"]
    lines = tail_summary("events", [read(0, [record(0, 4)], log_start=4, first=4, end=5)], 1,
                    newest=False, offset=1, committed=False)
    assert lines[1] == "partition 0: offset 1 is before its first (4); read from 4"
    lines = tail_summary("events", [read(0, [record()], end=1, high=3)], 1, newest=False, offset=None,
                    committed=True)
    assert lines == ["1 record(s) of topic 'events', partition(s) 0 (read_committed)",
                     "partition 0: a transaction open since offset 1 hides the records from there "
                     "to 3 until it is decided"]


def test_topics_list_is_a_table_without_internal_topics_unless_asked():
    topics = [TopicListing("__consumer_offsets", 50, 1, internal=True), TopicListing("events", 3, 1),
              TopicListing("events.dlq", 1, 3)]
    assert list_lines(topics, internal=False) == ["TOPIC       PARTITIONS  REPLICATION",
                                                  "events               3            1",
                                                  "events.dlq           1            3"]
    assert list_lines(topics, internal=True)[1] == \
        "__consumer_offsets          50            1  (internal)"
    assert list_lines(topics[:1], internal=False) == ["(no topics)"]


def test_topics_describe_shows_partitions_and_the_configs_set_on_the_topic():
    description = TopicDescription(
        "events", True, 2, {"cleanup.policy": "compact", "retention.ms": "604800000", "x": None},
        replication_factor=2, cluster_brokers=3, overridden=frozenset({"cleanup.policy", "x"}),
        partition_states=(PartitionState(0, 1, (1, 2), (1, 2)),
                          PartitionState(1, -1, (2, 3), (), offline=(2, 3))))
    assert describe_lines(description, all_configs=False) == [
        "topic events: 2 partition(s), replication factor 2, 3 broker(s) in the cluster",
        "  partition 0: leader 1, replicas 1,2, in sync 1,2",
        "  partition 1: leader none, replicas 2,3, in sync none, offline 2,3",
        "  configs set on the topic:",
        "    cleanup.policy=compact",
        "    x=(none)"]
    assert describe_lines(description, all_configs=True)[-4:] == [
        "  configs:", "    cleanup.policy=compact", "    retention.ms=604800000", "    x=(none)"]
    plain = TopicDescription("t", True, 1, {"retention.ms": "1"})
    assert describe_lines(plain, all_configs=False)[-1] == \
        "  configs: none set on the topic (--all-configs shows the defaults)"
    hidden = TopicDescription("t", True, 1, config_error=TopicAuthorizationFailedError("no"))
    assert describe_lines(hidden, all_configs=False)[-1].startswith("  configs: cannot read them: ")


def test_check_builds_the_sinks_options_as_the_sink_gets_them():
    settings = ClientSettings("127.0.0.1:9092", {"security.protocol": "SSL"}, 2.5)
    assert sink_options(settings, "events", [("errors.tolerance", "all")]) == {
        "kafka.bootstrap.servers": "127.0.0.1:9092", "kafka.security.protocol": "SSL",
        "topic": "events", "errors.tolerance": "all", "kafka.max.block.ms": "2500"}
    given_options = sink_options(settings, None, [("topic", "t"), ("Kafka.Max.Block.Ms", "900"),
                                                  ("kafka.security.protocol", "PLAINTEXT")])
    assert given_options == {"kafka.bootstrap.servers": "127.0.0.1:9092",
                             "kafka.security.protocol": "PLAINTEXT", "topic": "t",
                             "Kafka.Max.Block.Ms": "900"}


def test_check_prints_a_line_per_topic_it_checked():
    found = {"events": TopicDescription("events", True, 3, {"max.message.bytes": "1048588"},
                                        replication_factor=1, cluster_brokers=1),
             "dlq": TopicDescription("dlq", True, 1, {"max.message.bytes": "2000"},
                                     replication_factor=1, cluster_brokers=1)}
    assert found_lines({"events": "topic", "dlq": "errors.deadletterqueue.topic.name"}, found, 1048576) == [
        "  topic 'events' (option 'topic'): 3 partition(s), replication factor 1 (1 broker(s) in "
        "the cluster), max.message.bytes=1048588 >= kafka.max.request.size=1048576",
        "  topic 'dlq' (option 'errors.deadletterqueue.topic.name'): 1 partition(s), replication "
        "factor 1 (1 broker(s) in the cluster), max.message.bytes=2000 (dead letters are sized to it)"]


def test_a_malformed_key_value_is_refused_without_echoing_what_may_be_a_secret():
    import argparse

    from spark_kafka_sink.cli.arguments import key_value

    with pytest.raises(argparse.ArgumentTypeError) as refused:
        key_value("sasl.password:hunter2")
    assert "hunter2" not in str(refused.value) and "sasl.password" in str(refused.value)
    with pytest.raises(argparse.ArgumentTypeError, match="'linger.ms'$"):
        key_value("linger.ms")
    assert key_value("a=b=c") == ("a", "b=c")
