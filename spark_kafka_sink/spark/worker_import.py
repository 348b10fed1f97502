"""Spark's Python workers that cannot import this package: the failure recognised, the fix named.

A sink's tasks run in Spark's Python workers, which unpickle the sink's writer and so import
``spark_kafka_sink``. When the workers run a Python that lacks it (locally: ``PYSPARK_PYTHON``
unset, so Spark starts ``python3``, not the driver's virtualenv; on a cluster: the package not
installed on the executors), the first task fails and Spark raises its error around the worker's
``ModuleNotFoundError: No module named 'spark_kafka_sink'``, under some 80 lines of traceback.

:func:`worker_import_error` reads that out of a failed write's exception (its text and the
exceptions it chains) and returns a ``ConfigError`` that names the cause and the fixes, which
``KafkaSink`` raises chained to Spark's. It costs nothing before a write fails (no probe job).
Three causes (:class:`WorkerImportFailure`, ``kind``): the package missing (``"package"``), a
module or class of it missing (``"version"``: the executors run another version than the
driver), or a module it imports missing (``"dependency"``: a traceback through the package's own
files, e.g. numpy). Any other failure gives ``None`` and the caller re-raises Spark's error.

The Data Source's tasks and planning run in workers the application's code does not wrap, so
there :func:`local_workers_problem` looks ahead instead, for ``register``: with a local master
it starts the Python Spark will start (``SparkContext.pythonExec``) once and tries the import;
on a cluster or Spark Connect it cannot know and says nothing.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass
from typing import Any, Iterator

from ..errors import ConfigError
from ..version import __version__

__all__ = ["PACKAGE", "WorkerImportFailure", "find_worker_import_failure", "worker_import_error",
           "import_failure_message", "workers_python", "local_workers_problem"]

PACKAGE = "spark_kafka_sink"
PACKAGE_KIND, VERSION_KIND, DEPENDENCY_KIND = "package", "version", "dependency"
CHECK_MODULE = f"{PACKAGE}.producer.producer"
"""What :func:`local_workers_problem` imports: the package and the dependencies its tasks need
(pyspark aside: Spark puts its own on the workers' path)."""
CHECK_TIMEOUT_S = 30.0
"""How long :func:`local_workers_problem` lets the workers' Python try the import."""

_MISSING = re.compile(r"ModuleNotFoundError: No module named '([\w.]+)'")
_NO_ATTRIBUTE = re.compile(r"AttributeError: Can't get attribute '([\w.]+)' on <module '([\w.]+)'")
_OWN_FRAME = re.compile(r'File "[^"\n]*[\\/]' + PACKAGE + r'[\\/]')
_TRACEBACK = "Traceback (most recent call last):"
_MAX_CHAIN = 8


@dataclass(frozen=True)
class WorkerImportFailure:
    """What a worker could not import: ``missing`` (a module, or ``module.Class``) and ``kind``
    (:data:`PACKAGE_KIND`, :data:`VERSION_KIND` or :data:`DEPENDENCY_KIND`)."""

    missing: str
    kind: str


def find_worker_import_failure(text: str) -> WorkerImportFailure | None:
    """The worker import failure a Spark error's text reports, or ``None``."""
    for match in _MISSING.finditer(text):
        name = match.group(1)
        if name == PACKAGE:
            return WorkerImportFailure(name, PACKAGE_KIND)
        if name.startswith(PACKAGE + "."):
            return WorkerImportFailure(name, VERSION_KIND)
        start = text.rfind(_TRACEBACK, 0, match.start())
        if start >= 0 and _OWN_FRAME.search(text, start, match.start()):
            return WorkerImportFailure(name, DEPENDENCY_KIND)
    for match in _NO_ATTRIBUTE.finditer(text):
        if match.group(2) == PACKAGE or match.group(2).startswith(PACKAGE + "."):
            return WorkerImportFailure(f"{match.group(2)}.{match.group(1)}", VERSION_KIND)
    return None


def worker_import_error(error: BaseException, *, workers_python: str | None = None,
                        driver_python: str | None = None) -> ConfigError | None:
    """A ``ConfigError`` saying how to fix the worker import failure behind ``error`` (a failed
    write's exception), or ``None`` when it is not one. ``workers_python``: what Spark starts its
    workers with, when known (:func:`workers_python`); ``driver_python``: default this one."""
    for text in _texts(error):
        failure = find_worker_import_failure(text)
        if failure is not None:
            return ConfigError(import_failure_message(failure, workers_python,
                                                      driver_python or sys.executable))
    return None


def import_failure_message(failure: WorkerImportFailure, workers_python: str | None,
                           driver_python: str) -> str:
    """The cause and the fixes, in words a newcomer can act on."""
    wheel = f"spark_kafka_sink-{__version__}-py3-none-any.whl"
    if failure.kind == PACKAGE_KIND:
        what = (f"Spark's Python workers cannot import {PACKAGE} (ModuleNotFoundError: No module named "
                f"'{PACKAGE}'): they run a Python that does not have the package")
    elif failure.kind == VERSION_KIND:
        what = (f"Spark's Python workers have another version of {PACKAGE} than this driver's "
                f"{__version__}: theirs has no {failure.missing!r}")
    else:
        what = (f"Spark's Python workers import {PACKAGE} but not {failure.missing!r}, which it needs: "
                f"they run a Python where the package's dependencies are not installed")
    if workers_python and _resolved(workers_python) != _resolved(driver_python):
        unset = "" if "PYSPARK_PYTHON" in os.environ else " (PYSPARK_PYTHON is not set)"
        what += f". Spark starts them with {workers_python!r}{unset}, not with this driver's {driver_python}"
    return (f"{what}. Fix, on one machine (local master, a notebook): set PYSPARK_PYTHON to the "
            f"interpreter that has the package before the SparkSession starts, e.g. "
            f"os.environ['PYSPARK_PYTHON'] = sys.executable (here {driver_python}), or "
            f"--conf spark.pyspark.python=... with spark-submit; a running session keeps its "
            f"workers' Python: stop it and build it again. On a cluster: install the same package on "
            f"the driver and every executor, the wheel `make dist` builds ({wheel}): pip install it "
            f"on each node, or on Databricks add it as a cluster library (or %pip install it in the "
            f"notebook)")


def workers_python(session_or_frame: Any) -> str | None:
    """The Python Spark starts its workers with (``SparkContext.pythonExec``), from a
    SparkSession or a DataFrame; ``None`` where there is no SparkContext (Spark Connect)."""
    try:
        session = getattr(session_or_frame, "sparkSession", session_or_frame)
        return str(session.sparkContext.pythonExec)
    except Exception:  # noqa: BLE001 - Spark Connect raises (no sparkContext); best effort
        return None


def local_workers_problem(spark: Any) -> str | None:
    """With a local master: ``None`` when the Python Spark starts its workers with can import
    the package and its dependencies (the driver's own interpreter is taken as is; another one
    imports :data:`CHECK_MODULE` in a child process, with this process's environment), else what
    :func:`import_failure_message` says.
    ``None`` too for any other master and for Spark Connect (nothing to run here)."""
    try:
        context = spark.sparkContext
        master, python = str(context.master), str(context.pythonExec)
    except Exception:  # noqa: BLE001 - Spark Connect has no sparkContext
        return None
    if not master.startswith("local") or _resolved(python) == _resolved(sys.executable):
        return None
    executable = shutil.which(python) or python
    try:
        done = subprocess.run([executable, "-c", f"import {CHECK_MODULE}"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
                              timeout=CHECK_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as error:
        return import_failure_message(WorkerImportFailure(PACKAGE, PACKAGE_KIND), python,
                                      sys.executable) + f" (starting {python!r} failed: {error})"
    if done.returncode == 0:
        return None
    failure = find_worker_import_failure(done.stderr) or WorkerImportFailure(PACKAGE, PACKAGE_KIND)
    return import_failure_message(failure, python, sys.executable)


def _resolved(python: str) -> str:
    """An interpreter's path as given or found on PATH, not following links (a virtualenv's
    ``python`` links to its base interpreter, whose packages differ)."""
    return os.path.abspath(shutil.which(python) or python)


def _texts(error: BaseException) -> Iterator[str]:
    """The text of ``error`` and of the exceptions it chains (a few at most)."""
    seen: set[int] = set()
    pending: list[BaseException | None] = [error]
    while pending and len(seen) < _MAX_CHAIN:
        current = pending.pop()
        if current is None or id(current) in seen:
            continue
        seen.add(id(current))
        try:
            yield str(current)
        except Exception:  # noqa: BLE001 - a Py4J error asks the JVM, which may be gone
            pass
        pending.extend((current.__context__, current.__cause__))
