"""A task that fails after sending part of its rows is retried by Spark (``local[2,3]``): the
write completes, every row is present (the failed attempt's rows twice, counted), the retry got a
fresh producer, and the metrics count the successful attempts only; in both sink modes.

Exactly-once, the same failure: every row exactly once for a ``read_committed`` reader (the failed
attempt's rows are in the log, aborted), no transaction of the prefix left open.

The four cases (arrow and rows, at least once and exactly once) are four writes, one after another,
of one driver process (``retry_job.py``, started once for the module by the ``retry_runs``
fixture), each to its own topic with its own producer config; each test checks its case's part.
"""

from __future__ import annotations

import json
import uuid
from collections import Counter
from dataclasses import dataclass

import pytest

from ..helpers import create_topic
from ..verify import assert_no_open_transaction, consume_all, list_offsets
from .retry_job import CASE_MARK, parse_case
from .session import run_script

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.heavy]

ROWS, FAIL_AT, PARTITIONS = 4_000, 1_500, 2
MODES = ("arrow", "rows")
GUARANTEES = ("at-least-once", "exactly-once")


@dataclass(frozen=True)
class RetryCase:
    """One case's write in the shared driver process: its topic, its metrics, its output."""

    topic: str
    metrics: dict | None
    error: str | None
    output: str  # the driver's output from this case's start to the next case's


@pytest.fixture(scope="module")
def retry_runs(kafka, tmp_path_factory) -> dict[tuple[str, str], RetryCase]:
    """Run the four cases in one driver process (one ``local[2,3]`` SparkSession); by
    ``(mode, guarantee)``, each case's part."""
    bootstrap = kafka.bootstrap_servers
    specs: dict[tuple[str, str], str] = {}
    for mode in MODES:
        for guarantee in GUARANTEES:
            if guarantee == "exactly-once":
                topic = f"retry-eos-{uuid.uuid4().hex[:8]}"
                specs[mode, guarantee] = f"{mode},{topic},retry-{uuid.uuid4().hex[:8]}"
            else:
                topic = f"retry-{uuid.uuid4().hex[:8]}"
                specs[mode, guarantee] = f"{mode},{topic}"
            create_topic(bootstrap, topic, PARTITIONS)
    out = tmp_path_factory.mktemp("retry") / "results.json"
    code, output = run_script("tests.spark.retry_job", bootstrap, str(ROWS), str(FAIL_AT), str(out),
                              *specs.values())
    assert out.exists(), f"the retry job wrote no results (exit {code}):\n{output[-4000:]}"
    assert code == 0, f"the retry job failed:\n{output[-4000:]}"
    results = json.loads(out.read_text())
    parts = {}
    for chunk in output.split(CASE_MARK)[1:]:
        topic, _, rest = chunk.partition("\n")
        parts[topic] = rest
    cases = {}
    for key, spec in specs.items():
        _, topic, _ = parse_case(spec)
        result = results.get(topic, {"metrics": None, "error": "the job did not run this case"})
        cases[key] = RetryCase(topic, result["metrics"], result["error"], parts.get(topic, ""))
    return cases


def _case(retry_runs, mode: str, guarantee: str) -> RetryCase:
    case = retry_runs[mode, guarantee]
    assert case.error is None, f"the {mode} {guarantee} write failed:\n{case.error}"
    assert "null 'topic'" in case.output, "attempt 0 did not fail as planned"
    return case


@pytest.mark.parametrize("mode", MODES)
def test_retried_task_completes_the_write_and_counts_once(kafka, retry_runs, mode):
    bootstrap = kafka.bootstrap_servers
    case = _case(retry_runs, mode, "at-least-once")
    topic = case.topic

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=ROWS + FAIL_AT)
    seen = Counter(int(r.key) for part in records.values() for r in part)
    assert all(r.value == b"v" + r.key for part in records.values() for r in part)
    assert set(seen) == set(range(ROWS)), "a row is missing"
    duplicated = sorted(i for i, count in seen.items() if count > 1)
    assert duplicated == list(range(ROWS // 2, ROWS // 2 + FAIL_AT)), \
        "exactly the rows the failed attempt sent arrive twice"
    assert set(seen.values()) == {1, 2}

    metrics = case.metrics
    assert metrics["record-send-total"] == ROWS  # the failed attempt's 1,500 are not counted
    assert metrics[f"topic.{topic}.record-send-total"] == ROWS
    assert metrics["task-total"] == PARTITIONS and metrics["task-retried-total"] == 1
    assert metrics["record-error-total"] == 0
    # each successful task created its producer: partition 0 (no producer of this case's config
    # in any worker yet), and the retry, which the pool never serves the cached producer
    # (attempt > 0 replaces it)
    assert metrics["producer-create-total"] == PARTITIONS


@pytest.mark.parametrize("mode", MODES)
def test_exactly_once_a_retried_task_writes_every_row_once(kafka, retry_runs, mode):
    bootstrap = kafka.bootstrap_servers
    case = _case(retry_runs, mode, "exactly-once")
    topic = case.topic

    records = consume_all(bootstrap, topic, PARTITIONS, expected_count=ROWS)  # read_committed
    seen = Counter(int(r.key) for part in records.values() for r in part)
    assert set(seen) == set(range(ROWS)) and set(seen.values()) == {1}, \
        f"{sum(n > 1 for n in seen.values())} rows arrived twice"
    # the failed attempt's rows are in the log all the same, aborted: the test has teeth
    assert sum(list_offsets(bootstrap, topic, PARTITIONS, committed=False).values()) > ROWS + FAIL_AT
    metrics = case.metrics
    assert metrics["record-send-total"] == ROWS and metrics["task-retried-total"] == 1
    assert metrics["transaction-commit-total"] == PARTITIONS
    assert metrics["batch-replay-total"] == 0
    assert_no_open_transaction(bootstrap, topic, PARTITIONS)
