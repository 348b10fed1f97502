"""The suite's order and its split over pytest-xdist workers (docs/development.md, "Where the
time goes").

Order: the fast layer first, so a broken unit fails the run in about a minute: ``tests/unit``,
then the broker tests (``tests/integration``), then the Spark tests (``tests/spark``). Within a
layer, tests marked ``heavy`` (tens of seconds each: their own Spark driver process, a cluster)
come first, so that on two workers the last minutes hold short tests and both workers finish
together instead of one waiting for the other's long tail.

Split (``make test`` runs each layer with ``-n 2 --dist loadfile``): a module's tests stay on
one worker, in this order, so its module fixtures (a 3-node cluster, a module's own broker, a
soak run, a driver process shared by its tests) start once; the modules go to whichever worker
is free. The session fixtures (``kafka``, ``spark``, the secured and the 3.9 brokers) start once
per worker that needs them. (xdist's ``loadgroup`` would split modules finer, but it marks groups
in the test ids, which pytest 9.2's items no longer take.)

Marker ``versioned`` (set here, not by hand): a test whose outcome can depend on the installed
PySpark or pyarrow: every Spark test, every unit test under ``tests/unit/spark``, and every
unit test whose module mentions ``pyspark`` or ``pyarrow``. ``make compat`` runs those on the
older PySpark lines; the rest of the unit suite does not touch either.
"""

from __future__ import annotations

LAYERS = ("tests/unit/", "tests/integration/", "tests/spark/")
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
