"""Idempotence over its TransactionManager: the producer-id state table, sequences, in-flight
tracking, epoch bumps and the decisions the sender takes on OUT_OF_ORDER_SEQUENCE_NUMBER /
UNKNOWN_PRODUCER_ID."""

from __future__ import annotations

import pytest

from spark_kafka_sink.errors import (
    ClusterAuthorizationFailedError,
    KafkaTimeoutError,
    MessageTooLargeError,
    NotEnoughReplicasError,
    OutOfOrderSequenceNumberError,
    UnknownProducerIdError,
)
from spark_kafka_sink.bytecodec import INT32_MAX
from spark_kafka_sink.producer.transactions.idempotence import Idempotence
from spark_kafka_sink.producer.transactions.manager import MAX_EPOCH, TransactionManager
from spark_kafka_sink.producer.transactions.states import TransactionState
from spark_kafka_sink.producer.transactions.partition_map import NO_LAST_ACKED_SEQUENCE, ProducerIdAndEpoch
from spark_kafka_sink.producer.producer_batch import ProducerBatch
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.record.sequence import NO_SEQUENCE, increment_sequence
from spark_kafka_sink.structs import TopicPartition

TP = TopicPartition("t", 0)
OTHER = TopicPartition("t", 1)
OUT_OF_ORDER, UNKNOWN_PID, NOT_LEADER, TOO_LARGE = 45, 59, 6, 10


def batch_of(records: int, tp: TopicPartition = TP) -> ProducerBatch:
    batch = ProducerBatch(tp, RecordBatchBuilder(batch_size=1 << 20), 0)
    for _ in range(records):
        batch.try_append(0, None, b"v", None, None)
    return batch


def ready_state(producer_id: int = 1000, epoch: int = 0) -> Idempotence:
    state = Idempotence(TransactionManager())
    state.manager.begin_init()
    state.set_producer_id_and_epoch(producer_id, epoch)
    return state


def drained(state: Idempotence, *sizes: int, tp: TopicPartition = TP) -> list[ProducerBatch]:
    """Batches as ``drain`` would hand them out: gated, then stamped and tracked in flight.

    Until ``tp`` has an acknowledged batch under the current id/epoch only one batch may be in
    flight ("First batch alone"): draining several at once needs :func:`prime` first."""
    batches = []
    for size in sizes:
        batch = batch_of(size, tp)
        assert state.can_drain(batch)
        state.assign_producer_state(batch)
        batches.append(batch)
    return batches


def prime(state: Idempotence, tp: TopicPartition = TP, records: int = 1,
          base_offset: int = 0, link: int = -1) -> ProducerBatch:
    """Drain a first batch of ``records`` records for ``tp`` and acknowledge it on connection
    ``link``, so that the partition may have several batches in flight on that connection from
    now on (it takes sequences ``0 .. records - 1`` under the current id/epoch)."""
    assert state.last_acked_sequence(tp) == NO_LAST_ACKED_SEQUENCE and not state.has_in_flight(tp)
    primer, = drained(state, records, tp=tp)
    primer.drained(0, link)
    assert primer.base_sequence == 0
    state.handle_completed_batch(primer, base_offset=base_offset)
    assert state.last_acked_sequence(tp) == records - 1 and not state.has_in_flight(tp)
    return primer


def primed_state(producer_id: int = 1000, epoch: int = 0, *tps: TopicPartition,
                 records: int = 1) -> Idempotence:
    """:func:`ready_state` with a :func:`prime` batch acknowledged on each of ``tps`` (default TP)."""
    state = ready_state(producer_id, epoch)
    for tp in tps or (TP,):
        prime(state, tp, records)
    return state


# --- sequences ------------------------------------------------------------------------------------

@pytest.mark.parametrize(("sequence", "increment", "expected"), [
    (0, 5, 5), (INT32_MAX - 5, 5, INT32_MAX), (INT32_MAX, 1, 0), (INT32_MAX - 2, 5, 2),
    (INT32_MAX, 0, INT32_MAX),
])
def test_increment_sequence_wraps_like_java(sequence, increment, expected):
    assert increment_sequence(sequence, increment) == expected


