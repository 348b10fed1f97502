"""No two modules of the package define the same public name at top level: a reader (or a
``from ... import``) never has to ask which ``Record`` or ``read_batch`` is meant. A name that
does something different gets a name that says so; an old module path that re-exports names
imports them rather than defining them again."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "spark_kafka_sink"

ALLOWED = {
    "main": "each command's entry point, by convention",
}


def _public_definitions(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return {node.name for node in tree.body
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
            and not node.name.startswith("_")}


def test_every_public_name_is_defined_in_one_module_only():
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(PACKAGE.rglob("*.py")):
        for name in _public_definitions(path):
            where[name].append(str(path.relative_to(PACKAGE)))
    twice = {name: paths for name, paths in where.items() if len(paths) > 1 and name not in ALLOWED}
    assert twice == {}


def test_the_allowed_duplicates_still_exist():
    # an entry that no longer applies goes, so the list stays what it says
    counts: dict[str, int] = defaultdict(int)
    for path in PACKAGE.rglob("*.py"):
        for name in _public_definitions(path):
            counts[name] += 1
    assert {name for name in ALLOWED if counts[name] < 2} == set()
