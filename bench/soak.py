"""The soak (issue 6): ``python -m bench.soak`` (``make soak``), a bounded-rate stream through the
Spark sink for ``--duration`` seconds, with a pass/fail verdict (exit 1 on failure).

A ``rate-micro-batch`` stream (``bench/soak_stream.py``) of ``--rate`` records a second runs through
``foreachBatch(KafkaSink(...))`` in Spark ``local[2]`` into a fresh topic on an embedded Apache
Kafka node (or ``--bootstrap``), every micro-batch as a Spark job (``driver.write.max.rows=0``). Every ``--sample-every`` seconds the soak reads ``/proc``
(``bench/procstats.py``) for the driver (this Python process and the Spark JVM) and for Spark's
Python workers (the Python processes forked by the pyspark daemon under the JVM;
``spark.python.worker.reuse`` is on, so the same workers serve every micro-batch): RSS, threads,
open fds, sockets, TCP connections to the broker.

Every ``--evict-every`` seconds after the warm-up, an **eviction probe** holds one micro-batch
before it is written: the workers sit idle, and their pooled producers (``producer.cache.timeout``
= ``--cache-timeout``) must be evicted, which must close every worker's broker connection. Then
the held micro-batch is written, and its ``producer-create-total`` must show new producers.

At the end the gate stops writing between two micro-batches, the query stops, and confluent-kafka
reads the topic back: every id ``0 .. N-1`` the sink wrote, once each. The criteria
(``bench/soak_check.py``) and their slack are in docs/soak.md.

    python -m bench.soak --duration 600 --rate 500
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from . import admin
from .procstats import ProcSample, process_name, sample, tcp_remote_ports
from .soak_check import Check, cap_check, flat_check, rss_check
from .soak_stream import BatchGate, Delivery, rate_stream, read_ids
from .workers import python_workers

REPO = Path(__file__).resolve().parents[1]
LOG4J2 = REPO / "conf" / "log4j2.properties"
TICK_S = 0.25
STOP_WAIT_S = 120.0
DRIVER_MEMORY = "512m"
# The driver JVM's heap is committed and touched at start (-Xms = -Xmx, AlwaysPreTouch): its RSS
# then holds the whole heap from the first sample, and what can still grow is off the heap
# (thread stacks, metaspace, direct buffers, native memory), not the heap filling up to -Xmx.
DRIVER_HEAP_OPTIONS = f"-Xms{DRIVER_MEMORY} -XX:+AlwaysPreTouch"
# Spark's two BlockManager thread pools (ThreadUtils.newDaemonCachedThreadPool(name, 100)): each
# starts a thread per task until it has 100, and a thread ends after 60 s idle. So over the first
# minutes of a stream they grow towards 100 threads each, by design and bounded; they are checked
# against that cap, and the JVM's other threads must stay flat. (Names as /proc shows them: 15 chars.)
SPARK_BOUNDED_POOLS = ("block-manager-a", "block-manager-s")  # -ask-thread-pool, -storage-async-thread-pool
SPARK_POOL_CAP = 100 * len(SPARK_BOUNDED_POOLS)
DF_PARTITIONS = 2  # one per local[2] core

# Allowed growth of the flat counts over their baseline, per process (docs/soak.md).
SLACK = {
    # this process: py4j opens a callback connection (a socket and a thread) per concurrent call
    "driver-python": {"threads": 4, "fds": 6, "sockets": 4},
    # Spark's JVM: its thread pools start and retire threads on demand (RPC, shuffle, streaming)
    "driver-jvm": {"threads": 24, "fds": 24, "sockets": 8},
    # each worker: a producer's sender thread, its selector, wakeup pair and up to 2 broker
    # connections (bootstrap + leader) come and go with eviction; nothing else may grow
    "worker": {"threads": 2, "fds": 6, "sockets": 4},
}


@dataclass(frozen=True)
class Settings:
    duration_s: float
    warmup_s: float
    rate: int
    trigger_s: float
    value_size: int
    topic_partitions: int
    sample_every_s: float
    baseline_samples: int
    evict_every_s: float
    cache_timeout_s: float
    mode: str
    tolerance: float
    bootstrap: str | None

    def __post_init__(self) -> None:
        for name, option in (("duration_s", "duration"), ("rate", "rate"), ("trigger_s", "trigger"),
                             ("value_size", "value-size"), ("topic_partitions", "partitions"),
                             ("sample_every_s", "sample-every"), ("baseline_samples", "baseline-samples"),
                             ("cache_timeout_s", "cache-timeout"), ("tolerance", "tolerance")):
            if not getattr(self, name) > 0:
                raise ValueError(f"--{option} must be positive, got {getattr(self, name)}")
        if not 0 <= self.warmup_s < self.duration_s:
            raise ValueError("--warmup must be at least 0 and less than --duration")
        if self.evict_every_s < 0:
            raise ValueError("--evict-every must be >= 0 (0: no eviction probe)")
        if self.mode not in ("arrow", "rows"):
            raise ValueError("--mode must be arrow or rows")

    @property
    def rows_per_batch(self) -> int:
        return max(1, round(self.rate * self.trigger_s))


@dataclass(frozen=True)
class Round:
    """One sampling round: seconds since the stream started and each process's sample."""

    at_s: float
    warmup: bool
    paused: bool
    driver_python: ProcSample | None
    driver_jvm: ProcSample | None
    workers: dict[int, ProcSample]


