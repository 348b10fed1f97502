"""The partitioner: murmur2 against Java's vectors, numpy/scalar parity, explicit partitions, and
the sticky partitioner (switching, uniformity, adaptive weights, availability, concurrency)."""

from __future__ import annotations

import os
import pickle
import random
import subprocess
import sys
import threading
from collections import Counter
from contextlib import contextmanager
from unittest import mock

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from spark_kafka_sink.errors import InvalidPartitionError, KafkaError
from spark_kafka_sink.producer import partitioner as part
from spark_kafka_sink.producer.partitioner import (
    MURMUR2_MANY_IMPLEMENTATION,
    PURE_ENV_VAR,
    UNKNOWN_PARTITION,
    NodeLatency,
    PartitionLoadStats,
    PartitionLoad,
    StickyPartition,
    StickyPartitioner,
    TopicPartitions,
    build_load_stats,
    check_partition,
    murmur2,
    murmur2_many,
    murmur2_many_pure,
    partition_for_key,
    partitions_for_keys,
    to_positive,
)

# (key, Utils.murmur2(key), BuiltInPartitioner.partitionForKey(key, n) for n = 1, 7, 64, 1000),
# printed by tests/integration/java/Murmur2Dump.java on kafka-clients 4.1.1. The first six
# non-empty ones are also the cases of Kafka's UtilsTest.testMurmur2. The 0x80.. / 0xff.. keys
# would differ if the tail bytes were sign-extended.
JAVA_VECTORS = [
    (b"", 275646681, (0, 2, 25, 681)),
    (b"21", -973932308, (0, 3, 44, 340)),
    (b"foobar", -790332482, (0, 0, 62, 166)),
    (b"a-little-bit-long-string", -985981536, (0, 1, 32, 112)),
    (b"a-little-bit-longer-string", -1486304829, (0, 0, 3, 819)),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971, (0, 3, 13, 677)),
    (b"abc", 479470107, (0, 4, 27, 107)),
    (b"\x80", 857690492, (0, 1, 60, 492)),
    (b"\xff\xfe", 1717632651, (0, 0, 11, 651)),
    (b"\x80\x81\x82", -1975640061, (0, 6, 3, 587)),
    (b"\xff\xff\xff\xff", 644171429, (0, 6, 37, 429)),
    (b"\xff\xff\xff\xff\xff", -363838622, (0, 2, 34, 26)),
    (b"\x7f\x80\xff\x00\x01\x80\xfe", 179312026, (0, 5, 26, 26)),
    (b"\x00", 375494588, (0, 0, 60, 588)),
    (b"\x00\x00\x00\x00", 850957120, (0, 6, 0, 120)),
    ("ключ-€".encode(), 1229281790, (0, 2, 62, 790)),
    (bytes(range(256)), -1948347274, (0, 3, 54, 374)),
    (bytes(range(255, -1, -1))[:255], -788971837, (0, 6, 3, 811)),
    (b"\xa5" * 1021, 361579440, (0, 5, 48, 440)),
    (b"key-123456789", 1669656999, (0, 3, 39, 999)),
]
COUNTS = (1, 7, 64, 1000)
JAVA_IDS = [f"{len(key)}B-{key[:6].hex()}" for key, _, _ in JAVA_VECTORS]

# Kafka's UtilsTest.testMurmur2, verbatim.
UTILS_TEST = {
    b"21": -973932308,
    b"foobar": -790332482,
    b"a-little-bit-long-string": -985981536,
    b"a-little-bit-longer-string": -1486304829,
    b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8": -58897971,
    b"abc": 479470107,
}

keys_strategy = st.lists(st.one_of(st.binary(max_size=12), st.binary(max_size=700)), max_size=90)


@contextmanager
def numpy_for_any_size():
    """Make the vectorised functions take the numpy path even for a handful of keys."""
    with mock.patch.object(part, "NUMPY_MIN_KEYS", 0):
        yield


# --- murmur2 ------------------------------------------------------------------------------

@pytest.mark.parametrize(("key", "expected", "partitions"), JAVA_VECTORS, ids=JAVA_IDS)
def test_murmur2_matches_java(key, expected, partitions):
    assert murmur2(key) == expected
    assert murmur2(bytearray(key)) == expected
    assert murmur2(memoryview(b"xx" + key + b"yy")[2:2 + len(key)]) == expected
    for count, partition in zip(COUNTS, partitions):
        assert partition_for_key(key, count) == partition


