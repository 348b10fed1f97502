"""Spark's class-data archive (AppCDS) for short-lived Spark JVMs: the classes Spark loads and
verifies at every start are mapped from one file instead, so a ``local[2]`` session and a small
job start faster (the figure is in bench/README.md, "Figures behind design choices").

The same mechanism as the broker's (:mod:`spark_kafka_sink.embedded.cds`), for the JVMs of one
pyspark installation (its ``jars/``) and one JDK build: a single archive, in
``<cache>/spark-cds/<key>/driver-<java key>.jsa``. :func:`ensure_archive` dumps it once, by running a
small job that loads what the sink's jobs load (a batch and a micro-batch through ``mapInArrow``)
in a child process with ``-XX:ArchiveClassesAtExit``; callers at the same time wait on a file lock.
:func:`java_options` gives the flags for any Spark JVM of the same installation (a driver, an
executor, a standalone daemon): the archive when there is one, nothing otherwise. A JVM whose
class path differs from the dump's ignores the archive, silently (``-Xshare:auto`` and the CDS log
off): ``--jars`` and ``--packages`` do not count, Spark loads those with a class loader of its own.

``SPARK_KAFKA_SINK_CDS=0`` turns it off, as for the broker.
"""

from __future__ import annotations

import argparse
import fcntl
import hashlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
from pathlib import Path

from ..embedded import cds
from ..embedded.jars import default_cache_root

__all__ = ["archive_plan", "ensure_archive", "java_options", "kill_group", "start_ensuring"]

ROLE = "driver"
QUIET = ("-Xshare:auto", "-Xlog:cds*=off")
"""The archive is an optimisation: a JVM that cannot map it says nothing and starts without it."""
QUICK_START = ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC")
"""For the JVM that dumps: it runs one short job (the archive serves any compiler and collector)."""

DUMP_TIMEOUT_S = 300.0
MODULE = "spark_kafka_sink.spark.cds"
"""This module's name, to run it with ``python -m`` (as ``__main__``, ``__name__`` is not it)."""


def spark_java() -> str:
    """The ``java`` that pyspark's ``spark-class`` runs: ``$JAVA_HOME/bin/java``, else the one on PATH."""
    home = os.environ.get("JAVA_HOME")
    if home:
        return str(Path(home) / "bin" / "java")
    return shutil.which("java") or "java"


def archive_directory(cache_root: Path | None = None) -> Path:
    """Where this pyspark installation's archives live: keyed by its ``jars/`` directory (path and
    modification time, so a reinstalled pyspark gets a new one)."""
    import pyspark

    jars = Path(pyspark.__file__).resolve().parent / "jars"
    try:
        ident = f"{jars.resolve()}:{jars.stat().st_mtime_ns}"
    except OSError:
        ident = str(jars)
    key = hashlib.sha1(ident.encode()).hexdigest()[:12]
    return (cache_root or default_cache_root()) / "spark-cds" / key


def archive_plan(*, may_create: bool, cache_root: Path | None = None) -> cds.CdsPlan:
    """The flags for one Spark JVM: map the archive if there is one, else dump one at exit if
    ``may_create`` (the caller then :func:`~spark_kafka_sink.embedded.cds.promote`\\ s it)."""
    return cds.plan_in(archive_directory(cache_root), spark_java(), ROLE, may_create=may_create)


def java_options(cache_root: Path | None = None) -> str:
    """Java options for a Spark JVM of this installation: the archive's, or ``""`` without one."""
    plan = archive_plan(may_create=False, cache_root=cache_root)
    return " ".join((*plan.flags, *QUIET)) if plan.flags else ""


