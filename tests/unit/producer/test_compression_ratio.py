"""The compression ratio estimate (``producer/compression_ratio.py``): Java's steps, and the
sizes the drain expects from it (``send_arrow``'s budget: test_batch_size.py)."""

from __future__ import annotations

import pytest

from spark_kafka_sink.producer.compression_ratio import (DETERIORATING_STEP, ESTIMATION_FACTOR,
                                                         IMPROVING_STEP, CompressionRatioEstimator)


def test_the_estimate_starts_at_one_and_improves_by_small_steps():
    ratios = CompressionRatioEstimator()
    assert ratios.estimate("t") == 1.0
    assert ratios.observe("t", 10_000, 500) == pytest.approx(1.0 - IMPROVING_STEP)  # 0.05 seen
    for _ in range(500):
        ratios.observe("t", 10_000, 500)
    assert ratios.estimate("t") == pytest.approx(0.05)  # never below what was seen
    assert ratios.estimate("other") == 1.0                # per topic


def test_a_worse_batch_moves_the_estimate_up_at_once():
    ratios = CompressionRatioEstimator()
    for _ in range(300):
        ratios.observe("t", 10_000, 1_000)
    assert ratios.estimate("t") == pytest.approx(0.1)
    assert ratios.observe("t", 10_000, 1_020) == pytest.approx(0.1 + DETERIORATING_STEP)  # at least a step
    assert ratios.observe("t", 10_000, 9_000) == pytest.approx(0.9)                       # or to what was seen
    assert ratios.observe("t", 0, 0) == pytest.approx(0.9)                                # an empty batch: nothing


def test_expected_sizes_follow_the_estimate():
    ratios = CompressionRatioEstimator()
    # no gain assumed yet: a batch is expected 5% larger than its bytes
    assert ratios.estimated_size("t", 61, 1_000) == 61 + int(1_000 * ESTIMATION_FACTOR)
    for _ in range(300):
        ratios.observe("t", 10_000, 1_000)  # 0.1
    assert ratios.estimated_size("t", 61, 10_000) == 61 + int(10_000 * 0.1 * ESTIMATION_FACTOR)
