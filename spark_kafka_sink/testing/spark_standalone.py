"""A Spark standalone cluster on loopback, from pyspark's own ``spark-class`` (no download): one
master and N workers, each worker launching its own executor JVM (which forks its own Python
workers) for every application submitted to it. This is how the sink runs for its users: tasks
in executor processes apart from the driver, not inside the driver's JVM as with ``local[n]``.

    with SparkStandalone(workers=2, directory=tmp) as cluster:
        subprocess.run([... "spark-submit", "--master", cluster.master_url, ...])
        cluster.executors()              # the executor JVMs running now
        cluster.kill(executor)           # SIGKILL one: its tasks fail and Spark runs them again

Ports are picked free on 127.0.0.1; each daemon logs to ``directory/<name>.log`` and the executors
to ``directory/<worker>/<app-id>/<executor-id>/stderr`` (Spark's layout). Daemons get a small
heap (``daemon_memory``) and ``java_options`` (e.g. Spark's class-data archive, see ``spark_kafka_sink.spark.cds``);
each worker offers ``cores`` cores and ``memory`` to executors.
:meth:`close` ends everything the cluster started, by process id: its daemons, their executors
and the executors' Python workers.
"""

from __future__ import annotations

import importlib.util
import os
import signal
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from ..embedded.config import HOST
from ..embedded.ports import free_ports

__all__ = ["Executor", "SparkStandalone", "SparkStandaloneError", "cpu_seconds", "python_workers", "spark_home"]

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
EXECUTOR_CLASS = "org.apache.spark.executor.CoarseGrainedExecutorBackend"
_MASTER_READY = "I have been elected leader"
_WORKER_READY = "Successfully registered with master"


class SparkStandaloneError(RuntimeError):
    """The cluster did not start (the message carries the daemon's log tail)."""


@dataclass(frozen=True)
class Executor:
    """An executor JVM running now: its process id, Spark's executor id, the application it
    works for and the index of the worker that launched it."""

    pid: int
    executor_id: str
    app_id: str
    worker: int


def spark_home() -> Path:
    """The Spark installation inside the pyspark package (``bin/spark-class`` and the jars)."""
    spec = importlib.util.find_spec("pyspark")
    if spec is None or not spec.submodule_search_locations:
        raise SparkStandaloneError("pyspark is not installed: pip install 'spark-kafka-sink[spark]'")
    home = Path(next(iter(spec.submodule_search_locations)))
    if not (home / "bin" / "spark-class").is_file():
        raise SparkStandaloneError(f"this pyspark has no bin/spark-class under {home}")
    return home