@dataclass
class Probe:
    """One eviction probe (see the module docstring)."""

    started_s: float
    paused_s: float | None = None
    connections_before: int | None = None
    workers_before: list[int] = field(default_factory=list)
    closed_after_s: float | None = None
    workers_after: list[int] = field(default_factory=list)
    created_on_resume: int | None = None
    tasks_on_resume: int | None = None
    held_s: float | None = None
    """How long the gate held the micro-batch: the workers' idle time."""
    note: str = ""
    done: bool = False

    @property
    def passed(self) -> bool:
        return (bool(self.connections_before) and self.closed_after_s is not None
                and bool(self.created_on_resume) and self.held_s is not None and self.held_s >= self.closed_after_s)


@dataclass(frozen=True)
class Report:
    settings: Settings
    jvm_pid: int
    batches: int
    written: int
    skipped_batches: int
    delivery: Delivery | None
    probes: list[Probe]
    checks: list[Check]
    rounds: list[Round]
    error: str | None

    @property
    def passed(self) -> bool:
        return (self.error is None and all(c.passed for c in self.checks) and all(p.passed for p in self.probes)
                and self.delivery is not None and self.delivery.exact)


# --- the Spark session --------------------------------------------------------------------------

def start_session(warehouse: str) -> Any:
    from pyspark.sql import SparkSession

    os.environ.update({"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
                       "SPARK_LOCAL_IP": "127.0.0.1"})
    java_options = f"-Xss16m {DRIVER_HEAP_OPTIONS} -Dlog4j2.configurationFile=file:{LOG4J2}"
    spark = (SparkSession.builder.master("local[2]").appName("spark-kafka-sink-soak")
             .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.sql.shuffle.partitions", str(DF_PARTITIONS))
             .config("spark.driver.memory", DRIVER_MEMORY)
             .config("spark.driver.extraJavaOptions", java_options)
             .config("spark.python.worker.reuse", "true")
             .config("spark.sql.warehouse.dir", warehouse)
             .getOrCreate())
    spark.sparkContext.setLogLevel("WARN")
    return spark


def jvm_pid() -> int:
    from pyspark import SparkContext

    proc = getattr(SparkContext._gateway, "proc", None)
    if proc is None:
        raise RuntimeError("the Spark JVM was not started by this process; the soak samples its own JVM")
    return proc.pid


# --- sampling -----------------------------------------------------------------------------------

class Sampler:
    def __init__(self, jvm: int, broker_ports: frozenset[int]):
        self.jvm = jvm
        self.broker_ports = broker_ports

    def workers(self) -> list[int]:
        return sorted(python_workers(self.jvm))

    def round(self, at_s: float, warmup: bool, paused: bool) -> Round:
        tcp = tcp_remote_ports(os.getpid())
        workers = {pid: s for pid in self.workers() if (s := sample(pid, self.broker_ports, tcp)) is not None}
        return Round(at_s, warmup, paused, sample(os.getpid(), self.broker_ports, tcp),
                     sample(self.jvm, self.broker_ports, tcp, SPARK_BOUNDED_POOLS), workers)

    def worker_connections(self) -> int:
        tcp = tcp_remote_ports(os.getpid())
        return sum(s.broker_connections for pid in self.workers()
                   if (s := sample(pid, self.broker_ports, tcp)) is not None)


