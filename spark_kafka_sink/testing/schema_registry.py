"""SchemaRegistry: a real Confluent-compatible schema registry on loopback, for tests.

    with SchemaRegistry() as registry:
        client = SchemaRegistryClient(registry.client_conf())    # confluent_kafka.schema_registry

It runs Apicurio Registry 3 (Apache 2.0), fetched from Maven Central once into the Kafka jars'
cache (``spark_kafka_sink.embedded.apicurio``), as ``java -jar quarkus-run.jar`` on Java 21 or
later: ``$SPARK_KAFKA_SINK_REGISTRY_JAVA``, ``JAVA_HOME``, ``PATH``, then the system's JVM
directories. Its storage is in memory (H2), so every start is empty. The HTTP API and the
management interface both bind 127.0.0.1, each on a free port (the API on ``port`` when given:
one already taken is a ``PortInUseError`` before anything starts). ``url`` is the Confluent-compatible
API (``/apis/ccompat/v7``) that Confluent's clients and serializers speak.

The JVM gets a small heap, the C1 compiler only and an AppCDS archive of its classes (dumped by the
first clean stop on a machine, see ``embedded/cds.py``). The registry is ready once
``GET <url>/subjects`` answers 200. If it exits first or does not answer in time,
:class:`~spark_kafka_sink.embedded.RegistryStartError` carries the tail of its log. :meth:`close`
stops it by process id (its process group): SIGTERM, SIGKILL after a grace, then reaped. A
temporary work directory (the log, the JVM's temporary files) is removed then. A registry never
closed is killed by a finalizer (at interpreter exit at the latest).
"""

from __future__ import annotations

import shutil
import subprocess
import tempfile
import time
import urllib.error
import urllib.request
import weakref
from collections.abc import Mapping, Sequence
from pathlib import Path

from ..clock import SYSTEM_CLOCK, Clock
from ..embedded import cds
from ..embedded.apicurio import DEFAULT_APICURIO_VERSION, ApicurioApp, find_registry_java, resolve_apicurio
from ..embedded.config import HOST
from ..embedded.errors import RegistryStartError, tail
from ..embedded.java import service_flags
from ..embedded.node import launch_jvm, stop_jvm
from ..embedded.ports import check_free, free_ports

CCOMPAT_PATH = "/apis/ccompat/v7"
_POLL_S = 0.1
_PROBE_TIMEOUT_S = 2.0
# Measured on 2 cores: it starts and serves tests in 128m (RSS about 200 MB); 64m still starts.
DEFAULT_HEAP = "128m"
CLIENT_TIMEOUT_S = 10


