"""Sender: the producer's I/O thread (Java's ``Sender``; see docs/ARCHITECTURE.md).

One loop step, :meth:`Sender.run_once` (the map's "The sender thread" walks through it):
idempotence and transaction housekeeping (:mod:`.transactions`; after a fatal error every pending
batch fails with it and the loop only polls), then :meth:`Sender.send_producer_data` (ready,
metadata for unknown leaders, expire, drain, one ProduceRequest per node), then
``client.poll(timeout)``, whose responses come back through the request callbacks that decide
per partition (:meth:`Sender._complete_batch`): done, retry after a backoff, split, or fail.

Poll timeout (what ``send_producer_data`` returns): 0 when a request was just sent (more may be
sendable at once); otherwise the smallest of the accumulator's next ready-check delay (linger or
retry backoff left), the connection delay of ready nodes that cannot take a request yet, and the
time to the next batch expiry (queued or in flight). When nodes had data ready but nothing could be
drained (the idempotence gate holds it back), the wait is also capped at ``retry.backoff.ms``:
waiting is right, spinning is not. The client shortens the wait further for its own deadlines.

Expiry comes before drain (Java drains first): a batch past ``delivery.timeout.ms`` is failed
where it waits and is never drained, so a drained batch always goes out. A partition is muted
(``max.in.flight.requests.per.connection`` = 1) exactly while a request that carries it is in
flight: muted once the request is handed to the client, unmuted when its response, disconnect or
timeout is handled, whatever that handling raises. Expiry never stops later records.

A replaced cluster (``Metadata.cluster_change``) is seen at the top of each step and before each
Produce answer is handled, before anything else drains: the sequence bookkeeping
(:mod:`.transactions.idempotence`) resets the idempotent producer's id and sequences (or fails a
transactional producer), and an idempotent producer's answer to a request sent in an older cluster generation is not trusted: its batches
fail with ``ClusterChangedError`` (outcome unknown) and its leader hints are not applied.

Close: :meth:`initiate_close` lets :meth:`run` finish what is queued and in flight, then close the
client; :meth:`force_close` fails whatever is left at once with ``ProducerClosedError``.

The thread never dies silently. Callbacks cannot stop it (their errors, ``BaseException``
included, are contained where they run), an ``Exception`` in a step is logged and the loop goes
on, and anything else that escapes the loop is the safety net's: :meth:`run` fails every pending
record with a ``ProducerClosedError`` naming the cause, closes the accumulator with it (later
sends raise it at once), and still closes every socket. :attr:`Sender.death` holds that error.

Threads: everything but ``initiate_close``, ``force_close``, ``wakeup`` and ``running`` runs on the
sender thread. Time is the injected clock's ``monotonic_ms()``, passed down as ``now_ms``.
"""

from __future__ import annotations

import logging
import threading
from dataclasses import dataclass, fields
from functools import partial
from typing import Any, Mapping

from ..client.metadata import Metadata
from ..error_codes import ErrorCode
from ..client.network_client import NetworkClient
from ..client.requests import ClientRequest, ClientResponse
from ..clock import Clock
from ..errors import ClusterChangedError, ProducerClosedError, UnsupportedVersionError
from ..protocol.apis import PRODUCE
from ..structs import TopicPartition
from .accumulator import NO_DELAY_LIMIT_MS, ReadyCheckResult, RecordAccumulator
from .metrics import GuardedMetrics, SenderMetrics
from .produce_handler import (PartitionResult, batch_error, leader_hints, partition_results,
                               produce_request_body)
from .producer_batch import ProducerBatch
from .transactions.idempotence import Idempotence
from .transactions.requests import InitProducerIdHandler, TxnRequestSender

log = logging.getLogger(__name__)

LAST_PRODUCE_VERSION_BEFORE_TV2 = 11

CRASH_PAUSE_S = 0.1
"""Real-time pause after an unexpected error in the loop, so a persistent bug cannot spin."""


