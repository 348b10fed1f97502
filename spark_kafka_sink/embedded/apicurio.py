"""Apicurio Registry, the testing kit's schema registry, from Maven Central, once, into the cache.

Apicurio Registry 3 ships as one Quarkus application, ``io.apicurio:apicurio-registry-app``,
classifier ``all``, type ``tar.gz``, run with ``java -jar quarkus-run.jar`` on Java 21 or later
(:func:`find_registry_java`). It lives in the cache root of the Kafka jars (``jars.py``)::

    <root>/apicurio-registry-<version>/quarkus-run.jar   the unpacked application (lib/, app/, ...)
    <root>/apicurio-registry-<version>/.complete          marker: written last, after a whole unpack
    <root>/apicurio-registry-<version>/cds/               its AppCDS archives (cds.py)
    <root>/apicurio-registry-<version>.lock               fcntl lock held while resolving

A directory with a valid marker is used as is, with no network. Otherwise, under the lock (two
processes never fetch at once; the second finds the first one's result), the archive is fetched
into a download directory beside it, by Maven (``mvn dependency:copy``, through Maven's own
settings) or, without ``mvn``, by the Ivy jar pyspark ships; then unpacked (every member must be
a file or a directory inside the target) and deleted.
"""

from __future__ import annotations

import json
import os
import shutil
import tarfile
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import JarResolutionError
from .jars import check_method, find_ivy_jar, maven, resolve_cached, run_resolver
from .java import find_java, find_java_at_least

DEFAULT_APICURIO_VERSION = "3.3.3"
MIN_REGISTRY_JAVA = 21

REGISTRY_JAVA_ENV = "SPARK_KAFKA_SINK_REGISTRY_JAVA"
"""A ``java`` executable or Java home (21+) for the registry, looked at before ``JAVA_HOME``."""

GROUP = "io.apicurio"
ARTIFACT = "apicurio-registry-app"
CLASSIFIER = "all"
PACKAGING = "tar.gz"
_MARKER = ".complete"


@dataclass(frozen=True)
class ApicurioApp:
    """An unpacked Apicurio Registry: its directory and how it was fetched."""

    version: str
    directory: Path
    method: str

    @property
    def run_jar(self) -> Path:
        """``quarkus-run.jar``, what ``java -jar`` starts."""
        return self.directory / "quarkus-run.jar"


def coordinates(version: str) -> str:
    """The Maven coordinates ``group:artifact:version:type:classifier`` of the archive."""
    return f"{GROUP}:{ARTIFACT}:{version}:{PACKAGING}:{CLASSIFIER}"


def archive_name(version: str) -> str:
    """The archive's file name in the Maven repository layout."""
    return f"{ARTIFACT}-{version}-{CLASSIFIER}.{PACKAGING}"


def find_registry_java() -> str:
    """A Java 21+ for the registry (``$SPARK_KAFKA_SINK_REGISTRY_JAVA``, ``JAVA_HOME``, ``PATH``,
    the system's JVM directories); :class:`JavaNotFoundError` naming every place looked at."""
    return find_java_at_least(MIN_REGISTRY_JAVA, REGISTRY_JAVA_ENV, "Apicurio Registry")


def resolve_apicurio(version: str = DEFAULT_APICURIO_VERSION, cache_dir: str | os.PathLike | None = None,
                     *, method: str = "auto", java: str | None = None) -> ApicurioApp:
    """Apicurio Registry ``version``, unpacked in the cache, fetching it first if the cache lacks it.

    ``cache_dir`` is the cache root (default: the Kafka jars'). ``method`` is ``"auto"`` (Maven if
    ``mvn`` is on PATH, else pyspark's Ivy), ``"maven"`` or ``"ivy"``; ``java`` runs them (any
    17+). Raises :class:`JarResolutionError` with the tail of the tool's output when it fails.
    """
    check_method(method)

    def resolve(target: Path) -> ApicurioApp:
        how = ("maven" if shutil.which("mvn") else "ivy") if method == "auto" else method
        return _resolve(version, target.parent, target, how, java or find_java())

    return resolve_cached(cache_dir, f"apicurio-registry-{version}",
                          lambda target: read_marker(target, version), resolve)


