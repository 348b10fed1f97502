"""The SparkSession settings of the Spark tests (docs/ARCHITECTURE.md, "Spark in tests and local
runs"), shared by the ``spark`` fixture
and by the scripts the tests run in their own process (a different master, e.g. ``local[2,3]``).

``local[2]`` on loopback, no UI, two shuffle partitions, a 16 MB driver stack (stopping a query
during foreachBatch overflows the default) and the project's quiet log4j2 file. ``PYSPARK_PYTHON``
must be this interpreter (workers need pyarrow and this package) and ``SPARK_LOCAL_IP`` loopback:
:data:`SPARK_ENV` holds both, to be set before the JVM starts.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from spark_kafka_sink.spark import cds as spark_cds

ROOT = Path(__file__).resolve().parents[2]
CONF = ROOT / "conf"

QUICK_START_JAVA_OPTIONS = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"
"""For a driver JVM that lives for one short job (a test's own driver process): the C1 compiler
only and the serial collector, which spend far less CPU starting up (a ``local[2]`` session and a
small job: about a third less wall time on the 2-core machine, where test processes compete for
the cores). Never for benchmarks: C2 compiles Spark's own hot code for long runs."""



def short_job_java_options() -> str:
    """Java options for a Spark JVM of a test that lives for one short job (a test's own driver, a
    standalone daemon or executor, the Connect server): :data:`QUICK_START_JAVA_OPTIONS` and
    Spark's class-data archive when there is one (``spark_kafka_sink.spark.cds``)."""
    return f"{QUICK_START_JAVA_OPTIONS} {spark_cds.java_options()}".strip()


SPARK_ENV = {"PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
             "SPARK_LOCAL_IP": "127.0.0.1"}


def build_session(master: str, warehouse: str, app_name: str = "spark-kafka-sink-tests", *,
                  quick_start: bool = False):
    """A SparkSession on ``master`` (``local[2]``, or ``local[2,3]`` to allow task retries) with
    the tests' settings; ``warehouse`` is a temporary directory. The JVM maps Spark's class-data
    archive when there is one; ``quick_start`` for a driver process that runs one short job
    (:func:`short_job_java_options`)."""
    from pyspark.sql import SparkSession

    java_options = f"-Xss16m -Dlog4j2.configurationFile=file:{CONF / 'log4j2.properties'}"
    extra = short_job_java_options() if quick_start else spark_cds.java_options()
    if extra:
        java_options += f" {extra}"
    session = (SparkSession.builder
               .master(master)
               .appName(app_name)
               .config("spark.driver.bindAddress", "127.0.0.1")
               .config("spark.driver.host", "127.0.0.1")
               .config("spark.ui.enabled", "false")
               .config("spark.ui.showConsoleProgress", "false")
               .config("spark.sql.shuffle.partitions", "2")
               .config("spark.driver.memory", "768m")
               .config("spark.driver.extraJavaOptions", java_options)
               .config("spark.python.worker.reuse", "true")
               .config("spark.sql.warehouse.dir", warehouse)
               .getOrCreate())
    session.sparkContext.setLogLevel("WARN")
    return session


def same_minor_versions(version: str, *, later: bool = True) -> list[str]:
    """``version`` first, then the earlier releases of its minor, newest first, then (with
    ``later``) the later ones (3.4.1: 3.4.1, 3.4.0, 3.4.2, 3.4.3, ...): the order to try a Spark
    artifact of the running Spark's line in, when a repository does not serve every release."""
    major, minor, patch = version_parts(version)
    earlier = [f"{major}.{minor}.{p}" for p in range(patch - 1, -1, -1)]
    after = [f"{major}.{minor}.{p}" for p in range(patch + 1, patch + 10)] if later else []
    return [version, *earlier, *after]


def version_parts(version: str) -> tuple[int, int, int]:
    """``(major, minor, patch)`` of a Spark version (``4.1.0.dev2`` -> ``(4, 1, 0)``)."""
    major, minor, patch = (int("".join(c for c in part if c.isdigit()) or 0)
                           for part in (version.split(".") + ["0", "0"])[:3])
    return major, minor, patch


def run_script(module: str, *args: str, timeout_s: float = 240) -> tuple[int, str]:
    """Run ``python -m module args...`` from the repository root with :data:`SPARK_ENV` set (a
    test's own driver process); its exit code and output, or ``AssertionError`` with the output
    when it does not finish in ``timeout_s`` (it is killed)."""
    env = {**os.environ, **SPARK_ENV, "PYTHONPATH": os.pathsep.join(filter(None, [
        str(ROOT), os.environ.get("PYTHONPATH")]))}
    with subprocess.Popen([sys.executable, "-m", module, *args], cwd=ROOT, env=env,
                          stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as job:
        try:
            output, _ = job.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            job.kill()
            output, _ = job.communicate()
            raise AssertionError(f"{module} did not finish in {timeout_s:.0f} s:\n{output[-4000:]}")
    return job.returncode, output