def test_sequences_are_assigned_at_drain_per_partition():
    state = ready_state(producer_id=77, epoch=3)
    primer = prime(state, TP, records=1)  # sequence 0, acknowledged: TP may now pipeline
    first, second = drained(state, 3, 5)
    other, = drained(state, 2, tp=OTHER)
    assert [(b.producer_id, b.producer_epoch, b.base_sequence)
            for b in (primer, first, second, other)] == [
        (77, 3, 0), (77, 3, 1), (77, 3, 4), (77, 3, 0)]
    assert state.next_sequence(TP) == 9 and state.next_sequence(OTHER) == 2
    assert state.first_in_flight_sequence(TP) == 1
    state.assign_producer_state(first)  # a retried batch keeps its sequence
    assert first.base_sequence == 1 and state.next_sequence(TP) == 9


def test_sequence_assignment_wraps_around_int32_max():
    state = ready_state()
    first, = drained(state, 1)
    state.handle_completed_batch(first, base_offset=0)
    state.partitions.increment_sequence(TP, INT32_MAX - 3)  # as if ~2**31 records had been sent
    wrapping, after = drained(state, 5, 4)
    assert wrapping.base_sequence == INT32_MAX - 2  # ... INT32_MAX - 1, INT32_MAX, 0, 1
    assert wrapping.last_sequence == 1
    assert after.base_sequence == 2 and state.next_sequence(TP) == 6


def test_completed_batches_advance_acks_and_leave_flight():
    state = ready_state()
    prime(state, TP, records=1, base_offset=99)  # sequence 0 at offset 99
    assert (state.last_acked_sequence(TP), state.last_acked_offset(TP)) == (0, 99)
    first, second = drained(state, 3, 2)
    state.handle_completed_batch(first, base_offset=100)
    assert (state.last_acked_sequence(TP), state.last_acked_offset(TP)) == (3, 102)
    assert state.first_in_flight_sequence(TP) == 4
    state.handle_completed_batch(second, base_offset=103)
    assert (state.last_acked_sequence(TP), state.last_acked_offset(TP)) == (5, 104)
    assert state.first_in_flight_sequence(TP) == NO_SEQUENCE and not state.has_in_flight(TP)


# --- state table ----------------------------------------------------------------------------------

def test_producer_id_state_table():
    state = Idempotence(TransactionManager())
    assert state.manager.state is TransactionState.UNINITIALIZED and not state.manager.has_producer_id
    assert state.manager.producer_id_and_epoch == ProducerIdAndEpoch.NONE == ProducerIdAndEpoch(-1, -1)
    assert state.bump_epoch_and_reset_id_if_needed() is True  # the sender must send InitProducerId
    state.manager.begin_init()
    assert state.bump_epoch_and_reset_id_if_needed() is False  # already being sent
    state.manager.init_failed()
    assert state.manager.state is TransactionState.UNINITIALIZED
    state.manager.begin_init()
    state.set_producer_id_and_epoch(5, 0)
    assert state.manager.state is TransactionState.READY and state.manager.has_producer_id
    with pytest.raises(RuntimeError, match="invalid transaction state transition: begin_init in state READY"):
        state.manager.begin_init()


def test_fatal_error_is_terminal_and_stops_draining():
    state = ready_state()
    error = ClusterAuthorizationFailedError("denied")
    batch, = drained(state, 1)
    state.handle_failed_batch(batch, error, adjust_sequence_numbers=True)
    assert state.manager.has_fatal_error and state.manager.last_error is error
    assert not state.can_drain(batch_of(1))


def test_nothing_is_drained_without_a_producer_id():
    state = Idempotence(TransactionManager())
    assert not state.can_drain(batch_of(1))


# --- epoch bump -----------------------------------------------------------------------------------

