"""docs/ARCHITECTURE.md stays true where the code can say so.

- "Public names": the tables of what ``spark_kafka_sink`` and ``spark_kafka_sink.testing``
  export are each package's ``__all__``, and every name resolves to the object of the module the
  table names.
"""

from __future__ import annotations

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
