"""protocol/ stays sans-I/O: none of its modules imports an I/O, threading or Spark module."""

from __future__ import annotations

import ast
from pathlib import Path

import spark_kafka_sink.protocol as protocol

FORBIDDEN = {"socket", "selectors", "threading", "time", "asyncio", "pyspark", "ssl",
             "multiprocessing", "subprocess"}


def _imported_modules(path: Path):
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            yield node.module
        elif isinstance(node, ast.ImportFrom) and node.level > 0 and node.module:
            if node.level >= 2 and node.module.split(".")[0] == "client":
                yield "spark_kafka_sink.client"


def test_protocol_imports_no_io():
    root = Path(protocol.__file__).parent
    files = sorted(root.rglob("*.py"))
    assert len(files) > 10
    for path in files:
        for name in _imported_modules(path):
            top = name.split(".")[0]
            assert top not in FORBIDDEN, f"{path.relative_to(root)} imports {name}"
            assert not name.startswith("spark_kafka_sink.client"), f"{path} imports the client"
