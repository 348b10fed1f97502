"""The standalone producer benchmark (issue 3, bench/README.md): ``python -m bench.producer``.

One embedded Apache Kafka node; per client a fresh topic of 6 partitions and its own process, so
that peak RSS is per client. Every client sends ``--records`` records of ``--value-size`` bytes
(keys ``k0..k99``) with a per-record send loop, then flushes. Each run is capped in records and
in wall time (``--max-seconds``); a capped run reports its partial throughput. What landed is
counted on the broker (the sum of end offsets, read with confluent-kafka). ``CPU s/1M`` is the
client process's CPU, every thread (its own I/O threads, a JVM's JIT and GC), from the first send
to the end of the flush, per million records landed.

    python -m bench.producer --records 200000 --clients ours,kafka-python,confluent,java
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time
import uuid
from dataclasses import asdict, dataclass
from pathlib import Path

from . import admin, javaprod
from .peers import SETTINGS
from .table import cell

CLIENTS = ("ours", "ours-arrow", "kafka-python", "confluent", "java")
LABELS = {"ours": "spark-kafka-sink", "ours-arrow": "ours send_arrow", "kafka-python": "kafka-python",
          "confluent": "confluent-kafka", "java": "java kafka-clients"}
PARTITIONS = 6
_GRACE_S = 90.0  # beyond --max-seconds: start-up, the final flush and close
_WAIT_POLL_S = 0.05
REPO = Path(__file__).resolve().parents[1]


@dataclass
class Row:
    """One client's result. ``landed``: records on the broker; ``seconds``: first send → flushed."""

    client: str
    status: str  # ok | partial | unavailable | error
    records: int | None = 0  # handed to send(); None: unknown (a killed JVM)
    landed: int = 0
    seconds: float | None = None
    cpu_seconds: float | None = None  # the client process's CPU (every thread) over ``seconds``
    msgs_per_s: float | None = None
    peak_rss_mb: float | None = None
    detail: str = ""


@dataclass(frozen=True)
class Child:
    returncode: int | None  # None: killed at the time cap
    stdout: str
    stderr: str
    wall_s: float
    peak_rss_mb: float


def run_child(command: list[str], timeout_s: float) -> Child:
    """Run ``command``; its own peak RSS from ``wait4`` (not the max over all children)."""
    with tempfile.TemporaryFile("w+") as out, tempfile.TemporaryFile("w+") as err:
        began = time.monotonic()
        proc = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=out, stderr=err, cwd=REPO,
                                env={**os.environ, "PYTHONPATH": str(REPO)})
        deadline = began + timeout_s
        killed = False
        while True:
            pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
            if pid == proc.pid:
                break
            if time.monotonic() > deadline and not killed:
                proc.kill()
                killed = True
            time.sleep(_WAIT_POLL_S)
        proc.returncode = os.waitstatus_to_exitcode(status)  # reaped here: tell Popen
        wall = time.monotonic() - began
        out.seek(0)
        err.seek(0)
        return Child(None if killed else proc.returncode, out.read(), err.read(), wall,
                     usage.ru_maxrss / 1024.0)


def run_python_client(client: str, bootstrap: str, topic: str, args) -> Row:
    command = [sys.executable, "-m", "bench.peers", client, bootstrap, topic, str(args.records),
               str(args.value_size), str(args.max_seconds), args.compression]
    child = run_child(command, args.max_seconds + _GRACE_S)
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    if not lines:
        why = "killed at the time cap" if child.returncode is None else f"exit code {child.returncode}"
        return Row(client, "error", peak_rss_mb=child.peak_rss_mb,
                   detail=f"no result ({why}); stderr tail: {child.stderr[-500:]}")
    result = json.loads(lines[-1])
    return Row(client, result["status"], result["sent"], seconds=result["seconds"] or None,
               cpu_seconds=result["cpu_seconds"], peak_rss_mb=child.peak_rss_mb, detail=result["detail"])


def run_java(bootstrap: str, topic: str, args) -> Row:
    try:
        command = javaprod.command(bootstrap, topic, args.records, args.value_size)
    except javaprod.JavaUnavailable as exc:
        return Row("java", "unavailable", detail=str(exc))
    child = run_child(command, args.max_seconds)
    prod = javaprod.parse(child.stdout)
    if child.returncode is None:  # capped: count what landed over the whole wall time
        return Row("java", "partial", None, seconds=child.wall_s, peak_rss_mb=child.peak_rss_mb,
                   detail=f"killed at the {args.max_seconds:.0f} s cap; seconds include JVM start-up")
    if prod.seconds is None or child.returncode != 0:
        return Row("java", "error", peak_rss_mb=child.peak_rss_mb,
                   detail=f"exit {child.returncode}; {child.stdout[-300:]} {child.stderr[-300:]}")
    return Row("java", "ok", args.records, seconds=prod.seconds, cpu_seconds=prod.cpu_seconds,
               peak_rss_mb=child.peak_rss_mb, detail=prod.detail)


