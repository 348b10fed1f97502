"""docs/ARCHITECTURE.md stays true where the code can say so.

- "Public names": the tables of what ``spark_kafka_sink`` and ``spark_kafka_sink.testing``
  export are each package's ``__all__``, and every name resolves to the object of the module the
  table names.
- The module tables of "Layers" name every module of the package (``__init__.py`` aside) and no
  module that does not exist.
- "Time": in the producer's stack only ``clock.py`` reads the real clock, but for the one
  caller-side wait the map names.
- "The exactly-once road" and "The dead-letter road": every module path and every code name they
  quote exists, so a rename cannot leave a road pointing at nothing.
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


# --- the roads ----------------------------------------------------------------------------------

ROADS = ("### The exactly-once road", "### The dead-letter road")
_IDENT = r"[A-Za-z_]\w*"
_NAME = re.compile(rf"^({_IDENT})(?:\.({_IDENT}))?(?:\(\))?$")
SPARK_NAMES = {"foreachBatch"}
"""Spark's own names the roads quote (not this package's)."""


def _road_literals() -> set[str]:
    """Words the roads quote that are values, not names: the commit log's batch states and the
    dead-letter stages, as the code spells them."""
    from spark_kafka_sink.spark import dead_letters
    from spark_kafka_sink.spark.commit_log import BatchState

    return {state.value for state in BatchState} | {dead_letters.CONVERT, dead_letters.PRODUCE}


def _road_references(text: str) -> tuple[set[str], set[str], set[tuple[str, str]]]:
    """What a road quotes in backticks: module paths (``spark/sink.py``, under the package or the
    repository), bare names (``run_task``, ``DeadLetters``) and ``Class.member`` pairs
    (``ExactlyOnceDriver.begin_batch``). Anything else is a value or an expression, not checked:
    ``df.rdd`` (an object's attribute), ``keep_refused=True``, ``<prefix>-0``, ``before-record``."""
    paths: set[str] = set()
    names: set[str] = set()
    members: set[tuple[str, str]] = set()
    for token in re.findall(r"`([^`\n]+)`", text):
        if re.fullmatch(r"[\w/.]+\.py", token):
            paths.add(token)
            continue
        match = _NAME.match(token)
        if match is None:
            continue
        head, member = match.groups()
        if member is None:
            names.add(head)
        elif head.lstrip("_")[:1].isupper():   # a class, private ones too (``_BatchSender``)
            members.add((head, member))
    return paths, names, members


class _Definitions:
    """The names the package's source defines: every function and class, the names a module or a
    class body assigns, and the attributes methods set on ``self`` (local variables are no
    definitions); per class, its own members and its bases' (by name, within the package)."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.classes: dict[str, list[ast.ClassDef]] = {}
        for path in PACKAGE.rglob("*.py"):
            tree = ast.parse(path.read_text(), filename=str(path))
            self.names |= self._own(tree) | self._self_attributes(tree)
            for node in ast.walk(tree):
                if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                    self.names.add(node.name)
                if isinstance(node, ast.ClassDef):
                    self.names |= self._own(node)
                    self.classes.setdefault(node.name, []).append(node)

    @staticmethod
    def _own(owner: ast.Module | ast.ClassDef) -> set[str]:
        """What the statements of a module's or a class's body define."""
        found: set[str] = set()
        for statement in owner.body:
            if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                found.add(statement.name)
            targets = statement.targets if isinstance(statement, ast.Assign) else (
                [statement.target] if isinstance(statement, ast.AnnAssign) else [])
            found |= {part.id for target in targets for part in ast.walk(target)
                      if isinstance(part, ast.Name)}
        return found

    @staticmethod
    def _self_attributes(node: ast.AST) -> set[str]:
        """The ``self.<name>`` assigned anywhere under ``node``."""
        return {part.attr for part in ast.walk(node)
                if isinstance(part, ast.Attribute) and isinstance(part.ctx, ast.Store)
                and isinstance(part.value, ast.Name) and part.value.id == "self"}

    def members(self, name: str, seen: frozenset[str] = frozenset()) -> set[str]:
        """What class ``name`` (any class of that name) and its bases in the package define."""
        found: set[str] = set()
        for node in self.classes.get(name, ()):
            found |= self._own(node) | self._self_attributes(node)
            for base in node.bases:
                if isinstance(base, ast.Name) and base.id not in seen:
                    found |= self.members(base.id, seen | {name})
        return found


def _road(heading: str) -> str:
    text = _section(heading)
    assert text.strip(), f"docs/ARCHITECTURE.md has no text under {heading!r}"
    return text


def _unresolved(text: str, definitions: _Definitions) -> list[str]:
    paths, names, members = _road_references(text)
    missing = [path for path in sorted(paths)
               if not (PACKAGE / path).is_file() and not (ROOT / path).is_file()]
    allowed = _road_literals() | SPARK_NAMES
    missing += [name for name in sorted(names - allowed) if name not in definitions.names]
    missing += [f"{cls}.{member}" for cls, member in sorted(members)
                if cls not in definitions.classes or member not in definitions.members(cls)]
    return missing


@pytest.fixture(scope="module")
def definitions() -> _Definitions:
    return _Definitions()


@pytest.mark.parametrize("heading", ROADS)
def test_every_module_and_name_a_road_quotes_exists(heading, definitions):
    missing = _unresolved(_road(heading), definitions)
    assert missing == [], f"docs/ARCHITECTURE.md's {heading[4:]!r} quotes what the code lacks"


@pytest.mark.parametrize("heading", ROADS)
def test_a_road_quotes_modules_and_names_to_check(heading):
    paths, names, members = _road_references(_road(heading))
    assert len(paths) >= 3 and len(names) >= 10 and len(members) >= 10, (heading, paths)


def test_the_road_reader_tells_names_from_values(definitions):
    paths, names, members = _road_references(
        "`spark/sink.py`, `tests/spark/crash_job.py`, `run_task`, `KafkaProducer.send`, "
        "`Outcome.check()`, `_BatchSender.send`, `df.rdd`, `keep_refused=True`, `<prefix>-0`, "
        "`before-record`, `max.message.bytes`, `prepared`")
    assert paths == {"spark/sink.py", "tests/spark/crash_job.py"}
    assert names == {"run_task", "prepared"}
    assert members == {("KafkaProducer", "send"), ("Outcome", "check"), ("_BatchSender", "send")}
    assert _unresolved("`spark/sink.py` `run_task` `prepared` `KafkaProducer.send`",
                       definitions) == []
    assert _unresolved("`spark/sinks.py` `run_tasks` `KafkaProducer.sends` `NoSuchClass.send` "
                       "`ArrowSendResult.rejected` `ArrowSendResult.acked` `BatchState.PREPARED` "
                       "`FENCE_GAP` `lease`", definitions) == [
        "spark/sinks.py", "lease", "run_tasks", "KafkaProducer.sends", "NoSuchClass.send"]
