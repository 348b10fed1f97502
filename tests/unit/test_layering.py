"""The package's dependency rules, checked on the source (DESIGN.md §3).

- protocol/ and record/ are sans-I/O: no sockets, selectors, threads, clocks, event loops or Spark.
- Dependencies point down only: spark -> producer -> client -> protocol/record -> errors/structs.
- Only spark/ imports pyspark.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "spark_kafka_sink"

SANS_IO_FORBIDDEN = {"socket", "selectors", "threading", "time", "asyncio", "ssl", "pyspark", "subprocess"}

# layer -> sibling packages it must not import (they sit above it)
LAYERS = {
    "protocol": {"record", "client", "producer", "spark", "embedded", "cli", "config"},
    "record": {"protocol", "client", "producer", "spark", "embedded", "cli", "config"},
    "client": {"producer", "spark", "embedded", "cli"},
    "producer": {"spark", "embedded", "cli"},
}


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by a file."""
    return _imports_of_source(path.read_text(), path)


def _imports_of_source(source: str, path: Path) -> set[str]:
    """Absolute module names imported by ``source``; relative imports resolve against ``path``."""
    rel_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            module = ".".join(rel_parts[: len(rel_parts) - node.level] + ((node.module,) if node.module else ()))
            names.add(module)
            if not node.module:
                names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def _files(layer: str) -> list[Path]:
    root = PACKAGE / layer
    return sorted(root.rglob("*.py")) if root.is_dir() else []


@pytest.mark.parametrize("layer", ["protocol", "record"])
def test_sans_io_layers_import_no_io(layer):
    files = _files(layer)
    assert files, f"spark_kafka_sink/{layer}/ has no modules"
    offenders = []
    for path in files:
        for name in _imports(path):
            if name.split(".")[0] in SANS_IO_FORBIDDEN:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)


@pytest.mark.parametrize("layer", sorted(LAYERS))
def test_dependencies_point_down(layer):
    offenders = []
    for path in _files(layer):
        for name in _imports(path):
            parts = name.split(".")
            if parts[0] == "spark_kafka_sink" and len(parts) > 1 and parts[1] in LAYERS[layer]:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_only_spark_package_imports_pyspark():
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.relative_to(PACKAGE).parts[0] == "spark":
            continue
        for name in _imports(path):
            if name.split(".")[0] == "pyspark":
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_import_resolver_sees_relative_imports():
    """Guard the checker itself: relative and absolute imports of forbidden modules are caught."""
    probe = PACKAGE / "protocol" / "probe.py"
    assert "spark_kafka_sink.client" in _imports_of_source("from ..client import blocking\n", probe)
    assert "socket" in _imports_of_source("import socket\n", probe)
    assert "time" in _imports_of_source("from time import monotonic\n", probe)