def test_murmur2_matches_kafkas_utils_test():
    assert {key: murmur2(key) for key in UTILS_TEST} == UTILS_TEST


def test_vectorised_paths_match_java():
    keys = [key for key, _, _ in JAVA_VECTORS]
    hashes = np.array([expected for _, expected, _ in JAVA_VECTORS], dtype=np.int32)
    with numpy_for_any_size():
        assert murmur2_many(keys).tolist() == hashes.tolist()
        assert murmur2_many(pa.array(keys, pa.binary())).tolist() == hashes.tolist()
        for i, count in enumerate(COUNTS):
            expected = [partitions[i] for _, _, partitions in JAVA_VECTORS]
            assert partitions_for_keys(keys, count).tolist() == expected
    assert murmur2_many_pure(keys).tolist() == hashes.tolist()


def test_to_positive_clears_the_sign_bit():
    assert to_positive(5) == 5
    assert to_positive(-1) == 0x7FFFFFFF
    assert to_positive(-(2 ** 31)) == 0
    assert to_positive(-790332482) == -790332482 & 0x7FFFFFFF


@settings(max_examples=40, deadline=None)
@given(st.binary(max_size=64))
def test_murmur2_is_a_signed_32_bit_int(key):
    assert -(2 ** 31) <= murmur2(key) < 2 ** 31


@settings(max_examples=60, deadline=None)
@given(st.binary(max_size=part.KEY_CACHE_MAX_KEY_BYTES + 40), st.integers(1, 64))
def test_cached_partition_for_key_equals_the_uncached_path(key, count):
    expected = (murmur2(key) & 0x7FFFFFFF) % count
    for same_key in (key, bytes(key), bytearray(key), memoryview(key)):  # hit, hit, uncached x2
        assert partition_for_key(same_key, count) == expected


def test_key_cache_is_bounded_and_skips_long_and_mutable_keys():
    part._murmur2_cached.cache_clear()
    for i in range(part.KEY_CACHE_SIZE + 100):
        partition_for_key(b"key-%d" % i, 7)
    partition_for_key(b"x" * (part.KEY_CACHE_MAX_KEY_BYTES + 1), 7)
    partition_for_key(bytearray(b"mutable"), 7)
    info = part._murmur2_cached.cache_info()
    assert info.currsize == part.KEY_CACHE_SIZE
    assert info.misses == part.KEY_CACHE_SIZE + 100


def test_partition_for_key_rejects_no_partitions():
    with pytest.raises(ValueError, match="num_partitions"):
        partition_for_key(b"k", 0)
    with pytest.raises(ValueError, match="num_partitions"):
        partitions_for_keys([b"k"], 0)


# --- the vectorised path ------------------------------------------------------------------

@settings(max_examples=150, deadline=None)
@given(keys_strategy)
def test_murmur2_many_equals_scalar(keys):
    expected = [murmur2(k) for k in keys]
    with numpy_for_any_size():
        got = murmur2_many(keys)
    assert got.dtype == np.int32
    assert got.tolist() == expected
    assert murmur2_many_pure(keys).tolist() == expected


@settings(max_examples=100, deadline=None)
@given(keys_strategy, st.integers(min_value=1, max_value=5000), st.data())
def test_partitions_for_keys_equal_scalar_on_arrow(keys, count, data):
    with_nulls = [None if data.draw(st.booleans(), "null") else k for k in keys] \
        if keys and data.draw(st.booleans(), "nulls") else keys
    expected = [UNKNOWN_PARTITION if k is None else partition_for_key(k, count) for k in with_nulls]
    start = data.draw(st.integers(0, len(keys)), "slice start")
    with numpy_for_any_size():
        assert partitions_for_keys(with_nulls, count).tolist() == expected
        for arrow_type in (pa.binary(), pa.large_binary()):
            arr = pa.array(with_nulls, arrow_type)
            assert partitions_for_keys(arr, count).tolist() == expected
            assert partitions_for_keys(arr.slice(start), count).tolist() == expected[start:]
        chunked = pa.chunked_array([pa.array(with_nulls[:start], pa.binary()),
                                    pa.array(with_nulls[start:], pa.binary())])
        assert partitions_for_keys(chunked, count).tolist() == expected