def test_epoch_bump_resequences_in_flight_batches_from_zero():
    state = ready_state(producer_id=9, epoch=4)
    first, = drained(state, 3)
    state.handle_completed_batch(first, base_offset=0)  # acknowledged: not in flight any more
    second, third = drained(state, 2, 4)  # sequences 3 and 5, both in flight
    state.request_epoch_bump(TP)
    assert state.bump_epoch_and_reset_id_if_needed() is False
    assert state.manager.producer_id_and_epoch == ProducerIdAndEpoch(9, 5)
    assert [(b.producer_epoch, b.base_sequence, b.sequence_has_been_reset) for b in (second, third)] == [
        (5, 0, True), (5, 2, True)]
    assert state.next_sequence(TP) == 6 and state.last_acked_sequence(TP) == -1
    assert not state.epoch_bump_required
    fresh = batch_of(1)
    assert not state.can_drain(fresh)  # nothing acknowledged under epoch 5 yet: first batch alone
    state.handle_completed_batch(second, base_offset=3)
    assert state.can_drain(fresh)
    state.assign_producer_state(fresh)
    assert (fresh.producer_epoch, fresh.base_sequence) == (5, 6)


def test_other_partitions_move_to_the_new_epoch_once_their_flight_is_over():
    state = primed_state(9, 0, OTHER)  # acknowledged: the "first batch alone" gate is not what holds
    old, = drained(state, 2, tp=OTHER)
    state.request_epoch_bump(TP)
    state.bump_epoch_and_reset_id_if_needed()
    assert old.producer_epoch == 0  # untouched: it was not the partition in trouble
    waiting = batch_of(1, OTHER)
    assert state.has_stale_producer_id_and_epoch(OTHER)
    assert not state.can_drain(waiting)  # new epoch/sequence 0 must not overtake the old batch
    state.handle_completed_batch(old, base_offset=0)
    assert state.can_drain(waiting)
    state.assign_producer_state(waiting)
    assert (waiting.producer_epoch, waiting.base_sequence) == (1, 0)


def test_exhausted_epoch_resets_the_producer_id():
    state = ready_state(producer_id=9, epoch=MAX_EPOCH)
    state.request_epoch_bump(TP)
    assert state.bump_epoch_and_reset_id_if_needed() is True
    assert state.manager.state is TransactionState.UNINITIALIZED
    assert state.manager.producer_id_and_epoch == ProducerIdAndEpoch.NONE


def test_a_retried_batch_is_drained_only_when_first_in_flight():
    state = primed_state()
    first, second = drained(state, 1, 1)
    assert not state.can_drain(second)  # a retry of the second waits for the first
    assert state.can_drain(first)
    state.handle_completed_batch(first, base_offset=0)
    assert state.can_drain(second)


# --- pipelining is earned per connection (first batch alone, retries settle, one link) --------------

def test_a_second_new_batch_waits_while_the_first_is_in_flight_unacknowledged():
    state = ready_state()
    first, = drained(state, 2)
    second = batch_of(3)
    assert not state.can_drain(second)  # a broker without state would take it as a first sequence
    state.can_retry(first, NOT_LEADER)  # a transient error changes nothing: still unacknowledged
    assert not state.can_drain(second)
    assert not second.has_sequence and state.next_sequence(TP) == 2  # nothing was assigned to it
    state.handle_completed_batch(first, base_offset=0)
    assert state.can_drain(second)
    state.assign_producer_state(second)
    assert second.base_sequence == 2
    third, fourth = drained(state, 1, 1)  # acknowledged once: the partition pipelines again
    assert [b.base_sequence for b in (third, fourth)] == [5, 6]
    assert state.first_in_flight_sequence(TP) == 2


def test_the_first_batch_alone_holds_only_while_it_is_in_flight():
    state = ready_state()
    first, = drained(state, 1)
    state.handle_failed_batch(first, MessageTooLargeError(), adjust_sequence_numbers=False)
    assert not state.has_in_flight(TP)
    drained(state, 1)  # nothing in flight any more: the next new batch goes (alone again)
    assert not state.can_drain(batch_of(1))


