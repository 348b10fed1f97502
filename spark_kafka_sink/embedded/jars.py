"""Resolving the Apache Kafka broker jars from Maven Central, once, into a cache directory.

Layout of the cache (root: argument, else ``$SPARK_KAFKA_SINK_CACHE``, else
``~/.cache/spark-kafka-sink``)::

    <root>/kafka-<version>/*.jar        the runtime classpath of the broker
    <root>/kafka-<version>/.complete    marker: written last, only after a complete resolution
    <root>/kafka-<version>.lock         fcntl lock held while resolving

A directory with a valid marker is used as is, with no network. Otherwise, under the lock (so two
processes, e.g. pytest-xdist workers or two terminals, never resolve at once, and the second one
finds the first one's result), the directory is emptied and filled by:

1. Maven (``mvn`` on PATH): ``dependency:copy-dependencies`` on the ``pom.xml`` next to this module,
   with ``-Dkafka.version=<version>``.
2. Ivy (no ``mvn``): the ``ivy-*.jar`` that pyspark ships in ``pyspark/jars``, driven by an
   ``ivy.xml`` generated from the same pom's dependency list; only ``jar``/``bundle`` artifacts of
   the ``default`` configuration (no sources, javadoc or test-jars).
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

from .errors import BrokerLaunchError, JarResolutionError, tail
from .java import find_java

T = TypeVar("T")

DEFAULT_KAFKA_VERSION = "4.1.1"

_POM = Path(__file__).with_name("pom.xml")
_MARKER = ".complete"
_RESOLVE_TIMEOUT_S = 900.0
_POM_NS = {"m": "http://maven.apache.org/POM/4.0.0"}


@dataclass(frozen=True)
class KafkaJars:
    """A resolved Kafka classpath: the directory, its jars, and how it was resolved."""

    version: str
    directory: Path
    jars: tuple[str, ...]
    method: str

    @property
    def classpath(self) -> str:
        """A ``-cp`` value naming every jar of the directory (the JVM's ``dir/*`` form)."""
        return str(self.directory / "*")


def default_cache_root() -> Path:
    """``$SPARK_KAFKA_SINK_CACHE``, else ``~/.cache/spark-kafka-sink`` (XDG_CACHE_HOME honoured)."""
    env = os.environ.get("SPARK_KAFKA_SINK_CACHE")
    if env:
        return Path(env).expanduser()
    xdg = os.environ.get("XDG_CACHE_HOME")
    base = Path(xdg).expanduser() if xdg else Path.home() / ".cache"
    return base / "spark-kafka-sink"


def resolve_kafka_jars(version: str = DEFAULT_KAFKA_VERSION, cache_dir: str | os.PathLike | None = None,
                       *, method: str = "auto", java: str | None = None) -> KafkaJars:
    """The jars of Apache Kafka ``version``, resolving them first if the cache lacks them.

    ``cache_dir`` is the cache root (see the module docstring). ``method`` is ``"auto"`` (Maven if
    ``mvn`` is on PATH, else pyspark's Ivy), ``"maven"`` or ``"ivy"``. Raises
    :class:`JarResolutionError` with the tail of the tool's output when resolution fails.
    """
    check_method(method)
    return resolve_cached(cache_dir, f"kafka-{version}", lambda target: _read_marker(target, version),
                          lambda target: _resolve(version, target, method, java or find_java()))


def check_method(method: str) -> None:
    """``method`` is one a resolution takes: ``auto``, ``maven`` or ``ivy``."""
    if method not in ("auto", "maven", "ivy"):
        raise ValueError(f"method must be auto, maven or ivy, not {method!r}")


def resolve_cached(cache_dir: str | os.PathLike | None, name: str,
                   read: Callable[[Path], T | None], resolve: Callable[[Path], T]) -> T:
    """What ``read`` finds complete in ``<cache root>/<name>``, else ``resolve(target)`` once,
    under ``<name>.lock`` (another process may be resolving the same thing: it is read again
    inside the lock). ``cache_dir``: the cache root (default :func:`default_cache_root`)."""
    root = Path(cache_dir).expanduser() if cache_dir is not None else default_cache_root()
    target = root / name
    cached = read(target)
    if cached is not None:
        return cached
    root.mkdir(parents=True, exist_ok=True)
    with locked(root / f"{name}.lock"):
        cached = read(target)  # another process may have finished meanwhile
        return cached if cached is not None else resolve(target)


def _resolve(version: str, target: Path, method: str, java: str) -> KafkaJars:
    if method == "auto":
        method = "maven" if shutil.which("mvn") else "ivy"
    if target.exists():
        shutil.rmtree(target)
    target.mkdir(parents=True)
    started = time.monotonic()
    if method == "maven":
        _resolve_with_maven(version, target, java)
    else:
        _resolve_with_ivy(version, target, java)
    jars = tuple(sorted(p.name for p in target.glob("*.jar")))
    if not any(name.startswith(f"kafka_2.13-{version}") for name in jars):
        raise JarResolutionError(
            f"{method} finished but {target} holds no kafka_2.13-{version}.jar ({len(jars)} jars)")
    marker = {"version": version, "method": method, "jars": jars,
              "seconds": round(time.monotonic() - started, 1)}
    (target / _MARKER).write_text(json.dumps(marker, indent=1) + "\n")
    return KafkaJars(version, target, jars, method)


def _read_marker(target: Path, version: str) -> KafkaJars | None:
    """The cached resolution when its marker is there and every jar it lists still exists."""
    try:
        marker = json.loads((target / _MARKER).read_text())
    except (OSError, ValueError):
        return None
    jars = tuple(marker.get("jars", ()))
    if marker.get("version") != version or not jars or not all((target / j).is_file() for j in jars):
        return None
    return KafkaJars(version, target, jars, marker.get("method", "?"))


@contextlib.contextmanager
def locked(path: Path):
    """Hold an exclusive ``fcntl`` lock on ``path`` (created if missing) for the ``with`` block:
    one resolution of a cache entry at a time, across processes."""
    with open(path, "a+") as handle:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle.fileno(), fcntl.LOCK_UN)


