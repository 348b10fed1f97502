"""One embedded Kafka node: one JVM running ``kafka.Kafka`` as combined broker+controller.

A node owns a directory::

    <dir>/server.properties   written by :meth:`KafkaNode.configure`
    <dir>/data/               log.dirs (formatted once by :meth:`KafkaNode.format`)
    <dir>/logs/               kafka.logs.dir
    <dir>/format.log          StorageTool output
    <dir>/kafka.log           the JVM's stdout+stderr, where our log4j2 config also writes

The JVM runs in its own session (so a terminal's Ctrl-C reaches the launcher, which then stops the
nodes in order) and, on Linux, with a parent-death signal: if the Python process that started it
dies without cleaning up (SIGKILL, ``os._exit``), the kernel kills the JVM too. That signal is tied
to the starting *thread*, so it is only set when the node is started from the main thread.

Only the process this object started is ever signalled (with its process group, which holds it
alone), and it is always reaped (no zombies). ``launch_jvm`` and ``stop_jvm`` do the same for
any JVM of the tooling (the testing kit's schema registry).
"""

from __future__ import annotations

import ctypes
import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

from . import cds
from .config import NodeAddress, render, server_properties
from .errors import StorageFormatError, tail
from .jars import KafkaJars
from .java import broker_flags, tool_flags
from .security import write_private

LOG4J_CONFIG = Path(__file__).with_name("log4j2.properties")
_PR_SET_PDEATHSIG = 1
_FORMAT_TIMEOUT_S = 120.0


