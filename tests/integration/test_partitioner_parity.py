"""Keyed partitioning parity: ours = Apache Kafka's Java producer = librdkafka's ``murmur2_random``.

10,000 seeded random keys (empty ones, short ones, long ones up to 1 KiB, bytes with the high bit
set) over topics of 1, 7 and 64 partitions:

- ``java/Murmur2Dump.java`` prints ``Utils.murmur2`` and ``BuiltInPartitioner.partitionForKey``
  for every key; our scalar and vectorised functions must give the same.
- confluent-kafka's producer with ``partitioner=murmur2_random`` produces every key to the
  embedded broker; the partition in each delivery report must be ours. librdkafka sends a *null*
  key to a random partition, so only non-null keys are used; an empty key (``b""``) is not null
  there and is hashed like any other (checked: it lands where Java puts it).

Needs ``javac`` and the Kafka jars (fails, never skips, without them) and the broker.
"""

from __future__ import annotations

import random
import time
import uuid
from pathlib import Path

import numpy as np
import pytest
from confluent_kafka import Producer

from spark_kafka_sink.producer.partitioner import (
    murmur2,
    murmur2_many,
    partition_for_key,
    partitions_for_keys,
)

from ..helpers import create_topic
from ..javatools import compile_java

pytestmark = pytest.mark.broker

SOURCE = Path(__file__).with_name("java") / "Murmur2Dump.java"
COUNTS = (1, 7, 64)
KEYS = 10_000
SEED = 794  # KIP-794


def _keys() -> list[bytes]:
    rng = random.Random(SEED)
    keys = [b"", b"\x80", b"\xff\xfe", b"\x80\x81\x82", b"\xff" * 5, b"\x00" * 4, bytes(range(256))]
    while len(keys) < KEYS:
        roll = rng.random()
        if roll < 0.02:
            keys.append(b"")
        elif roll < 0.80:
            keys.append(rng.randbytes(rng.randrange(1, 65)))
        else:
            keys.append(rng.randbytes(rng.randrange(65, 1025)))
    return keys


@pytest.fixture(scope="module")
def keys() -> list[bytes]:
    return _keys()


@pytest.fixture(scope="module")
def java(keys, tmp_path_factory) -> dict[str, list[int]]:
    """``{"hash": [...], 1: [...], 7: [...], 64: [...]}`` from Java, in key order."""
    program = compile_java(SOURCE, tmp_path_factory.mktemp("murmur2-dump"))
    out = program.run([str(c) for c in COUNTS], stdin="".join(k.hex() + "\n" for k in keys))
    rows = [list(map(int, line.split())) for line in out.splitlines()]
    assert len(rows) == len(keys), f"Murmur2Dump printed {len(rows)} rows for {len(keys)} keys"
    columns = list(zip(*rows))
    return {"hash": list(columns[0]), **{c: list(columns[i + 1]) for i, c in enumerate(COUNTS)}}


def _produce_all(bootstrap: str, topic: str, keys: list[bytes],
                 timeout_s: float = 30.0) -> list[int]:
    """The partition librdkafka's murmur2_random gave each key (from the delivery reports)."""
    partitions = [-2] * len(keys)
    errors = []

    def delivered(index: int, err, msg) -> None:
        if err is not None:
            errors.append(err)
        else:
            partitions[index] = msg.partition()

    producer = Producer({"bootstrap.servers": bootstrap, "partitioner": "murmur2_random",
                         "linger.ms": 20, "acks": 1, "queue.buffering.max.messages": 2 * len(keys)})
    deadline = time.monotonic() + timeout_s
    for i, key in enumerate(keys):
        producer.produce(topic, value=None, key=key,
                         on_delivery=lambda err, msg, i=i: delivered(i, err, msg))
        if i % 1000 == 999:
            producer.poll(0)
    remaining = producer.flush(max(deadline - time.monotonic(), 0.1))
    assert remaining == 0, f"{remaining} message(s) to {topic} undelivered after {timeout_s} s"
    assert not errors, f"delivery errors on {topic}: {errors[:5]}"
    del producer  # librdkafka is torn down now, not when the session's broker is gone
    return partitions


def test_our_hash_and_partitions_equal_javas(keys, java):
    ours = [murmur2(k) for k in keys]
    mismatches = [(k.hex()[:40], len(k), o, j)
                  for k, o, j in zip(keys, ours, java["hash"]) if o != j]
    assert not mismatches, \
        f"{len(mismatches)} hash mismatches (key, len, ours, Java): {mismatches[:5]}"
    assert murmur2_many(keys).tolist() == java["hash"]
    for count in COUNTS:
        assert [partition_for_key(k, count) for k in keys] == java[count], f"{count} partitions"
        assert partitions_for_keys(keys, count).tolist() == java[count], f"{count} partitions"


def test_our_partitions_equal_librdkafka_murmur2_random(kafka, keys, java):
    for count in COUNTS:
        topic = f"murmur2-parity-{count}-{uuid.uuid4().hex[:8]}"
        create_topic(kafka.bootstrap_servers, topic, count)
        theirs = np.array(_produce_all(kafka.bootstrap_servers, topic, keys))
        ours = partitions_for_keys(keys, count)
        bad = np.flatnonzero(theirs != ours)
        assert not len(bad), (
            f"{len(bad)} of {len(keys)} keys differ on {count} partitions (key, ours, librdkafka): "
            f"{[(keys[i].hex()[:40], int(ours[i]), int(theirs[i])) for i in bad[:5]]}")
        assert ours.tolist() == java[count]  # and all three agree
        if count > 1:
            assert len(set(theirs.tolist())) == count  # every partition was used