def run_resolver(tool: str, command: list[str], env: dict[str, str] | None, cwd: str, what: str) -> None:
    """Run Maven or Ivy fetching ``what`` (e.g. ``"Apache Kafka 4.1.1"``); a
    :class:`JarResolutionError` with the tail of its output when it fails or times out."""
    try:
        out = subprocess.run(command, cwd=cwd, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                             timeout=_RESOLVE_TIMEOUT_S)
    except subprocess.TimeoutExpired as exc:
        raise JarResolutionError(
            f"{tool} did not resolve {what} within {_RESOLVE_TIMEOUT_S:.0f} s. "
            f"Output:\n{tail(_text(exc.output))}") from exc
    except OSError as exc:
        raise JarResolutionError(f"could not run {tool}: {exc}") from exc
    if out.returncode != 0:
        raise JarResolutionError(
            f"{tool} could not resolve {what} (exit {out.returncode}); Maven Central "
            f"must be reachable on the first start. Command: {' '.join(command)}\n"
            f"{tool} output (tail):\n{tail(out.stdout)}")


def maven(java: str) -> tuple[str, dict[str, str]]:
    """``mvn`` on PATH and the environment to run it in (``JAVA_HOME``: ``java``'s home unless set).

    Maven reads its own settings (mirrors, proxies) as usual. :class:`JarResolutionError` without
    ``mvn``.
    """
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JarResolutionError("`mvn` is not on PATH; install Maven or use method='ivy' (needs pyspark)")
    env = dict(os.environ)
    env.setdefault("JAVA_HOME", str(Path(os.path.realpath(java)).parent.parent))
    return mvn, env


def _resolve_with_maven(version: str, target: Path, java: str) -> None:
    mvn, env = maven(java)
    with tempfile.TemporaryDirectory(prefix="spark-kafka-sink-mvn-") as work:
        pom = Path(work) / "pom.xml"
        shutil.copyfile(_POM, pom)  # the package directory may be read-only
        run_resolver("Maven", [mvn, "-B", "-ntp", "-f", str(pom), "dependency:copy-dependencies",
                               "-DincludeScope=runtime", f"-DoutputDirectory={target}",
                               f"-Dkafka.version={version}"], env, work, f"Apache Kafka {version}")


