"""Unit tests fail fast: a short per-test timeout.

The unit tests run without a broker or Spark and each takes well under a second (the slowest
about 0.7 s on a 2-core machine), so a test that runs for :data:`UNIT_TIMEOUT_S` is hung (a
lost wakeup, a deadlock, a loop that never ends) and fails then, instead of holding the suite
for the 300 s that setup.cfg gives the broker and Spark tests. A test that needs longer says so
with its own ``@pytest.mark.timeout``.
"""

from __future__ import annotations

from pathlib import Path

import pytest

UNIT_TIMEOUT_S = 30
_HERE = Path(__file__).parent


def pytest_collection_modifyitems(config, items):
    for item in items:
        if _HERE in Path(item.fspath).parents and item.get_closest_marker("timeout") is None:
            item.add_marker(pytest.mark.timeout(UNIT_TIMEOUT_S))