def broker_ports(bootstrap: str) -> frozenset[int]:
    """The ports of every broker of the cluster (connections go to the advertised listeners)."""
    from confluent_kafka import Consumer

    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "soak-ports"})
    try:
        brokers = consumer.list_topics(timeout=30).brokers.values()
        return frozenset(b.port for b in brokers) | {int(a.rsplit(":", 1)[1]) for a in bootstrap.split(",")}
    finally:
        consumer.close()


# --- the run ------------------------------------------------------------------------------------

class ProbeRunner:
    """Steps one :class:`Probe` from the main loop's ticks: pause, watch the connections close,
    resume, read the resumed micro-batch's figures. Each step is bounded."""

    def __init__(self, gate: BatchGate, sampler: Sampler, settings: Settings, now_s: float):
        self.gate, self.sampler = gate, sampler
        self.probe = Probe(started_s=now_s)
        self.pause_limit_s = max(30.0, 5 * settings.trigger_s)
        # eviction within 2 × timeout of the last release (producer_pool.py), plus the close itself
        self.close_limit_s = 2 * settings.cache_timeout_s + 10.0
        self.resume_limit_s = 60.0
        self.batches_before = len(gate.batches)
        self.resumed_at: float | None = None
        gate.request_pause()

    def step(self, now_s: float) -> None:
        probe = self.probe
        if probe.paused_s is None:
            if self.gate.paused:
                probe.paused_s = now_s
                probe.workers_before = self.sampler.workers()
                probe.connections_before = self.sampler.worker_connections()
            elif now_s - probe.started_s > self.pause_limit_s:
                self._finish(f"no micro-batch reached the gate in {self.pause_limit_s:.0f} s")
            return
        if self.resumed_at is None:
            if self.sampler.worker_connections() == 0:
                probe.closed_after_s = now_s - probe.paused_s
                probe.workers_after = self.sampler.workers()
                self._resume(now_s)
            elif now_s - probe.paused_s > self.close_limit_s:
                probe.workers_after = self.sampler.workers()
                probe.note = f"worker broker connections still open {self.close_limit_s:.0f} s into the pause"
                self._resume(now_s)
            return
        resumed = [b for b in self.gate.batches[self.batches_before:] if b.after_pause]
        if resumed:
            probe.created_on_resume = resumed[0].producers_created
            probe.tasks_on_resume = resumed[0].tasks
            probe.held_s = resumed[0].held_s
            self._finish("")
        elif now_s - self.resumed_at > self.resume_limit_s:
            self._finish(f"the held micro-batch was not written within {self.resume_limit_s:.0f} s")

    def _resume(self, now_s: float) -> None:
        self.resumed_at = now_s
        self.gate.resume()

    def _finish(self, note: str) -> None:
        if note:
            self.probe.note = note
        if self.resumed_at is None:  # gave up before the resume: never leave the gate held
            self.gate.resume()
        self.probe.done = True