def test_string_keys_hash_as_utf8():
    words = ["", "a", "ключ", "€uro", "key-1", "längere-zeichenkette"] * 20
    expected = [murmur2(w.encode()) for w in words]
    assert murmur2_many(words).tolist() == expected  # 120 keys: the numpy path
    assert murmur2_many(pa.array(words, pa.string())).tolist() == expected
    assert murmur2_many(pa.array(words, pa.large_string()).slice(5)).tolist() == expected[5:]
    assert murmur2_many(words[:3]).tolist() == expected[:3]  # the scalar path


def test_arrow_null_slot_bytes_are_ignored():
    """A null slot may own bytes in the data buffer; they must not be hashed or shift the rest."""
    arr = pa.array([b"abcdefgh", b"zzzzzzzzz", b"12345"], pa.binary())
    validity = pa.array([True, False, True]).buffers()[1]
    nulled = pa.Array.from_buffers(pa.binary(), 3, [validity, *arr.buffers()[1:]], null_count=1)
    expected = [partition_for_key(b"abcdefgh", 7), UNKNOWN_PARTITION,
                partition_for_key(b"12345", 7)]
    with numpy_for_any_size():
        assert partitions_for_keys(nulled, 7).tolist() == expected


def test_murmur2_many_rejects_null_keys():
    with pytest.raises(ValueError, match="1 null key"):
        murmur2_many([b"a", None])
    with pytest.raises(ValueError, match="null key"):
        murmur2_many(pa.array([None] * 100, pa.binary()))


def test_large_inputs_take_the_live_path_and_agree():
    rng = random.Random(7)
    keys = [rng.randbytes(rng.randrange(0, 1025)) for _ in range(3000)]
    keys[::97] = [b""] * len(keys[::97])
    assert len(keys) >= part.NUMPY_MIN_KEYS
    if MURMUR2_MANY_IMPLEMENTATION == "numpy":
        with mock.patch.object(part, "murmur2_many_pure", side_effect=AssertionError("scalar")):
            got = murmur2_many(keys)
    else:
        got = murmur2_many(keys)
    assert got.tolist() == [murmur2(k) for k in keys]
    assert murmur2_many((k for k in keys)).tolist() == got.tolist()  # any iterable


def test_numpy_path_is_live_by_default_and_env_var_forces_python():
    assert MURMUR2_MANY_IMPLEMENTATION == ("python" if os.environ.get(PURE_ENV_VAR) else "numpy")
    code = ("from spark_kafka_sink.producer import partitioner as p; "
            "print(p.MURMUR2_MANY_IMPLEMENTATION, p.murmur2_many([b'k'] * 100)[0])")
    env = {**os.environ, PURE_ENV_VAR: "1"}
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=60, check=True).stdout.split()
    assert out == ["python", str(murmur2(b"k"))]


# --- explicit partitions ------------------------------------------------------------------

def test_check_partition_accepts_partitions_in_range():
    assert check_partition("t", 0, 1) == 0
    assert check_partition("t", 6, 7) == 6
    assert check_partition("t", np.int64(3), 7) == 3


@pytest.mark.parametrize("partition", [-1, 7, 100])
def test_check_partition_rejects_partitions_out_of_range(partition):
    with pytest.raises(InvalidPartitionError) as info:
        check_partition("orders", partition, 7)
    err = info.value
    assert isinstance(err, KafkaError) and isinstance(err, ValueError)
    assert (err.topic, err.partition, err.num_partitions) == ("orders", partition, 7)
    assert "'orders'" in str(err) and str(partition) in str(err) and "7 partition(s)" in str(err)
    copy = pickle.loads(pickle.dumps(err))
    assert type(copy) is InvalidPartitionError and str(copy) == str(err)


@pytest.mark.parametrize("partition", ["1", 1.0, True])
def test_check_partition_rejects_non_integers(partition):
    with pytest.raises(TypeError, match="partition"):
        check_partition("t", partition, 7)


# --- sticky partitioner: switching ----------------------------------------------------------

ALL7 = TopicPartitions(7, tuple(range(7)))


def test_sticks_until_batch_size_bytes_then_switches():
    sp = StickyPartitioner(100, rng=random.Random(1))
    first = sp.peek("t", ALL7)
    assert sp.partition("t", ALL7) == first.partition and sp.peek("t", ALL7) is first
    assert not sp.update_partition_info("t", first, 60, ALL7)
    assert sp.peek("t", ALL7) is first and first.produced_bytes == 60
    assert sp.update_partition_info("t", first, 40, ALL7)  # exactly batch.size: switch
    second = sp.peek("t", ALL7)
    assert second is not first and second.produced_bytes == 0
    assert sp.is_changed("t", first) and not sp.is_changed("t", second)