def measure(client: str, bootstrap: str, args) -> Row:
    topic = f"bench-{client}-{uuid.uuid4().hex[:8]}"
    admin.create_topic(bootstrap, topic, PARTITIONS)
    if client == "java":
        row = run_java(bootstrap, topic, args)
    else:
        row = run_python_client(client, bootstrap, topic, args)
    if row.status in ("ok", "partial"):
        row.landed = admin.landed(bootstrap, topic, PARTITIONS)
        if row.seconds:
            row.msgs_per_s = row.landed / row.seconds
        if row.records is not None and row.landed != row.records:
            row.detail = f"{row.detail}; only {row.landed} of {row.records} sent landed".lstrip("; ")
            row.status = "partial"
    return row


def cpu_per_million(row: Row) -> float | None:
    """The client's CPU seconds per 1M records that landed."""
    if row.cpu_seconds is None or not row.landed:
        return None
    return row.cpu_seconds * 1_000_000 / row.landed


def table(rows: list[Row]) -> str:
    rates = {row.client: row.msgs_per_s for row in rows}

    def ratio(row: Row, peer: str) -> float | None:
        if row.msgs_per_s is None or not rates.get(peer):
            return None
        return row.msgs_per_s / rates[peer]

    head = f"{'client':<20}{'records':>10}{'seconds':>9}{'msgs/s':>10}{'vs kafka-py':>12}" \
           f"{'vs confluent':>13}{'CPU s/1M':>10}{'peak RSS MB':>13}  status"
    lines = [head, "-" * len(head)]
    for row in rows:
        if row.status == "unavailable" and row.client == "ours":
            lines.append(f"{LABELS[row.client]:<20}spark-kafka-sink producer: not available yet")
            continue
        lines.append(f"{LABELS[row.client]:<20}{row.landed:>10}{cell(row.seconds, '.2f'):>9}"
                     f"{cell(row.msgs_per_s, ',.0f'):>10}{cell(ratio(row, 'kafka-python'), '.2f'):>12}"
                     f"{cell(ratio(row, 'confluent'), '.2f'):>13}{cell(cpu_per_million(row), '.2f'):>10}"
                     f"{cell(row.peak_rss_mb, '.0f'):>13}"
                     f"  {row.status}")
    notes = [f"  {LABELS[r.client]}: {r.detail}" for r in rows if r.detail]
    return "\n".join(lines + (["notes:"] + notes if notes else []))


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m bench.producer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--records", type=int, default=1_000_000, help="records per client (1,000,000)")
    parser.add_argument("--value-size", type=int, default=100, help="value bytes (100)")
    parser.add_argument("--clients", default=",".join(CLIENTS), help=f"comma list of {', '.join(CLIENTS)}")
    parser.add_argument("--max-seconds", type=float, default=180.0, help="wall-time cap per client (180)")
    parser.add_argument("--json", metavar="OUT", help="also write the rows to this JSON file")
    parser.add_argument("--compression", default="none", choices=("none", "gzip", "snappy", "lz4", "zstd"),
                        help="codec for the Python clients (none); the Java client always sends uncompressed")
    args = parser.parse_args(argv)
    args.clients = [c.strip() for c in args.clients.split(",") if c.strip()]
    unknown = sorted(set(args.clients) - set(CLIENTS))
    if unknown:
        parser.error(f"unknown client(s) {unknown}; choose from {list(CLIENTS)}")
    if args.records < 1 or args.value_size < 0 or args.max_seconds <= 0:
        parser.error("--records must be >= 1, --value-size >= 0 and --max-seconds > 0")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    from spark_kafka_sink.embedded import EmbeddedKafka

    print(f"{args.records:,} records x {args.value_size} B per client, keys k0..k99, {PARTITIONS} "
          f"partitions, one embedded broker; settings: acks={SETTINGS.acks} linger.ms={SETTINGS.linger_ms}"
          f" batch.size={SETTINGS.batch_size} idempotence={SETTINGS.idempotence} "
          f"compression={args.compression}; cap {args.max_seconds:.0f} s per client", flush=True)
    rows: list[Row] = []
    with EmbeddedKafka(1) as kafka:
        for client in args.clients:
            row = measure(client, kafka.bootstrap_servers, args)
            if row.client == "ours" and row.status == "unavailable":
                print("spark-kafka-sink producer: not available yet", flush=True)
            else:
                print(f"  {LABELS[client]}: {cell(row.msgs_per_s, ',.0f')} msgs/s ({row.status})", flush=True)
            rows.append(row)
    print()
    print(table(rows))
    if args.json:
        settings = {**asdict(SETTINGS), "compression": args.compression}
        Path(args.json).write_text(json.dumps({"records": args.records, "value_size": args.value_size,
                                               "settings": settings,
                                               "rows": [asdict(r) for r in rows]}, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