def _resolve(version: str, root: Path, target: Path, method: str, java: str) -> ApicurioApp:
    if target.exists():
        shutil.rmtree(target)
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix=f"apicurio-registry-{version}.", suffix=".download",
                                     dir=root) as download:
        fetch = _fetch_with_maven if method == "maven" else _fetch_with_ivy
        fetch(version, Path(download), java)
        archive = Path(download) / archive_name(version)
        if not archive.is_file():
            raise JarResolutionError(f"{method} finished but fetched no {archive.name}")
        files = unpack(archive, target)
    if not (target / "quarkus-run.jar").is_file():
        raise JarResolutionError(f"{archive_name(version)} holds no quarkus-run.jar ({files} files)")
    marker = {"version": version, "method": method, "files": files,
              "seconds": round(time.monotonic() - started, 1)}
    (target / _MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return ApicurioApp(version, target, method)


def read_marker(target: Path, version: str) -> ApicurioApp | None:
    """The cached registry when its marker names ``version`` and ``quarkus-run.jar`` is there."""
    try:
        marker = json.loads((target / _MARKER).read_text())
    except (OSError, ValueError):
        return None
    if marker.get("version") != version or not (target / "quarkus-run.jar").is_file():
        return None
    return ApicurioApp(version, target, marker.get("method", "?"))


def unpack(archive: Path, target: Path) -> int:
    """Unpack the ``tar.gz`` ``archive`` into ``target``; the number of files.

    Refuses (:class:`JarResolutionError`) an archive with a link, a device, an absolute path or a
    ``..``: only files and directories inside ``target``.
    """
    try:
        with tarfile.open(archive, "r:gz") as tar:
            members = tar.getmembers()
            for member in members:
                parts = Path(member.name).parts
                if not (member.isfile() or member.isdir()) or Path(member.name).is_absolute() or ".." in parts:
                    raise JarResolutionError(
                        f"{archive.name}: refusing member {member.name!r} (only files and directories "
                        f"inside the target are unpacked)")
            target.mkdir(parents=True, exist_ok=True)
            options = {"filter": "data"} if hasattr(tarfile, "data_filter") else {}
            tar.extractall(target, members=members, **options)
    except (OSError, tarfile.TarError) as exc:
        raise JarResolutionError(f"could not unpack {archive.name} into {target}: {exc}") from exc
    return sum(1 for member in members if member.isfile())


def _fetch_with_maven(version: str, into: Path, java: str) -> None:
    mvn, env = maven(java)
    run_resolver("Maven", [mvn, "-B", "-ntp", "dependency:copy", f"-Dartifact={coordinates(version)}",
                           f"-DoutputDirectory={into}"], env, str(into), f"Apicurio Registry {version}")


def _fetch_with_ivy(version: str, into: Path, java: str) -> None:
    ivy_jar = find_ivy_jar()
    if ivy_jar is None:
        raise JarResolutionError(
            "Cannot fetch Apicurio Registry: `mvn` is not on PATH and pyspark (whose jars/ directory "
            "ships the Ivy jar) is not installed. Install Maven or `pip install pyspark`.")
    ivy_xml = into / "ivy.xml"
    ivy_xml.write_text(registry_ivy_module(version))
    pattern = f"{into}/[artifact]-[revision]-[classifier].[ext]"
    run_resolver("Ivy", [java, "-jar", str(ivy_jar), "-ivy", str(ivy_xml), "-confs", "default",
                         "-types", PACKAGING, "-retrieve", pattern], None, str(into),
                 f"Apicurio Registry {version}")


def registry_ivy_module(version: str) -> str:
    """An ``ivy.xml`` naming the archive alone (classifier ``all``, type ``tar.gz``, no dependencies)."""
    return "\n".join([
        '<ivy-module version="2.0" xmlns:m="http://ant.apache.org/ivy/maven">',
        '  <info organisation="spark-kafka-sink" module="apicurio-registry"/>',
        '  <configurations><conf name="default"/></configurations>',
        "  <dependencies>",
        f'    <dependency org="{GROUP}" name="{ARTIFACT}" rev="{version}" transitive="false" '
        'conf="default-&gt;default">',
        f'      <artifact name="{ARTIFACT}" type="{PACKAGING}" ext="{PACKAGING}" m:classifier="{CLASSIFIER}"/>',
        "    </dependency>",
        "  </dependencies>",
        "</ivy-module>", ""])