def test_the_first_batch_alone_applies_again_after_an_epoch_bump():
    state = primed_state(9, 0)
    first, second = drained(state, 1, 2)  # pipelined under epoch 0: sequences 1 and 2
    state.request_epoch_bump(TP)
    state.bump_epoch_and_reset_id_if_needed()
    assert [(b.producer_epoch, b.base_sequence) for b in (first, second)] == [(1, 0), (1, 1)]
    assert state.last_acked_sequence(TP) == NO_LAST_ACKED_SEQUENCE  # the acked state restarts
    fresh = batch_of(1)
    assert state.can_drain(first)  # the re-sequenced first in flight is retried...
    assert not state.can_drain(fresh)  # ...but nothing new joins it before an ack under epoch 1
    state.handle_completed_batch(first, base_offset=1)
    assert state.can_drain(fresh)
    state.assign_producer_state(fresh)
    assert (fresh.producer_epoch, fresh.base_sequence) == (1, 3)


def test_the_first_batch_alone_applies_again_when_another_partition_moves_to_the_new_epoch():
    state = primed_state(9, 0, TP, OTHER)
    state.request_epoch_bump(TP)
    state.bump_epoch_and_reset_id_if_needed()
    moved, = drained(state, 1, tp=OTHER)  # nothing in flight on OTHER: it moves to epoch 1 at 0
    assert (moved.producer_epoch, moved.base_sequence) == (1, 0)
    assert not state.can_drain(batch_of(1, OTHER))
    state.handle_completed_batch(moved, base_offset=1)
    drained(state, 1, 1, tp=OTHER)


def test_the_first_batch_alone_applies_again_under_a_new_producer_id():
    state = primed_state(9, MAX_EPOCH)
    state.request_epoch_bump(TP)
    assert state.bump_epoch_and_reset_id_if_needed() is True  # epoch exhausted: a new id
    state.manager.begin_init()
    state.set_producer_id_and_epoch(10, 0)
    first, = drained(state, 1)
    assert (first.producer_id, first.producer_epoch, first.base_sequence) == (10, 0, 0)
    assert not state.can_drain(batch_of(1))


def test_the_first_batch_alone_does_not_hold_back_a_retry_or_other_partitions():
    state = ready_state()
    first, = drained(state, 2)
    assert state.can_retry(first, NOT_LEADER).retry
    assert state.can_drain(first)  # the retried first batch itself goes (it has its sequence)
    state.assign_producer_state(first)
    assert first.base_sequence == 0 and state.next_sequence(TP) == 2
    other, = drained(state, 1, tp=OTHER)  # another partition has its own first batch
    assert other.base_sequence == 0
    assert not state.can_drain(batch_of(1, OTHER)) and not state.can_drain(batch_of(1))


def on_link(state: Idempotence, link: int, *sizes: int, tp: TopicPartition = TP,
            sent: bool = True) -> list[ProducerBatch]:
    """:func:`drained` for connection ``link``; ``sent``: their request is on the wire."""
    batches = []
    for size in sizes:
        batch = batch_of(size, tp)
        assert state.can_drain(batch, link)
        state.assign_producer_state(batch)
        batch.drained(0, link)
        batch.in_flight = sent
        batches.append(batch)
    return batches


def test_pipelining_needs_an_ack_on_the_same_connection():
    state = ready_state()
    first, = on_link(state, 7, 1)
    first.in_flight = False
    state.handle_completed_batch(first, base_offset=0)   # acknowledged on connection 7
    second, = on_link(state, 7, 1)
    assert state.can_drain(batch_of(1), 7)               # pipelines on 7...
    assert not state.can_drain(batch_of(1), 8)           # ...not on a new connection (reconnect,
    second.in_flight = False                             # new leader): that one goes alone first
    state.handle_completed_batch(second, base_offset=1)
    third, = on_link(state, 8, 1)                        # nothing in flight: goes, alone
    assert not state.can_drain(batch_of(1), 8)
    third.in_flight = False
    state.handle_completed_batch(third, base_offset=2)
    assert state.can_drain(batch_of(1), 8)


