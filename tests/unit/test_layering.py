"""The package's dependency rules, checked on the source (docs/ARCHITECTURE.md, "Layers").

- protocol/ and record/ are sans-I/O: no sockets, selectors, threads, clocks, event loops or Spark.
- Dependencies point down only: spark -> producer -> client -> protocol/record -> errors/structs.
- client/auth/ (SASL and its tokens) sits below config.py and admin.py too: config reads its
  credentials from it.
- schema_registry/ (the driver's registry client, beside config.py on client/) imports nothing of
  producer/, spark/, embedded/, testing/ or the CLI.
- Only spark/ imports pyspark.
- avro/ (Avro schemas and the column-wise encoder) imports nothing of the package but errors.py,
  and no I/O: the producer and the Spark layer use it, not the other way round.
- A wing may carry its own rule: producer/arrow/ (the send_arrow pipeline) imports nothing from
  spark/, so the Spark sink's arrow mode stays a caller of it.
- producer/transactions/ imports nothing else of producer/ at load time (the sender and the
  accumulator use it, not the other way round).
- No import circle between modules (module-level imports; ``TYPE_CHECKING`` ones aside), and no
  module below the package root imports a name from the root itself (only its submodules).
- No module imports a private name (``_``-prefixed, dunders such as ``__version__`` aside) from
  another module of the package: what two modules share is public and documented where it lives.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[2] / "spark_kafka_sink"

SANS_IO_FORBIDDEN = {"socket", "selectors", "threading", "time", "asyncio", "ssl", "pyspark", "subprocess"}

# layer (a folder under the package, or a wing's folder in one) -> top-level packages or modules it
# must not import (they sit above it)
LAYERS = {
    "protocol": {"record", "client", "producer", "spark", "embedded", "cli", "config"},
    "record": {"protocol", "client", "producer", "spark", "embedded", "cli", "config"},
    "client": {"producer", "spark", "embedded", "cli"},
    "client/auth": {"producer", "spark", "embedded", "cli", "config", "admin"},
    "producer": {"spark", "embedded", "cli"},
    "producer/arrow": {"spark", "embedded", "cli"},
    "schema_registry": {"producer", "spark", "embedded", "testing", "cli"},
    "avro": {"producer", "client", "spark", "embedded", "testing", "protocol", "config", "cli",
             "admin"},
}


def _imports(path: Path) -> set[str]:
    """Absolute module names imported by a file."""
    return _imports_of_source(path.read_text(), path)


def _from_module(node: ast.ImportFrom, path: Path) -> str:
    """The absolute module a ``from ... import`` in the file at ``path`` names (relative ones
    resolved against ``path``)."""
    if not node.level:
        return node.module or ""
    rel_parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(rel_parts[: len(rel_parts) - node.level] + ((node.module,) if node.module else ()))


def _imports_of_source(source: str, path: Path) -> set[str]:
    """Absolute module names imported by ``source``; relative imports resolve against ``path``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level:
            module = _from_module(node, path)
            names.add(module)
            if not node.module:
                names.update(f"{module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            names.add(node.module or "")
    return names


def _files(layer: str) -> list[Path]:
    root = PACKAGE / layer
    return sorted(root.rglob("*.py")) if root.is_dir() else []


@pytest.mark.parametrize("layer", ["protocol", "record", "avro"])
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
    files = _files(layer)
    assert files, f"spark_kafka_sink/{layer}/ has no modules"
    offenders = []
    for path in files:
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
    in_auth = PACKAGE / "client" / "auth" / "probe.py"
    assert "spark_kafka_sink.producer" in _imports_of_source("from ...producer import sender\n", in_auth)
    assert "spark_kafka_sink.config" in _imports_of_source("from ... import config\n", in_auth)


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_level_imports(path: Path, modules: set[str]) -> set[str]:
    """The package's modules ``path`` imports when it is loaded: module-level imports, those under
    ``if TYPE_CHECKING`` left out; ``from . import a`` counts as the submodule ``a``."""
    found: set[str] = set()
    for statement in ast.parse(path.read_text(), filename=str(path)).body:
        if isinstance(statement, ast.If) and "TYPE_CHECKING" in ast.dump(statement.test):
            continue
        for node in ast.walk(statement):
            if isinstance(node, ast.ImportFrom):
                base = _from_module(node, path)
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
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ImportFrom):
                base = _from_module(node, path)
                if base == "spark_kafka_sink":
                    offenders += [f"{path.relative_to(PACKAGE)} imports {alias.name} from the root"
                                  for alias in node.names if f"{base}.{alias.name}" not in modules]
    assert not offenders, "\n".join(offenders)


def _private_imports_of_source(source: str, path: Path) -> list[str]:
    """``module.name`` for each ``_``-prefixed name (not a dunder) ``source`` imports from a
    module of the package (``from x import _y``; ``import spark_kafka_sink.x._y`` too)."""
    found = []
    for node in ast.walk(ast.parse(source, filename=str(path))):
        if isinstance(node, ast.ImportFrom):
            base = _from_module(node, path)
            if base.split(".")[0] == "spark_kafka_sink":
                found += [f"{base}.{alias.name}" for alias in node.names if _is_private(alias.name)]
        elif isinstance(node, ast.Import):
            found += [alias.name for alias in node.names
                      if alias.name.split(".")[0] == "spark_kafka_sink"
                      and any(_is_private(part) for part in alias.name.split("."))]
    return found


def _is_private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def test_no_module_imports_a_private_name_of_another():
    offenders = [f"{path.relative_to(PACKAGE)} imports {name}"
                 for path in sorted(PACKAGE.rglob("*.py"))
                 for name in _private_imports_of_source(path.read_text(), path)]
    assert not offenders, "\n".join(offenders)


def test_private_import_checker_sees_relative_and_absolute_imports():
    """Guard the checker itself: private names are caught however imported; dunders are not private."""
    probe = PACKAGE / "spark" / "probe.py"
    assert _private_imports_of_source("from .task import Outcome, _flushed\n", probe) == \
        ["spark_kafka_sink.spark.task._flushed"]
    assert _private_imports_of_source("from spark_kafka_sink.client import _x\n", probe) == \
        ["spark_kafka_sink.client._x"]
    assert _private_imports_of_source("from ..version import __version__\nfrom os import _exit\n", probe) == []


def test_the_avro_package_imports_nothing_of_the_package_but_errors_and_arrow_columns():
    """avro/ depends on errors.py and the record layer's Arrow column helpers alone (its own
    modules aside), whatever new module appears."""
    files = _files("avro")
    assert files, "spark_kafka_sink/avro/ has no modules"
    offenders = []
    for path in files:
        for name in _imports(path):
            parts = name.split(".")
            allowed = parts[1:] == ["record", "arrow_columns"] or (len(parts) > 1 and parts[1] in ("avro", "errors"))
            if parts[0] == "spark_kafka_sink" and not allowed:
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)


def test_the_transaction_wing_imports_nothing_else_of_the_producer():
    """producer/transactions/ sits under the sender and the accumulator that use it: at load time
    it imports only its own modules from producer/ (type-only imports aside)."""
    files = _files("producer/transactions")
    assert files, "spark_kafka_sink/producer/transactions/ has no modules"
    modules = {_module_name(path) for path in PACKAGE.rglob("*.py")}
    offenders = []
    for path in files:
        for name in _module_level_imports(path, modules):
            if (name.startswith("spark_kafka_sink.producer.")
                    and not name.startswith("spark_kafka_sink.producer.transactions")):
                offenders.append(f"{path.relative_to(PACKAGE)} imports {name}")
    assert not offenders, "\n".join(offenders)
