"""The ``spark-kafka-sink`` command's arguments (``spark_kafka_sink.cli``), its ``--help`` and its
one-line failures, without a broker (a loopback socket stands for a silent or absent one); the
broker it runs is tested in tests/integration/test_embedded.py, the client commands against a
broker in tests/integration/test_cli_tools.py."""

from __future__ import annotations

import argparse
import re
import socket
import sys
import time
from pathlib import Path

import pytest

from spark_kafka_sink.cli import TopicSpec, build_parser, failure, main, port_number, topic_spec
from spark_kafka_sink.cli.arguments import ClientSettings, client_settings, key_value, offset, seconds
from spark_kafka_sink.cli.jobs import JOBS
from spark_kafka_sink.errors import (KafkaConnectionError, SaslAuthenticationFailedError,
                                     TopicAlreadyExistsError)

ROOT = Path(__file__).resolve().parents[2]


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


def parse(argv):
    return build_parser().parse_args(argv)


def exits_2(argv, capsys) -> str:
    """``main(argv)`` exits 2 before any connection; its stderr."""
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


def test_tail_reads_the_newest_records_by_default_and_takes_its_bounds():
    args = parse(["tail", "events"])
    assert (args.topic, args.partition, args.from_beginning, args.offset, args.max_records,
            args.isolation, args.format, args.timeout) == \
        ("events", None, False, None, 20, "read_uncommitted", "text", 10.0)
    args = parse(["tail", "events", "--partition", "0", "--partition", "2", "--offset", "-5",
                  "--max-records", "7", "--isolation", "read_committed", "--format", "json",
                  "--timeout", "2.5", "--bootstrap-server", "127.0.0.1:9093"])
    assert (args.partition, args.offset, args.max_records, args.isolation, args.format,
            args.timeout, args.bootstrap_server) == \
        ([0, 2], -5, 7, "read_committed", "json", 2.5, "127.0.0.1:9093")


@pytest.mark.parametrize(("argv", "fault"), [
    (["tail", "events", "--from-beginning", "--offset", "3"], "not allowed with argument"),
    (["tail", "events", "--max-records", "0"], "--max-records: a whole number of at least 1, got '0'"),
    (["tail", "events", "--partition", "-1"], "--partition: a partition is a whole number"),
    (["tail", "events", "--offset", "x"], "--offset: an offset is N"),
    (["tail", "events", "--isolation", "serializable"], "--isolation: invalid choice"),
    (["tail", "events", "--format", "yaml"], "--format: invalid choice"),
    (["tail", "events", "--timeout", "0"], "--timeout: a positive number of seconds, got '0'"),
    (["tail", "events", "--timeout", "inf"], "--timeout: a positive number of seconds"),
    (["tail", "bad name"], "'bad name': "),
    (["tail"], "the following arguments are required: TOPIC"),
    (["topics"], "the following arguments are required: ACTION"),
    (["topics", "create"], "the following arguments are required: NAME[:PARTITIONS]"),
    (["topics", "create", "events:0"], "at least 1 partition"),
    (["topics", "create", "events", "--replication-factor", "0"], "--replication-factor"),
    (["topics", "create", "events", "--config", "cleanup.policy"], "--config: expected KEY=VALUE"),
    (["topics", "describe"], "the following arguments are required: NAME"),
    (["topics", "list", "--property", "=x"], "--property: expected KEY=VALUE, got '=x'"),
    (["topics", "list", "--property", "group.id=x"], "unknown producer property 'group.id'"),
    (["topics", "list", "--property", "linger.ms=soon"], "--property/--config-file: "),
    (["topics", "list", "--bootstrap-server", "nohost"], "--bootstrap-server: bootstrap.servers "),
    (["check", "--option", "topic"], "--option: expected KEY=VALUE"),
    (["nope"], "invalid choice: 'nope'"),
])
def test_a_bad_argument_exits_2_naming_it(argv, fault, capsys):
    assert fault in exits_2(argv, capsys)


def test_argument_types_name_the_fault():
    assert key_value(" security.protocol =SSL") == ("security.protocol", "SSL")
    assert key_value("sasl.jaas.config=a=b c=d") == ("sasl.jaas.config", "a=b c=d")
    assert offset("-3") == -3 and offset("12") == 12
    assert seconds("0.5") == 0.5
    with pytest.raises(argparse.ArgumentTypeError, match="got 'nan'"):
        seconds("nan")