def test_nothing_goes_while_an_answer_is_due_on_another_connection():
    # The whole-cluster restart: batches still in flight to the old leader (connection 1) while
    # metadata already names a new leader (connection 2). A new leader holding no state for the
    # producer would write whatever comes first; the old leader's answers must come first.
    state = ready_state()
    prime(state, link=1)
    old = on_link(state, 1, 1, 1, 1)
    fresh = batch_of(1)
    assert not state.can_drain(fresh, 2)
    for batch in old:                                    # NOT_LEADER_OR_FOLLOWER for each
        batch.in_flight = False
        assert state.can_retry(batch, NOT_LEADER).retry
        batch.reenqueued(0)
    assert not state.can_drain(old[1], 2)                # retries go in order...
    assert state.can_drain(old[0], 2)                    # ...the first one first, to the new leader
    old[0].drained(0, 2)
    old[0].in_flight = True
    assert not state.can_drain(fresh, 2)                 # and new batches wait for the retries


def test_a_retry_waits_for_an_answer_due_on_another_connection():
    state = ready_state()
    prime(state, link=1)
    first, second = on_link(state, 1, 1, 1)
    first.in_flight = False                              # refused: to be retried on connection 2
    assert state.can_retry(first, NOT_LEADER).retry
    first.reenqueued(0)
    assert not state.can_drain(first, 2)                 # the second is still on the wire on 1
    second.in_flight = False                             # ...until its answer arrives
    assert state.can_drain(first, 2)


def test_a_new_batch_does_not_join_a_retried_batch_in_flight():
    state = ready_state()
    prime(state, link=3)
    first, = on_link(state, 3, 1)
    first.in_flight = False
    assert state.can_retry(first, NOT_LEADER).retry
    first.reenqueued(0)
    assert state.can_drain(first, 3)
    first.drained(0, 3)
    first.in_flight = True                               # the retry is in flight
    assert not state.can_drain(batch_of(1), 3)           # a new batch must not overtake it
    first.in_flight = False
    state.handle_completed_batch(first, base_offset=1)
    assert state.can_drain(batch_of(1), 3)


def test_an_acknowledged_sequence_gap_is_logged(caplog):
    state = primed_state(7, 0)                           # sequence 0 acknowledged
    skipped, later = drained(state, 4, 2)                # sequences 1-4 and 5-6
    with caplog.at_level("WARNING", logger="spark_kafka_sink.producer.transactions.idempotence"):
        state.handle_completed_batch(later, base_offset=1)
    assert "acknowledged sequence 5 for t-0 while 1 was the next" in caplog.text
    assert "no state for producerId 7" in caplog.text
    caplog.clear()
    with caplog.at_level("WARNING", logger="spark_kafka_sink.producer.transactions.idempotence"):
        state.handle_completed_batch(drained(state, 1)[0], base_offset=3)   # 7 follows 6
    assert not caplog.text


def test_no_gap_is_reported_behind_a_batch_that_expired_in_flight(caplog):
    state = primed_state(7, 0)
    expired, later = drained(state, 4, 2)                # sequences 1-4 and 5-6, both sent
    state.handle_failed_batch(expired, KafkaTimeoutError("expired"), adjust_sequence_numbers=False)
    state.mark_sequence_unresolved(expired)              # it may have been written: no gap known
    with caplog.at_level("WARNING", logger="spark_kafka_sink.producer.transactions.idempotence"):
        state.handle_completed_batch(later, base_offset=5)
    assert not caplog.text


def test_leadership_back_on_the_first_connection_waits_for_the_answer_due_on_the_second():
    # Leadership flaps: acknowledged on connection 1, then a batch goes (alone) on connection 2,
    # then metadata names the first leader again. Pipelining was earned on 1, but the answer for
    # the batch on 2 must come first.
    state = ready_state()
    prime(state, link=1)
    away, = on_link(state, 2, 1)
    assert not state.can_drain(batch_of(1), 1)
    away.in_flight = False
    state.handle_completed_batch(away, base_offset=1)
    assert state.can_drain(batch_of(1), 1)               # nothing in flight: goes, alone


