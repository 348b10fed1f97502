"""``row_chunks`` caps a pass by rows as well as bytes (tiny rows: per-row work arrays dominate)."""

from __future__ import annotations

import numpy as np

from spark_kafka_sink.producer.arrow.send import row_chunks


def test_a_row_cap_splits_passes_of_tiny_rows():
    sizes = np.full(10, 3, dtype=np.int64)
    assert row_chunks(sizes, 1_000) == [(0, 10)]
    assert row_chunks(sizes, 1_000, max_rows=4) == [(0, 4), (4, 8), (8, 10)]
    assert row_chunks(sizes, 7, max_rows=4) == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]  # bytes first
    assert row_chunks(np.array([50, 1, 1], dtype=np.int64), 10, max_rows=1) == [(0, 1), (1, 2), (2, 3)]