def _resolve_with_ivy(version: str, target: Path, java: str) -> None:
    ivy_jar = find_ivy_jar()
    if ivy_jar is None:
        raise JarResolutionError(
            "Cannot resolve the Apache Kafka jars: `mvn` is not on PATH and pyspark (whose jars/ "
            "directory ships the Ivy jar) is not installed. Install Maven (e.g. `sudo apt-get "
            "install maven`) or `pip install pyspark`.")
    with tempfile.TemporaryDirectory(prefix="spark-kafka-sink-ivy-") as work:
        ivy_xml = Path(work) / "ivy.xml"
        ivy_xml.write_text(ivy_module(version))
        pattern = f"{target}/[artifact]-[revision](-[classifier]).[ext]"
        run_resolver("Ivy", [java, "-jar", str(ivy_jar), "-ivy", str(ivy_xml), "-confs", "default",
                             "-types", "jar", "bundle", "-retrieve", pattern], None, work,
                     f"Apache Kafka {version}")


def find_ivy_jar() -> Path | None:
    """The ``ivy-*.jar`` shipped in ``pyspark/jars``, or ``None`` without pyspark."""
    try:
        import importlib.util
        spec = importlib.util.find_spec("pyspark")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    for location in spec.submodule_search_locations:
        found = sorted(Path(location, "jars").glob("ivy-*.jar"))
        if found:
            return found[-1]
    return None


def pom_dependencies(version: str) -> list[tuple[str, str, str]]:
    """(group, artifact, version) of each dependency in the project pom, for Kafka ``version``."""
    root = ET.parse(_POM).getroot()
    props = {el.tag.split("}")[1]: el.text or "" for el in root.find("m:properties", _POM_NS)}
    props["kafka.version"] = version
    deps = []
    for dep in root.iterfind("m:dependencies/m:dependency", _POM_NS):
        rev = dep.findtext("m:version", "", _POM_NS)
        for key, value in props.items():
            rev = rev.replace("${" + key + "}", value)
        deps.append((dep.findtext("m:groupId", "", _POM_NS), dep.findtext("m:artifactId", "", _POM_NS), rev))
    return deps


def ivy_module(version: str) -> str:
    """An ``ivy.xml`` depending on the pom's artifacts, mapped to their Maven runtime closure."""
    lines = [f'    <dependency org="{g}" name="{a}" rev="{v}" conf="default-&gt;default"/>'
             for g, a, v in pom_dependencies(version)]
    return "\n".join([
        '<ivy-module version="2.0">',
        '  <info organisation="spark-kafka-sink" module="embedded-kafka-jars"/>',
        '  <configurations><conf name="default"/></configurations>',
        "  <dependencies>", *lines, "  </dependencies>",
        "</ivy-module>", ""])


def _text(data: bytes | str | None) -> str:
    if data is None:
        return ""
    return data.decode(errors="replace") if isinstance(data, bytes) else data


def _main(argv: list[str] | None = None) -> int:
    """``python -m spark_kafka_sink.embedded.jars [VERSION] [--cache-dir D] [--method M]`` (make jars)."""
    import argparse

    parser = argparse.ArgumentParser(prog="python -m spark_kafka_sink.embedded.jars",
                                     description="Resolve the Apache Kafka broker jars into the cache.")
    parser.add_argument("version", nargs="?", default=DEFAULT_KAFKA_VERSION)
    parser.add_argument("--cache-dir", help="cache root (default $SPARK_KAFKA_SINK_CACHE or "
                                            "~/.cache/spark-kafka-sink)")
    parser.add_argument("--method", choices=("auto", "maven", "ivy"), default="auto")
    args = parser.parse_args(argv)
    started = time.monotonic()
    try:
        found = resolve_kafka_jars(args.version, args.cache_dir, method=args.method)
    except BrokerLaunchError as exc:  # JarResolutionError or JavaNotFoundError
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(f"Apache Kafka {found.version}: {len(found.jars)} jars in {found.directory} "
          f"(resolved with {found.method}; {time.monotonic() - started:.1f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(_main())
