"""``send_arrow``'s numpy shortcuts against their references: grouping rows by partition with a
radix sort of narrowed partition numbers, and per-row sizes read from Arrow offsets."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pytest

from spark_kafka_sink.producer.arrow.input import ArrowColumns
from spark_kafka_sink.producer.arrow.plan import group_by_partition
from spark_kafka_sink.producer.arrow.send import row_sizes


def reference_groups(partitions):
    return [(int(p), np.flatnonzero(partitions == p).tolist()) for p in np.unique(partitions)]


@pytest.mark.parametrize("count", [1, 12, 255, 256, 300, 65_535, 70_000, 2**31 - 1])
def test_groups_are_stable_and_ascending_for_every_partition_count(count):
    rng = np.random.default_rng(count)
    partitions = rng.integers(0, count, 5_000).astype(np.int32)
    partitions[:3] = count - 1  # the largest partition number is present
    groups = group_by_partition(partitions)
    assert [(g.partition, g.rows.tolist()) for g in groups] == reference_groups(partitions)


def test_groups_of_negative_partition_numbers_keep_the_int32_sort():
    partitions = np.array([3, -1, 3, 0, -1], dtype=np.int32)
    assert [(g.partition, g.rows.tolist()) for g in group_by_partition(partitions)] == [
        (-1, [1, 4]), (0, [3]), (3, [0, 2])]


def arrays(kind):
    cells = [b"abc", None, b"", b"x" * 300, None, "é".encode(), b"k9"]
    if kind in ("string", "large_string"):
        return pa.array([None if c is None else c.decode() for c in cells], getattr(pa, kind)())
    return pa.array(cells, getattr(pa, kind)())


@pytest.mark.parametrize("kind", ["binary", "large_binary", "string", "large_string"])
@pytest.mark.parametrize("window", [(0, 7), (1, 5), (3, 0)])
def test_row_sizes_read_offsets_like_binary_length(kind, window):
    start, length = window
    value = arrays(kind).slice(start, length)
    key = arrays("string").slice(start, length)
    columns = ArrowColumns(length, value, key)
    expected = (pc.fill_null(pc.binary_length(value), 0).to_numpy(zero_copy_only=False)
                + pc.fill_null(pc.binary_length(key), 0).to_numpy(zero_copy_only=False) + 8)
    got = row_sizes(columns)
    assert got.dtype == np.int64
    assert got.tolist() == expected.tolist()
