"""Finding a Java runtime (17+ for Kafka, newer for other tools) and the JVM flags the embedded
processes run with."""

from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from collections.abc import Sequence
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


JVM_DIRECTORIES = ("/usr/lib/jvm", "/usr/java", "/Library/Java/JavaVirtualMachines")
"""Where systems install JDKs side by side: Debian, Ubuntu, Fedora and RHEL (``/usr/lib/jvm``),
Oracle's packages (``/usr/java``), macOS (``<dir>/<jdk>/Contents/Home``)."""


def find_java_at_least(minimum: int, override_env: str, purpose: str,
                       jvm_directories: Sequence[str | os.PathLike] = JVM_DIRECTORIES) -> str:
    """A ``java`` of feature version ``minimum`` or later, to run ``purpose`` (named in errors).

    Looked for in order, the first that is new enough winning:

    1. ``$<override_env>``: a ``java`` executable or a Java home. When set it is the only answer:
       an unusable one is an error naming it, never skipped.
    2. ``$JAVA_HOME/bin/java``.
    3. ``java`` on ``PATH``.
    4. Every JDK in ``jvm_directories`` (``<dir>/<jdk>/bin/java``), the newest version first.

    Raises :class:`JavaNotFoundError` naming every place looked at and what was found there.
    """
    need = f"{purpose} needs Java {minimum} or later"
    hint = (f"Install one (e.g. a distribution's openjdk-{minimum}-jre-headless or newer, "
            f"`brew install openjdk@{minimum}` on macOS) and set JAVA_HOME or {override_env} to it.")
    override = os.environ.get(override_env, "").strip()
    if override:
        java = _java_of(Path(override).expanduser())
        found = _version_or_reason(java)
        if isinstance(found, int) and found >= minimum:
            return java
        raise JavaNotFoundError(f"{need}, but {override_env}={override!r} gives {_describe(java, found)}. "
                                f"Point {override_env} at a Java {minimum}+ `java` or its home, or unset it.")
    looked = [f"{override_env}: not set"]
    home = os.environ.get("JAVA_HOME", "").strip()
    candidates: list[tuple[str, str]] = []  # (where, java)
    if home:
        candidates.append((f"JAVA_HOME={home}", str(Path(home) / "bin" / "java")))
    else:
        looked.append("JAVA_HOME: not set")
    on_path = shutil.which("java")
    if on_path:
        candidates.append(("PATH", on_path))
    else:
        looked.append("PATH: no `java`")
    for where, java in candidates:
        found = _version_or_reason(java)
        if isinstance(found, int) and found >= minimum:
            return java
        looked.append(f"{where}: {_describe(java, found)}")
    best: tuple[int, str] | None = None
    seen = {os.path.realpath(java) for _, java in candidates}
    for directory in map(Path, jvm_directories):
        if not directory.is_dir():
            looked.append(f"{directory}: no such directory")
            continue
        jdks = [java for jdk in sorted(directory.iterdir(), key=lambda d: (d.is_symlink(), d.name))
                for java in (jdk / "bin" / "java", jdk / "Contents" / "Home" / "bin" / "java")
                if java.is_file()]
        if not jdks:
            looked.append(f"{directory}: no JDK in it")
        for java in jdks:
            real = os.path.realpath(java)
            if real in seen:  # an alias (Debian's java-1.17.0-openjdk-amd64), real ones first
                continue
            seen.add(real)
            found = _version_or_reason(str(java))
            looked.append(f"{java}: {_describe(str(java), found, with_path=False)}")
            if isinstance(found, int) and found >= minimum and (best is None or found > best[0]):
                best = (found, str(java))
    if best is not None:
        return best[1]
    places = "\n".join(f"  - {line}" for line in looked)
    raise JavaNotFoundError(f"{need}; none found. Looked at:\n{places}\n{hint}")


def _java_of(path: Path) -> str:
    """``path`` itself when it is a file, else the ``bin/java`` of the Java home it names."""
    return str(path / "bin" / "java") if path.is_dir() else str(path)


def _version_or_reason(java: str) -> int | str:
    """The feature version of ``java``, or why it has none."""
    if not os.path.isfile(java):
        return "no such file"
    if not os.access(java, os.X_OK):
        return "not executable"
    try:
        return java_version(java)
    except JavaNotFoundError as exc:  # "<java> -version failed ...": the path is said once already
        return str(exc).removesuffix(f". {INSTALL_HINT}").removeprefix(f"{java} ")


def _describe(java: str, found: int | str, with_path: bool = True) -> str:
    what = f"Java {found}" if isinstance(found, int) else found
    return f"{java}: {what}" if with_path else what


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


def service_flags(heap: str, extra: Sequence[str] = ()) -> list[str]:
    """JVM flags for a small service that starts, answers a few requests and stops (the testing
    kit's schema registry): a fixed small heap, the fast-start flags and the C1 compiler only
    (it halves such a service's start), then ``extra``."""
    return [f"-Xms{_min_heap(heap)}", f"-Xmx{heap}", *_FAST_START, "-XX:TieredStopAtLevel=1", *extra]


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