def stream(spark: Any, sink: Any, settings: Settings, sampler: Sampler, checkpoint: str,
           log: Any) -> tuple[BatchGate, list[Round], list[Probe], str | None]:
    """Run the stream for ``settings.duration_s``; the gate, the rounds, the probes, and an error."""
    gate = BatchGate(sink)
    frame = rate_stream(spark, rows_per_batch=settings.rows_per_batch, partitions=DF_PARTITIONS,
                        value_size=settings.value_size)
    query = (frame.writeStream.foreachBatch(gate).option("checkpointLocation", checkpoint)
             .trigger(processingTime=f"{settings.trigger_s} seconds").start())
    rounds: list[Round] = []
    probes: list[Probe] = []
    runner: ProbeRunner | None = None
    start = time.monotonic()
    end = start + settings.duration_s
    next_sample = start
    first_probe = settings.warmup_s + settings.evict_every_s
    next_probe = start + first_probe if settings.evict_every_s else float("inf")
    probe_budget = settings.trigger_s * 3 + 2 * settings.cache_timeout_s + 15.0
    error = None
    try:
        while True:
            now = time.monotonic()
            if gate.error is not None or query.exception() is not None or not query.isActive:
                error = f"the streaming query failed: {gate.error or query.exception()}"
                break
            if now >= next_sample:
                at = now - start
                rounds.append(sampler.round(at, at < settings.warmup_s, runner is not None))
                next_sample += settings.sample_every_s
                if len(rounds) % max(1, int(60 / settings.sample_every_s)) == 0:
                    log(f"{at:6.0f} s: {len(gate.batches)} micro-batches, {gate.written:,} records written")
            if runner is None and now >= next_probe and now + probe_budget < end:
                runner = ProbeRunner(gate, sampler, settings, now - start)
            if runner is not None:
                runner.step(now - start)
                if runner.probe.done:
                    probes.append(runner.probe)
                    log(f"{now - start:6.0f} s: eviction probe: {describe(runner.probe)}")
                    runner = None
                    next_probe = now + settings.evict_every_s
            if now >= end and runner is None:
                break
            time.sleep(TICK_S)
    finally:
        if not gate.stop(STOP_WAIT_S) and error is None:
            error = f"a micro-batch was still being written {STOP_WAIT_S:.0f} s after the stop"
        query.stop()
    if error is None and query.exception() is not None:
        error = f"the streaming query failed: {query.exception()}"
    if settings.evict_every_s and not probes and error is None:
        error = "no eviction probe ran: make --duration longer than --warmup + --evict-every + the probe's time"
    return gate, rounds, probes, error


def describe(probe: Probe) -> str:
    closed = "not closed" if probe.closed_after_s is None else f"closed in {probe.closed_after_s:.1f} s"
    held = "" if probe.held_s is None else f" (micro-batch held {probe.held_s:.1f} s)"
    text = (f"{probe.connections_before} worker broker connection(s) before, {closed}{held}; "
            f"{probe.created_on_resume} producer(s) created by the next micro-batch "
            f"({probe.tasks_on_resume} task(s)); workers {probe.workers_before} -> {probe.workers_after}")
    return text + (f"; {probe.note}" if probe.note else "")


# --- the checks ---------------------------------------------------------------------------------

def checks(rounds: list[Round], settings: Settings) -> list[Check]:
    """The RSS and flat-count checks over the post-warm-up rounds (bench/soak_check.py).

    The driver's two processes are one series each. Workers: each worker pid seen at the first
    post-warm-up round is one series of its own; a worker that appears later (Spark replaced or
    added one) is reported, and fails the soak only if more workers than at the start are alive.
    """
    after = [r for r in rounds if not r.warmup]
    n = settings.baseline_samples
    out: list[Check] = []

    def series(name: str, values: list[Any], role: str) -> None:
        present = [v for v in values if v is not None]
        serving, floor = present, None
        if role == "worker":  # RSS while the worker holds its producer: see worker_rss_samples
            serving, evicted = worker_rss_samples(present)
            floor = serving_before_eviction(present)
        check = rss_check(f"{name} RSS", [s.rss_kb for s in serving], baseline_samples=n,
                          tolerance=settings.tolerance, floor_samples=floor)
        if serving is not present and evicted:
            check = replace(check, detail=f"{check.detail}; {len(evicted)} sample(s) with the producer evicted "
                                          f"left out (lowest {min(s.rss_kb for s in evicted) / 1024:.1f} MiB)")
        out.append(check)
        for what in ("threads", "fds", "sockets"):
            counts = [getattr(s, what) - (s.pool_threads if what == "threads" else 0) for s in present]
            label = f"{name} {what}" + (" (other)" if what == "threads" and role == "driver-jvm" else "")
            out.append(flat_check(label, counts, baseline_samples=n, slack=SLACK[role][what]))

    series("driver python", [r.driver_python for r in after], "driver-python")
    series("driver JVM", [r.driver_jvm for r in after], "driver-jvm")
    out.append(cap_check("driver JVM Spark pool threads", [r.driver_jvm.pool_threads for r in after if r.driver_jvm],
                         cap=SPARK_POOL_CAP))
    first = sorted(after[0].workers) if after else []
    if not first:
        out.append(Check("workers", False, None, None, None, "≥ 1 worker", 0, "no Python worker seen"))
    for index, pid in enumerate(first):
        series(f"worker {index + 1} (pid {pid})", [r.workers.get(pid) for r in after], "worker")
    counts = [len(r.workers) for r in after]
    out.append(flat_check("worker processes", counts, baseline_samples=n, slack=0))
    return out


