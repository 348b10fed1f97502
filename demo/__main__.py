"""``python -m demo`` (``make demo``): generate clicks, stream them to Kafka with Spark, read them back.

Steps, each printed as it happens:

1. start a single-node Apache Kafka (``EmbeddedKafka``; skipped with ``--bootstrap``),
2. create the topic (6 partitions),
3. write the click events as JSON-lines files,
4. ``spark-submit jobs/stream_to_kafka.py --trigger availableNow --key-column user_id`` with
   ``--max-files-per-trigger``, so the files go in several micro-batches,
5. read the topic back with confluent-kafka and compare: rows generated = written = read back,
   and every key is its event's ``user_id``.

With ``--cluster`` step 4 runs on a Spark standalone cluster on loopback instead of ``local[2]``
(a master and two workers from pyspark's ``spark-class``, each worker with its own executor JVM
and Python workers): the path a job takes when it scales out.

Exit status 0 when everything matches, 1 otherwise. The broker is always stopped, and the work
directory removed unless ``--keep``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import tempfile
import time
import uuid
from pathlib import Path
from typing import Sequence

from .clicks import write_clicks
from .readback import read_back
from .spark_job import run_stream_job

PARTITIONS = 6
CLUSTER_WORKERS = 2
# --cluster: one 1-core executor per worker with a small heap (2 cores, as local[2] has)
CLUSTER_CONF = {"spark.executor.memory": "512m", "spark.executor.cores": "1", "spark.cores.max": "2"}
SPARK_TIMEOUT_S = 900.0
READ_TIMEOUT_S = 180.0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m demo",
        description="Stream generated click events to Kafka with spark-kafka-sink, then check them "
                    "with an independent consumer.")
    parser.add_argument("--events", type=int, default=200_000, metavar="N",
                        help="click events to generate (default 200000)")
    parser.add_argument("--files", type=int, default=8, metavar="N",
                        help="JSON-lines files to spread them over (default 8)")
    parser.add_argument("--max-files-per-trigger", type=int, metavar="N",
                        help="files per micro-batch (default: a quarter of the files, so 4 batches)")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (data, checkpoint, Spark log, metrics)")
    parser.add_argument("--bootstrap", metavar="HOST:PORT[,...]",
                        help="use this Kafka cluster instead of starting an embedded broker")
    parser.add_argument("--seed", type=int, default=7, help="random seed of the data (default 7)")
    parser.add_argument("--cluster", action="store_true",
                        help="run the job on a Spark standalone cluster (a master and 2 workers on "
                             "loopback, each with its own executor) instead of local[2]")
    return parser


def say(text: str = "") -> None:
    print(text, flush=True)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    if args.events < 1 or args.files < 1 or args.files > args.events:
        say("demo: error: need --events >= --files >= 1")
        return 2
    per_trigger = args.max_files_per_trigger or max(1, args.files // 4)
    if per_trigger < 1:
        say("demo: error: --max-files-per-trigger must be at least 1")
        return 2
    work = Path(tempfile.mkdtemp(prefix="spark-kafka-sink-demo-"))
    kafka = None
    try:
        say("spark-kafka-sink demo: click events -> Spark Structured Streaming -> Kafka -> read back")
        if args.bootstrap:
            bootstrap, topic = args.bootstrap, f"clicks-{uuid.uuid4().hex[:8]}"
            say(f"1. Kafka: using {bootstrap}")
        else:
            from spark_kafka_sink.embedded import EmbeddedKafka

            say("1. Kafka: starting a single-node Apache Kafka (the first run downloads its jars)...")
            kafka = EmbeddedKafka(1, work_dir=work / "kafka")
            kafka.start()
            bootstrap, topic = kafka.bootstrap_servers, "clicks"
            say(f"   running at {bootstrap} (started in {kafka.start_seconds or 0:.1f} s)")
        return _run(args, work, bootstrap, topic, per_trigger)
    finally:
        if kafka is not None:
            kafka.close()
        if args.keep:
            say(f"Kept the work directory: {work}")
        else:
            shutil.rmtree(work, ignore_errors=True)


def _run(args: argparse.Namespace, work: Path, bootstrap: str, topic: str, per_trigger: int) -> int:
    from spark_kafka_sink.admin import create_topic

    created = create_topic(bootstrap, topic, PARTITIONS, exist_ok=False)
    say(f"2. Topic {topic!r}: created with {created.partitions} partitions")

    started = time.monotonic()
    data = write_clicks(work / "clicks", args.events, args.files, seed=args.seed)
    say(f"3. Data: {data.events:,} click events in {len(data.files)} JSON-lines files "
        f"({data.bytes / 1e6:.1f} MB, {time.monotonic() - started:.1f} s)")
    with data.files[0].open(encoding="utf-8") as first:
        say(f"   e.g. {first.readline().strip()}")

    metrics_path = work / "metrics.json"
    job_args = ["--source", str(data.directory), "--format", "json", "--topic", topic,
                "--bootstrap", bootstrap, "--key-column", "user_id",
                "--checkpoint", str(work / "checkpoint"), "--trigger", "availableNow",
                "--max-files-per-trigger", str(per_trigger), "--metrics-json", str(metrics_path),
                "--timeout", str(SPARK_TIMEOUT_S - 60)]
    with contextlib.ExitStack() as stack:
        master, conf = None, None
        if args.cluster:
            from spark_kafka_sink.testing.spark_standalone import SparkStandalone

            say("4. Spark: starting a standalone cluster on loopback (a master, 2 workers)...")
            cluster = stack.enter_context(SparkStandalone(work / "spark-cluster", workers=CLUSTER_WORKERS))
            master, conf = cluster.master_url, CLUSTER_CONF
            say(f"   master at {master}; each worker gets its own executor JVM for the job")
        say(f"{'   ' if args.cluster else '4. Spark: '}spark-submit {'--master ' + master + ' ' if master else ''}"
            f"jobs/stream_to_kafka.py --trigger availableNow --key-column user_id "
            f"--max-files-per-trigger {per_trigger}")
        run = run_stream_job(job_args, work / "spark-job.log", timeout_s=SPARK_TIMEOUT_S,
                             echo=lambda line: say(f"   {line}"), master=master, conf=conf)
        if args.cluster:
            tasks = [(path.parent.name, _tasks_run(path)) for path in cluster.executor_logs()]
            say("   tasks run per executor: " + ", ".join(f"executor {name}: {count}" for name, count in tasks))
    if run.returncode != 0 or not metrics_path.is_file():
        say(f"   FAILED: spark-submit exited with {run.returncode}; the last lines of its log:")
        for line in _tail(run.log, 25):
            say(f"   | {line}")
        if not args.keep:
            say("   (run again with --keep to keep the whole log)")
        return 1
    metrics = json.loads(metrics_path.read_text(encoding="utf-8"))
    written = metrics["rows_written"]
    job_seconds = metrics["seconds"]
    say(f"   done: {run.seconds:.1f} s wall for spark-submit (JVM and Spark start-up included); "
        f"the query wrote for {job_seconds:.1f} s in {metrics['batches']} micro-batches = "
        f"{(written or 0) / max(job_seconds, 1e-9):,.0f} rows/s")

    say("5. Reading the topic back with confluent-kafka (an independent client)...")
    got = read_back(bootstrap, topic, PARTITIONS, timeout_s=READ_TIMEOUT_S)
    say("   per partition: " + ", ".join(f"{p}: {n:,}" for p, n in sorted(got.per_partition.items())))
    ok = written == data.events == got.total == got.distinct_events and got.key_mismatches == 0
    say(f"   rows generated {data.events:,} | written by Spark {written if written is None else f'{written:,}'}"
        f" | read back {got.total:,} ({got.seconds:.1f} s)")
    say(f"   distinct event_ids read back: {got.distinct_events:,}; keys equal to the event's "
        f"user_id: {'all' if got.key_mismatches == 0 else f'{got.key_mismatches:,} records differ'}")

    totals = metrics.get("metrics_total") or {}
    shown = ("record-send-total", "record-retry-total", "record-error-total", "byte-total",
             "batch-total", "request-total", "request-latency-avg", "task-total", "producer-create-total")
    say("Sink metrics (whole run): " + ", ".join(
        f"{name}={_figure(totals.get(name))}{' ms' if name.endswith('-avg') else ''}"
        for name in shown if name in totals))
    say("RESULT: OK, every event arrived exactly once" if ok else
        "RESULT: MISMATCH, the counts above differ")
    return 0 if ok else 1


def _tasks_run(executor_log: Path) -> int:
    """How many tasks an executor started, from its log (Spark's "Running task" lines)."""
    try:
        return executor_log.read_text(encoding="utf-8", errors="replace").count("Running task ")
    except OSError:
        return 0


def _figure(value) -> str:
    if value is None:
        return "n/a"
    if isinstance(value, float) and not value.is_integer():
        return f"{value:.1f}"
    return f"{int(value):,}"


def _tail(path: Path, lines: int) -> list[str]:
    try:
        return path.read_text(encoding="utf-8", errors="replace").splitlines()[-lines:]
    except OSError:
        return []


if __name__ == "__main__":
    sys.exit(main())
