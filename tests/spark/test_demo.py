"""``make demo`` (``python -m demo``) end to end, small: its own embedded broker, 20,000 events in
4 files, the streaming job under spark-submit, and the read-back it checks itself."""

from __future__ import annotations

import os
import re
import sys

import pytest

from .test_jobs import run_bounded

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

DEMO_TIMEOUT_S = 360


@pytest.mark.timeout(DEMO_TIMEOUT_S + 60)
def test_demo_streams_every_event_and_reads_it_back():
    env = {**os.environ, "PYSPARK_PYTHON": sys.executable}
    result = run_bounded([sys.executable, "-m", "demo", "--events", "20000", "--files", "4"], env,
                         DEMO_TIMEOUT_S)
    out = result.stdout
    assert "rows generated 20,000 | written by Spark 20,000 | read back 20,000" in out, out
    assert "distinct event_ids read back: 20,000; keys equal to the event's user_id: all" in out, out
    assert "RESULT: OK" in out, out
    assert len(re.findall(r"micro-batch \d+: 5,000 rows read, 5,000 written", out)) == 4, out
    per_partition = re.search(r"per partition: (.*)", out).group(1)
    counts = [int(n.replace(",", "")) for n in re.findall(r"\d+: ([\d,]+)", per_partition)]
    assert len(counts) == 6 and sum(counts) == 20_000 and all(counts), out
