"""CPU seconds by process, read from ``/proc`` (Linux), to split what a benchmark costs the machine.

A Spark write spends CPU in three places: the broker (the embedded Kafka JVM), the Spark JVM
(Arrow export, Spark's own Kafka producer for the built-in sink, task scheduling) and the Python
workers (the pyspark daemons and the workers they fork). :class:`CpuMeter` reads all three before
and after a contender; :class:`CpuSplit` is the difference, in seconds.

Python workers come and go (Spark kills idle ones, ``spark.python.worker.reuse=false`` forks one
per task). A worker's CPU is counted while it runs (its own ``utime + stime``) and, once it has
exited and its daemon has reaped it, in the daemon's ``cutime + cstime``: so the sum over the
daemons (own and reaped children) plus the live workers counts every worker exactly once.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

_TICKS = os.sysconf("SC_CLK_TCK")


@dataclass(frozen=True)
class ProcStat:
    """A process's line of ``/proc/<pid>/stat``: the fields the benchmarks read."""

    pid: int
    ppid: int
    name: str
    own: int       # utime + stime, ticks
    children: int  # cutime + cstime: reaped children, ticks


def proc_stat(pid: int) -> ProcStat | None:
    """``pid``'s stat, or ``None`` when it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    name = text[text.index("(") + 1:text.rindex(")")]
    fields = text[text.rindex(")") + 2:].split()
    return ProcStat(pid, int(fields[1]), name, int(fields[11]) + int(fields[12]),
                 int(fields[13]) + int(fields[14]))


def all_procs() -> dict[int, ProcStat]:
    """Every process visible in ``/proc``, by pid."""
    return {s.pid: s for s in (proc_stat(int(d)) for d in os.listdir("/proc") if d.isdigit()) if s}


def _descendants(procs: dict[int, ProcStat], root: int) -> list[ProcStat]:
    children: dict[int, list[ProcStat]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), ()):
            found.append(child)
            todo.append(child.pid)
    return found


def spark_jvm(root: int | None = None) -> int | None:
    """The pid of the Spark JVM this process started: the ``java`` among its descendants that runs
    ``SparkSubmit`` (the embedded broker is a ``java`` child too)."""
    procs = all_procs()
    for proc in _descendants(procs, os.getpid() if root is None else root):
        if proc.name != "java":
            continue
        try:
            argv = Path(f"/proc/{proc.pid}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"org.apache.spark.deploy.SparkSubmit" in argv:
            return proc.pid
    return None


@dataclass(frozen=True)
class CpuSplit:
    """CPU seconds of the broker, the Spark JVM and the Python workers."""

    broker: float = 0.0
    jvm: float = 0.0
    python: float = 0.0

    @property
    def total(self) -> float:
        return self.broker + self.jvm + self.python

    def __sub__(self, other: CpuSplit) -> CpuSplit:
        return CpuSplit(self.broker - other.broker, self.jvm - other.jvm, self.python - other.python)

    def per_million(self, rows: int) -> CpuSplit:
        """The same split per 1M rows (``rows`` written)."""
        scale = 1e6 / rows if rows else 0.0
        return CpuSplit(self.broker * scale, self.jvm * scale, self.python * scale)


class CpuMeter:
    """Reads the CPU seconds used so far by the broker ``broker_pid``, the Spark JVM ``jvm_pid``
    and the Python processes under that JVM (see the module docstring)."""

    def __init__(self, broker_pid: int | None, jvm_pid: int | None):
        self.broker_pid = broker_pid
        self.jvm_pid = jvm_pid

    def read(self) -> CpuSplit:
        procs = all_procs()
        broker = procs.get(self.broker_pid) if self.broker_pid else None
        jvm = procs.get(self.jvm_pid) if self.jvm_pid else None
        python = 0
        if jvm is not None:
            for proc in _descendants(procs, jvm.pid):
                if not proc.name.startswith("python"):
                    continue
                daemon = procs.get(proc.ppid) is jvm
                python += proc.own + (proc.children if daemon else 0)
        return CpuSplit((broker.own if broker else 0) / _TICKS, (jvm.own if jvm else 0) / _TICKS,
                        python / _TICKS)
