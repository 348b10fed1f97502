"""KafkaProducer's transactional calls that decide without a broker: misuse is refused at once,
and a refused commit leaves alone a flush another thread has in progress. The sender thread only
ever sees a refused connection."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.producer import KafkaProducer


@pytest.fixture
def make():
    producers = []

    def make(**config):
        producer = KafkaProducer({"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                                  "reconnect.backoff.ms": 1_000, **config})
        producers.append(producer)
        return producer

    yield make
    for producer in producers:
        producer.close(0)


def test_transactional_calls_need_a_transactional_id(make):
    producer = make()
    for call in (producer.init_transactions, producer.begin_transaction,
                 producer.commit_transaction, producer.abort_transaction,
                 producer.resumable_transaction):
        with pytest.raises(IllegalStateError, match="needs transactional.id"):
            call()


def test_a_transactional_producer_refuses_sends_and_commits_outside_a_transaction(make):
    producer = make(**{"transactional.id": "etl-1"})
    with pytest.raises(IllegalStateError, match="outside a transaction"):
        producer.send("t", b"v")
    with pytest.raises(IllegalStateError, match="before init_transactions"):
        producer.begin_transaction()


def test_a_refused_commit_leaves_another_threads_flush_in_progress(make):
    producer = make(**{"transactional.id": "etl-1"})
    accumulator = producer._accumulator
    accumulator.begin_flush()                  # a flush() in progress on another thread
    with pytest.raises(IllegalStateError, match="no open transaction"):
        producer.commit_transaction()
    assert accumulator.flush_in_progress
    assert accumulator.await_flush_completion(0)
    assert not accumulator.flush_in_progress