def test_client_settings_take_a_config_file_and_properties_over_it(tmp_path):
    path = tmp_path / "client.properties"
    path.write_text("bootstrap.servers=127.0.0.1:19093\nsecurity.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=PLAIN\nsasl.username=alice\nsasl.password=alice-secret\n")
    parser = build_parser()
    args = parser.parse_args(["topics", "list", "--config-file", str(path),
                              "--property", "sasl.username=bob", "--timeout", "3"])
    settings = client_settings(args, parser)
    assert settings.bootstrap == "127.0.0.1:19093"          # the file's, none given
    assert dict(settings.properties) == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                                         "sasl.username": "bob", "sasl.password": "alice-secret"}
    assert settings.timeout_s == 3.0
    assert settings.config.sasl_username == "bob"
    assert "secret" not in repr(settings) and "bob" not in repr(settings)
    args = parser.parse_args(["topics", "list", "--config-file", str(path),
                              "--bootstrap-server", "127.0.0.1:9092"])
    assert client_settings(args, parser).bootstrap == "127.0.0.1:9092"     # the flag wins
    assert client_settings(parser.parse_args(["topics", "list"]), parser) == \
        ClientSettings("127.0.0.1:9092", {}, 10.0)


def test_a_config_file_that_cannot_be_read_exits_2_naming_it(tmp_path, capsys):
    missing = tmp_path / "missing.properties"
    assert f"--config-file {missing}: No such file" in exits_2(
        ["topics", "list", "--config-file", str(missing)], capsys)
    bad = tmp_path / "bad.properties"
    bad.write_text("linger.ms\n")
    assert "--config-file: " in exits_2(["tail", "t", "--config-file", str(bad)], capsys)


def test_help_lists_the_commands_and_the_jobs_of_jobs_folder(capsys):
    with pytest.raises(SystemExit) as exited:
        main(["--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    for command in ("broker", "schema-registry", "topics", "tail", "check"):
        assert re.search(rf"^    {command}\b", out, re.M), command
    assert {path for path, _ in JOBS} == {f"jobs/{p.name}" for p in (ROOT / "jobs").glob("*.py")}
    for path, _ in JOBS:
        assert f"  {path}  " in out
        assert (ROOT / path).is_file()
    assert "spark-submit --properties-file conf/spark-defaults.conf" in out
    assert main([]) == 2                    # no command: the help, and 2


def test_the_failure_line_names_the_cluster_and_the_bound():
    settings = ClientSettings("127.0.0.1:1", {}, 2.0)
    assert failure(KafkaConnectionError("connect 127.0.0.1:1 failed: refused"), settings) == \
        "cannot reach the cluster at 127.0.0.1:1 within 2 s: connect 127.0.0.1:1 failed: refused"
    assert failure(SaslAuthenticationFailedError("bad password"), settings).startswith(
        "the cluster at 127.0.0.1:1 refused the client: SaslAuthenticationFailedError: ")
    assert failure(TopicAlreadyExistsError("t"), settings).startswith("TopicAlreadyExistsError: ")
    assert failure(FileNotFoundError(2, "No such file", "ca.pem"), None) == \
        "FileNotFoundError: [Errno 2] No such file: 'ca.pem'"
    assert failure(AttributeError("a bug"), settings) is None       # a bug keeps its traceback


def _closed_port() -> int:
    with socket.create_server(("127.0.0.1", 0)) as server:
        return server.getsockname()[1]


@pytest.mark.parametrize("argv", [["topics", "list"], ["topics", "describe", "t"],
                                  ["topics", "create", "t"], ["tail", "t"]])
def test_a_refused_connection_exits_1_at_once_with_one_line(argv, capsys):
    address = f"127.0.0.1:{_closed_port()}"
    started = time.monotonic()
    assert main([*argv, "--bootstrap-server", address]) == 1
    assert time.monotonic() - started < 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "Traceback" not in err
    assert err.startswith(f"spark-kafka-sink {' '.join(argv[:2]) if argv[0] == 'topics' else 'tail'}: "
                          f"cannot reach the cluster at {address} within 10 s: connect {address} failed")


def test_a_silent_listener_fails_within_the_timeout(capsys):
    with socket.create_server(("127.0.0.1", 0)) as server:    # accepts, never answers
        address = f"127.0.0.1:{server.getsockname()[1]}"
        started = time.monotonic()
        assert main(["tail", "t", "--bootstrap-server", address, "--timeout", "0.3"]) == 1
        assert time.monotonic() - started < 1.5
    err = capsys.readouterr().err
    assert err.startswith(f"spark-kafka-sink tail: cannot reach the cluster at {address} within 0.3 s")
    assert err.count("\n") == 1


def test_check_says_so_when_pyspark_cannot_be_imported(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "spark_kafka_sink.spark.options", None)
    assert main(["check", "--topic", "events"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-kafka-sink check: the sink's options need PySpark 3.4 or newer")
    assert "pip install 'pyspark>=3.4'" in err and err.count("\n") == 1


def test_check_reports_bad_sink_options_before_any_connection(capsys):
    address = f"127.0.0.1:{_closed_port()}"
    assert main(["check", "--bootstrap-server", address, "--option", "subscribe=events"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("spark-kafka-sink check: FAILED: the options: ") and "subscribe" in err