def test_stale_token_changes_nothing():
    sp = StickyPartitioner(10, rng=random.Random(2))
    old = sp.peek("t", ALL7)
    sp.update_partition_info("t", old, 10, ALL7)
    new = sp.peek("t", ALL7)
    assert not sp.update_partition_info("t", old, 1000, ALL7)
    assert sp.peek("t", ALL7) is new and new.produced_bytes == 0


def test_disabled_switch_waits_for_twice_batch_size():
    sp = StickyPartitioner(100, rng=random.Random(3))
    token = sp.peek("t", ALL7)
    assert not sp.update_partition_info("t", token, 150, ALL7, enable_switch=False)
    assert not sp.update_partition_info("t", token, 49, ALL7, enable_switch=False)
    assert sp.update_partition_info("t", token, 1, ALL7, enable_switch=False)  # 200 = 2 x 100


def test_topics_are_independent():
    sp = StickyPartitioner(10, rng=random.Random(4))
    a, b = sp.peek("a", ALL7), sp.peek("b", ALL7)
    sp.update_partition_info("a", a, 10, ALL7)
    assert sp.is_changed("a", a) and not sp.is_changed("b", b)


def _switch_counts(sp: StickyPartitioner, view, switches: int, topic: str = "t") -> Counter:
    counts: Counter = Counter()
    for _ in range(switches):
        token = sp.peek(topic, view)
        counts[token.partition] += 1
        sp.update_partition_info(topic, token, sp.batch_size, view)
    return counts


def test_switches_are_uniform_over_available_partitions():
    sp = StickyPartitioner(16384, rng=random.Random(794))
    counts = _switch_counts(sp, ALL7, 14_000)
    assert sorted(counts) == list(range(7))
    assert all(1850 <= n <= 2150 for n in counts.values()), counts  # 2000 expected


def test_only_available_partitions_are_chosen():
    view = TopicPartitions(6, (1, 4, 5))
    counts = _switch_counts(StickyPartitioner(1, rng=random.Random(5)), view, 3000)
    assert sorted(counts) == [1, 4, 5] and min(counts.values()) > 900


def test_no_available_partition_falls_back_to_all():
    counts = _switch_counts(StickyPartitioner(1, rng=random.Random(6)), TopicPartitions(3, ()), 600)
    assert sorted(counts) == [0, 1, 2]


def test_topic_without_partitions_is_an_error():
    with pytest.raises(ValueError, match="no partitions"):
        StickyPartitioner(1).partition("t", TopicPartitions(0, ()))


def test_configuration_is_validated():
    with pytest.raises(ValueError, match="batch_size"):
        StickyPartitioner(0)
    with pytest.raises(ValueError, match="availability_timeout_ms"):
        StickyPartitioner(1, availability_timeout_ms=-1)


# --- sticky partitioner: adaptive weights ---------------------------------------------------

def test_load_stats_is_javas_cumulative_frequency_table():
    # Java's example: queue sizes 0 3 1 -> weights 4 1 3 -> CFT 4 5 8.
    stats = build_load_stats([0, 3, 1], [10, 11, 12], 3)
    assert stats == PartitionLoadStats((4, 5, 8), (10, 11, 12))
    assert [stats.pick(r) for r in range(8)] == [10, 10, 10, 10, 11, 12, 12, 12]
    assert stats.pick(8 + 4) == 11  # r is taken modulo the total


def test_load_stats_stays_uniform_when_nothing_to_weigh():
    assert build_load_stats([2, 2, 2], [0, 1, 2], 3) is None  # all equal, nothing excluded
    assert build_load_stats([5], [0], 1) is None  # fewer than two partitions
    assert build_load_stats([], [], 4) is None  # nothing may be chosen
    # one of three excluded: weighted even though the rest are equal
    assert build_load_stats([2, 2], [0, 2], 3) == PartitionLoadStats((1, 2), (0, 2))


def _queues(sizes, leaders=None):
    leaders = leaders or [1] * len(sizes)
    return [PartitionLoad(p, size, leader) for p, (size, leader) in enumerate(zip(sizes, leaders))]


