"""DeliveryTally: records sent with a tally are counted once per batch, not called back per record."""

from __future__ import annotations

import logging
import threading

from spark_kafka_sink.errors import KafkaTimeoutError, NotLeaderOrFollowerError
from spark_kafka_sink.producer.tally import DeliveryFailure, DeliveryTally
from spark_kafka_sink.structs import TopicPartition

from .test_producer_batch import TP, append, new_batch


def test_a_batch_tells_its_tally_once_with_its_record_count():
    tally = DeliveryTally()
    batch = new_batch()
    futures = [append(batch, callback=tally) for _ in range(5)]
    assert tally.completed == 0
    batch.complete(base_offset=40)
    assert (tally.acked, tally.failed, tally.acked_by_topic) == (5, 0, {"topic": 5})
    assert tally.first_failure is None
    assert [f.result(timeout=0).offset for f in futures] == [40, 41, 42, 43, 44]


def test_a_failed_batch_is_the_first_failure_and_later_ones_only_count():
    tally = DeliveryTally()
    first, second, good = new_batch(), new_batch(), new_batch()
    for batch, count in ((first, 3), (second, 2), (good, 4)):
        for _ in range(count):
            append(batch, callback=tally)
    error = NotLeaderOrFollowerError("gone")
    first.fail(error)
    second.fail(KafkaTimeoutError("late"))
    good.complete(base_offset=0)
    assert (tally.acked, tally.failed, tally.completed) == (4, 5, 9)
    assert tally.first_failure == DeliveryFailure(error, TP, 3)
    assert "failed=5" in repr(tally)


def test_futures_of_tallied_records_still_take_done_callbacks():
    tally = DeliveryTally()
    batch = new_batch()
    future = append(batch, callback=tally)
    seen = []
    future.add_done_callback(lambda f: seen.append((tally.acked, f.result().offset)))
    batch.complete(base_offset=9)
    assert seen == [(1, 9)]  # the tally is told before per-record callbacks run


def test_tallies_and_plain_callbacks_share_a_batch():
    mine, theirs = DeliveryTally(), DeliveryTally()
    calls = []
    batch = new_batch()
    append(batch, callback=mine)
    append(batch, callback=lambda metadata, error: calls.append(metadata.offset))
    append(batch, callback=theirs)
    append(batch, callback=mine)
    append(batch)
    batch.complete(base_offset=100)
    assert (mine.acked, theirs.acked, calls) == (2, 1, [101])


def test_a_raising_tally_does_not_stop_the_others(caplog):
    class Broken(DeliveryTally):
        def batch_completed(self, topic_partition, records, error, base_offset=-1):
            raise RuntimeError("tally bug")

    broken, good = Broken(), DeliveryTally()
    batch = new_batch()
    append(batch, callback=broken)
    append(batch, callback=good)
    with caplog.at_level(logging.ERROR, logger="spark_kafka_sink.producer.future"):
        batch.complete(base_offset=0)
    assert good.acked == 1
    assert "delivery tally" in caplog.text and "tally bug" in caplog.text


def test_counts_are_exact_under_concurrent_batches():
    tally = DeliveryTally()
    batches = []
    for _ in range(40):
        batch = new_batch()
        for _ in range(25):
            append(batch, callback=tally)
        batches.append(batch)
    threads = [threading.Thread(target=lambda part: [b.complete(base_offset=0) for b in part],
                                args=(batches[i::4],)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=10)
    assert tally.acked == 1000 and tally.acked_by_topic == {TP.topic: 1000}


def test_the_topic_partition_of_a_failure_names_the_partition():
    tally = DeliveryTally()
    tally.batch_completed(TopicPartition("a", 1), 2, None)
    tally.batch_completed(TopicPartition("b", 0), 3, RuntimeError("x"))
    assert tally.acked_by_topic == {"a": 2}
    assert tally.first_failure.topic_partition == TopicPartition("b", 0)