def test_acknowledgements_follow_sequences_across_the_int32_wrap(caplog):
    state = ready_state(7, 0)
    prime(state)
    entry = state.partitions.get_or_create(TP)           # as if 2**31 - 3 records had gone
    entry.last_acked_sequence, entry.next_sequence = INT32_MAX - 3, INT32_MAX - 2
    with caplog.at_level("WARNING", logger="spark_kafka_sink.producer.transactions.idempotence"):
        across, = drained(state, 4)                      # MAX-2, MAX-1, MAX, 0
        assert (across.base_sequence, across.last_sequence) == (INT32_MAX - 2, 0)
        state.handle_completed_batch(across, base_offset=10)
        assert state.last_acked_sequence(TP) == 0
        after, = drained(state, 2)                       # 1 and 2
        state.handle_completed_batch(after, base_offset=14)
        assert state.last_acked_sequence(TP) == 2
    assert not caplog.text


def test_a_late_acknowledgement_from_an_older_epoch_leaves_the_new_sequences_alone(caplog):
    state = ready_state(7, 0)
    prime(state)
    late, = drained(state, 50)                           # sequences 1-50, sent
    state.handle_failed_batch(late, KafkaTimeoutError("expired"), adjust_sequence_numbers=False)
    state.mark_sequence_unresolved(late)
    state.maybe_resolve_sequences()                      # nothing in flight, 51 not acknowledged
    state.bump_epoch_and_reset_id_if_needed()
    assert state.manager.producer_id_and_epoch.epoch == 1
    with caplog.at_level("WARNING", logger="spark_kafka_sink.producer.transactions.idempotence"):
        state.handle_completed_batch(late, base_offset=1)   # its epoch-0 request succeeded late
        assert state.last_acked_sequence(TP) == NO_LAST_ACKED_SEQUENCE
        fresh, = drained(state, 1)
        assert (fresh.producer_epoch, fresh.base_sequence) == (1, 0)
        state.handle_completed_batch(fresh, base_offset=51)
    assert state.last_acked_sequence(TP) == 0
    assert not caplog.text


# --- decisions on sequence errors -----------------------------------------------------------------

def test_out_of_order_on_the_next_batch_bumps_the_epoch_and_retries():
    state = ready_state()
    batch, = drained(state, 2)
    decision = state.can_retry(batch, OUT_OF_ORDER)
    assert (decision.retry, decision.epoch_bump_requested) == (True, True)
    assert state.epoch_bump_required


def test_out_of_order_behind_an_earlier_batch_in_flight_just_retries():
    state = primed_state()
    first, second = drained(state, 2, 2)
    decision = state.can_retry(second, OUT_OF_ORDER)
    assert (decision.retry, decision.epoch_bump_requested) == (True, False)
    assert not state.epoch_bump_required


def test_out_of_order_on_the_first_in_flight_with_a_gap_bumps_instead_of_waiting_forever():
    state = primed_state()
    first, second = drained(state, 2, 2)
    state.remove_in_flight(first)  # e.g. its outcome was lost, nothing in flight can fill the gap
    decision = state.can_retry(second, OUT_OF_ORDER)
    assert decision.epoch_bump_requested and decision.retry


def test_out_of_order_after_a_sequence_reset_waits():
    state = ready_state()
    batch, = drained(state, 2)
    state.request_epoch_bump(TP)
    state.bump_epoch_and_reset_id_if_needed()
    decision = state.can_retry(batch, OUT_OF_ORDER)
    assert (decision.retry, decision.epoch_bump_requested) == (True, False)


def test_unknown_producer_id_bumps_when_the_log_start_is_known():
    state = ready_state()
    batch, = drained(state, 1)
    assert state.can_retry(batch, UNKNOWN_PID, log_start_offset=-1).epoch_bump_requested is False
    decision = state.can_retry(batch, UNKNOWN_PID, log_start_offset=50)
    assert (decision.retry, decision.epoch_bump_requested) == (True, True)


def test_other_errors_retry_when_retriable():
    state = ready_state()
    batch, = drained(state, 1)
    assert state.can_retry(batch, NOT_LEADER).retry is True
    assert state.can_retry(batch, TOO_LARGE).retry is False


