"""The suite's order and its split over pytest-xdist workers (README, "The test suite").

Order: the fast layer first, so a broken unit fails the run in about a minute: ``tests/unit``,
then the broker tests (``tests/integration``), then the Spark tests (``tests/spark``). Within a
layer, tests marked ``heavy`` (tens of seconds each: their own Spark driver process, a cluster)
come first, so that on two workers the last minutes hold short tests and both workers finish
together instead of one waiting for the other's long tail.

Split (``make test`` runs the broker and Spark layers with ``-n 2 --dist loadgroup``): a test
goes to whichever worker is free, except that tests sharing something costly to start stay on one
worker (an ``xdist_group``), so it starts once:

- the tests of a module that uses a module-scoped fixture (a 3-node cluster, a module's own
  broker, a soak run), or a session-scoped one defined in the module itself: the group is the
  module;
- the tests that use one of the session fixtures in :data:`SHARED_GROUPS` (a broker that few
  tests need: Kafka 3.9, the secured broker): one group per fixture, unless a module fixture
  already keeps the test with its module.

The common session fixtures (``kafka``, ``spark``) start once per worker that needs them.

Marker ``versioned`` (set here, not by hand): a test whose outcome can depend on the installed
PySpark or pyarrow: every Spark test, every unit test under ``tests/unit/spark``, and every
unit test whose module mentions ``pyspark`` or ``pyarrow``. ``make compat`` runs those on the
older PySpark lines; the rest of the unit suite does not touch either.
"""

from __future__ import annotations

from pathlib import PurePosixPath

LAYERS = ("tests/unit/", "tests/integration/", "tests/spark/")

SHARED_GROUPS = {"kafka_tv1": "kafka-3.9", "secured_kafka": "secured-kafka"}
"""Session fixtures few tests use, which each worker would otherwise start: fixture -> group."""


VERSIONED_NAMES = ("pyspark", "pyarrow")


def is_versioned(nodeid: str, module_source: str) -> bool:
    """Whether the test ``nodeid`` (its module's text ``module_source``) is ``versioned``."""
    return (layer(nodeid) == 2 or nodeid.startswith("tests/unit/spark/")
            or (layer(nodeid) == 0 and any(name in module_source for name in VERSIONED_NAMES)))


def layer(nodeid: str) -> int:
    """0 for a unit test, 1 for a broker test, 2 for a Spark test, 3 for anything else."""
    return next((i for i, prefix in enumerate(LAYERS) if nodeid.startswith(prefix)), len(LAYERS))


def run_order(items: list) -> list:
    """``items`` by layer, the ``heavy`` ones first within each (a stable sort: the collection
    order otherwise)."""
    return sorted(items, key=lambda item: (layer(item.nodeid),
                                           item.get_closest_marker("heavy") is None))


def group_of(nodeid: str, fixtures: dict[str, tuple[str, str]]) -> str | None:
    """The xdist group of the test ``nodeid``, given the fixtures it uses (``name -> (scope, the
    node id where the fixture is defined)``), or None when any worker may run it. (A test that
    asks for a fixture only at run time, ``request.getfixturevalue``, carries its group as an
    ``xdist_group`` mark.)"""
    module = nodeid.split("::", 1)[0]
    for scope, defined_in in fixtures.values():
        # a module-scoped fixture, or a wider one that only this module can see
        if scope in ("module", "class", "package") or (scope == "session" and defined_in == module):
            return str(PurePosixPath(module))
    for fixture in fixtures:
        if fixture in SHARED_GROUPS:
            return SHARED_GROUPS[fixture]
    return None
