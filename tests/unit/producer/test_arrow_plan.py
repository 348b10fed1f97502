"""Partition planning for Arrow input: the same choices send() makes, for whole columns."""

from __future__ import annotations

import random

import numpy as np
import pyarrow as pa
import pytest

from spark_kafka_sink.errors import InvalidPartitionError
from spark_kafka_sink.producer.arrow.plan import plan_partitions, sticky_runs
from spark_kafka_sink.producer.partitioner import StickyPartitioner, TopicPartitions, partition_for_key

VIEW = TopicPartitions(7, tuple(range(7)))


def sticky(batch_size=1000, seed=3):
    return StickyPartitioner(batch_size, adaptive=False, rng=random.Random(seed))


def test_keyed_rows_match_the_scalar_partitioner_and_groups_keep_row_order():
    keys = [f"user-{i % 37}".encode() for i in range(500)]
    plan = plan_partitions("t", VIEW, rows=500, keys=pa.array(keys, pa.binary()))
    assert plan.partitions.tolist() == [partition_for_key(k, 7) for k in keys]
    assert sorted(g.partition for g in plan.groups) == [g.partition for g in plan.groups]
    for group in plan.groups:
        assert group.rows.tolist() == sorted(group.rows.tolist())
        assert set(plan.partitions[group.rows].tolist()) == {group.partition}
    assert sum(len(g.rows) for g in plan.groups) == plan.row_count == 500


def test_string_keys_hash_as_utf8():
    keys = ["é", "k1", "ключ"]
    plan = plan_partitions("t", VIEW, rows=3, keys=pa.array(keys))
    assert plan.partitions.tolist() == [partition_for_key(k.encode(), 7) for k in keys]


def test_an_explicit_partition_wins_and_a_null_one_falls_back_to_the_key():
    keys = pa.array([b"a", b"b", b"c"])
    plan = plan_partitions("t", VIEW, rows=3, keys=keys, explicit=pa.array([6, None, 0], pa.int32()))
    assert plan.partitions.tolist() == [6, partition_for_key(b"b", 7), 0]


def test_out_of_range_partition_names_the_row():
    with pytest.raises(InvalidPartitionError, match=r"row 2: invalid partition 7 for topic 't'.*0\.\.6 \(2 rows are out of range\)"):
        plan_partitions("t", VIEW, rows=4, keys=None, explicit=pa.array([0, 1, 7, -1]))


def test_null_keys_go_in_sticky_runs_of_batch_size_bytes():
    partitioner = sticky(batch_size=1000)
    sizes = np.full(50, 100, dtype=np.int64)  # 10 rows fill a run
    keys = pa.array([None] * 50, pa.binary())
    plan = plan_partitions("t", VIEW, rows=50, keys=keys, sizes=sizes, sticky=partitioner)
    runs = [plan.partitions[i:i + 10].tolist() for i in range(0, 50, 10)]
    assert all(len(set(run)) == 1 for run in runs)
    reference = sticky(batch_size=1000)  # the same choices, record by record
    expected = []
    for _ in range(50):
        current = reference.peek("t", VIEW)
        expected.append(current.partition)
        reference.update_partition_info("t", current, 100, VIEW, enable_switch=True)
    assert plan.partitions.tolist() == expected


def test_sticky_runs_continue_from_the_partitioners_state():
    partitioner = sticky(batch_size=1000)
    first = sticky_runs("t", VIEW, partitioner, np.full(3, 300, dtype=np.int64))
    second = sticky_runs("t", VIEW, partitioner, np.full(3, 300, dtype=np.int64))
    assert len(set(first.tolist())) == 1  # 900 bytes: no switch yet
    assert second[0] == first[0]  # the 4th row reaches 1000 bytes on the same partition
    assert len(set(second.tolist()[1:])) == 1


def test_mixed_keyed_and_unkeyed_rows():
    keys = pa.array([b"x", None, b"y", None], pa.binary())
    plan = plan_partitions("t", VIEW, rows=4, keys=keys, sizes=np.full(4, 10), sticky=sticky())
    assert plan.partitions[0] == partition_for_key(b"x", 7) and plan.partitions[2] == partition_for_key(b"y", 7)
    assert plan.partitions[1] == plan.partitions[3]


def test_ignore_keys_sends_keyed_rows_sticky_too():
    keys = pa.array([b"x", b"y"], pa.binary())
    plan = plan_partitions("t", VIEW, rows=2, keys=keys, sizes=np.full(2, 10), sticky=sticky(),
                           ignore_keys=True)
    assert plan.partitions[0] == plan.partitions[1]


def test_rows_without_key_need_sizes_and_a_partitioner():
    with pytest.raises(ValueError, match="sticky partitioner"):
        plan_partitions("t", VIEW, rows=2)


def test_empty_input():
    plan = plan_partitions("t", VIEW, rows=0, keys=pa.array([], pa.binary()))
    assert plan.groups == () and plan.row_count == 0


def test_a_plan_slice_regroups_its_rows():
    keys = pa.array([f"k{i}".encode() for i in range(40)], pa.binary())
    plan = plan_partitions("t", VIEW, rows=40, keys=keys)
    part = plan.slice(10, 25)
    assert part.partitions.tolist() == plan.partitions[10:25].tolist()
    assert sorted(int(r) for g in part.groups for r in g.rows) == list(range(15))
