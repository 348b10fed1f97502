"""The transactional producer's requests and states, sans I/O: the transaction manager and the
sender over the harness's in-memory brokers (one of them the coordinator) and a fake clock.

The caller's steps (``initialize_transactions``, ``begin_transaction``, ``begin_commit``,
``begin_abort``) are called here on the test's thread, as the producer calls them on the
caller's; the sender is stepped by hand."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import (
    IllegalStateError, KafkaError, ProducerFencedError, TransactionAbortedError,
)
from spark_kafka_sink.producer.tally import DeliveryTally
from spark_kafka_sink.producer.transactions.manager import TransactionManager
from spark_kafka_sink.producer.transactions.states import TRANSITIONS, TransactionState, next_state
from spark_kafka_sink.structs import TopicPartition

from .sender_harness import (
    ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR, INIT_PRODUCER_ID, PRODUCE, PRODUCER_ID, Harness,
)

S = TransactionState
TP0, TP1 = TopicPartition("t", 0), TopicPartition("t", 1)


def transactional(**kw) -> Harness:
    h = Harness(transactional_id="etl-1", **kw)
    h.bootstrap()
    return h


def init(h: Harness) -> None:
    result = h.transaction_manager.initialize_transactions()
    h.run_until(lambda: result.is_done)
    result.wait(0)


def begin(h: Harness) -> None:
    h.transaction_manager.begin_transaction(h.client.finalized_features.level("transaction.version"))


def complete(h: Harness, step, advance_ms: int = 0):
    result = step()
    h.run_until(lambda: result.is_done, advance_ms=advance_ms)
    return result


# --- the table ----------------------------------------------------------------------------------

def test_every_state_outside_the_table_refuses_each_event_naming_both():
    events = {event for _, event in TRANSITIONS}
    for state in S:
        for event in events:
            if (state, event) in TRANSITIONS:
                assert next_state(state, event) is TRANSITIONS[(state, event)]
            else:
                with pytest.raises(IllegalStateError, match=f"{event} in state {state.name}"):
                    next_state(state, event)
    assert not any(source is S.FATAL_ERROR for source, _ in TRANSITIONS)   # terminal


def test_caller_misuse_is_a_clear_error_before_anything_is_sent():
    manager = TransactionManager("etl-1")
    with pytest.raises(IllegalStateError, match=r"begin_transaction\(\) before init_transactions"):
        manager.begin_transaction()
    with pytest.raises(IllegalStateError, match="outside a transaction .*UNINITIALIZED"):
        manager.check_can_send()
    with pytest.raises(IllegalStateError, match=r"commit_transaction\(\) with no open transaction"):
        manager.begin_commit()
    idempotent = TransactionManager()
    with pytest.raises(IllegalStateError, match="needs a transactional.id"):
        idempotent.initialize_transactions()


# --- transaction version 1 ----------------------------------------------------------------------

def test_v1_finds_the_coordinator_inits_enrols_partitions_before_producing_then_ends():
    h = transactional()
    init(h)
    find = h.requests(FIND_COORDINATOR)
    assert len(find) == 1 and find[0].version >= 4
    assert find[0].body.key_type == 1 and list(find[0].body.coordinator_keys) == ["etl-1"]
    [init_request] = h.requests(INIT_PRODUCER_ID, node_id=2)    # to the coordinator only
    assert init_request.body.transactional_id == "etl-1"
    assert init_request.body.transaction_timeout_ms == 60_000
    assert h.transaction_manager.state is S.READY

    begin(h)
    h.append(TP0)
    h.append(TP1)
    h.run_until(lambda: len(h.requests(PRODUCE)) >= 1)
    [add] = h.requests(ADD_PARTITIONS_TO_TXN, node_id=2)
    assert add.version <= 3 and add.body.v3_and_below_transactional_id == "etl-1"
    assert {(t.name, p) for t in add.body.v3_and_below_topics for p in t.partitions} == \
        {("t", 0), ("t", 1)}
    h.run_until(lambda: not h.accumulator.has_incomplete())
    for request in h.requests(PRODUCE):
        assert request.version <= 11 and request.body.transactional_id == "etl-1"
    assert all(batch.is_transactional for batches in h.produce_batches() for batch in batches.values())

    assert not h.requests(END_TXN)                             # nothing ends before the commit
    complete(h, h.transaction_manager.begin_commit).wait(0)
    [end] = h.requests(END_TXN, node_id=2)
    assert end.version <= 4 and end.body.committed is True and end.body.producer_epoch == 0
    assert h.transaction_manager.state is S.READY
    assert h.transaction_manager.partitions_in_transaction == frozenset()


def test_end_txn_waits_for_the_batches_in_flight():
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    h.defer_produce = True
    h.run_until(lambda: h.deferred)
    result = h.transaction_manager.begin_commit()
    h.step(5)
    assert not h.requests(END_TXN) and not result.is_done
    h.answer_deferred()
    h.run_until(lambda: result.is_done)
    assert len(h.requests(END_TXN)) == 1 and result.error is None


def test_a_transaction_with_no_partition_completes_without_end_txn():
    h = transactional()
    init(h)
    begin(h)
    complete(h, h.transaction_manager.begin_commit).wait(0)
    begin(h)
    complete(h, h.transaction_manager.begin_abort).wait(0)
    assert not h.requests(END_TXN) and h.transaction_manager.state is S.READY


def test_find_coordinator_below_v4_sends_the_single_key():
    h = Harness(transactional_id="etl-1")
    for broker in h.brokers.values():
        broker.ranges = {**broker.ranges, FIND_COORDINATOR.api_key: (0, 3)}
    h.bootstrap()
    init(h)
    [find] = h.requests(FIND_COORDINATOR)
    assert find.version == 3 and find.body.key == "etl-1" and find.body.key_type == 1


def test_not_coordinator_looks_the_coordinator_up_again_and_retries_after_the_backoff():
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    h.run_until(lambda: not h.accumulator.has_incomplete())
    h.txn_answers[END_TXN] += [16]                             # NOT_COORDINATOR
    h.coordinator = 1                                          # it moved
    result = complete(h, h.transaction_manager.begin_commit, advance_ms=50)
    result.wait(0)
    assert len(h.requests(END_TXN, node_id=2)) == 1 and len(h.requests(END_TXN, node_id=1)) == 1
    assert len(h.requests(FIND_COORDINATOR)) == 2


def test_concurrent_transactions_on_add_partitions_is_retried():
    h = transactional()
    init(h)
    begin(h)
    h.txn_answers[ADD_PARTITIONS_TO_TXN] += [51, 51]           # CONCURRENT_TRANSACTIONS
    h.append(TP0)
    h.run_until(lambda: not h.accumulator.has_incomplete(), advance_ms=50)
    assert len(h.requests(ADD_PARTITIONS_TO_TXN)) == 3
    assert h.transaction_manager.state is S.IN_TRANSACTION


def test_a_dead_coordinator_is_looked_up_again_instead_of_waited_on():
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    h.run_until(lambda: not h.accumulator.has_incomplete())
    h.kill(2)
    h.coordinator = 1
    complete(h, h.transaction_manager.begin_commit, advance_ms=50).wait(0)
    assert len(h.requests(END_TXN, node_id=1)) == 1 and not h.requests(END_TXN, node_id=2)


def test_a_coordinator_that_refuses_connections_is_looked_up_again():
    """As above, but the client saw the coordinator go before sending to it: it cannot connect,
    and looks the coordinator up again instead of trying that node forever."""
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    h.run_until(lambda: not h.accumulator.has_incomplete())
    h.kill(2)
    h.step(3)                                                  # the disconnect is seen
    h.coordinator = 1
    complete(h, h.transaction_manager.begin_commit, advance_ms=50).wait(0)
    assert len(h.requests(END_TXN, node_id=1)) == 1 and not h.requests(END_TXN, node_id=2)
    assert len(h.requests(FIND_COORDINATOR)) == 2

def test_producer_fenced_is_fatal_and_fails_the_step_and_the_records():
    h = transactional()
    init(h)
    begin(h)
    h.script(TP0, {"error_code": 90})                          # PRODUCER_FENCED on Produce
    future = h.append(TP0)
    h.run_until(lambda: future.done())
    assert isinstance(future.exception(), ProducerFencedError)
    assert h.transaction_manager.state is S.FATAL_ERROR
    with pytest.raises(ProducerFencedError, match="fenced"):
        h.transaction_manager.check_can_send()
    with pytest.raises(ProducerFencedError):
        h.transaction_manager.begin_commit()


def test_fenced_on_init_fails_init_transactions():
    h = transactional()
    h.init_answers += [90]
    result = h.transaction_manager.initialize_transactions()
    h.run_until(lambda: result.is_done)
    with pytest.raises(ProducerFencedError, match="InitProducerId on node 2"):
        result.wait(0)


def test_invalid_producer_epoch_from_the_coordinator_is_fenced():
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    h.txn_answers[END_TXN] += [47]                             # INVALID_PRODUCER_EPOCH
    result = complete(h, h.transaction_manager.begin_commit)
    with pytest.raises(ProducerFencedError, match="INVALID_PRODUCER_EPOCH from EndTxn on node 2"):
        result.wait(0)
    assert h.transaction_manager.state is S.FATAL_ERROR


def test_an_abortable_error_on_init_is_fatal_there_being_nothing_to_abort():
    h = transactional()
    h.init_answers += [120]                                    # TRANSACTION_ABORTABLE
    result = h.transaction_manager.initialize_transactions()
    h.run_until(lambda: result.is_done)
    with pytest.raises(KafkaError, match="InitProducerId for transactional.id 'etl-1' on node 2"):
        result.wait(0)
    assert h.transaction_manager.state is S.FATAL_ERROR

def test_a_failed_batch_makes_the_commit_fail_and_the_abort_bumps_the_epoch_under_v1():
    h = transactional()
    init(h)
    begin(h)
    h.script(TP0, {"error_code": 45})                          # OUT_OF_ORDER_SEQUENCE_NUMBER: a gap
    failed = h.append(TP0)
    h.run_until(lambda: failed.done())
    assert h.transaction_manager.state is S.ABORTABLE_ERROR
    with pytest.raises(KafkaError, match="can only be aborted"):
        h.transaction_manager.begin_commit()
    with pytest.raises(KafkaError, match="can only be aborted"):
        h.transaction_manager.check_can_send()
    result = complete(h, h.transaction_manager.begin_abort)
    result.wait(0)
    [end] = h.requests(END_TXN)
    assert end.body.committed is False
    bump = h.requests(INIT_PRODUCER_ID)[-1]                    # it may have left a sequence gap
    assert (bump.body.producer_id, bump.body.producer_epoch) == (PRODUCER_ID, 0)
    assert h.transaction_manager.producer_id_and_epoch.epoch == 1
    assert h.transaction_manager.state is S.READY


@pytest.mark.parametrize("kept", [False, True])
def test_a_record_the_broker_refuses_alone_aborts_unless_its_sender_keeps_refused_records(kept):
    """INVALID_RECORD naming one record of three. As in Java the transaction becomes abortable
    (its other records fail as aborted), unless the records were sent with a tally that keeps
    refused records (the sink's dead letters): the broker wrote none of the refused one, so the
    others are written, their sequences closing the gap, and the transaction commits."""
    h = transactional()
    init(h)
    begin(h)
    h.script(TP0, {"error_code": 87, "record_errors": [{"batch_index": 1}]})
    tally = DeliveryTally(keep_refused=True) if kept else None
    futures = [h.append_record(TP0, 5, None, f"v{i}".encode(), None, tally) for i in range(3)]
    h.run_until(lambda: all(f.done() for f in futures), advance_ms=10)
    if not kept:
        assert h.transaction_manager.state is S.ABORTABLE_ERROR
        assert isinstance(futures[0].exception(), TransactionAbortedError)
        return
    assert [record[3] for record in h.log[TP0]] == [b"v0", b"v2"]
    assert sorted(seq for _, _, seq, _ in h.log[TP0]) == [0, 1]
    assert tally.refused == 1 and tally.acked == 2
    result = complete(h, h.transaction_manager.begin_commit)
    result.wait(0)
    [end] = h.requests(END_TXN)
    assert end.body.committed is True and h.transaction_manager.state is S.READY


def test_a_commit_in_progress_fails_when_a_batch_fails():
    h = transactional(retries=0)
    init(h)
    begin(h)
    h.script(TP0, {"error_code": 19})
    h.defer_produce = True
    h.append(TP0)
    h.run_until(lambda: h.deferred)
    result = h.transaction_manager.begin_commit()
    h.answer_deferred()
    h.run_until(lambda: result.is_done)
    with pytest.raises(KafkaError, match="can only be aborted"):
        result.wait(0)
    assert not h.requests(END_TXN) and h.transaction_manager.state is S.ABORTABLE_ERROR


def test_abort_fails_queued_records_without_sending_them():
    h = transactional()
    init(h)
    begin(h)
    h.hold_produce = True
    h.append(TP0)
    h.run_until(lambda: h.requests(PRODUCE))
    queued = h.append(TP0)                                     # waits behind the one in flight
    h.transaction_manager.begin_abort()
    h.step()
    assert isinstance(queued.exception(), TransactionAbortedError)
    assert len(h.requests(PRODUCE)) == 1


# --- transaction version 2 ----------------------------------------------------------------------

def test_v2_enrols_with_produce_v12_and_takes_the_bumped_epoch_from_end_txn():
    h = transactional(transaction_version=2)
    init(h)
    for round_ in range(2):
        begin(h)
        assert h.transaction_manager.transaction_version == 2
        h.append(TP0)
        h.run_until(lambda: not h.accumulator.has_incomplete())
        complete(h, h.transaction_manager.begin_commit).wait(0)
        assert h.transaction_manager.producer_id_and_epoch.epoch == round_ + 1
    assert not h.requests(ADD_PARTITIONS_TO_TXN)
    assert all(request.version >= 12 for request in h.requests(PRODUCE))
    ends = h.requests(END_TXN)
    assert [end.version >= 5 for end in ends] == [True, True]
    assert [end.body.producer_epoch for end in ends] == [0, 1]
    epochs = [batch.producer_epoch for batches in h.produce_batches() for batch in batches.values()]
    sequences = [batch.base_sequence for batches in h.produce_batches() for batch in batches.values()]
    assert epochs == [0, 1] and sequences == [0, 0]            # a new epoch restarts sequences


def test_a_timed_out_wait_can_be_repeated_and_waits_for_the_same_step():
    h = transactional()
    first = h.transaction_manager.initialize_transactions()
    assert h.transaction_manager.initialize_transactions() is first
    h.run_until(lambda: first.is_done)
    first.wait(0)
    with pytest.raises(IllegalStateError, match="already called"):
        h.transaction_manager.initialize_transactions()


def test_invalid_producer_epoch_on_a_transactional_produce_is_fatal_as_fenced():
    """Java: a transactional producer answered INVALID_PRODUCER_EPOCH by a partition leader was
    fenced (the coordinator bumped the epoch), so it is fatal, not an abortable error that
    abort_transaction() would try to get past."""
    h = transactional()
    init(h)
    begin(h)
    h.script(TP0, {"error_code": 47})                          # INVALID_PRODUCER_EPOCH
    future = h.append(TP0)
    h.run_until(lambda: future.done())
    assert future.exception().code == 47
    assert h.transaction_manager.state is S.FATAL_ERROR
    fenced = h.transaction_manager.last_error
    assert isinstance(fenced, ProducerFencedError) and fenced.__cause__ is future.exception()
    assert "INVALID_PRODUCER_EPOCH from Produce to t-0" in str(fenced)
    with pytest.raises(ProducerFencedError):
        h.transaction_manager.begin_abort()


@pytest.mark.parametrize("api", [ADD_PARTITIONS_TO_TXN, END_TXN])
def test_transaction_abortable_from_the_coordinator_makes_the_transaction_abortable_not_fatal(api):
    """TRANSACTION_ABORTABLE (KIP-890): the coordinator asks the producer to abort; the producer
    stays usable: the commit fails, abort_transaction() ends the transaction and the next one
    begins."""
    h = transactional()
    init(h)
    begin(h)
    h.txn_answers[api] += [120]                                 # TRANSACTION_ABORTABLE
    future = h.append(TP0)
    commit = complete(h, h.transaction_manager.begin_commit)
    with pytest.raises(KafkaError, match="can only be aborted.*TransactionAbortable"):
        commit.wait(0)
    assert h.transaction_manager.state is S.ABORTABLE_ERROR and not h.transaction_manager.has_fatal_error
    if api is ADD_PARTITIONS_TO_TXN:                            # never enrolled: never sent
        h.run_until(lambda: future.done())
        assert isinstance(future.exception(), TransactionAbortedError) and not h.requests(PRODUCE)
    complete(h, h.transaction_manager.begin_abort).wait(0)
    assert h.transaction_manager.state is S.READY
    begin(h)
    assert h.transaction_manager.state is S.IN_TRANSACTION


def test_a_transaction_is_handed_out_only_once_its_partitions_are_enrolled():
    h = transactional()
    init(h)
    begin(h)
    h.append(TP0)
    with pytest.raises(IllegalStateError, match="still being added to the transaction: flush"):
        h.transaction_manager.open_transaction()
    h.run_until(lambda: not h.accumulator.has_incomplete())
    pid_epoch, partitions, version = h.transaction_manager.open_transaction()
    assert (pid_epoch.producer_id, partitions, version) == (PRODUCER_ID, frozenset({TP0}), 1)
