"""The package's dependency rules, checked on the source (docs/ARCHITECTURE.md, "Layers").

- protocol/ and record/ are sans-I/O: no sockets, selectors, threads, clocks, event loops or Spark.
- Dependencies point down only: spark -> producer -> client -> protocol/record -> errors/structs.
- Only spark/ imports pyspark.
- producer/transactions/ imports nothing else of producer/ at load time (the sender and the
  accumulator use it, not the other way round).
- No import circle between modules (module-level imports; ``TYPE_CHECKING`` ones aside), and no
  module below the package root imports a name from the root itself (only its submodules).
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


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it is loaded: module-level imports, those under
    ``if TYPE_CHECKING`` left out; ``from . import a`` counts as the submodule ``a``."""
    rel_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    found: set[str] = set()
    for statement in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.dump(statement.test):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(rel_parts[: len(rel_parts) - node.level] + ((node.module,) if node.module else ()))
                subs = {f"{base}.{alias.name}" for alias in node.names} & modules
                found |= subs or ({base} & modules)
            elif isinstance(node, ast.Import):
                found |= {alias.name for alias in node.names} & modules
    return found


def test_no_import_circle():
    paths = {_module_name(path): path for path in PACKAGE.rglob("*.py")}
    graph = {name: _module_level_imports(path, set(paths)) - {name} for name, path in paths.items()}
    circles, state = [], {}

    def visit(name: str, trail: list[str]) -> None:
        state[name] = "open"
        for other in sorted(graph[name]):
            if state.get(other) == "open":
                circles.append(" -> ".join(trail[trail.index(other):] + [other]))
            elif other not in state:
                visit(other, trail + [other])
        state[name] = "done"

    for name in sorted(graph):
        if name not in state:
            visit(name, [name])
    assert not circles, "\n".join(circles)


def test_no_module_below_the_root_imports_a_name_from_the_root():
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    offenders = []
    for path in sorted(PACKAGE.rglob("*.py")):
        if path.parent == PACKAGE:
            continue
        rel_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = node.module or ""
                if node.level:
                    base = ".".join(rel_parts[: len(rel_parts) - node.level] + ((node.module,) if node.module else ()))
                if base == "spark_kafka_sink":
                    offenders += [f"{path.relative_to(PACKAGE)} imports {alias.name} from the root"
                                  for alias in node.names if f"{base}.{alias.name}" not in modules]
    assert not offenders, "\n".join(offenders)


def test_the_transaction_wing_imports_nothing_else_of_the_producer():
    """producer/transactions/ sits under the sender and the accumulator that use it: at load time
    it imports only its own modules from producer/ (type-only imports aside)."""
    wing = PACKAGE / "producer" / "transactions"
    files = sorted(wing.rglob("*.py"))
    assert files, "spark_kafka_sink/producer/transactions/ has no modules"
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    offenders = []
    for path in files:
        for name in _module_level_imports(path, modules):
            if (name.startswith("spark_kafka_sink.producer.")
                    and not name.startswith("spark_kafka_sink.producer.transactions")):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)