@dataclass(frozen=True)
class SenderSettings:
    """The sender's settings, Java producer names, Kafka 4 defaults where they have one."""

    acks: int
    retries: int
    max_request_size: int
    request_timeout_ms: int
    delivery_timeout_ms: int
    max_in_flight_requests_per_connection: int
    retry_backoff_ms: int
    retry_backoff_max_ms: int
    transaction_timeout_ms: int = 60_000
    use_leader_hints: bool = True  # KIP-951; off only to measure what the hints save

    @classmethod
    def from_config(cls, config: Any) -> "SenderSettings":
        """From a ``ProducerConfig`` (or any object with these attribute names)."""
        return cls(**{f.name: getattr(config, f.name) for f in fields(cls) if hasattr(config, f.name)})


@dataclass(frozen=True)
class ReadyNodes:
    """Nodes to drain now (node id -> the id of its connection, see
    ``NetworkClient.connection_id``), and how long until the ready-but-unreachable ones may be."""

    nodes: Mapping[int, int]
    not_ready_timeout_ms: int


class Sender:
    """The I/O loop of one producer; see the module docstring."""

    def __init__(self, *, client: NetworkClient, metadata: Metadata, accumulator: RecordAccumulator,
                 clock: Clock, settings: SenderSettings, idempotence: Idempotence | None = None,
                 metrics: SenderMetrics | None = None):
        """``idempotence``: the sequence bookkeeping of an idempotent (or transactional)
        producer; its ``manager`` is the producer's ``TransactionManager``."""
        self._client = client
        self._metadata = metadata
        self._accumulator = accumulator
        self._clock = clock
        self._settings = settings
        self._idempotence = idempotence
        self._txn = None if idempotence is None else idempotence.manager
        self._metrics = GuardedMetrics(metrics)
        self._guarantee_order = settings.max_in_flight_requests_per_connection == 1
        self._in_flight: dict[TopicPartition, list[ProducerBatch]] = {}
        self._txn_requests = None if self._txn is None else TxnRequestSender(
            client=client, manager=self._txn, retry_backoff_ms=settings.retry_backoff_ms)
        self._cluster_generation = metadata.cluster_generation   # the one acted on
        self._running = True
        self._forced = False
        self._death: ProducerClosedError | None = None

    # --- the thread -----------------------------------------------------------------------------

    def run(self) -> None:
        """Thread target: loop until closed, finish pending work (unless forced), close. Whatever
        escapes the loop ends in :meth:`_die`; the client is closed in every case."""
        log.debug("starting the producer I/O thread")
        try:
            while self._running:
                self._step()
            log.debug("closing: sending the remaining records")
            while not self._forced and self._has_pending_work():
                self._step()
            self._abort_leftovers()
        except BaseException as exc:  # noqa: B036 - the safety net: see the module docstring
            self._die(exc)
        finally:
            self._close_client()
        log.debug("the producer I/O thread has stopped")

    @property
    def death(self) -> ProducerClosedError | None:
        """Why the thread died (see the module docstring); ``None`` while it lives or after a
        normal close."""
        return self._death

    def _die(self, cause: BaseException) -> None:
        """The loop was broken by ``cause``: fail every pending record and refuse later ones with
        an error naming it. Runs on the dying thread; never raises."""
        error = ProducerClosedError(
            f"the producer's I/O thread died ({type(cause).__name__}: {cause}); pending and later "
            "records fail with this error: close the producer and create a new one")
        error.__cause__ = cause
        self._death = error
        self._running = False
        log.critical("the producer I/O thread died; failing every pending record", exc_info=cause)
        try:
            self._accumulator.close(error)
            self._accumulator.abort_incomplete_batches(error)
        except BaseException:  # noqa: B036 - the sweep is best effort; the client still closes
            log.exception("error while failing the pending records of a dead producer I/O thread")
        self._in_flight.clear()

    def _close_client(self) -> None:
        try:
            self._client.close()
        except BaseException:  # noqa: B036 - on the way out: log, do not mask the thread's end
            log.exception("error while closing the producer's connections")

    def _has_pending_work(self) -> bool:
        return self._accumulator.has_undrained() or self._client.in_flight_request_count() > 0

    def _step(self) -> None:
        try:
            self.run_once()
        except Exception:
            log.exception("unexpected error in the producer I/O thread; continuing")
            threading.Event().wait(CRASH_PAUSE_S)

    def _abort_leftovers(self) -> None:
        if not (self._forced or self._accumulator.has_incomplete()):
            return
        how = "closed forcefully" if self._forced else "closed"
        self._accumulator.abort_incomplete_batches(ProducerClosedError(
            f"Producer is {how}: the record was not delivered before close"))
        self._in_flight.clear()

    def initiate_close(self) -> None:
        """Stop accepting records; ``run`` delivers what is pending, then returns."""
        self._accumulator.close()
        self._running = False
        self.wakeup()

    def force_close(self) -> None:
        """Stop now: ``run`` fails whatever is pending with ``ProducerClosedError``."""
        self._forced = True
        self.initiate_close()

    def wakeup(self) -> None:
        self._client.wakeup()

    def wakeup_by(self, deadline_ms: int) -> None:
        """Make the loop look at the accumulator by ``deadline_ms`` (monotonic); a no-op when
        its current wait ends by then anyway (``NetworkClient.wakeup_by``)."""
        self._client.wakeup_by(deadline_ms)

    @property
    def running(self) -> bool:
        return self._running

    # --- one step -------------------------------------------------------------------------------

    def run_once(self) -> None:
        """One loop step: idempotence housekeeping, produce data, poll."""
        now_ms = self._clock.monotonic_ms()
        self._check_cluster()
        manager = self._txn
        if manager is not None and manager.has_fatal_error:
            self._abort_batches(manager.last_error)
            self._client.poll(self._settings.retry_backoff_ms, now_ms)
            return
        if manager is not None and manager.is_transactional:
            error = manager.undrained_batch_error()   # aborting, or abortable
            if error is not None and self._accumulator.has_undrained():
                self._accumulator.abort_undrained_batches(error)
        init_timeout = self._maybe_send_txn_request(now_ms)
        timeout = min(init_timeout, self.send_producer_data(now_ms))
        self._client.poll(timeout, now_ms)

    def _check_cluster(self) -> None:
        """Act once on a change of cluster id (module docstring)."""
        change = self._metadata.cluster_change
        if change is None or change.generation == self._cluster_generation:
            return
        self._cluster_generation = change.generation
        if self._idempotence is not None:
            self._idempotence.cluster_changed(change.previous, change.current)

    def _abort_batches(self, exc: BaseException) -> None:
        """The producer failed fatally: fail every incomplete batch, queued or in flight (Java's
        ``maybeAbortBatches``). Responses still to come find their batches done."""
        if not self._accumulator.has_incomplete():
            return
        log.error("failing every pending batch after a fatal error: %r", exc)
        self._accumulator.abort_undrained_batches(exc)
        for batches in self._in_flight.values():
            for batch in batches:
                if batch.fail(exc):
                    self._accumulator.deallocate(batch)
        self._in_flight.clear()

    def _maybe_send_txn_request(self, now_ms: int) -> int:
        """Sequence housekeeping, then the pending request (InitProducerId when a producer id is
        needed; for a transactional producer, the manager's next step, EndTxn only once no batch
        is incomplete): Java's ``maybeSendAndPollTransactionalRequest``."""
        idempotence = self._idempotence
        if idempotence is None:
            return NO_DELAY_LIMIT_MS
        idempotence.maybe_resolve_sequences()
        requests = self._txn_requests
        if idempotence.bump_epoch_and_reset_id_if_needed() and not requests.has_pending:
            requests.enqueue(InitProducerIdHandler(
                idempotence, transaction_timeout_ms=self._settings.transaction_timeout_ms))
        return requests.maybe_send(now_ms, self._accumulator.has_incomplete())

    def send_producer_data(self, now_ms: int) -> int:
        """Drain and send what is ready; returns the poll timeout (module docstring)."""
        cluster = self._metadata.snapshot
        result = self._accumulator.ready(cluster, now_ms)
        self._request_unknown_leaders(result, now_ms)
        ready = self._ready_nodes(result, now_ms)
        self._expire_batches(now_ms)
        drained = self._accumulator.drain(cluster, ready.nodes, self._settings.max_request_size,
                                          now_ms)
        self._track_in_flight(drained)
        sent = self._send_produce_requests(drained, now_ms)
        return self._poll_timeout(result, ready, sent, now_ms)

    # --- send_producer_data steps ---------------------------------------------------------------

    def _request_unknown_leaders(self, result: ReadyCheckResult, now_ms: int) -> None:
        if not result.unknown_leader_topics:
            return
        for topic in result.unknown_leader_topics:
            self._metadata.add_topic(topic, now_ms)
        log.debug("requesting metadata for topics with an unknown leader: %s",
                  sorted(result.unknown_leader_topics))
        self._metadata.request_update(now_ms)

    def _ready_nodes(self, result: ReadyCheckResult, now_ms: int) -> ReadyNodes:
        nodes: dict[int, int] = {}
        not_ready_timeout = NO_DELAY_LIMIT_MS
        client = self._client
        for node_id in result.ready_nodes:
            can_drain = client.ready(node_id, now_ms)
            self._accumulator.update_node_latency_stats(node_id, now_ms, can_drain)
            if can_drain:
                nodes[node_id] = client.connection_id(node_id)
            else:
                not_ready_timeout = min(not_ready_timeout, client.poll_delay(node_id, now_ms))
        return ReadyNodes(nodes, not_ready_timeout)

    def _track_in_flight(self, drained: Mapping[int, list[ProducerBatch]]) -> None:
        for batches in drained.values():
            for batch in batches:
                self._in_flight.setdefault(batch.topic_partition, []).append(batch)

    def _expire_batches(self, now_ms: int) -> None:
        """Fail batches past ``delivery.timeout.ms``, in flight and queued (Java's order)."""
        in_flight = self._expired_in_flight(now_ms)
        queued = self._accumulator.expired_batches(now_ms)
        sent = set(map(id, in_flight))
        for batch in in_flight + queued:
            # a queued batch with a sequence that never went out (a split part) leaves a gap
            unsent = id(batch) not in sent and batch.has_sequence and not batch.in_retry
            self._fail_batch(batch, batch.timeout_error(now_ms), adjust_sequence_numbers=unsent)
        if self._idempotence is None:
            return
        for batch in in_flight + queued:
            if batch.has_sequence and (batch.in_retry or id(batch) in sent):
                # it may have been written: hold new batches back until this resolves
                self._idempotence.mark_sequence_unresolved(batch)

    def _expired_in_flight(self, now_ms: int) -> list[ProducerBatch]:
        expired: list[ProducerBatch] = []
        timeout = self._settings.delivery_timeout_ms
        for tp, batches in list(self._in_flight.items()):
            while batches and batches[0].has_reached_delivery_timeout(timeout, now_ms):
                batch = batches.pop(0)
                if not batch.is_done:
                    expired.append(batch)
            if not batches:
                del self._in_flight[tp]
        return expired

    def _next_in_flight_expiry_ms(self) -> int:
        timeout = self._settings.delivery_timeout_ms
        return min((batches[0].created_ms + timeout for batches in self._in_flight.values()),
                   default=NO_DELAY_LIMIT_MS)

    def _send_produce_requests(self, drained: Mapping[int, list[ProducerBatch]], now_ms: int) -> bool:
        """One ProduceRequest per node; whether any was sent."""
        sent = False
        for node_id, batches in drained.items():
            if batches:
                self._send_produce_request(node_id, batches, now_ms)
                sent = True
        if sent:
            self._metrics.on_drain(now_ms)
        return sent

    def _send_produce_request(self, node_id: int, batches: list[ProducerBatch], now_ms: int) -> None:
        acks = self._settings.acks
        manager = self._txn
        transactional_id = None if manager is None else manager.transactional_id
        try:
            body = produce_request_body(batches, acks=acks,
                                        timeout_ms=self._settings.request_timeout_ms,
                                        transactional_id=transactional_id)
            by_partition = {batch.topic_partition: batch for batch in batches}
            # a transactional producer on transaction version 1 stays below Produce v12, the
            # version that enrols partitions implicitly (KIP-890), as Java does
            max_version = (LAST_PRODUCE_VERSION_BEFORE_TV2 if transactional_id is not None
                           and manager.transaction_version < 2 else None)
            request = ClientRequest(node_id, PRODUCE, body, created_ms=now_ms, max_version=max_version,
                                    expect_response=acks != 0,
                                    callback=partial(self._handle_produce_response, by_partition,
                                                     self._cluster_generation))
            log.debug("sending %d batch(es) to node %d", len(batches), node_id)
            self._client.send(request, now_ms)
        except UnsupportedVersionError as exc:    # the broker speaks no Produce version of ours
            failed = PartitionResult(ErrorCode.UNSUPPORTED_VERSION, error_message=str(exc))
            for batch in batches:
                self._complete_batch(batch, failed, now_ms)
            return
        except Exception as exc:                  # a bug: the batches never went out
            log.exception("could not send a produce request to node %d", node_id)
            for batch in batches:
                self._fail_batch(batch, ProducerClosedError(
                    f"the produce request for {batch.topic_partition} could not be sent: {exc!r}"),
                    adjust_sequence_numbers=True)
            return
        for batch in batches:
            batch.in_flight = True
            if self._guarantee_order:
                self._accumulator.mute(batch.topic_partition)
        self._metrics.on_produce_request(node_id, batches, now_ms)

    def _poll_timeout(self, result: ReadyCheckResult, ready: ReadyNodes, sent: bool,
                      now_ms: int) -> int:
        if sent:
            return 0
        next_expiry = min(self._accumulator.next_expiry_time_ms, self._next_in_flight_expiry_ms())
        timeout = min(result.next_ready_check_delay_ms, ready.not_ready_timeout_ms,
                      next_expiry - now_ms)
        if ready.nodes:  # data ready, nothing drainable: wait for an event, do not spin
            timeout = min(timeout, self._settings.retry_backoff_ms)
        return max(timeout, 0)

    # --- responses ------------------------------------------------------------------------------

    def _handle_produce_response(self, batches: Mapping[TopicPartition, ProducerBatch],
                                 generation: int, response: ClientResponse) -> None:
        """Runs inside ``client.poll``: decide every batch of the request, sent while the cluster
        generation was ``generation``."""
        now_ms = response.received_ms
        if not response.disconnected and response.latency_ms is not None:
            self._metrics.on_response(response.node_id, response.latency_ms)
        self._check_cluster()
        if generation != self._cluster_generation and self._txn is not None:
            self._fail_answered_after_cluster_change(batches)
            return
        results = partition_results(response, batches)
        moved: frozenset[TopicPartition] = frozenset()
        if self._settings.use_leader_hints:
            hints, nodes = leader_hints(response)
            if hints:   # KIP-951: the new leaders now, not after a Metadata round trip
                moved = self._metadata.update_leaders(hints, nodes, cluster_generation=generation)
                if moved:
                    log.info("moved %s to their new leaders from the Produce response (KIP-951)",
                             sorted(f"{tp.topic}-{tp.partition}" for tp in moved))
        for tp, batch in batches.items():
            batch.in_flight = False
            try:
                self._complete_batch(batch, results[tp], now_ms, leader_moved=tp in moved)
            except Exception as exc:             # a bug here must not strand the other batches
                log.exception("error while completing the batch for %s", tp)
                if self._idempotence is not None:
                    self._idempotence.remove_in_flight(batch)   # nor hold its partition back
                if batch.fail(exc):
                    self._remove_and_deallocate(batch)
            finally:
                if self._guarantee_order:        # its request is over, however it ended
                    self._accumulator.unmute(tp)

    def _fail_answered_after_cluster_change(self, batches: Mapping[TopicPartition, ProducerBatch]) -> None:
        """An idempotent producer's request sent before the cluster changed, answered after:
        whatever the answer says, its batches may or may not be written (module docstring)."""
        change = self._metadata.cluster_change
        for tp, batch in batches.items():
            batch.in_flight = False
            try:
                if not batch.is_done:
                    log.error("failing the batch of %d record(s) for %s: the cluster changed (cluster "
                              "id %s, now %s) while its request was out", batch.record_count, tp,
                              change.previous, change.current)
                self._fail_batch(batch, ClusterChangedError(
                    f"the cluster behind bootstrap.servers changed (cluster id {change.previous}, "
                    f"now {change.current}) while the request carrying this record for {tp} was "
                    f"out: it may or may not have been written, to cluster {change.previous}, or "
                    f"to {change.current} under the producer id {change.previous} gave (which "
                    f"{change.current} may take for another producer's). It is not sent again, "
                    "so that it cannot be written twice"), adjust_sequence_numbers=False)
            finally:
                if self._guarantee_order:
                    self._accumulator.unmute(tp)

    def _complete_batch(self, batch: ProducerBatch, result: PartitionResult, now_ms: int, *,
                        leader_moved: bool = False) -> None:
        """Java's ``Sender.completeBatch`` for one partition's result. ``leader_moved``: the
        response named the partition's new leader (KIP-951): a retry goes there without backing
        off, and no Metadata refresh is needed for it."""
        code = result.error_code
        if code == ErrorCode.NONE:
            self._succeed_batch(batch, result)
        elif code == ErrorCode.MESSAGE_TOO_LARGE and batch.record_count > 1 and not batch.is_done:
            self._split_batch(batch, now_ms)
        elif code in _REFUSED_ONE_BY_ONE and batch.record_count > 1 and not batch.is_done and (
                result.record_errors or code != ErrorCode.CORRUPT_MESSAGE):
            self._split_out_refused(batch, result, now_ms)
        elif self._can_retry(batch, result, now_ms):
            log.warning("got error %s for %s (attempt %d); retrying", result.error_class.__name__
                        if result.error_class else code, batch.topic_partition, batch.attempts + 1)
            self._reenqueue_batch(batch, now_ms, backoff=not leader_moved)
        elif code == ErrorCode.DUPLICATE_SEQUENCE_NUMBER:
            self._succeed_batch(batch, result)   # the broker already has it
        else:
            self._fail_batch(batch, batch_error(batch, result),
                             adjust_sequence_numbers=batch.attempts < self._settings.retries)
        if code != ErrorCode.NONE and result.invalid_metadata and not leader_moved:
            log.warning("%s for %s: requesting a metadata update", result.error_class.name,
                        batch.topic_partition)
            self._metadata.request_update(now_ms)

    def _split_batch(self, batch: ProducerBatch, now_ms: int) -> None:
        """Java's split path of ``completeBatch``: the parts go back at the front of the
        partition's queue, as if never tried (no retry counted); the refused batch is forgotten."""
        log.warning("the broker refused the batch of %d records (%d bytes) for %s as too large: "
                    "splitting it and sending the parts", batch.record_count,
                    batch.size_in_bytes, batch.topic_partition)
        if self._idempotence is not None:
            self._idempotence.remove_in_flight(batch)
        parts = self._accumulator.split_and_reenqueue(batch, now_ms)
        self._remove_and_deallocate(batch)
        log.debug("split the batch for %s into %d", batch.topic_partition, len(parts))
        self._metrics.on_split(batch.topic_partition.topic)

    def _split_out_refused(self, batch: ProducerBatch, result: PartitionResult, now_ms: int) -> None:
        """A per-record refusal of a batch of several records (INVALID_RECORD, INVALID_TIMESTAMP,
        CORRUPT_MESSAGE; the broker wrote none of them), so that one bad record never fails its
        batch-mates (beyond Java, which fails the whole batch):

        - with Produce v8+ ``record_errors`` naming the bad records: split them out, fail each
          with the broker's reason, and send the others again, in order, as the split for
          MESSAGE_TOO_LARGE does. The failed records' sequences are given to the records after
          them (``Idempotence.handle_failed_batch``), so neither the idempotent producer
          nor a transaction has to start over;
        - without (an older broker, or a verdict on the whole batch): send every record again in
          a batch of its own, so that the broker judges each alone;
        - INVALID_TIMESTAMP naming several records: the broker answers it when any of them has a
          bad timestamp, and the others may be invalid otherwise (a null key on a compacted
          topic): those records are sent again alone, so that each fails with its own error."""
        refused = _refused(batch, result)
        if result.error_code == ErrorCode.INVALID_TIMESTAMP and len(refused) > 1:
            log.warning("the broker refused %d of the %d records of a batch for %s (INVALID_TIMESTAMP, "
                        "maybe not for all): sending those alone, the others again", len(refused),
                        batch.record_count, batch.topic_partition)
            if self._idempotence is not None:
                self._idempotence.remove_in_flight(batch)
            self._accumulator.split_and_reenqueue(batch, now_ms, alone=refused)
            self._remove_and_deallocate(batch)
            return
        what = f"{result.error_class.name if result.error_class else result.error_code}: " \
               f"{result.error_message or 'invalid'}"
        if refused:
            log.warning("the broker refused %d of the %d records of a batch for %s (%s); failing "
                        "those and sending the others again", len(refused), batch.record_count,
                        batch.topic_partition, what)
        else:
            log.warning("the broker refused a batch of %d records for %s without naming the records "
                        "(%s); sending each record again alone", batch.record_count,
                        batch.topic_partition, what)
        if self._idempotence is not None:
            self._idempotence.remove_in_flight(batch)
        alone = refused or frozenset(range(batch.record_count))
        parts = self._accumulator.split_and_reenqueue(batch, now_ms, refused, alone=alone)
        self._remove_and_deallocate(batch)
        reasons = {e.batch_index: e.message for e in result.record_errors}
        index = 0
        for part in parts:
            if index in refused:
                single = PartitionResult(result.error_code,
                                         error_message=reasons.get(index) or result.error_message,
                                         record_errors=())
                self._fail_batch(part, batch_error(part, single), adjust_sequence_numbers=True)
            index += part.record_count

    def _can_retry(self, batch: ProducerBatch, result: PartitionResult, now_ms: int) -> bool:
        if (batch.has_reached_delivery_timeout(self._settings.delivery_timeout_ms, now_ms)
                or batch.attempts >= self._settings.retries or batch.is_done):
            return False
        if self._idempotence is None:
            return result.retriable
        decision = self._idempotence.can_retry(batch, result.error_code, result.log_start_offset)
        return decision.retry

    def _succeed_batch(self, batch: ProducerBatch, result: PartitionResult) -> None:
        if self._idempotence is not None:
            self._idempotence.handle_completed_batch(batch, result.base_offset)
        if batch.complete(result.base_offset, result.log_append_time_ms):
            self._remove_and_deallocate(batch)

    def _fail_batch(self, batch: ProducerBatch, exc: BaseException, *,
                    adjust_sequence_numbers: bool) -> None:
        if not batch.is_done:
            self._metrics.on_error(batch.topic_partition.topic, batch.record_count)
        if self._idempotence is not None:
            self._idempotence.handle_failed_batch(batch, exc, adjust_sequence_numbers)
        if batch.fail(exc):
            self._remove_and_deallocate(batch)

    def _reenqueue_batch(self, batch: ProducerBatch, now_ms: int, *, backoff: bool = True) -> None:
        self._accumulator.reenqueue(batch, now_ms, backoff=backoff)
        self._remove_in_flight(batch)
        self._metrics.on_retry(batch.topic_partition.topic, batch.record_count)

    def _remove_and_deallocate(self, batch: ProducerBatch) -> None:
        self._remove_in_flight(batch)
        self._accumulator.deallocate(batch)

    def _remove_in_flight(self, batch: ProducerBatch) -> None:
        tp = batch.topic_partition
        batches = self._in_flight.get(tp)
        if batches is None:
            return
        batches[:] = [b for b in batches if b is not batch]
        if not batches:
            del self._in_flight[tp]


_REFUSED_ONE_BY_ONE = frozenset({ErrorCode.INVALID_RECORD, ErrorCode.INVALID_TIMESTAMP,
                                 ErrorCode.CORRUPT_MESSAGE})
"""Errors by which the broker refuses records one by one (``record_errors`` may name them)."""


def _refused(batch: ProducerBatch, result: PartitionResult) -> frozenset[int]:
    """The indexes of the records ``result`` says the broker refused (those in the batch)."""
    return frozenset(e.batch_index for e in result.record_errors
                     if 0 <= e.batch_index < batch.record_count)