def test_adaptive_prefers_short_queues():
    sp = StickyPartitioner(1, rng=random.Random(8))
    sp.update_load_stats("t", _queues([0, 10, 0, 10]), 4)
    assert sp.load_stats("t") == PartitionLoadStats((11, 12, 23, 24), (0, 1, 2, 3))
    counts = _switch_counts(sp, TopicPartitions(4, (0, 1, 2, 3)), 24_000)
    assert 10_500 <= counts[0] <= 11_500 and 10_500 <= counts[2] <= 11_500  # 11000 expected
    assert 800 <= counts[1] <= 1200 and 800 <= counts[3] <= 1200  # 1000 expected


def test_adaptive_needs_a_queue_for_every_partition_and_can_be_disabled():
    sp = StickyPartitioner(1, rng=random.Random(9))
    sp.update_load_stats("t", _queues([0, 10, 0]), 4)  # partition 3 has no deque yet
    assert sp.load_stats("t") is None
    off = StickyPartitioner(1, adaptive=False)
    off.update_load_stats("t", _queues([0, 10, 0, 10]), 4)
    assert off.load_stats("t") is None


def test_adaptive_leaves_out_partitions_without_leader():
    sp = StickyPartitioner(1, rng=random.Random(10))
    sp.update_load_stats("t", _queues([0, 0, 3], [1, None, 1]), 3)
    assert sp.load_stats("t") == PartitionLoadStats((4, 5), (0, 2))
    assert set(_switch_counts(sp, TopicPartitions(3, (0, 2)), 500)) == {0, 2}


def test_availability_timeout_excludes_partitions_of_slow_nodes():
    latency = {1: NodeLatency(ready_time_ms=10_000, drain_time_ms=9_990),
               2: NodeLatency(ready_time_ms=10_000, drain_time_ms=8_000)}  # 2: 2 s without drain
    queues = _queues([1, 1, 1, 1], [1, 2, 1, 2])
    sp = StickyPartitioner(1, availability_timeout_ms=1000, rng=random.Random(11))
    sp.update_load_stats("t", queues, 4, latency)
    assert sp.load_stats("t") == PartitionLoadStats((1, 2), (0, 2))
    assert set(_switch_counts(sp, TopicPartitions(4, (0, 1, 2, 3)), 500)) == {0, 2}

    within = StickyPartitioner(1, availability_timeout_ms=2000, rng=random.Random(11))
    within.update_load_stats("t", queues, 4, latency)  # 2000 ms is not over 2000
    assert within.load_stats("t") is None
    off = StickyPartitioner(1, availability_timeout_ms=0)
    off.update_load_stats("t", queues, 4, latency)
    assert off.load_stats("t") is None


def test_availability_timeout_keeps_partitions_with_empty_queues():
    """As in Java: only partitions with queued batches are checked against the node's latency."""
    latency = {2: NodeLatency(ready_time_ms=10_000, drain_time_ms=0)}
    sp = StickyPartitioner(1, availability_timeout_ms=1000)
    sp.update_load_stats("t", _queues([1, 0, 1, 3], [1, 2, 1, 2]), 4, latency)
    assert sp.load_stats("t") == PartitionLoadStats((1, 3, 4), (0, 1, 2))


# --- sticky partitioner: threads ----------------------------------------------------------

def test_concurrent_appends_under_deque_locks_count_every_byte():
    """Four threads follow the documented protocol; every byte lands on exactly one token."""
    sp = StickyPartitioner(1000, rng=random.Random(12))
    view = TopicPartitions(4, (0, 1, 2, 3))
    deque_locks = [threading.Lock() for _ in range(4)]
    tokens: set = set()
    tokens_lock = threading.Lock()
    appends_per_thread, size = 5000, 7

    def producer():
        for _ in range(appends_per_thread):
            while True:
                token = sp.peek("t", view)
                with deque_locks[token.partition]:
                    if sp.is_changed("t", token):
                        continue
                    sp.update_partition_info("t", token, size, view)
                    break
            with tokens_lock:
                tokens.add(token)

    threads = [threading.Thread(target=producer) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=30)
    assert not any(t.is_alive() for t in threads)
    assert sum(t.produced_bytes for t in tokens) == 4 * appends_per_thread * size
    current = sp.peek("t", view)
    assert all(t.produced_bytes >= 1000 for t in tokens if t is not current)
    assert all(isinstance(t, StickyPartition) for t in tokens)
