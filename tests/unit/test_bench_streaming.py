"""The streaming benchmark's figures without Spark or a broker (bench/streaming.py): which
micro-batches count as warm, their median and p90, the delivery check, and the closing lines
the issue's targets use."""

from __future__ import annotations

import pytest

from bench.cpu import CpuSplit
from bench.streaming import (Batch, Comparison, Run, batches, comparisons, latency, medians, per_batch_ms,
                             quantile, shortfall, warm)


def progress(batch_id, add_batch, rows):
    entry = {"batchId": batch_id, "numInputRows": rows, "durationMs": {"triggerExecution": 1000}}
    if add_batch is not None:
        entry["durationMs"]["addBatch"] = add_batch
    return entry


def test_only_progress_that_ran_a_batch_counts_in_batch_order():
    found = batches([progress(2, 30, 5), progress(0, 10, 0), progress(3, None, 0), progress(1, 20, 7)])
    assert found == [Batch(0, 10.0, 0), Batch(1, 20.0, 7), Batch(2, 30.0, 5)]
    assert batches([{"batchId": 4, "numInputRows": 0, "durationMs": None}]) == []


def test_warm_batches_drop_the_first_few_and_any_before_the_first_with_rows():
    found = [Batch(i, 100.0 + i, 0 if i < 5 else 2000) for i in range(8)]
    assert [b.batch_id for b in warm(found, skip=3)] == [5, 6, 7]
    assert [b.batch_id for b in warm(found[5:], skip=1)] == [6, 7]
    assert [b.batch_id for b in warm(found[5:], skip=0)] == [5, 6, 7]
    assert warm([Batch(0, 5.0, 0), Batch(1, 5.0, 0)], skip=0) == []


def test_quantiles_interpolate_between_ranks():
    assert quantile([300, 100, 200], 0.5) == 200
    assert quantile([100, 200, 300, 400], 0.5) == 250
    assert quantile(list(range(1, 11)), 0.9) == pytest.approx(9.1)
    assert quantile([7], 0.9) == 7
    assert quantile([], 0.5) is None
    with pytest.raises(ValueError, match="within"):
        quantile([1], 1.5)


def test_latency_counts_the_warm_batches_only():
    entries = [progress(0, 900, 0), progress(1, 600, 2000), progress(2, 500, 2000), progress(3, 400, 2000)]
    entries += [progress(4 + i, ms, 1990 + i) for i, ms in enumerate([100, 120, 110, 300, 105])]
    figures = latency(entries, skip=3)
    assert (figures.batches, figures.counted) == (9, 6)
    assert figures.batch_ids == (3, 4, 5, 6, 7, 8)
    assert figures.median_ms == 115.0
    assert figures.p90_ms == pytest.approx(350.0)
    assert figures.rows_median == 1992.5
    empty = latency([progress(0, 50, 0)])
    assert (empty.counted, empty.median_ms, empty.p90_ms, empty.rows_median) == (0, None, None, None)


def test_the_targets_read_from_one_runs_medians():
    lines = [c.line() for c in comparisons({"builtin": 100.0, "ours": 120.0, "ours-eos": 175.0,
                                            "floor-count": 95.0, "floor-arrow": 150.0})]
    assert lines == ["ours / builtin: 1.20x (target at most 1.3x: met)",
                     "ours-eos - ours: +55 ms (target at most 40 ms: NOT met)",
                     "floor-count / builtin: 0.95x", "floor-arrow / builtin: 1.50x",
                     "ours - floor-arrow: -30 ms"]


def test_a_missing_side_shows_as_not_measured():
    by_name = {c.what: c for c in comparisons({"ours": 120.0, "builtin": None})}
    assert by_name["ours / builtin"].value is None and by_name["ours / builtin"].met is None
    assert by_name["ours / builtin"].line() == "ours / builtin: n/a (target at most 1.3x: not measured)"
    assert by_name["ours - floor-arrow"].line() == "ours - floor-arrow: n/a"
    assert Comparison("x", 1.3, "x", 1.3).met is True


def test_only_completed_runs_give_medians():
    figures = latency([progress(i, 100 + i, 10) for i in range(6)], skip=3)
    runs = [Run("ours", 2000, "ok", figures), Run("builtin", 2000, "short", figures),
            Run("ours-eos", 2000, "error")]
    assert medians(runs) == {"ours": 104.0}


def test_delivery_must_cover_every_reported_batch():
    assert shortfall(6000, 6000) == "" and shortfall(6500, 6000) == ""
    assert shortfall(0, 0) == "nothing delivered"
    assert shortfall(None, 10) == "not counted"
    assert shortfall(5999, 6000) == "5,999 delivered, fewer than the 6,000 rows of the reported batches"


def test_cpu_is_split_per_batch_in_milliseconds():
    assert per_batch_ms(CpuSplit(1.0, 2.0, 0.5), 10) == CpuSplit(100.0, 200.0, 50.0)
    assert per_batch_ms(CpuSplit(1.0, 2.0, 0.5), 0) is None


def test_kafkasinks_collection_before_a_job_is_allowed_for_once():
    from bench.streaming import SOURCE_PARTITIONS, collection_allowance

    allowance = collection_allowance("ours", 5000)
    assert allowance == 5001 * SOURCE_PARTITIONS and collection_allowance("ours-eos", 5000) == allowance
    assert collection_allowance("ours", 0) == 0 and collection_allowance("builtin", 5000) == 0
    assert shortfall(480_000, 500_000, 20_004) == ""
    assert shortfall(479_000, 500_000, 20_004).startswith("479,000 delivered")
