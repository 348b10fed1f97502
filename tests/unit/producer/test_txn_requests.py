"""The producer's own requests (``transactions.requests``): a handler's outcome decides whether the sender
of those requests is done, waits out ``retry.backoff.ms`` before the next request, or stops; one
request at a time. Over the sender harness's in-memory brokers."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.producer.transactions.states import TransactionState
from spark_kafka_sink.producer.transactions.requests import (
    NOTHING_TO_WAIT_FOR_MS, HandlerOutcome, InitProducerIdHandler, TxnRequestSender,
)

from .sender_harness import INIT_PRODUCER_ID, Harness


class ScriptedHandler(InitProducerIdHandler):
    """InitProducerId whose answers are judged by a script of outcomes instead."""

    def __init__(self, idempotence, outcomes):
        super().__init__(idempotence, transaction_timeout_ms=60_000)
        self.outcomes = list(outcomes)
        self.seen = []

    def handle_response(self, body, node_id):
        self.seen.append(node_id)
        outcome = self.outcomes.pop(0)
        if outcome is HandlerOutcome.DONE:
            return super().handle_response(body, node_id)
        return outcome


def setup(outcomes):
    h = Harness(idempotent=True)
    h.bootstrap()
    sender = TxnRequestSender(client=h.client, manager=h.transaction_manager, retry_backoff_ms=100)
    handler = ScriptedHandler(h.idempotence, outcomes)
    sender.enqueue(handler)
    return h, sender, handler


def poll_until_answered(h, sender, handler, answers):
    for _ in range(20):
        sender.maybe_send(h.now)
        h.client.poll(0, h.now)
        if len(handler.seen) == answers:
            return
    raise AssertionError(f"{answers} answers expected, got {len(handler.seen)}")


def test_a_retry_waits_out_the_backoff_and_done_ends_the_request():
    h, sender, handler = setup([HandlerOutcome.RETRY, HandlerOutcome.DONE])
    poll_until_answered(h, sender, handler, 1)
    assert h.transaction_manager.state is TransactionState.UNINITIALIZED
    assert not sender.has_pending                               # a retry asks again what to send
    sender.enqueue(handler)
    assert sender.maybe_send(h.now) == 100                      # the backoff, nothing sent
    assert len(h.requests(INIT_PRODUCER_ID)) == 1
    h.clock.advance(100)
    poll_until_answered(h, sender, handler, 2)
    assert h.transaction_manager.state is TransactionState.READY and not sender.has_pending
    assert sender.maybe_send(h.now) == NOTHING_TO_WAIT_FOR_MS
    assert len(h.requests(INIT_PRODUCER_ID)) == 2


def test_one_request_at_a_time():
    h, sender, handler = setup([HandlerOutcome.DONE])
    with pytest.raises(IllegalStateError, match="InitProducerId enqueued while InitProducerId is pending"):
        sender.enqueue(InitProducerIdHandler(h.idempotence, transaction_timeout_ms=60_000))
    for _ in range(5):
        sender.maybe_send(h.now)
        if sender.in_flight:
            break
        h.client.poll(0, h.now)
    assert sender.in_flight and sender.maybe_send(h.now) == NOTHING_TO_WAIT_FOR_MS
    assert len(h.requests(INIT_PRODUCER_ID)) <= 1


def test_a_fatal_outcome_ends_the_request_and_is_not_retried():
    h, sender, handler = setup([HandlerOutcome.FATAL])
    poll_until_answered(h, sender, handler, 1)
    assert not sender.has_pending
    h.clock.advance(1_000)
    assert sender.maybe_send(h.now) == NOTHING_TO_WAIT_FOR_MS
    assert len(h.requests(INIT_PRODUCER_ID)) == 1


def test_a_resumed_commit_whose_id_expired_raises_invalid_producer_id_mapping():
    """EndTxn answers INVALID_PRODUCER_ID_MAPPING when the coordinator forgot the id
    (transactional.id.expiration.ms): for a resumed transaction that is final, not "abortable"
    (there is no producer to abort with), and the error says what is unknown."""
    from spark_kafka_sink.error_codes import ErrorCode
    from spark_kafka_sink.errors import InvalidProducerIdMappingError
    from spark_kafka_sink.producer.transactions.resumable import ResumableTransaction, commit_resumable
    from spark_kafka_sink.structs import TopicPartition

    from .sender_harness import END_TXN, PRODUCER_ID

    h = Harness(transactional_id="q-0")
    h.txn_answers[END_TXN].append(ErrorCode.INVALID_PRODUCER_ID_MAPPING)
    transaction = ResumableTransaction("q-0", PRODUCER_ID, 3, (TopicPartition("t", 0),), 1)
    with pytest.raises(InvalidProducerIdMappingError,
                       match=r"'q-0'.*no longer knows the id .*transactional\.id\.expiration\.ms.*"
                             r"whether this transaction was committed before is unknown"):
        commit_resumable(transaction, {"bootstrap.servers": "b1:9092"}, 5, clock=h.clock,
                         selector=h.sel)


@pytest.mark.parametrize("commit", [True, False])
def test_the_end_txn_step_carries_the_commit_decision_to_its_handler(commit):
    from spark_kafka_sink.producer.transactions.manager import TransactionManager
    from spark_kafka_sink.producer.transactions.requests import EndTxnHandler, transactional_handler
    from spark_kafka_sink.producer.transactions.states import TransactionalStep
    from spark_kafka_sink.structs import TopicPartition

    manager = TransactionManager("txn-a", 60_000)
    manager.resume_transaction(7, 3, frozenset({TopicPartition("t", 0)}), 1)
    manager.begin_commit() if commit else manager.begin_abort()
    manager.coordinator = 1
    step = manager.next_transactional_step(has_incomplete_batches=False)
    assert step is (TransactionalStep.COMMIT if commit else TransactionalStep.ABORT)
    handler = transactional_handler(step, manager)
    assert isinstance(handler, EndTxnHandler) and handler.committed is commit
    assert manager.next_transactional_step(has_incomplete_batches=True) is None  # waits for them
    with pytest.raises(ValueError, match="unknown transactional step 'EndTxn'"):
        transactional_handler("EndTxn", manager)
