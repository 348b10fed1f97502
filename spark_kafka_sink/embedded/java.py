"""Finding a Java 17+ runtime and the JVM flags every embedded Kafka process runs with."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from pathlib import Path

from .errors import JavaNotFoundError

MIN_JAVA = 17

INSTALL_HINT = (
    f"Apache Kafka 4.x needs Java {MIN_JAVA} or later. Install it, e.g. "
    "`sudo apt-get install openjdk-17-jre-headless` (Debian/Ubuntu), "
    "`sudo dnf install java-17-openjdk-headless` (Fedora/RHEL), "
    "`brew install openjdk@17` (macOS), or download one from https://adoptium.net; "
    "then put `java` on PATH or set JAVA_HOME."
)

# Measured on 2 cores, 1 node, cached jars, best of 3 (format + launch + Metadata): G1 2.90 s,
# ParallelGC 2.85 s, SerialGC 2.82 s, -Xshare:off 2.98 s, -XX:TieredStopAtLevel=1 2.30 s. The GC
# barely matters; SerialGC is kept for its small footprint (no G1 remembered sets, one GC thread).
# TieredStopAtLevel=1 is not used by default: it starts faster but costs the broker much of its
# throughput (the test suite, whose brokers idle, adds it through BROKER_JAVA_OPTIONS_ENV).
# The big win is an AppCDS archive of Kafka's own classes (cds.py): ~2.2 s → ~1.3 s per JVM.
_FAST_START = (
    "-XX:+UseSerialGC",
    "-Xshare:auto",
    "-XX:+ExitOnOutOfMemoryError",
    "-Djava.awt.headless=true",
    "-Dfile.encoding=UTF-8",
)

# Tools (StorageTool) run for a second: the smallest heap and no C2 compiler.
_TOOL = ("-Xms32m", "-Xmx128m", "-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xshare:auto")


def find_java() -> str:
    """The ``java`` to run: ``$JAVA_HOME/bin/java`` when set, else the first on ``PATH``.

    Raises :class:`JavaNotFoundError` (with install instructions) when there is none, or when it is
    older than Java 17.
    """
    home = os.environ.get("JAVA_HOME")
    candidate = None
    if home and (Path(home) / "bin" / "java").is_file():
        candidate = str(Path(home) / "bin" / "java")
    else:
        candidate = shutil.which("java")
    if candidate is None:
        where = f"JAVA_HOME={home!r} has no bin/java and " if home else ""
        raise JavaNotFoundError(f"Java was not found ({where}no `java` on PATH). {INSTALL_HINT}")
    version = java_version(candidate)
    if version < MIN_JAVA:
        raise JavaNotFoundError(f"{candidate} is Java {version}. {INSTALL_HINT}")
    return candidate


@functools.lru_cache(maxsize=8)
def java_version(java: str) -> int:
    """The feature version of ``java`` (8, 11, 17, 21...), read from ``java -version``."""
    try:
        out = subprocess.run([java, "-version"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired) as exc:
        raise JavaNotFoundError(f"{java} -version failed: {exc}. {INSTALL_HINT}") from exc
    match = re.search(r'version "(\d+)(?:\.(\d+))?', out.stderr + out.stdout)
    if out.returncode != 0 or match is None:
        raise JavaNotFoundError(
            f"{java} -version failed (exit {out.returncode}): {out.stderr.strip()[:500]}. {INSTALL_HINT}")
    major = int(match.group(1))
    return int(match.group(2) or 0) if major == 1 else major  # "1.8.0_392" is Java 8


BROKER_JAVA_OPTIONS_ENV = "SPARK_KAFKA_SINK_BROKER_JAVA_OPTIONS"
"""Extra JVM flags for every embedded broker, after ours (so they win), split on whitespace: the
test suite sets ``-XX:TieredStopAtLevel=1`` (a third less CPU to start, a quarter less idle;
its brokers carry little load), benchmarks leave it unset."""


def broker_flags(heap: str, log4j_config: Path, logs_dir: Path) -> list[str]:
    """JVM flags for a broker: fixed small heap, fast start, our log4j2 config, then
    ``$SPARK_KAFKA_SINK_BROKER_JAVA_OPTIONS``."""
    return [
        f"-Xms{_min_heap(heap)}", f"-Xmx{heap}", *_FAST_START,
        f"-Dlog4j2.configurationFile={log4j_config}",
        f"-Dkafka.logs.dir={logs_dir}",
        *os.environ.get(BROKER_JAVA_OPTIONS_ENV, "").split(),
    ]


def tool_flags(log4j_config: Path, logs_dir: Path) -> list[str]:
    """JVM flags for a short-lived Kafka tool such as ``kafka.tools.StorageTool``."""
    return [*_TOOL, f"-Dlog4j2.configurationFile={log4j_config}", f"-Dkafka.logs.dir={logs_dir}"]


def _min_heap(heap: str) -> str:
    """The initial heap: 128m, or ``heap`` itself when that is smaller."""
    units = {"k": 1 << 10, "m": 1 << 20, "g": 1 << 30}
    match = re.fullmatch(r"(\d+)([kmgKMG]?)", heap)
    if match is None:
        raise ValueError(f"heap must look like 384m or 1g, got {heap!r}")
    size = int(match.group(1)) * units.get(match.group(2).lower(), 1)
    return "128m" if size >= 128 << 20 else heap
