"""Running ``jobs/stream_to_kafka.py`` under ``spark-submit`` for the demo.

The command comes from :func:`spark_kafka_sink.spark.submit.spark_submit_command`, so the demo runs
the job exactly as its docstring tells users to. Spark's whole output goes to a log file; only the
job's one-line-per-micro-batch progress is echoed, so the demo stays readable. The run is bounded:
past ``timeout_s`` the process group it started is killed. The driver maps Spark's class-data
archive when a test run left one (``spark_kafka_sink.spark.cds``): it starts seconds sooner.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Mapping, Sequence

from spark_kafka_sink.spark.submit import spark_submit_command
from spark_kafka_sink.spark import cds as spark_cds

ROOT = Path(__file__).resolve().parents[1]
STREAM_JOB = ROOT / "jobs" / "stream_to_kafka.py"
CONF = ROOT / "conf"


@dataclass(frozen=True)
class SparkRun:
    """How ``spark-submit`` ended: its exit status, wall time (JVM and Spark start-up included),
    its log file, and the job's summary lines (its stdout's last lines)."""

    returncode: int
    seconds: float
    log: Path
    summary: tuple[str, ...]


def run_stream_job(args: Sequence[str], log: Path, *, timeout_s: float, echo: Callable[[str], None],
                   master: str | None = None, conf: Mapping[str, str] | None = None) -> SparkRun:
    """``spark-submit jobs/stream_to_kafka.py ARGS``; ``echo`` gets each micro-batch line.
    ``master`` (a standalone cluster's URL) replaces the defaults' ``local[2]``; ``conf`` adds
    ``--conf`` settings."""
    command = spark_submit_command(STREAM_JOB, list(args), conf_dir=CONF, master=master, conf=conf,
                                   java_options=spark_cds.java_options())
    started = time.monotonic()
    with open(log, "w", encoding="utf-8") as log_file:
        process = subprocess.Popen(command.argv, env=command.environ(), cwd=ROOT, text=True,
                                   stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                   stdin=subprocess.DEVNULL, start_new_session=True)
        lines: list[str] = []
        reader = threading.Thread(target=_follow, args=(process, log_file, lines, echo), daemon=True)
        reader.start()
        try:
            returncode = process.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            _kill_group(process)
            returncode = -signal.SIGKILL
            echo(f"spark-submit did not finish in {timeout_s:.0f} s; killed it")
        except BaseException:  # Ctrl-C: the job runs in its own session, so it did not get it
            _kill_group(process)
            raise
        reader.join(timeout=10)
    summary = tuple(line for line in lines if line.startswith(("stream_to_kafka:", "sink metrics:")))
    return SparkRun(returncode, time.monotonic() - started, log, summary)


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the process group the job was started in (spark-submit's JVM and its Python driver),
    by its id, and reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait(timeout=30)


def _follow(process: subprocess.Popen, log_file, lines: list[str], echo: Callable[[str], None]) -> None:
    for line in process.stdout:
        log_file.write(line)
        text = line.rstrip("\n")
        lines.append(text)
        if text.startswith("micro-batch "):
            echo(text)