class SchemaRegistry:
    """Apicurio Registry on 127.0.0.1 (see the module docstring); a context manager.

    ``version``: the Apicurio Registry release. ``java``: the ``java`` to run (default: found as
    the module docstring says). ``work_dir``: where its log goes (default: a temporary directory
    removed at close). ``cache_dir``: the cache root (default: the Kafka jars'). ``heap``: the JVM
    heap. ``java_options``: extra JVM flags, after ours. ``properties``: extra Apicurio or Quarkus
    configuration (``-D`` system properties; one of ours named again takes the caller's value;
    the log names them without their values). ``port``: the HTTP API's port (default: a free one).
    """

    def __init__(self, *, version: str = DEFAULT_APICURIO_VERSION, java: str | None = None,
                 work_dir: str | Path | None = None, cache_dir: str | Path | None = None,
                 heap: str = DEFAULT_HEAP, java_options: Sequence[str] = (),
                 properties: Mapping[str, object] | None = None, start_timeout_s: float = 90.0,
                 clock: Clock = SYSTEM_CLOCK, port: int | None = None):
        if start_timeout_s <= 0:
            raise ValueError(f"start_timeout_s must be positive, got {start_timeout_s}")
        if port is not None and not 1 <= port <= 65535:
            raise ValueError(f"port must be 1-65535, got {port}")
        self._fixed_port = port
        self.version = version
        self.heap = heap
        self.start_timeout_s = start_timeout_s
        self._java = java
        self._work_dir = Path(work_dir) if work_dir is not None else None
        self._cache_dir = cache_dir
        self._java_options = tuple(java_options)
        self._properties = {str(k): str(v) for k, v in (properties or {}).items()}
        self._clock = clock
        self._process: subprocess.Popen | None = None
        self._finalizer: weakref.finalize | None = None
        self._owned_dir: Path | None = None
        self._cds = cds.CdsPlan(())
        self.directory: Path | None = None
        self.app: ApicurioApp | None = None
        self.port: int | None = None
        self.management_port: int | None = None
        self.start_seconds: float | None = None

    # --- lifecycle -------------------------------------------------------------------------

    def __enter__(self) -> SchemaRegistry:
        return self.start()

    def __exit__(self, *exc_info) -> None:
        self.close()

    def start(self) -> SchemaRegistry:
        """Fetch the registry if the cache lacks it, start it, and return once it answers."""
        if self._process is not None:
            raise RuntimeError("the schema registry is already started")
        java = self._java or find_registry_java()
        self.app = resolve_apicurio(self.version, self._cache_dir)
        try:
            self.directory = self._make_directory()
            if self._fixed_port is None:
                self.port, self.management_port = free_ports(2)
            else:
                check_free(self._fixed_port, "the schema registry's port")
                self.port = self._fixed_port
                self.management_port = next(p for p in free_ports(2) if p != self._fixed_port)
            self._cds = cds.plan_in(self.app.directory / "cds", java, "registry")
            settings = self._settings()
            flags = [*service_flags(self.heap, self._java_options), *self._cds.flags,
                     f"-Djava.io.tmpdir={self.directory / 'tmp'}"]
            run = ["-jar", str(self.app.run_jar)]
            command = [java, *flags, *(f"-D{name}={value}" for name, value in settings.items()), *run]
            # The log (and so a failed start's error) names the caller's properties, never their
            # values: they may hold credentials.
            shown = [java, *flags, *(f"-D{name}=" + ("(hidden)" if name in self._properties else value)
                                     for name, value in settings.items()), *run]
            began = self._clock.monotonic_ms()
            self._process = launch_jvm(command, cwd=self.directory, log_path=self.log_path,
                                       banner=f"starting Apicurio Registry {self.version}", shown=shown)
            self._finalizer = weakref.finalize(self, _kill_forgotten, self._process, self._owned_dir)
            self._wait_ready(began + int(self.start_timeout_s * 1000))
            self.start_seconds = (self._clock.monotonic_ms() - began) / 1000
        except BaseException:
            self.close()
            raise
        return self

    def close(self, grace_s: float = 10.0) -> int | None:
        """Stop the registry (SIGTERM to its process group, SIGKILL after ``grace_s``), reap it,
        and remove a temporary work directory; idempotent. Returns its exit code."""
        process, self._process = self._process, None
        if self._finalizer is not None:
            self._finalizer.detach()
            self._finalizer = None
        code = None
        try:
            if process is not None:
                if self._cds.pending is not None:
                    grace_s = max(grace_s, 15.0)  # the first clean stop dumps the class archive
                code, clean = stop_jvm(process, grace_s)
                # 143 = 128 + SIGTERM: the JVM's exit after its shutdown hooks ran.
                cds.promote(self._cds, clean_exit=clean and code in (0, 143))
        finally:
            owned, self._owned_dir = self._owned_dir, None
            if owned is not None:
                shutil.rmtree(owned, ignore_errors=True)
        return code

    def _make_directory(self) -> Path:
        if self._work_dir is None:
            self._owned_dir = Path(tempfile.mkdtemp(prefix="spark-kafka-sink-registry-"))
            directory = self._owned_dir
        else:
            directory = self._work_dir
        (directory / "tmp").mkdir(parents=True, exist_ok=True)
        return directory

    def _settings(self) -> dict[str, str]:
        """Loopback only, our ports, in-memory storage; then the caller's ``properties``."""
        return {"quarkus.http.host": HOST, "quarkus.http.port": str(self.port),
                "quarkus.management.host": HOST, "quarkus.management.port": str(self.management_port),
                "apicurio.storage.kind": "sql", "apicurio.storage.sql.kind": "h2",
                **self._properties}

    def _wait_ready(self, deadline_ms: int) -> None:
        opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never a proxy
        last: object = "no answer yet"
        while True:
            assert self._process is not None
            code = self._process.poll()
            if code is not None:
                raise RegistryStartError(
                    f"Apicurio Registry {self.version} exited with code {code} during start-up"
                    f"{self._kept_log()}; its log ends:\n{self.log_tail()}")
            try:
                with opener.open(f"{self.url}/subjects", timeout=_PROBE_TIMEOUT_S) as answer:
                    if answer.status == 200:
                        return
                    last = f"HTTP {answer.status}"
            except urllib.error.HTTPError as exc:
                last = f"HTTP {exc.code}"
            except OSError as exc:
                last = exc
            if self._clock.monotonic_ms() >= deadline_ms:
                raise RegistryStartError(
                    f"Apicurio Registry {self.version} did not answer GET {self.url}/subjects within "
                    f"{self.start_timeout_s:g} s (last: {last}){self._kept_log()}; its log ends:\n"
                    f"{self.log_tail()}")
            time.sleep(_POLL_S)

    def _kept_log(self) -> str:
        """Where the log stays after a failed start: nowhere when the work dir is temporary."""
        return "" if self._owned_dir is not None else f" (log {self.log_path})"

    # --- addresses and state ---------------------------------------------------------------

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>``: the registry's root (its own API is under ``/apis``)."""
        if self.port is None:
            raise RuntimeError("the schema registry is not started")
        return f"http://{HOST}:{self.port}"

    @property
    def url(self) -> str:
        """The Confluent-compatible API, ``http://127.0.0.1:<port>/apis/ccompat/v7``: what
        ``schema.registry.url`` and Confluent's ``SchemaRegistryClient`` take."""
        return self.base_url + CCOMPAT_PATH

    def client_conf(self) -> dict[str, object]:
        """Configuration for confluent-kafka's ``SchemaRegistryClient``: ``url`` and a request
        ``timeout``. Apicurio now and then leaves a request for a path it does not serve
        unanswered (its 404 never sent: about one in several hundred on a fresh connection; newer
        clients' serializers look up such a path, ``/associations``), and that client waits
        forever by default; with a timeout, its retry takes over."""
        return {"url": self.url, "timeout": CLIENT_TIMEOUT_S}

    @property
    def pid(self) -> int | None:
        """The JVM's process id while it runs; ``None`` before start and after close."""
        return self._process.pid if self._process is not None else None

    @property
    def is_alive(self) -> bool:
        return self._process is not None and self._process.poll() is None

    @property
    def log_path(self) -> Path:
        """The registry's log: the JVM's stdout and stderr."""
        if self.directory is None:
            raise RuntimeError("the schema registry is not started")
        return self.directory / "registry.log"

    def log_tail(self, lines: int = 60) -> str:
        try:
            return tail(self.log_path.read_text(errors="replace"), lines)
        except OSError:
            return f"(no log at {self.log_path})"

    def __repr__(self) -> str:
        state = f"url={self.url}, pid={self.pid}" if self.is_alive else "stopped"
        return f"SchemaRegistry(version={self.version}, {state})"


def _kill_forgotten(process: subprocess.Popen, owned_dir: Path | None) -> None:
    """Finalizer (at interpreter exit too) of a registry never closed: kill and reap its JVM,
    remove its temporary directory."""
    stop_jvm(process, grace_s=0.0)
    if owned_dir is not None:
        shutil.rmtree(owned_dir, ignore_errors=True)
