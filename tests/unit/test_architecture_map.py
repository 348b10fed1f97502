"""docs/ARCHITECTURE.md stays true where the code can say so.

- "Public names": the tables of what ``spark_kafka_sink`` and ``spark_kafka_sink.testing``
  export are each package's ``__all__``, and every name resolves to the object of the module the
  table names.
- The module tables of "Layers" name every module of the package (``__init__.py`` aside) and no
  module that does not exist.
- "Time": in the producer's stack only ``clock.py`` reads the real clock, but for the one
  caller-side wait the map names.
"""

from __future__ import annotations

import ast
import importlib
import re
from pathlib import Path

import pytest

import spark_kafka_sink

ROOT = Path(__file__).resolve().parents[2]
PACKAGE = ROOT / "spark_kafka_sink"
MAP = ROOT / "docs" / "ARCHITECTURE.md"

ROW = re.compile(r"^\| `([^`]+)` \| `([^`]+)` \|")


def _section(heading: str) -> str:
    """The text under ``heading`` (a whole line of the map) up to the next heading of its level
    or above."""
    text = MAP.read_text()
    level = heading.split(" ")[0]
    start = text.index(f"\n{heading}\n") + len(heading) + 2
    ends = [match.start() for match in re.finditer(r"^#{1,%d} " % len(level), text[start:], re.M)]
    return text[start:start + ends[0]] if ends else text[start:]


def _public_names() -> dict[str, dict[str, str]]:
    """package -> {name: module path under spark_kafka_sink/}, from the map's "Public names"."""
    tables: dict[str, dict[str, str]] = {}
    package = None
    for line in _section("### Public names").splitlines():
        heading = re.match(r"^`(spark_kafka_sink[\w.]*)`.*:$", line)  # "`package` (...):"
        if heading:
            package = heading.group(1)
            tables[package] = {}
        row = ROW.match(line)
        if row and package is not None:
            assert row.group(1) not in tables[package], f"{row.group(1)} listed twice for {package}"
            tables[package][row.group(1)] = row.group(2)
    return tables


def _module_of(path: str) -> str:
    return "spark_kafka_sink." + path.removesuffix(".py").removesuffix("/__init__").replace("/", ".")


def test_the_map_lists_both_packages():
    assert set(_public_names()) == {"spark_kafka_sink", "spark_kafka_sink.testing"}


@pytest.mark.parametrize("package", ["spark_kafka_sink", "spark_kafka_sink.testing"])
def test_the_map_lists_exactly_what_the_package_exports(package):
    listed = _public_names()[package]
    exported = importlib.import_module(package).__all__
    assert len(set(exported)) == len(exported), f"{package}.__all__ repeats a name"
    assert sorted(listed) == sorted(exported), (
        f"docs/ARCHITECTURE.md's 'Public names' and {package}.__all__ differ: update both")


@pytest.mark.parametrize("package", ["spark_kafka_sink", "spark_kafka_sink.testing"])
def test_every_exported_name_is_the_object_of_the_module_the_map_names(package):
    imported = importlib.import_module(package)
    for name, path in _public_names()[package].items():
        module = importlib.import_module(_module_of(path))
        assert getattr(imported, name) is getattr(module, name), f"{package}.{name} is not {path}'s"


def test_the_root_imports_each_lazy_name_from_the_module_the_map_names():
    listed = _public_names()["spark_kafka_sink"]
    lazy = spark_kafka_sink._EXPORTS
    assert set(lazy) == set(spark_kafka_sink.__all__) - {"__version__"}
    assert {name: _module_of(listed[name]) for name in lazy} == lazy


def test_star_import_gives_the_root_names():
    scope: dict[str, object] = {}
    exec("from spark_kafka_sink import *", scope)
    assert set(spark_kafka_sink.__all__) <= set(scope)


