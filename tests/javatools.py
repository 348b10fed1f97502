"""Compiling and running the small Java helpers of the tests (``javac`` into pytest's tmp dir).

Needs a JDK (``javac`` on PATH) and the resolved Kafka jars; missing either FAILS the test (the
Java comparisons must really run), it never skips.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

import pytest

from spark_kafka_sink.embedded.jars import resolve_kafka_jars


@dataclass(frozen=True)
class JavaProgram:
    """A compiled helper: ``run(args)`` runs its main class on the Kafka classpath."""

    java: str
    classpath: str
    main_class: str

    def run(self, args: list[str] = (), *, stdin: str | None = None, timeout_s: float = 120) -> str:
        """The program's stdout; the test fails (with stderr's tail) on a non-zero exit."""
        cmd = [self.java, "-XX:TieredStopAtLevel=1", "-Xshare:auto", "-cp", self.classpath,
               self.main_class, *args]
        return _run(cmd, self.main_class, stdin=stdin, timeout_s=timeout_s)


def compile_java(source: Path, classes_dir: Path) -> JavaProgram:
    """``javac`` ``source`` against the Kafka jars into ``classes_dir``; its main class is the
    file's name."""
    javac = shutil.which("javac")
    if javac is None:
        pytest.fail(f"javac is not on PATH: this test compiles {source.name}. Install a JDK "
                    "17+ (e.g. `apt-get install openjdk-17-jdk-headless`).")
    java = str(Path(javac).resolve().with_name("java"))
    classpath = resolve_kafka_jars().classpath
    _run([javac, "-d", str(classes_dir), "-cp", classpath, str(source)], f"javac {source.name}")
    return JavaProgram(java, f"{classpath}{os.pathsep}{classes_dir}", source.stem)


def _run(args: list[str], what: str, *, stdin: str | None = None, timeout_s: float = 120) -> str:
    result = subprocess.run(args, input=stdin, capture_output=True, text=True, timeout=timeout_s)
    if result.returncode != 0:
        pytest.fail(f"{what} failed (exit {result.returncode}):\n{result.stderr[-4000:]}")
    return result.stdout
