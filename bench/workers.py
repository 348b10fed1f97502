"""Peak RSS of Spark's Python workers, read from ``/proc`` (Linux) while a benchmark runs.

Workers are the ``python`` descendants of the Spark JVM. Their peak (``VmHWM``) is reset before a
contender starts, sampled in a background thread, and read back afterwards; see
:class:`WorkerPeaks`.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

from .cpu import ProcStat, all_procs

_SAMPLE_S = 0.5  # sampler period


def python_workers(root: int) -> dict[int, int]:
    """pid → CPU ticks of the Spark Python workers under ``root``: Python processes forked by a
    Python parent (the pyspark daemon, itself a child of the JVM) among ``root``'s descendants."""
    procs = all_procs()
    children: dict[int, list[ProcStat]] = {}
    for proc in procs.values():
        children.setdefault(proc.ppid, []).append(proc)
    workers, todo = {}, [root]
    while todo:
        parent = todo.pop()
        for child in children.get(parent, ()):
            todo.append(child.pid)
            if parent != root and child.name.startswith("python") and procs[parent].name.startswith("python"):
                workers[child.pid] = child.own
    return workers


def _peak_kb(pid: int) -> int | None:
    """The process's RSS high-water mark (``VmHWM``), resettable unlike ``ru_maxrss``."""
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def _reset_peak(pid: int) -> bool:
    """Reset ``pid``'s high-water mark to its current RSS (``clear_refs`` 5, Linux ≥ 4.0), so a
    reused worker does not carry the previous contender's peak."""
    try:
        Path(f"/proc/{pid}/clear_refs").write_text("5")
        return True
    except OSError:
        return False


class WorkerPeaks:
    """The peak RSS of the Python workers that ran one contender's tasks, watched from outside.

    Workers are reused across jobs, so each one's high-water mark is reset first; a sampler thread
    keeps each worker's peak (a worker may exit before the end). Workers count as this
    contender's when they used at least a quarter of the busiest one's CPU time meanwhile: the
    other pool's workers sit idle.
    """

    def __init__(self, root: int | None = None):
        self._root = os.getpid() if root is None else root
        self._start_ticks = python_workers(self._root)
        self.reset_ok = all([_reset_peak(pid) for pid in self._start_ticks])
        self._peaks: dict[int, int] = {}
        self._ticks: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="worker-rss", daemon=True)
        self._thread.start()

    def _sample(self) -> None:
        for pid, ticks in python_workers(self._root).items():
            self._ticks[pid] = ticks
            peak = _peak_kb(pid)
            if peak is not None:
                self._peaks[pid] = max(peak, self._peaks.get(pid, 0))

    def _run(self) -> None:
        while not self._stop.wait(_SAMPLE_S):
            self._sample()

    def stop(self) -> float | None:
        """The largest single-worker peak among the busy workers, in MB (``None``: none seen)."""
        self._stop.set()
        self._thread.join()
        self._sample()
        used = {pid: ticks - self._start_ticks.get(pid, 0) for pid, ticks in self._ticks.items()}
        busiest = max(used.values(), default=0)
        busy = [pid for pid, ticks in used.items() if busiest and ticks >= busiest / 4 and pid in self._peaks]
        return max(self._peaks[pid] for pid in busy) / 1024.0 if busy else None