class KafkaNode:
    """A broker+controller JVM. Create it, :meth:`configure`, :meth:`format`, then :meth:`start`."""

    def __init__(self, address: NodeAddress, directory: Path, *, java: str, jars: KafkaJars,
                 heap: str = "384m", dump_cds: bool = False,
                 system_properties: Mapping[str, str] | None = None):
        self.address = address
        self.system_properties = dict(system_properties or {})
        self.dump_cds = dump_cds  # this node may create the AppCDS archives (see cds.py)
        self._cds = cds.CdsPlan(())
        self.directory = Path(directory)
        self.java = java
        self.jars = jars
        self.heap = heap
        self._process: subprocess.Popen | None = None
        self._lock = threading.Lock()

    # --- identity and state ----------------------------------------------------------------

    @property
    def node_id(self) -> int:
        return self.address.node_id

    @property
    def port(self) -> int:
        """The client (PLAINTEXT) port."""
        return self.address.port

    @property
    def controller_port(self) -> int:
        return self.address.controller_port

    @property
    def bootstrap(self) -> str:
        """``127.0.0.1:<port>``: the PLAINTEXT listener the node binds (never a proxy)."""
        return f"127.0.0.1:{self.port}"

    @property
    def advertised_port(self) -> int:
        """The PLAINTEXT port the node advertises: a fault proxy's when one was given, else ``port``."""
        return self.address.client_port("PLAINTEXT")

    def bootstrap_for(self, protocol: str) -> str:
        """``127.0.0.1:<port>`` a client of ``protocol`` uses (the advertised one for PLAINTEXT)."""
        return f"127.0.0.1:{self.address.client_port(protocol)}"

    @property
    def config_path(self) -> Path:
        return self.directory / "server.properties"

    @property
    def data_dir(self) -> Path:
        return self.directory / "data"

    @property
    def log_path(self) -> Path:
        """The node's log: JVM output and log4j2 (WARN and up, plus the start line)."""
        return self.directory / "kafka.log"

    @property
    def pid(self) -> int | None:
        """The JVM's pid while it runs (or until it is reaped); ``None`` before the first start."""
        return self._process.pid if self._process is not None else None

    @property
    def is_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def exit_code(self) -> int | None:
        """The JVM's exit status once it has exited (negative: killed by that signal)."""
        return self._process.poll() if self._process is not None else None

    def __repr__(self) -> str:
        state = "alive" if self.is_alive else "stopped"
        return f"KafkaNode(id={self.node_id}, port={self.port}, pid={self.pid}, {state})"

    # --- setup -----------------------------------------------------------------------------

    def configure(self, cluster: Sequence[NodeAddress], extra: Mapping[str, object] | None = None,
                  security: Mapping[str, object] | None = None) -> None:
        """Create the node's directories and write ``server.properties`` (owner-only: it may hold
        the secured listeners' passwords)."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.directory / "logs").mkdir(exist_ok=True)
        props = server_properties(self.address, cluster, self.data_dir, extra, security)
        write_private(self.config_path, render(props).encode())

    def format(self, cluster_id: str, extra_args: Sequence[str] = ()) -> None:
        """Format the node's storage for ``cluster_id`` (``kafka.tools.StorageTool format``).

        ``extra_args`` go to StorageTool as they are (e.g. ``--add-scram`` credentials); they are
        never echoed into errors or logs.
        """
        plan = cds.plan(self.jars, self.java, "tool", may_create=self.dump_cds)
        command = [self.java, *tool_flags(LOG4J_CONFIG, self.directory / "logs"), *plan.flags,
                   "-cp", self.jars.classpath, "kafka.tools.StorageTool", "format", "-t", cluster_id,
                   "-c", str(self.config_path), *extra_args]
        try:
            out = subprocess.run(command, cwd=self.directory, stdin=subprocess.DEVNULL,
                                 stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                                 timeout=_FORMAT_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            # Not chained: the TimeoutExpired names the command line, credentials included.
            cds.promote(plan, clean_exit=False)
            raise StorageFormatError(f"node {self.node_id}: StorageTool format did not finish "
                                     f"within {_FORMAT_TIMEOUT_S:.0f} s") from None
        except OSError as exc:
            cds.promote(plan, clean_exit=False)
            raise StorageFormatError(f"node {self.node_id}: StorageTool format failed: {exc}") from exc
        cds.promote(plan, clean_exit=out.returncode == 0)
        (self.directory / "format.log").write_text(out.stdout)
        if out.returncode != 0:
            raise StorageFormatError(
                f"node {self.node_id}: StorageTool format exited {out.returncode} "
                f"(config {self.config_path}). Output:\n{tail(out.stdout)}")

    # --- lifecycle -------------------------------------------------------------------------

    def start(self) -> None:
        """Launch the JVM (returns at once; the cluster waits for readiness)."""
        with self._lock:
            if self.is_alive:
                raise RuntimeError(f"node {self.node_id} is already running (pid {self.pid})")
            self._reap()
            self._cds = cds.plan(self.jars, self.java, "broker", may_create=self.dump_cds)
            command = [self.java, *broker_flags(self.heap, LOG4J_CONFIG, self.directory / "logs"),
                       *(f"-D{name}={value}" for name, value in self.system_properties.items()),
                       *self._cds.flags, "-cp", self.jars.classpath, "kafka.Kafka", str(self.config_path)]
            self._process = launch_jvm(command, cwd=self.directory, log_path=self.log_path,
                                       banner=f"starting node {self.node_id}")

    def stop(self, grace_s: float = 15.0) -> int | None:
        """SIGTERM (Kafka shuts down cleanly), then SIGKILL after ``grace_s``; returns the exit code.

        A node dumping the AppCDS archive at exit (first run on a machine) gets at least 15 s.
        """
        if self._cds.pending is not None:
            grace_s = max(grace_s, 15.0)
        with self._lock:
            process = self._process
            if process is None:
                return None
            code, clean = stop_jvm(process, grace_s)
            # 143 = 128 + SIGTERM: Kafka's normal exit after its shutdown hooks ran.
            cds.promote(self._cds, clean_exit=clean and code in (0, 143))
            return code

    def kill(self) -> int | None:
        """SIGKILL, as a crash would (for fault tests); returns the exit code."""
        with self._lock:
            process = self._process
            if process is None:
                return None
            if process.poll() is None:
                process.kill()
            code = process.wait()
            cds.promote(self._cds, clean_exit=False)
            return code

    def restart(self, grace_s: float = 15.0) -> None:
        """Stop the node if it runs, then start it again on the same storage and ports."""
        self.stop(grace_s)
        self.start()

    def send_signal(self, sig: int) -> None:
        """Send ``sig`` to the JVM if it still runs (e.g. SIGSTOP/SIGCONT to freeze a node)."""
        with self._lock:
            if self._process is not None and self._process.poll() is None:
                self._process.send_signal(sig)

    def _reap(self) -> None:
        if self._process is not None and self._process.poll() is None:
            raise RuntimeError(f"node {self.node_id} is still running")

    # --- diagnostics -----------------------------------------------------------------------

    def log_tail(self, lines: int = 60) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return f"(no log at {self.log_path})"
        return tail(text, lines)

    def log_mentions(self, needle: str, since_last_start: bool = True) -> bool:
        try:
            text = self.log_path.read_text(errors="replace")
        except OSError:
            return False
        if since_last_start:
            text = text[text.rfind("=== spark-kafka-sink: starting node"):]
        return needle in text


def launch_jvm(command: Sequence[str], *, cwd: Path, log_path: Path, banner: str,
               shown: Sequence[str] | None = None) -> subprocess.Popen:
    """Start ``command`` (a JVM) in a session of its own, with the parent-death signal (see the
    module docstring), its stdout and stderr appended to ``log_path`` after a line
    ``=== spark-kafka-sink: <banner> at <time>: <command>`` (``shown`` instead of the command
    when given: one whose secret values are hidden)."""
    with open(log_path, "ab") as log:
        stamp = time.strftime("%Y-%m-%d %H:%M:%S")
        log.write(f"=== spark-kafka-sink: {banner} at {stamp}: {' '.join(shown or command)}\n".encode())
        log.flush()
        return subprocess.Popen(
            list(command), cwd=cwd, stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
            close_fds=True, start_new_session=True, preexec_fn=_parent_death_signal())


def stop_jvm(process: subprocess.Popen, grace_s: float) -> tuple[int, bool]:
    """Stop a process :func:`launch_jvm` started: SIGTERM to its process group (the session it
    leads), SIGKILL after ``grace_s``, then reap it. Returns its exit code and whether it ended
    within the grace."""
    clean = True
    if process.poll() is None:
        _signal_group(process, signal.SIGTERM)
        try:
            process.wait(grace_s)
        except subprocess.TimeoutExpired:
            _signal_group(process, signal.SIGKILL)
            clean = False
    return process.wait(), clean


def _signal_group(process: subprocess.Popen, sig: int) -> None:
    """``sig`` to the group ``process`` leads; only while it is unreaped, so the id is still its."""
    if process.poll() is None:
        try:
            os.killpg(process.pid, sig)
        except ProcessLookupError:
            pass


def _parent_death_signal():
    """A ``preexec_fn`` asking Linux to SIGKILL the child when this thread dies, or ``None``."""
    if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
        return None
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        prctl = libc.prctl
    except (OSError, AttributeError):
        return None
    parent = os.getpid()

    def preexec() -> None:
        prctl(_PR_SET_PDEATHSIG, signal.SIGKILL)
        if os.getppid() != parent:  # the parent died before prctl took effect
            os._exit(1)

    return preexec
