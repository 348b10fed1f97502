"""Application class-data sharing (AppCDS) archives, so the broker JVM starts faster (the figure
is in bench/README.md, "Figures behind design choices").

Java 17 can dump the classes a run loaded into a dynamic archive at exit
(``-XX:ArchiveClassesAtExit``) and map them at the next start (``-XX:SharedArchiveFile``). The
archive belongs to one jar directory and one JDK build, so it lives next to the jars, named by a
key of the ``java`` binary::

    <cache>/kafka-<version>/cds/<role>-<java key>.jsa

The first run of a role (``broker`` or ``tool``) with no archive dumps one into a private temporary
file; :func:`promote` renames it into place only after a clean exit (a JVM killed mid-dump leaves
a partial file, which is deleted). Concurrent first runs each dump their own file; the rename is
atomic, so the last one wins. A stale or foreign archive is harmless: with ``-Xshare:auto`` the JVM
prints a warning into the node log and runs without it.

``SPARK_KAFKA_SINK_CDS=0`` turns the whole mechanism off.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .jars import KafkaJars


@dataclass(frozen=True)
class CdsPlan:
    """The JVM flags for one run, and the temporary archive to promote after a clean exit."""

    flags: tuple[str, ...]
    pending: Path | None = None
    final: Path | None = None


def enabled() -> bool:
    return os.environ.get("SPARK_KAFKA_SINK_CDS", "1").strip().lower() not in ("0", "false", "no", "off")


def plan(jars: KafkaJars, java: str, role: str, *, may_create: bool = True) -> CdsPlan:
    """Use the archive for ``role`` if there is one; else dump one at exit if ``may_create``."""
    return plan_in(jars.directory / "cds", java, role, may_create=may_create)


def plan_in(directory: Path, java: str, role: str, *, may_create: bool = True) -> CdsPlan:
    """:func:`plan` for the archives kept in ``directory`` (any JVM application's, e.g. Spark's)."""
    if not enabled():
        return CdsPlan(())
    final = directory / f"{role}-{java_key(java)}.jsa"
    if final.is_file():
        return CdsPlan((f"-XX:SharedArchiveFile={final}",))
    if not may_create:
        return CdsPlan(())
    final.parent.mkdir(parents=True, exist_ok=True)
    _drop_stale(final.parent)
    pending = final.with_name(f"{final.stem}.{os.getpid()}.{id(final):x}.tmp")
    return CdsPlan((f"-XX:ArchiveClassesAtExit={pending}",), pending, final)


def promote(cds: CdsPlan, clean_exit: bool) -> None:
    """After the JVM exited: move a dumped archive into place, or drop a partial one."""
    if cds.pending is None or cds.final is None or not cds.pending.exists():
        return
    try:
        if clean_exit and cds.pending.stat().st_size > 0:
            os.replace(cds.pending, cds.final)
        else:
            cds.pending.unlink()
    except OSError:
        pass


def _drop_stale(directory: Path, age_s: float = 3600.0) -> None:
    """Remove temporary archives left by JVMs killed before a promotion (older than an hour)."""
    now = time.time()
    for leftover in directory.glob("*.tmp"):
        try:
            if now - leftover.stat().st_mtime > age_s:
                leftover.unlink()
        except OSError:
            pass


def java_key(java: str) -> str:
    """A short key for one JDK build: its real path, size and modification time."""
    real = os.path.realpath(java)
    try:
        stat = os.stat(real)
        ident = f"{real}:{stat.st_size}:{stat.st_mtime_ns}"
    except OSError:
        ident = real
    return hashlib.sha1(ident.encode()).hexdigest()[:12]