def _mapped_modules() -> set[str]:
    """Module paths under spark_kafka_sink/ that the module tables of "Layers" name: a table's
    first column, relative to the folder its heading names (``### producer/``), or to the package
    under "Package root" and "embedded/ and testing/" (whose rows give the folder). A row for a
    folder (``messages/``) names its modules in its second column."""
    found: set[str] = set()
    folder = None
    for line in _section("## 1. Layers").splitlines():
        heading = re.match(r"^### (\S+)", line)
        if heading:
            name = heading.group(1)
            if name in ("Package", "embedded/"):
                folder = ""
            else:
                folder = name if name.endswith("/") else None
            continue
        row = re.match(r"^\| `([^`]+)` \|(.*)\|$", line)
        if not row or folder is None:
            continue
        first, rest = row.groups()
        if first.endswith("/"):
            found |= {f"{folder}{first}{module}" for module in re.findall(r"`(\w+\.py)`", rest)}
        elif first.endswith(".py"):
            found.add(folder + first)
    return found


def test_the_module_tables_name_every_module_and_only_those():
    modules = {str(path.relative_to(PACKAGE)) for path in PACKAGE.rglob("*.py")}
    mapped = _mapped_modules()
    assert sorted(mapped - modules) == [], "docs/ARCHITECTURE.md names modules that do not exist"
    unmapped = sorted(module for module in modules - mapped if Path(module).name != "__init__.py")
    assert unmapped == [], "modules missing from docs/ARCHITECTURE.md's module tables"


def test_the_module_table_reader_sees_every_table():
    mapped = _mapped_modules()
    for module in ("__init__.py", "protocol/messages/fetch.py", "client/auth/oidc.py",
                   "producer/arrow/plan.py", "producer/transactions/manager.py", "spark/jobs/run.py",
                   "embedded/node.py", "testing/faultproxy.py"):
        assert module in mapped, module


# --- the real clock -----------------------------------------------------------------------------

STACK = ("protocol", "record", "client", "producer")
CLOCK_READERS = {"time", "time_ns", "monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns",
                 "process_time", "process_time_ns", "thread_time", "thread_time_ns"}
DATE_READERS = {"now", "utcnow", "today"}
# the one caller-side wait of the stack that reads the clock itself (docs/ARCHITECTURE.md, "Time")
ALLOWED = {"clock.py": CLOCK_READERS, "producer/future.py": {"monotonic"}}


def _clock_reads(source: str) -> set[str]:
    """The real-clock functions ``source`` calls or imports: ``time.monotonic()``,
    ``from time import perf_counter``, ``datetime.now()``, ``date.today()``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.ImportFrom) and node.module == "time":
            found |= {alias.name for alias in node.names if alias.name in CLOCK_READERS}
        elif isinstance(node, ast.Attribute) and isinstance(node.value, (ast.Name, ast.Attribute)):
            owner = node.value.id if isinstance(node.value, ast.Name) else node.value.attr
            if owner == "time" and node.attr in CLOCK_READERS:
                found.add(node.attr)
            elif owner in {"datetime", "date"} and node.attr in DATE_READERS:
                found.add(node.attr)
    return found


def test_the_clock_reader_sees_every_form():
    assert _clock_reads("import time\nx = time.monotonic()\n") == {"monotonic"}
    assert _clock_reads("from time import perf_counter_ns\n") == {"perf_counter_ns"}
    assert _clock_reads("import datetime\nx = datetime.datetime.now()\n") == {"now"}
    assert _clock_reads("from datetime import date\nx = date.today()\n") == {"today"}
    assert _clock_reads("import time\ntime.sleep(1)\nx = clock.monotonic_ms()\n") == set()


def test_only_clock_py_reads_the_real_clock_in_the_producer_stack():
    offenders = []
    for path in [PACKAGE / "clock.py"] + [p for layer in STACK for p in sorted((PACKAGE / layer).rglob("*.py"))]:
        name = str(path.relative_to(PACKAGE))
        extra = _clock_reads(path.read_text()) - ALLOWED.get(name, set())
        if extra:
            offenders.append(f"{name} reads the clock: {sorted(extra)}")
    assert not offenders, "\n".join(offenders)
    assert _clock_reads((PACKAGE / "clock.py").read_text()), "clock.py no longer reads the clock"
