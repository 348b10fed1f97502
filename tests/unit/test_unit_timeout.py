"""The unit suite's short per-test timeout (tests/unit/conftest.py) is really applied."""

from __future__ import annotations

import pytest

from .conftest import UNIT_TIMEOUT_S


def test_a_unit_test_gets_the_short_timeout(request):
    marker = request.node.get_closest_marker("timeout")
    assert marker is not None and marker.args == (UNIT_TIMEOUT_S,)
    assert UNIT_TIMEOUT_S < 300                 # setup.cfg's, for the broker and Spark tests


@pytest.mark.timeout(45)
def test_a_unit_test_may_ask_for_its_own(request):
    assert request.node.get_closest_marker("timeout").args == (45,)
