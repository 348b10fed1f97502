"""A task that fails after sending part of its rows is retried by Spark (``local[2,3]``): the
write completes, every row is present (the failed attempt's rows twice, counted), the retry got a
fresh producer, and the metrics count the successful attempts only; in both sink modes.

Exactly-once, the same failure: every row exactly once for a ``read_committed`` reader (the failed
attempt's rows are in the log, aborted), no transaction of the prefix left open."""

from __future__ import annotations

import json
import uuid
from collections import Counter
from pathlib import Path

import pytest

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, list_offsets
from .session import run_script

pytestmark = [pytest.mark.spark, pytest.mark.broker]

ROWS, FAIL_AT, PARTITIONS = 4_000, 1_500, 2


def _run_retry_job(bootstrap: str, topic: str, out: Path, mode: str, *extra: str) -> str:
    code, output = run_script("tests.spark.retry_job", bootstrap, topic, str(ROWS), str(FAIL_AT),
                              str(out), mode, *extra)
    assert code == 0, f"the retry job failed:\n{output[-4000:]}"
    assert "null 'topic'" in output, "attempt 0 did not fail as planned"
    return output


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_retried_task_completes_the_write_and_counts_once(kafka, tmp_path, mode):
    bootstrap = kafka.bootstrap_servers
    topic = f"retry-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    out = tmp_path / "metrics.json"
    _run_retry_job(bootstrap, topic, out, mode)

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=ROWS + FAIL_AT)
    seen = Counter(int(r.key) for part in records.values() for r in part)
    assert all(r.value == b"v" + r.key for part in records.values() for r in part)
    assert set(seen) == set(range(ROWS)), "a row is missing"
    duplicated = sorted(i for i, count in seen.items() if count > 1)
    assert duplicated == list(range(ROWS // 2, ROWS // 2 + FAIL_AT)), \
        "exactly the rows the failed attempt sent arrive twice"
    assert set(seen.values()) == {1, 2}

    metrics = json.loads(out.read_text())
    assert metrics["record-send-total"] == ROWS  # the failed attempt's 1,500 are not counted
    assert metrics[f"topic.{topic}.record-send-total"] == ROWS
    assert metrics["task-total"] == PARTITIONS and metrics["task-retried-total"] == 1
    assert metrics["record-error-total"] == 0
    # each successful task created its producer: partition 0 in a fresh worker, and the retry,
    # which the pool never serves the cached producer (attempt > 0 replaces it)
    assert metrics["producer-create-total"] == PARTITIONS


@pytest.mark.parametrize("mode", ["arrow", "rows"])
def test_exactly_once_a_retried_task_writes_every_row_once(kafka, tmp_path, mode):
    bootstrap = kafka.bootstrap_servers
    topic = f"retry-eos-{uuid.uuid4().hex[:8]}"
    prefix = f"retry-{uuid.uuid4().hex[:8]}"
    create_topic(bootstrap, topic, PARTITIONS)
    out = tmp_path / "metrics.json"
    _run_retry_job(bootstrap, topic, out, mode, prefix)

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=ROWS)  # read_committed
    seen = Counter(int(r.key) for part in records.values() for r in part)
    assert set(seen) == set(range(ROWS)) and set(seen.values()) == {1}, \
        f"{sum(n > 1 for n in seen.values())} rows arrived twice"
    # the failed attempt's rows are in the log all the same, aborted: the test has teeth
    assert sum(list_offsets(bootstrap, topic, PARTITIONS, committed=False).values()) > ROWS + FAIL_AT
    metrics = json.loads(out.read_text())
    assert metrics["record-send-total"] == ROWS and metrics["task-retried-total"] == 1
    assert metrics["transaction-commit-total"] == PARTITIONS
    assert metrics["batch-replay-total"] == 0
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)
