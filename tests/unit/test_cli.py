"""The ``spark-kafka-sink`` command's arguments (``spark_kafka_sink.cli``), without a broker; the
broker it runs is tested in tests/integration/test_cli_broker.py."""

from __future__ import annotations

import argparse

import pytest

from spark_kafka_sink.cli import TopicSpec, main, port_number, topic_spec


@pytest.mark.parametrize(("text", "spec"), [
    ("events", TopicSpec("events", 1)),
    ("events:3", TopicSpec("events", 3)),
    ("events.dlq", TopicSpec("events.dlq", 1)),
    ("a-b_c.d:12", TopicSpec("a-b_c.d", 12)),
])
def test_a_topic_is_a_name_and_an_optional_partition_count(text, spec):
    assert topic_spec(text) == spec


@pytest.mark.parametrize(("text", "why"), [
    ("events:", "positive integer, got ''"),
    ("events:x", "positive integer, got 'x'"),
    ("events:-2", "positive integer, got '-2'"),
    ("events:0", "at least 1 partition"),
    (":3", "empty"),
    ("bad name", "characters other than"),
    ("a:b:2", "characters other than"),
])
def test_a_bad_topic_is_refused_naming_what_is_wrong(text, why):
    with pytest.raises(argparse.ArgumentTypeError, match=why) as raised:
        topic_spec(text)
    assert repr(text) in str(raised.value)


@pytest.mark.parametrize("text", ["0", "65536", "x", "-1", ""])
def test_a_port_is_1_to_65535(text):
    with pytest.raises(argparse.ArgumentTypeError, match="1-65535"):
        port_number(text)
    assert port_number("9092") == 9092


def test_bad_arguments_exit_2_before_anything_starts(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["broker", "--topic", "events:none"])
    assert exited.value.code == 2
    assert "--topic" in capsys.readouterr().err
    assert main(["broker", "--nodes", "3", "--port", "65534"]) == 2
    assert "ports 65534..65536 run past 65535" in capsys.readouterr().err