def worker_rss_samples(samples: list[ProcSample]) -> tuple[list[ProcSample], list[ProcSample]]:
    """A worker's samples split into (holding its pooled producer, producer evicted), told apart by
    the worker's broker connections. Evicting the producer frees its buffer memory and its
    sender thread (the worker's RSS drops by up to ~25 MB of ~150 MB): the RSS criterion compares
    a worker with itself in the same state, so the evicted samples are left out of it (and
    reported); they can only be lower. A worker that never connects keeps all its samples."""
    serving = [s for s in samples if s.broker_connections > 0]
    if not serving:
        return samples, []
    return serving, [s for s in samples if s.broker_connections == 0]


def serving_before_eviction(samples: list[ProcSample]) -> int | None:
    """How many of a worker's samples holding its producer come before its first sample with the
    producer evicted (None: never evicted). The RSS criterion's lower bound holds for those only:
    a producer created after an eviction starts with empty buffers and the memory its
    predecessor freed is given back to the system as it goes, so the worker's RSS can sit below
    its baseline for several micro-batches (longer on a loaded machine) before the new producer
    has grown to its working size. That is the eviction working, not a fault; growth above the
    baseline is held to the bound throughout."""
    serving = 0
    for sample in samples:
        if sample.broker_connections == 0 and serving:
            return serving
        serving += sample.broker_connections > 0
    return None


# --- output -------------------------------------------------------------------------------------

def _fmt(check: Check, value: float | None) -> str:
    if value is None:
        return "-"
    return f"{value / 1024:.1f} MiB" if check.name.endswith("RSS") else f"{value:g}"


def table(report: Report) -> str:
    head = f"{'criterion':<32} {'baseline':>11} {'min':>11} {'max':>11}  {'limit':<16} {'result':<6} detail"
    lines = [head, "-" * len(head)]
    for c in report.checks:
        lines.append(f"{c.name:<32} {_fmt(c, c.baseline):>11} {_fmt(c, c.low):>11} {_fmt(c, c.high):>11}  "
                     f"{c.limit:<16} {'ok' if c.passed else 'FAIL':<6} {c.detail}")
    for i, probe in enumerate(report.probes, 1):
        lines.append(f"{'eviction probe ' + str(i):<32} {'':>11} {'':>11} {'':>11}  {'0 conns, new':<16} "
                     f"{'ok' if probe.passed else 'FAIL':<6} {describe(probe)}")
    d = report.delivery
    if d is not None:
        lines.append(f"{'delivery':<32} {d.expected:>11,} {d.unique:>11,} {d.read:>11,}  {'exactly once':<16} "
                     f"{'ok' if d.exact else 'FAIL':<6} expected / unique / read; {d.duplicates} dup, "
                     f"{d.missing} missing {d.sample_missing}, {d.unexpected} unexpected, {d.bad_values} bad "
                     f"values; read back in {d.read_seconds:.1f} s")
    return "\n".join(lines)


def verdict(report: Report) -> str:
    if report.passed:
        return "SOAK PASSED"
    failed = [c.name for c in report.checks if not c.passed]
    failed += [f"eviction probe {i}" for i, p in enumerate(report.probes, 1) if not p.passed]
    if report.delivery is None or not report.delivery.exact:
        failed.append("delivery")
    if report.error:
        failed.append(report.error)
    return "SOAK FAILED: " + "; ".join(failed)


# --- main ---------------------------------------------------------------------------------------

