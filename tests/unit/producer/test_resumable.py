"""Transactions completed without their producer (``producer.transactions.resumable``): what
``commit_resumable`` and ``abort_resumable`` send, over the sender harness's in-memory brokers
(node 2 is the coordinator) and a fake clock. The broker round trip runs in
tests/integration/test_transactions.py and the exactly-once Spark tests."""

from __future__ import annotations

from dataclasses import replace

import pytest

from spark_kafka_sink.client import factory
from spark_kafka_sink.client.factory import ClientObservers
from spark_kafka_sink.errors import ConfigError, KafkaTimeoutError
from spark_kafka_sink.producer import producer as producer_module
from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.producer.transactions import resumable as resumable_module
from spark_kafka_sink.producer.transactions.resumable import (
    ResumableTransaction, abort_resumable, commit_resumable,
)
from spark_kafka_sink.structs import TopicPartition

from ..client.test_sasl_client import PASSWORD, SaslBroker
from ..fakes import FakeClock
from .sender_harness import END_TXN, FIND_COORDINATOR, Harness

CONFIG = {"bootstrap.servers": "b1:9092", "retry.backoff.ms": 10}
TRANSACTION = ResumableTransaction("q-3", 1000, 4, (TopicPartition("t", 0), TopicPartition("t", 1)), 1)


class TickingClock(FakeClock):
    """Moves 5 ms each time it is read, so a wait for an answer that never comes runs out."""

    def monotonic_ms(self) -> int:
        self.advance(5)
        return super().monotonic_ms()


@pytest.mark.parametrize(("complete", "committed"), [(commit_resumable, True), (abort_resumable, False)])
def test_end_txn_goes_to_the_coordinator_with_the_transactions_id_and_epoch(complete, committed):
    h = Harness()
    complete(TRANSACTION, CONFIG, 5, clock=h.clock, selector=h.sel)
    assert len(h.requests(FIND_COORDINATOR)) == 1
    [end] = h.requests(END_TXN)
    assert end in h.requests(END_TXN, node_id=2)
    assert (end.body.transactional_id, end.body.producer_id, end.body.producer_epoch,
            end.body.committed) == ("q-3", 1000, 4, committed)
    assert end.version <= 4                                     # transaction version 1


def test_a_configuration_for_another_transactional_id_is_refused():
    h = Harness()
    with pytest.raises(ConfigError, match="transactional.id 'other' in the configuration is not "
                                          "the transaction's \\('q-3'\\)"):
        commit_resumable(TRANSACTION, {**CONFIG, "transactional.id": "other"}, 5, clock=h.clock,
                         selector=h.sel)
    assert h.requests(END_TXN) == []


def test_the_timeout_is_in_seconds_and_names_the_transaction():
    h = Harness()
    h.kill(2)                                                   # the coordinator is gone
    clock = TickingClock()
    started = clock.monotonic_ms()
    with pytest.raises(KafkaTimeoutError, match=r"the commit of the transaction of 'q-3' .* did not "
                                                r"complete within 500 ms"):
        commit_resumable(TRANSACTION, CONFIG, 0.5, clock=clock, selector=h.sel)
    assert 500 <= clock.monotonic_ms() - started < 1_000


def test_the_resumable_path_builds_its_client_as_the_producer_does(monkeypatch):
    built = []

    def recording(config, **arguments):
        stack = factory.build_client(config, **arguments)
        built.append((config, arguments, stack))
        return stack

    monkeypatch.setattr(producer_module, "build_client", recording)
    monkeypatch.setattr(resumable_module, "build_client", recording)
    properties = {"bootstrap.servers": "127.0.0.1:1", "max.block.ms": 2_000,
                  "connections.max.idle.ms": 1_234, "metadata.max.idle.ms": 5_678,
                  "request.timeout.ms": 7_000, "reconnect.backoff.ms": 77}
    KafkaProducer(properties).close(0)
    with pytest.raises(KafkaTimeoutError):           # nothing listens there: the client was built
        commit_resumable(TRANSACTION, properties, 0.2)
    (producers, _, producer_stack), (resumers, arguments, resumer_stack) = built
    assert resumers == producers                       # the idle timeouts among them
    assert (replace(resumer_stack.settings, client_id="") ==
            replace(producer_stack.settings, client_id=""))
    assert resumer_stack.settings.connections_max_idle_ms == 1_234
    assert resumer_stack.settings.client_id == "transaction-resumer"
    assert arguments["observers"] == ClientObservers()   # none given: none wired


def test_observers_given_to_the_resumable_path_hear_its_logins_and_throttle_times():
    h = Harness()
    sasl = SaslBroker()
    for broker in h.brokers.values():
        sasl.install(broker)
    logins, throttles = [], []
    observers = ClientObservers(throttle=lambda api, ms, now: throttles.append(api.name),
                                authentication=lambda again, ok: logins.append((again, ok)))
    secured = {**CONFIG, "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
               "sasl.jaas.config": "org.apache.kafka.common.security.plain.PlainLoginModule "
                                   f'required username="alice" password="{PASSWORD}";'}
    commit_resumable(TRANSACTION, secured, 5, clock=h.clock, selector=h.sel, observers=observers)
    assert len(h.requests(END_TXN)) == 1
    assert logins and set(logins) == {(False, True)}     # every connection logged in once
    assert "EndTxn" in throttles and "FindCoordinator" in throttles


def test_the_old_module_path_still_resolves_the_same_objects():
    from spark_kafka_sink.producer import resumable as old
    from spark_kafka_sink.producer.transactions import resumable as new
    for name in ("ResumableTransaction", "commit_resumable", "abort_resumable", "FencedId",
                 "fence_transactional_ids"):
        assert getattr(old, name) is getattr(new, name), name


# ResumableTransaction("sink-0", 7, 3, (TopicPartition("t", 0), TopicPartition("t", 1)), 2), pickled
# (protocol 2) while the class lived in spark_kafka_sink.producer.resumable.
OLD_PICKLE = (
    b"\x80\x02cspark_kafka_sink.producer.resumable\nResumableTransaction\nq\x00)\x81q\x01}q\x02("
    b"X\x10\x00\x00\x00transactional_idq\x03X\x06\x00\x00\x00sink-0q\x04X\x0b\x00\x00\x00producer_idq"
    b"\x05K\x07X\x0e\x00\x00\x00producer_epochq\x06K\x03X\n\x00\x00\x00partitionsq\x07"
    b"cspark_kafka_sink.structs\nTopicPartition\nq\x08)\x81q\t}q\n(X\x05\x00\x00\x00topicq\x0b"
    b"X\x01\x00\x00\x00tq\x0cX\t\x00\x00\x00partitionq\rK\x00ubh\x08)\x81q\x0e}q\x0f(h\x0bh\x0ch\rK"
    b"\x01ub\x86q\x10X\x13\x00\x00\x00transaction_versionq\x11K\x02ub."
)


def test_a_transaction_pickled_under_the_old_module_path_still_loads():
    import pickle
    value = pickle.loads(OLD_PICKLE)
    assert value == ResumableTransaction("sink-0", 7, 3, (TopicPartition("t", 0), TopicPartition("t", 1)), 2)
    assert type(value) is ResumableTransaction
