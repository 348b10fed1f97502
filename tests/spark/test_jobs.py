"""The jobs (jobs/stream_to_kafka.py, jobs/batch_to_kafka.py): their argument handling, fast and
without Spark; then each script run end to end under ``spark-submit`` against the session broker,
every record read back with confluent-kafka."""

from __future__ import annotations

import json
import math
import os
import re
import signal
import subprocess
import sys
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from spark_kafka_sink.spark.jobs import (Columns, JobError, JobResult, match_source_columns,
                                         parse_job_args, parse_trigger, total_metrics)
from spark_kafka_sink.spark.submit import spark_submit_command

from ..helpers import create_topic
from ..verify import consume_all
from .session import short_job_java_options

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"
SUBMIT_TIMEOUT_S = 150


def unique(name: str) -> str:
    return f"{name}-{uuid.uuid4().hex[:8]}"


# --- arguments (no Spark) ------------------------------------------------------------------------

def stream_args(tmp_path: Path, *extra: str) -> list[str]:
    return ["--source", str(tmp_path), "--topic", "clicks", "--checkpoint", str(tmp_path / "ckpt"),
            *extra]


def test_bootstrap_comes_from_the_flag_then_the_environment(tmp_path):
    spec = parse_job_args(stream_args(tmp_path), streaming=True, environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert spec.bootstrap == "h:1"
    spec = parse_job_args(stream_args(tmp_path, "--bootstrap", "g:2"), streaming=True,
                          environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert spec.bootstrap == "g:2"
    with pytest.raises(JobError, match="--bootstrap HOST:PORT.*KAFKA_BOOTSTRAP"):
        parse_job_args(stream_args(tmp_path), streaming=True, environ={})


def test_properties_file_then_options_then_flags(tmp_path):
    props = tmp_path / "producer.properties"
    props.write_text("# defaults\nacks=all\nlinger.ms = 20\ncompression.type lz4\n")
    spec = parse_job_args(stream_args(tmp_path, "--option", "kafka.linger.ms=5", "--option",
                                      "Kafka.Batch.Size=1000", "--key-column", "user_id"),
                          streaming=True, default_properties=props, environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert dict(spec.sink_options) == {
        "kafka.acks": "all", "kafka.linger.ms": "5", "kafka.compression.type": "lz4",
        "kafka.batch.size": "1000", "kafka.bootstrap.servers": "h:1", "topic": "clicks"}
    assert spec.columns == Columns(key="user_id") and spec.trigger.available_now
    assert spec.checkpoint == str(tmp_path / "ckpt") and spec.streaming


def test_the_shipped_producer_properties_are_valid_sink_options(tmp_path):
    spec = parse_job_args(stream_args(tmp_path), streaming=True,
                          default_properties=CONF / "producer.properties", environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert spec.sink_options["kafka.acks"] == "all"
    assert spec.sink_options["kafka.enable.idempotence"] == "true"


@pytest.mark.parametrize("extra, message", [
    (["--option", "linger.ms"], "--option 'linger.ms': write it as KEY=VALUE"),
    (["--option", "topic=other"], "--option topic: use --topic"),
    (["--option", "kafka.bootstrap.servers=x:1"], "use --bootstrap"),
    (["--option", "kafka.lingerms=5"], "did you mean 'kafka.linger.ms'"),
    (["--trigger", "soon"], "--trigger 'soon'"),
    (["--max-files-per-trigger", "0"], "--max-files-per-trigger must be at least 1"),
    (["--timeout", "0"], "--timeout must be more than 0"),
    (["--key-column", " "], "--key-column must name a column"),
    (["--producer-properties", "missing.properties"], "--producer-properties 'missing.properties': no such file"),
])
def test_argument_errors_name_the_argument(tmp_path, extra, message):
    with pytest.raises(JobError) as caught:
        parse_job_args(stream_args(tmp_path, *extra), streaming=True, environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert message in str(caught.value)


def test_a_properties_file_with_prefixed_keys_or_bad_lines_is_refused(tmp_path):
    prefixed = tmp_path / "prefixed.properties"
    prefixed.write_text("kafka.linger.ms=5\n")
    with pytest.raises(JobError, match="without the 'kafka.' prefix"):
        parse_job_args(stream_args(tmp_path, "--producer-properties", str(prefixed)), streaming=True,
                       environ={"KAFKA_BOOTSTRAP": "h:1"})
    broken = tmp_path / "broken.properties"
    broken.write_text("acks=all\nlinger.ms\n")
    with pytest.raises(JobError, match=r"broken\.properties, line 2"):
        parse_job_args(stream_args(tmp_path, "--producer-properties", str(broken)), streaming=True,
                       environ={"KAFKA_BOOTSTRAP": "h:1"})


def test_missing_source_and_stream_only_flags(tmp_path):
    with pytest.raises(JobError, match="--source .*no such directory"):
        parse_job_args(["--source", str(tmp_path / "nope"), "--topic", "t"], streaming=False,
                       environ={"KAFKA_BOOTSTRAP": "h:1"})
    with pytest.raises(SystemExit):  # argparse: the batch job has no --checkpoint
        parse_job_args(stream_args(tmp_path), streaming=False, environ={"KAFKA_BOOTSTRAP": "h:1"})
    spec = parse_job_args(["--source", str(tmp_path), "--topic", "t", "--format", "csv"],
                          streaming=False, environ={"KAFKA_BOOTSTRAP": "h:1"})
    assert not spec.streaming and spec.trigger is None and spec.source.reader_options() == {"header": "true"}


def test_triggers():
    assert parse_trigger("availablenow").writer_kwargs() == {"availableNow": True}
    assert parse_trigger(" 10  seconds ").writer_kwargs() == {"processingTime": "10 seconds"}
    assert str(parse_trigger("1 minute 30 seconds")) == "1 minute 30 seconds"
    for bad in ("10", "10s", "once", ""):
        with pytest.raises(JobError, match="--trigger"):
            parse_trigger(bad)


def test_missing_columns_are_named_with_the_available_ones():
    assert match_source_columns(Columns("USER_ID", None), ["event_id", "user_id"]) == \
        Columns("user_id", None)
    with pytest.raises(JobError) as caught:
        match_source_columns(Columns(None, "payload"), ["event_id", "user_id"])
    assert str(caught.value) == ("--value-column 'payload': the source has no such column; its "
                                 "columns are: event_id, user_id")


def test_spark_submit_keeps_the_defaults_java_options_and_adds_the_quiet_log4j2():
    command = spark_submit_command("job.py", ["--x"], conf_dir=CONF, python=sys.executable)
    java_options = command.argv[command.argv.index("--driver-java-options") + 1]
    assert java_options.startswith("-Xss16m ") and "-Dlog4j2.configurationFile=file:" in java_options
    assert java_options.endswith("/conf/log4j2.properties")
    assert command.argv[-2:] == ("job.py", "--x")
    assert Path(command.argv[0]).name == "spark-submit"
    assert dict(command.env) == {"PYSPARK_PYTHON": sys.executable, "SPARK_LOCAL_IP": "127.0.0.1",
                                 "PYSPARK_DRIVER_PYTHON": sys.executable}
    assert "--master" not in command.argv and "--conf" not in command.argv  # the defaults' local[2]


def test_spark_submit_on_a_cluster_takes_its_master_and_settings_before_the_script():
    command = spark_submit_command("job.py", ["--x"], conf_dir=CONF, master="spark://127.0.0.1:7077",
                                   conf={"spark.executor.memory": "512m", "spark.cores.max": "2"})
    argv = list(command.argv)
    assert argv[argv.index("--master") + 1] == "spark://127.0.0.1:7077"
    assert [argv[i + 1] for i, part in enumerate(argv) if part == "--conf"] == [
        "spark.executor.memory=512m", "spark.cores.max=2"]
    assert argv.index("--properties-file") < argv.index("--master") < argv.index("job.py")
    assert argv[-2:] == ["job.py", "--x"]


def test_spark_submit_adds_the_callers_java_options_after_the_drivers():
    command = spark_submit_command("job.py", [], conf_dir=CONF, java_options=" -XX:+UseSerialGC ")
    java_options = command.argv[command.argv.index("--driver-java-options") + 1]
    assert java_options.startswith("-Xss16m ") and java_options.endswith("/log4j2.properties -XX:+UseSerialGC")


def test_metrics_over_a_run_add_up_and_serialize_without_nan():
    history = [{"record-send-total": 10, "request-total": 2, "request-latency-avg": 4.0},
               {"record-send-total": 5, "request-total": 1, "request-latency-avg": 10.0},
               {"record-send-total": 0, "request-total": 0, "request-latency-avg": math.nan}]
    assert total_metrics(history) == {"record-send-total": 15, "request-total": 3,
                                      "request-latency-avg": 6.0}
    result = JobResult("stream_to_kafka", "t", 15, 2.0, 3, history[-1],
                       tuple(enumerate(history)), input_rows=15)
    as_json = json.loads(json.dumps(result.to_json_dict(), allow_nan=False))
    assert as_json["rows_per_second"] == 7.5 and as_json["last_metrics"]["request-latency-avg"] is None


# --- the scripts under spark-submit ---------------------------------------------------------------

def run_job(script: str, args: list[str]) -> subprocess.CompletedProcess:
    """``spark-submit jobs/<script> ARGS`` (Spark set up as docs/ARCHITECTURE.md says), bounded by
    SUBMIT_TIMEOUT_S:
    past it, the process group it was started in is killed, by its id."""
    command = spark_submit_command(ROOT / "jobs" / script, args, conf_dir=CONF,
                                   java_options=short_job_java_options())
    return run_bounded(list(command.argv), command.environ(), SUBMIT_TIMEOUT_S)


def run_bounded(argv: list[str], env: dict[str, str], timeout_s: float) -> subprocess.CompletedProcess:
    process = subprocess.Popen(argv, env=env, cwd=ROOT, text=True, stdin=subprocess.DEVNULL,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True)
    try:
        out, err = process.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        os.killpg(process.pid, signal.SIGKILL)
        out, err = process.communicate(timeout=30)
        pytest.fail(f"{argv[0]} ... did not finish in {timeout_s} s; stdout:\n{out[-3000:]}\n"
                    f"stderr:\n{err[-3000:]}")
    result = subprocess.CompletedProcess(argv, process.returncode, out, err)
    assert result.returncode == 0, f"exit {result.returncode}\nstdout:\n{out[-3000:]}\nstderr:\n{err[-5000:]}"
    return result


# Given, to skip the inferring batch read (the demo's run covers inference).
SCHEMA = ("event_id STRING, user_id STRING, amount DOUBLE, qty BIGINT, tags ARRAY<STRING>, "
          "geo STRUCT<country: STRING, zip: STRING>, coupon STRING")


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.heavy
def test_stream_job_writes_every_row_as_json_keyed_by_its_column(kafka, tmp_path):
    bootstrap = kafka.bootstrap_servers
    topic = unique("job-stream")
    partitions = 4
    create_topic(bootstrap, topic, partitions)
    source = tmp_path / "events"
    source.mkdir()
    expected: dict[str, dict] = {}
    for part in range(3):
        lines = []
        for i in range(part * 1700, (part + 1) * 1700):
            row = {"event_id": f"e{i:05d}", "user_id": f"user-{i % 97}", "amount": i * 0.25,
                   "qty": i % 7, "tags": ["a", f"t{i % 3}"], "geo": {"country": "DE", "zip": str(i)}}
            if i % 50 == 0:
                row["coupon"] = f"C{i}"  # sparse field: null elsewhere, so absent from the JSON
            lines.append(json.dumps(row))
            expected[row["event_id"]] = row
        (source / f"part-{part}.json").write_text("\n".join(lines) + "\n")
    metrics_path = tmp_path / "metrics.json"

    result = run_job("stream_to_kafka.py", [
        "--source", str(source), "--format", "json", "--topic", topic, "--bootstrap", bootstrap,
        "--schema", SCHEMA, "--key-column", "user_id", "--checkpoint", str(tmp_path / "checkpoint"),
        "--trigger", "availableNow", "--max-files-per-trigger", "1",
        "--option", "kafka.linger.ms=10", "--metrics-json", str(metrics_path)])

    total = len(expected)
    records = consume_all(bootstrap, topic, partitions, expected_count=total)
    seen: dict[str, dict] = {}
    partition_of_key: dict[bytes, set[int]] = defaultdict(set)
    for part in records.values():
        for record in part:
            row = json.loads(record.value)
            assert row["event_id"] not in seen, "a row arrived twice"
            seen[row["event_id"]] = row
            assert record.key == row["user_id"].encode()
            partition_of_key[record.key].add(record.partition)
    assert seen == expected
    assert all(len(found) == 1 for found in partition_of_key.values()), "a key in two partitions"

    metrics = json.loads(metrics_path.read_text())
    assert metrics["rows_written"] == metrics["input_rows"] == total
    assert metrics["batches"] == len(metrics["metrics_history"]) == 3
    assert metrics["metrics_total"]["record-send-total"] == total
    assert metrics["metrics_total"][f"topic.{topic}.record-send-total"] == total
    assert metrics["metrics_total"]["record-error-total"] == 0
    assert sorted(entry["batch_id"] for entry in metrics["metrics_history"]) == [0, 1, 2]
    assert f"stream_to_kafka: {total:,} rows to topic '{topic}' in 3 micro-batches" in result.stdout
    assert "sink metrics: record-send-total=5100" in result.stdout
    # spark-submit's PythonRunner merges the driver's stderr (the progress lines) into its stdout
    assert len(re.findall(r"micro-batch \d: 1,700 rows read, 1,700 written", result.stdout)) == 3


@pytest.mark.spark
@pytest.mark.broker
@pytest.mark.heavy
def test_batch_job_writes_csv_rows_keyed_by_a_numeric_column(kafka, tmp_path):
    bootstrap = kafka.bootstrap_servers
    topic = unique("job-batch")
    partitions = 3
    create_topic(bootstrap, topic, partitions)
    source = tmp_path / "orders"
    source.mkdir()
    expected = {}
    for part in range(2):
        lines = ["order_id,amount,note"]
        for i in range(part * 1000, (part + 1) * 1000):
            note = f"note {i}, quoted" if i % 3 else "plain"
            lines.append(f'{i},{i * 1.5},"{note}"')
            expected[i] = {"order_id": i, "amount": i * 1.5, "note": note}
        (source / f"orders-{part}.csv").write_text("\n".join(lines) + "\n")
    metrics_path = tmp_path / "metrics.json"

    result = run_job("batch_to_kafka.py", [
        "--source", str(source), "--format", "csv", "--topic", topic, "--bootstrap", bootstrap,
        "--key-column", "order_id", "--metrics-json", str(metrics_path)])

    records = consume_all(bootstrap, topic, partitions, expected_count=len(expected))
    got = {}
    for part in records.values():
        for record in part:
            row = json.loads(record.value)
            assert record.key == str(row["order_id"]).encode()
            assert row["order_id"] not in got, "a row arrived twice"
            got[row["order_id"]] = row
    assert got == expected

    metrics = json.loads(metrics_path.read_text())
    assert metrics["rows_written"] == metrics["metrics_total"]["record-send-total"] == len(expected)
    assert metrics["last_metrics"]["record-send-total"] == len(expected)
    assert metrics["metrics_history"][0]["batch_id"] is None
    assert f"batch_to_kafka: {len(expected):,} rows to topic '{topic}' in one write" in result.stdout