def test_failed_batches_request_what_unblocks_their_partition():
    state = ready_state()
    out_of_order, = drained(state, 1)
    state.handle_failed_batch(out_of_order, OutOfOrderSequenceNumberError(), adjust_sequence_numbers=False)
    assert state.epoch_bump_required and not state.has_in_flight(TP)

    state = ready_state()
    unknown, = drained(state, 3)
    state.handle_failed_batch(unknown, UnknownProducerIdError(), adjust_sequence_numbers=True)
    assert state.next_sequence(TP) == 0 and not state.epoch_bump_required  # partition reset

    state = ready_state()
    sent, = drained(state, 1)
    state.handle_failed_batch(sent, NotEnoughReplicasError(), adjust_sequence_numbers=True)
    assert state.epoch_bump_required  # a gap may be left: bump rather than fail later batches

    state = ready_state()
    prime(state)                                 # sequence 0 acknowledged
    refused, later = drained(state, 1, 2)        # the broker refused one record on its own
    state.handle_failed_batch(refused, MessageTooLargeError(), adjust_sequence_numbers=True)
    assert not state.epoch_bump_required                     # it wrote none: no gap is left
    assert later.base_sequence == 1 and later.sequence_has_been_reset
    assert state.next_sequence(TP) == 3


# --- unresolved sequences (batches expired after being sent) --------------------------------------

def test_unresolved_partition_resolves_when_later_batches_were_acknowledged():
    state = primed_state()  # acknowledged: only the unresolved sequence holds new batches back
    expired, later = drained(state, 2, 3)
    state.mark_sequence_unresolved(expired)
    state.remove_in_flight(expired)
    assert state.has_unresolved_sequence(TP) and not state.can_drain(batch_of(1))
    state.handle_completed_batch(later, base_offset=10)  # proves the expired one was written
    state.maybe_resolve_sequences()
    assert not state.has_unresolved_sequence(TP) and not state.epoch_bump_required
    assert state.can_drain(batch_of(1))


def test_unresolved_partition_bumps_the_epoch_when_nothing_was_acknowledged():
    state = ready_state()
    expired, = drained(state, 2)
    state.mark_sequence_unresolved(expired)
    state.remove_in_flight(expired)
    state.maybe_resolve_sequences()
    assert not state.has_unresolved_sequence(TP) and state.epoch_bump_required


# --- the cluster replaced (another cluster id) -------------------------------------------------------

def test_a_replaced_cluster_resets_the_id_and_re_sequences_the_waiting_batches_under_the_next():
    state = ready_state(producer_id=0)
    prime(state)                                          # acknowledged by the old cluster
    waiting, out = drained(state, 2, 3, tp=TP)[:1] + drained(state, 1, tp=OTHER)
    out.in_flight = True                                  # its request is still out
    state.cluster_changed("A", "B")
    assert state.manager.state is TransactionState.UNINITIALIZED and not state.manager.has_producer_id
    assert not state.can_drain(batch_of(1))               # nothing before the new id
    assert state.bump_epoch_and_reset_id_if_needed()      # InitProducerId is due
    state.manager.begin_init()
    state.set_producer_id_and_epoch(0, 0)                 # B's own id 0: same number, new state
    assert (waiting.producer_id, waiting.producer_epoch, waiting.base_sequence) == (0, 0, 0)
    assert waiting.sequence_has_been_reset
    assert not state.has_in_flight(OTHER) and state.next_sequence(OTHER) == 0
    assert state.last_acked_offset(TP) == -1


def test_an_id_asked_for_before_the_cluster_changed_is_not_used():
    state = Idempotence(TransactionManager())
    state.manager.begin_init()                            # InitProducerId out to the old cluster
    state.cluster_changed("A", "B")
    state.set_producer_id_and_epoch(7, 0)                 # its answer
    assert state.manager.state is TransactionState.UNINITIALIZED and not state.manager.has_producer_id
    assert state.bump_epoch_and_reset_id_if_needed()      # asked again, of the new cluster
    state.manager.begin_init()
    state.set_producer_id_and_epoch(3, 0)
    assert state.manager.producer_id_and_epoch == ProducerIdAndEpoch(3, 0)


def test_a_transactional_producer_fails_naming_both_cluster_ids():
    state = Idempotence(TransactionManager("etl-1"))
    state.cluster_changed("A", "B")
    assert state.manager.has_fatal_error
    assert "'etl-1'" in str(state.manager.last_error) and "cluster id A, now B" in str(state.manager.last_error)