def ensure_archive(cache_root: Path | None = None, *, timeout_s: float = DUMP_TIMEOUT_S) -> Path | None:
    """The archive's path, dumping it first if there is none (once: concurrent callers wait on a
    lock). ``None`` when archives are off or the dump failed (Spark then starts without one)."""
    if not cds.enabled():
        return None
    directory = archive_directory(cache_root)
    directory.mkdir(parents=True, exist_ok=True)
    with open(directory / ".lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        plan = archive_plan(may_create=True, cache_root=cache_root)
        if plan.pending is None:  # there is one already
            return _path_of(plan)
        options = " ".join((*plan.flags, *QUIET, *QUICK_START))
        env = {**os.environ, "PYSPARK_PYTHON": sys.executable, "PYSPARK_DRIVER_PYTHON": sys.executable,
               "SPARK_LOCAL_IP": "127.0.0.1"}
        job = subprocess.Popen([sys.executable, "-m", MODULE, "--load-classes", options], env=env,
                               stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                               start_new_session=True)
        try:
            clean = job.wait(timeout=timeout_s) == 0
        except subprocess.TimeoutExpired:
            kill_group(job)
            clean = False
        cds.promote(plan, clean_exit=clean)
        return plan.final if plan.final is not None and plan.final.is_file() else None


def start_ensuring(cache_root: Path | None = None) -> subprocess.Popen | None:
    """:func:`ensure_archive` in a background process (``None`` when there is nothing to do), so
    that the dump overlaps other work; callers of :func:`ensure_archive` wait for it on the lock.
    The caller reaps the process (:func:`kill_group` ends it and its children)."""
    if not cds.enabled() or archive_plan(may_create=False, cache_root=cache_root).flags:
        return None
    argv = [sys.executable, "-m", MODULE, "--ensure"]
    if cache_root is not None:
        argv += ["--cache-root", str(cache_root)]
    return subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                            start_new_session=True)


def kill_group(process: subprocess.Popen) -> None:
    """End ``process`` (started by this module, in a session of its own) and everything it
    started, by its process group id; then reap it."""
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _path_of(plan: cds.CdsPlan) -> Path:
    return Path(plan.flags[0].split("=", 1)[1])


def _load_classes(java_options: str) -> None:
    """A local[2] session running what the sink's jobs run: a batch through ``mapInArrow`` and
    two micro-batches of a JSON file stream through ``foreachBatch``; then a clean stop, at which
    the JVM writes the archive."""
    from pyspark.sql import SparkSession

    with tempfile.TemporaryDirectory(prefix="spark-cds-") as work:
        source = Path(work) / "source"
        source.mkdir()
        for part in range(2):
            (source / f"part-{part}.json").write_text(
                "".join(f'{{"id": {i}, "name": "n{i}"}}\n' for i in range(part * 100, part * 100 + 100)))
        session = (SparkSession.builder.master("local[2]").appName("spark-cds")
                   .config("spark.driver.bindAddress", "127.0.0.1").config("spark.driver.host", "127.0.0.1")
                   .config("spark.ui.enabled", "false").config("spark.sql.shuffle.partitions", "2")
                   .config("spark.driver.extraJavaOptions", f"-Xss16m {java_options}")
                   .config("spark.sql.warehouse.dir", str(Path(work) / "warehouse")).getOrCreate())
        try:
            def same(batches):
                yield from batches

            session.range(1000, numPartitions=2).mapInArrow(same, "id long").count()
            seen = []
            query = (session.readStream.schema("id LONG, name STRING").option("maxFilesPerTrigger", 1)
                     .json(str(source)).writeStream.trigger(availableNow=True)
                     .option("checkpointLocation", str(Path(work) / "checkpoint"))
                     .foreachBatch(lambda df, _: seen.append(df.mapInArrow(same, df.schema).count()))
                     .start())
            query.awaitTermination(DUMP_TIMEOUT_S)
            if seen != [100, 100]:
                raise RuntimeError(f"the class-loading job saw {seen} rows per micro-batch, not [100, 100]")
        finally:
            gateway = session.sparkContext._gateway.proc  # the JVM (spark-class execs it)
            session.stop()
            # the JVM writes the archive as it exits, which it does when its stdin closes: wait
            # for that, so the caller promotes a complete file
            gateway.stdin.close()
            gateway.wait(timeout=DUMP_TIMEOUT_S)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Dump Spark's class-data archive unless there is one")
    action = parser.add_mutually_exclusive_group(required=True)
    action.add_argument("--ensure", action="store_true", help="dump the archive unless there is one")
    action.add_argument("--load-classes", metavar="JAVA_OPTIONS",
                        help="(internal) run the job whose JVM dumps the archive, with these options")
    parser.add_argument("--cache-root", type=Path)
    args = parser.parse_args(argv)
    if args.load_classes is not None:
        _load_classes(args.load_classes)
        return 0
    return 0 if ensure_archive(args.cache_root) is not None or not cds.enabled() else 1


if __name__ == "__main__":
    sys.exit(main())
