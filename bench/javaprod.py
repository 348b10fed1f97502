"""The Java producer peer: ``bench/jvm/Prod.java`` compiled against our Kafka jars.

It is compiled with ``javac`` against the kafka-clients jar that the embedded
broker already resolved (``resolve_kafka_jars().directory``), so nothing is downloaded. Classes
go to ``bench/jvm/build/`` and are rebuilt when the source is newer.
"""

from __future__ import annotations

import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from spark_kafka_sink.embedded import resolve_kafka_jars

REPO = Path(__file__).resolve().parents[1]
SOURCE = REPO / "bench" / "jvm" / "Prod.java"
BUILD = REPO / "bench" / "jvm" / "build"
# kafka-clients and what it loads at run time; no slf4j binding, so the client logs nothing.
_RUNTIME_JARS = ("kafka-clients-", "lz4-java-", "snappy-java-", "zstd-jni-", "slf4j-api-")
_RESULT = re.compile(r"in ([0-9.]+) s = ([0-9.]+) msg/s")
_ACKED = re.compile(r"acked=(\d+) errors=(\d+)")
_CPU = re.compile(r"^cpu ([0-9.]+) s$", re.MULTILINE)


class JavaUnavailable(Exception):
    """No JDK, or no kafka-clients jar to compile Prod.java against."""


def classpath() -> str:
    directory = resolve_kafka_jars().directory
    jars = sorted(p for p in directory.glob("*.jar") if p.name.startswith(_RUNTIME_JARS))
    if not any(p.name.startswith("kafka-clients-") for p in jars):
        raise JavaUnavailable(f"no kafka-clients jar in {directory}")
    return ":".join(str(p) for p in jars)


def build() -> Path:
    """Compile Prod.java into ``BUILD`` unless the class is up to date; the class directory."""
    if not SOURCE.is_file():
        raise JavaUnavailable(f"{SOURCE} not found")
    javac = shutil.which("javac")
    if javac is None:
        raise JavaUnavailable("javac not found (install a JDK 17+)")
    target = BUILD / "Prod.class"
    if target.is_file() and target.stat().st_mtime >= SOURCE.stat().st_mtime:
        return BUILD
    BUILD.mkdir(parents=True, exist_ok=True)
    out = subprocess.run([javac, "-nowarn", "-d", str(BUILD), "-cp", classpath(), str(SOURCE)],
                         capture_output=True, text=True, timeout=120)
    if out.returncode != 0:
        raise JavaUnavailable(f"javac failed ({out.returncode}):\n{out.stderr[-2000:]}")
    return BUILD


def command(bootstrap: str, topic: str, records: int, value_size: int) -> list[str]:
    """``java ... Prod BOOTSTRAP TOPIC N SIZE none`` (acks=all, linger 5 ms, batch 256 KiB, idempotent)."""
    java = shutil.which("java")
    if java is None:
        raise JavaUnavailable("java not found")
    return [java, "-Xmx512m", "-cp", f"{build()}:{classpath()}", "Prod", bootstrap, topic,
            str(records), str(value_size), "none"]


@dataclass(frozen=True)
class ProdResult:
    """What Prod printed: its send→flush seconds and the JVM's CPU seconds over the same span
    (every thread, the JIT and GC too; start-up excluded), ``None`` when missing; its
    acked/errors line."""

    seconds: float | None
    cpu_seconds: float | None
    detail: str


def parse(stdout: str) -> ProdResult:
    """Prod's figures from its standard output."""
    match = _RESULT.search(stdout)
    cpu = _CPU.search(stdout)
    acked = _ACKED.search(stdout)
    detail = f"acked={acked.group(1)} errors={acked.group(2)}" if acked else ""
    return ProdResult(float(match.group(1)) if match else None,
                      float(cpu.group(1)) if cpu else None, detail)