class SparkStandalone:
    """One master and ``workers`` workers on 127.0.0.1 (see the module docstring)."""

    def __init__(self, directory: str | Path, *, workers: int = 2, cores: int = 1, memory: str = "1g",
                 daemon_memory: str = "256m", start_timeout_s: float = 90.0, java_options: str = "") -> None:
        if workers < 1 or cores < 1:
            raise ValueError(f"need at least one worker and one core, got workers={workers}, cores={cores}")
        self.directory = Path(directory)
        self.workers = workers
        self.cores = cores
        self.memory = memory
        self.daemon_memory = daemon_memory
        self.start_timeout_s = start_timeout_s
        self.java_options = java_options
        self.master_port = 0
        self._processes: list[tuple[str, subprocess.Popen, IO[bytes]]] = []

    @property
    def master_url(self) -> str:
        """``spark://127.0.0.1:<port>``, for ``spark-submit --master``."""
        if not self.master_port:
            raise SparkStandaloneError("the cluster is not started")
        return f"spark://{HOST}:{self.master_port}"

    def __repr__(self) -> str:
        state = self.master_url if self.master_port else "not started"
        return f"SparkStandalone({state}, workers={self.workers}, cores={self.cores}, memory={self.memory})"

    def __enter__(self) -> SparkStandalone:
        self.start()
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()

    # --- start ---------------------------------------------------------------------------------

    def start(self) -> None:
        """Start the master, then the workers; return once every worker has registered.
        :class:`SparkStandaloneError` (and everything stopped) when one does not in time."""
        if self._processes:
            raise SparkStandaloneError("the cluster is already started")
        self.directory.mkdir(parents=True, exist_ok=True)
        ports = free_ports(2 + 2 * self.workers)
        self.master_port = ports[0]
        try:
            self._launch("master", [MASTER_CLASS, "--host", HOST, "--port", str(ports[0]),
                                    "--webui-port", str(ports[1])])
            self._wait_for("master", _MARKER_OF["master"])
            for index in range(self.workers):
                name = self.worker_name(index)
                work = self.directory / name
                work.mkdir(exist_ok=True)
                self._launch(name, [WORKER_CLASS, "--host", HOST, "--port", str(ports[2 + 2 * index]),
                                    "--webui-port", str(ports[3 + 2 * index]), "--cores", str(self.cores),
                                    "--memory", self.memory, "--work-dir", str(work), self.master_url])
            for index in range(self.workers):
                self._wait_for(self.worker_name(index), _MARKER_OF["worker"])
        except BaseException:
            self.close()
            raise

    @staticmethod
    def worker_name(index: int) -> str:
        return f"worker-{index}"

    def log_path(self, name: str) -> Path:
        """The log file of the daemon ``name`` (``master``, ``worker-0``, ...)."""
        return self.directory / f"{name}.log"

    def _environment(self) -> dict[str, str]:
        home = spark_home()
        env = {**os.environ, "SPARK_HOME": str(home), "SPARK_LOCAL_IP": HOST, "SPARK_LOCAL_HOSTNAME": HOST,
               "SPARK_DAEMON_MEMORY": self.daemon_memory, "SPARK_LOG_DIR": str(self.directory),
               "SPARK_NO_DAEMONIZE": "1"}
        # a SPARK_CONF_DIR of the caller's (e.g. local[2] defaults) must not reach the daemons
        env.pop("SPARK_CONF_DIR", None)
        env.pop("SPARK_MASTER_OPTS", None)
        env.pop("SPARK_WORKER_OPTS", None)
        env.pop("SPARK_DAEMON_JAVA_OPTS", None)
        if self.java_options:
            env["SPARK_DAEMON_JAVA_OPTS"] = self.java_options
        return env

    def _launch(self, name: str, args: list[str]) -> None:
        log = open(self.log_path(name), "wb")  # noqa: SIM115 - closed in close()
        try:
            process = subprocess.Popen([str(spark_home() / "bin" / "spark-class"), *args],
                                       env=self._environment(), stdin=subprocess.DEVNULL, stdout=log,
                                       stderr=subprocess.STDOUT, start_new_session=True)
        except BaseException:
            log.close()
            raise
        self._processes.append((name, process, log))

    def _wait_for(self, name: str, marker: str) -> None:
        process = next(p for n, p, _ in self._processes if n == name)
        deadline = time.monotonic() + self.start_timeout_s
        while time.monotonic() < deadline:
            if marker in self._log_text(name):
                return
            if process.poll() is not None:
                raise SparkStandaloneError(f"the Spark {name} exited with {process.returncode} before it "
                                           f"was ready; its log ends:\n{self.log_tail(name)}")
            time.sleep(0.2)
        raise SparkStandaloneError(f"the Spark {name} was not ready within {self.start_timeout_s:.0f} s "
                                   f"(no {marker!r} in its log); its log ends:\n{self.log_tail(name)}")

    def _log_text(self, name: str) -> str:
        try:
            return self.log_path(name).read_text(encoding="utf-8", errors="replace")
        except OSError:
            return ""

    def log_tail(self, name: str, lines: int = 40) -> str:
        return "\n".join(self._log_text(name).splitlines()[-lines:])

    # --- executors -----------------------------------------------------------------------------

    def executors(self) -> list[Executor]:
        """The executor JVMs the workers run now, by worker."""
        found = []
        for index in range(self.workers):
            worker = self._process(self.worker_name(index))
            if worker is None:
                continue
            for pid in _descendants(worker.pid):
                argv = _cmdline(pid)
                if EXECUTOR_CLASS not in argv:
                    continue
                found.append(Executor(pid, _flag(argv, "--executor-id"), _flag(argv, "--app-id"), index))
        return found

    def kill(self, executor: Executor) -> None:
        """SIGKILL an executor JVM (as a lost machine would): Spark re-runs its tasks elsewhere and
        the worker launches a new executor. Its Python workers end when their JVM is gone."""
        if executor.pid not in {e.pid for e in self.executors()}:
            raise SparkStandaloneError(f"{executor} is not an executor of this cluster (any more)")
        os.kill(executor.pid, signal.SIGKILL)

    def executor_log(self, executor: Executor) -> Path:
        """The executor's stderr (Spark's INFO log: ``Running task ...`` lines, among others)."""
        return self.directory / self.worker_name(executor.worker) / executor.app_id / executor.executor_id / "stderr"

    def executor_logs(self, app_id: str | None = None) -> list[Path]:
        """Every executor stderr the workers wrote (of ``app_id`` only, when given), by worker."""
        pattern = f"{app_id or '*'}/*/stderr"
        return [path for index in range(self.workers)
                for path in sorted((self.directory / self.worker_name(index)).glob(pattern))]

    def _process(self, name: str) -> subprocess.Popen | None:
        return next((p for n, p, _ in self._processes if n == name and p.poll() is None), None)

    # --- stop ----------------------------------------------------------------------------------

    def close(self, grace_s: float = 10.0) -> None:
        """Stop the workers, then the master (SIGTERM, SIGKILL after ``grace_s``), and kill what
        they started that is still running (executors, Python workers), by process id."""
        if not self._processes:
            return
        started = [p.pid for _, p, _ in self._processes]
        children = {pid for root in started for pid in _descendants(root)}
        for _, process, _ in reversed(self._processes):
            if process.poll() is None:
                _signal_group(process.pid, signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for _, process, _ in reversed(self._processes):
            try:
                process.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(process.pid, signal.SIGKILL)
                process.wait(timeout=30)
        for pid in children:
            _kill_if_alive(pid)
        for _, _, log in self._processes:
            log.close()
        self._processes = []
        self.master_port = 0


_MARKER_OF = {"master": _MASTER_READY, "worker": _WORKER_READY}


def _signal_group(pid: int, sig: int) -> None:
    """Signal the process group ``pid`` leads (each daemon was started in its own session)."""
    try:
        os.killpg(pid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def _kill_if_alive(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def _stat_fields(pid: int | str) -> list[str] | None:
    """The fields of ``/proc/<pid>/stat`` after the command name (``state`` first), or ``None``
    when the process is gone. The name may hold blanks and parentheses: split after the last ')'."""
    try:
        with open(f"/proc/{pid}/stat", encoding="utf-8", errors="replace") as stat:
            text = stat.read()
    except OSError:
        return None
    return text[text.rfind(")") + 2:].split()


def _parents() -> dict[int, int]:
    """``{pid: parent pid}`` of every process visible in /proc."""
    parents = {}
    for entry in os.scandir("/proc"):
        if entry.name.isdigit() and (fields := _stat_fields(entry.name)) and len(fields) > 1:
            parents[int(entry.name)] = int(fields[1])
    return parents


def _descendants(root: int) -> list[int]:
    """Every process below ``root`` (children, their children, ...), from /proc."""
    children: dict[int, list[int]] = {}
    for pid, parent in _parents().items():
        children.setdefault(parent, []).append(pid)
    found, todo = [], [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found.append(child)
            todo.append(child)
    return found


def _cmdline(pid: int) -> list[str]:
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as file:
            return [part.decode("utf-8", "replace") for part in file.read().split(b"\0") if part]
    except OSError:
        return []


def _flag(argv: list[str], name: str) -> str:
    """The value after ``name`` in ``argv`` (``''`` when absent)."""
    for index, part in enumerate(argv[:-1]):
        if part == name:
            return argv[index + 1]
    return ""


def cpu_seconds(pids: list[int]) -> float:
    """User plus system CPU seconds the processes ``pids`` have used so far (gone ones count 0)."""
    ticks = 0
    for pid in pids:
        fields = _stat_fields(pid)
        if fields is not None:
            ticks += int(fields[11]) + int(fields[12])  # utime, stime
    return ticks / os.sysconf("SC_CLK_TCK")


def python_workers(executor: Executor) -> list[int]:
    """The Python processes an executor has forked (pyspark's daemon and its workers)."""
    return [pid for pid in _descendants(executor.pid)
            if "python" in os.path.basename((_cmdline(pid) or [""])[0])]