def parse_args(argv: list[str] | None) -> tuple[Settings, str | None]:
    parser = argparse.ArgumentParser(prog="python -m bench.soak", description=__doc__.split("\n\n")[0])
    add = parser.add_argument
    add("--duration", type=float, default=600.0, help="seconds of streaming, warm-up included (600)")
    add("--warmup", type=float, default=None,
        help="seconds before the samples count (default: 20%% of --duration, at most 60)")
    add("--rate", type=int, default=500, help="records per second (500)")
    add("--trigger", type=float, default=1.0, help="micro-batch trigger interval in seconds (1)")
    add("--value-size", type=int, default=100, help="value bytes (100)")
    add("--partitions", type=int, default=4, help="partitions of the soak's topic (4)")
    add("--sample-every", type=float, default=5.0, help="seconds between samples (5)")
    add("--baseline-samples", type=int, default=5, help="post-warm-up samples whose median is the baseline (5)")
    add("--evict-every", type=float, default=120.0,
        help="seconds between eviction probes after the warm-up; 0: none (120)")
    add("--cache-timeout", type=float, default=3.0, help="the sink's producer.cache.timeout in seconds (3)")
    add("--mode", default="arrow", help="the sink's mode: arrow or rows (arrow)")
    add("--tolerance", type=float, default=0.15, help="allowed RSS deviation from the baseline (0.15)")
    add("--bootstrap", default=None, help="an existing cluster; default: start an embedded Apache Kafka node")
    add("--json", metavar="OUT", default=None, help="also write the report to this JSON file")
    args = parser.parse_args(argv)
    warmup = min(60.0, args.duration * 0.2) if args.warmup is None else args.warmup
    try:
        settings = Settings(args.duration, warmup, args.rate, args.trigger, args.value_size, args.partitions,
                            args.sample_every, args.baseline_samples, args.evict_every, args.cache_timeout,
                            args.mode, args.tolerance, args.bootstrap)
    except ValueError as error:
        parser.error(str(error))
    return settings, args.json


def run(settings: Settings, bootstrap: str, log: Any) -> Report:
    from bench.spark import stop_session
    from spark_kafka_sink import KafkaSink

    topic = f"soak-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, settings.topic_partitions)
    ports = broker_ports(bootstrap)
    with tempfile.TemporaryDirectory(prefix="soak-") as tmp:
        spark = start_session(str(Path(tmp) / "warehouse"))
        try:
            jvm = jvm_pid()
            log(f"Spark JVM pid {jvm} ({process_name(jvm)}), driver pid {os.getpid()}, broker port(s) "
                f"{sorted(ports)}, topic {topic!r}")
            sink = KafkaSink(**{"kafka.bootstrap.servers": bootstrap, "topic": topic, "mode": settings.mode,
                                "producer.cache.timeout": f"{round(settings.cache_timeout_s * 1000)}ms",
                                # every micro-batch through the workers, whose producers it watches
                                "driver.write.max.rows": 0})
            gate, rounds, probes, error = stream(spark, sink, settings, Sampler(jvm, ports),
                                                 str(Path(tmp) / "checkpoint"), log)
        finally:
            stop_session(spark)
    written = gate.written
    log(f"stream stopped: {len(gate.batches)} micro-batches, {written:,} records written; reading back")
    delivery = read_ids(bootstrap, topic, written)
    return Report(settings, jvm, len(gate.batches), written, gate.skipped, delivery, probes,
                  checks(rounds, settings), rounds, error)


def main(argv: list[str] | None = None) -> int:
    settings, json_out = parse_args(argv)

    def log(line: str) -> None:
        print(line, flush=True)

    log(f"soak: {settings.duration_s:.0f} s at {settings.rate} records/s ({settings.rows_per_batch} per "
        f"{settings.trigger_s:g} s micro-batch, {settings.value_size} B values), warm-up {settings.warmup_s:.0f} s, "
        f"a sample every {settings.sample_every_s:g} s, eviction probe every {settings.evict_every_s:g} s "
        f"(producer.cache.timeout {settings.cache_timeout_s:g} s), mode {settings.mode}")
    if settings.bootstrap:
        report = run(settings, settings.bootstrap, log)
    else:
        from spark_kafka_sink.embedded import EmbeddedKafka

        with tempfile.TemporaryDirectory(prefix="soak-kafka-") as work, EmbeddedKafka(1, work_dir=work) as kafka:
            report = run(settings, kafka.bootstrap_servers, log)
    print()
    print(table(report))
    print()
    if json_out:
        Path(json_out).write_text(json.dumps(asdict(report) | {"passed": report.passed}, indent=2, default=str))
    print(verdict(report), flush=True)
    return 0 if report.passed else 1


if __name__ == "__main__":
    # Re-import under the package name, so Spark pickles nothing of __main__.
    from bench.soak import main as _main

    sys.exit(_main())
