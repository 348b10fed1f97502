"""A real ``KafkaProducer`` whose sender thread runs in lockstep with the test, over in-memory
brokers that answer Produce only when told to, and check sequences as a broker holding producer
state does. For the model-based test (``test_producer_model.py``).

Lockstep: :class:`LockstepSelector` parks the sender thread in ``poll`` until the test grants one
step (:meth:`LockstepCluster.step`), so the thread is always either parked or running exactly one
loop step the test asked for. Runs are deterministic (hypothesis can shrink them) although the
callbacks, ``flush`` and ``close`` are the real ones on the real thread, and every random
source is seeded. Time is a FakeClock that
only the test moves. A step that does not come back to ``poll`` within :data:`STALL_S` (real
time) is a stall: the sender is blocked somewhere it must never block.

Brokers (nodes 1 and 2) keep a log per partition. Produce requests are deferred; the test answers
the oldest one (:meth:`LockstepCluster.answer`) with ``None`` (process it: write the batches whose
sequence is the next expected, DUPLICATE_SEQUENCE_NUMBER for one already written,
OUT_OF_ORDER_SEQUENCE_NUMBER for a gap) or with an error code for every partition of the request
(nothing written). A request whose connection is gone is never answered (the client times it out).
As a broker does, a connection's answers go out in request order: a Metadata or InitProducerId
answer is held behind the deferred Produce requests before it on its connection.
"""

from __future__ import annotations

import random
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any
from unittest import mock

from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.protocol import INIT_PRODUCER_ID, METADATA, PRODUCE, ServerFraming
from spark_kafka_sink.record import read_batches
from spark_kafka_sink.structs import TopicPartition

from ..client.fake_selector import FakeBroker, FakeSelector, metadata_body
from ..fakes import FakeClock

STALL_S = 5.0
OUT_OF_ORDER, DUPLICATE = 45, 46
LOST_REPLY = "lost-reply"      # an answer to give: written, but the reply never arrives
# A broker checks for a duplicate before it can answer these: told to answer one for a batch it
# already wrote, it answers DUPLICATE_SEQUENCE_NUMBER instead (anything else would be a broker
# that lies about its log, and the producer would rightly write the batch again). MESSAGE_TOO_LARGE
# is here too: the same bytes were accepted once (only a topic config change in between could
# make a real broker refuse them, and then Java's producer also splits and writes them twice).
ANSWERED_AFTER_THE_DUPLICATE_CHECK = frozenset({OUT_OF_ORDER, 10})


class LockstepSelector(FakeSelector):
    """``poll`` parks until :meth:`grant`; :meth:`wait_parked` waits for the thread to park."""

    def __init__(self) -> None:
        super().__init__()
        self._go = threading.Semaphore(0)
        self._parked = threading.Event()

    def poll(self, timeout_ms: int):
        self._parked.set()
        self._go.acquire()
        return super().poll(timeout_ms)

    def grant(self) -> None:
        self._parked.clear()        # before the release: a wait after it sees only the next park
        self._go.release()

    def wait_parked(self, timeout: float) -> bool:
        return self._parked.wait(timeout)

    @property
    def parked(self) -> bool:
        return self._parked.is_set()


@dataclass
class _PartitionState:
    """What a broker remembers of the producer on one partition."""

    producer_id: int = -1
    epoch: int = -1
    next_sequence: int = 0
    written: list = field(default_factory=list)  # (base sequence, record count, base offset)


class LockstepCluster:
    """Two brokers, a producer in lockstep with the test, and the brokers' logs."""

    def __init__(self, config: dict[str, Any], *, topics: dict[str, int]) -> None:
        self.clock = FakeClock()
        self.selector = LockstepSelector()
        self.topics = dict(topics)
        self.leaders: dict[tuple[str, int], int] = {}
        self.log: dict[TopicPartition, list[bytes]] = defaultdict(list)
        # (node, connection number, request, body): body None for a Produce the test answers,
        # else an answer ready but held behind an earlier Produce on the same connection
        self.deferred: list[tuple[int, int, Any, Any]] = []
        self.produce_requests = 0
        self.gone: set[int] = set()                     # nodes out of the cluster (node_goes)
        self._states: dict[TopicPartition, _PartitionState] = defaultdict(_PartitionState)
        self.brokers: dict[int, FakeBroker] = {}
        for node_id in (1, 2):
            self.brokers[node_id] = self.selector.add_broker(f"b{node_id}", 9092, FakeBroker(
                node_id, metadata=lambda request, n=node_id: self._in_order(n, request, self._metadata),
                handlers={PRODUCE.api_key: lambda request, n=node_id: self._defer(n, request),
                          INIT_PRODUCER_ID.api_key:
                              lambda request, n=node_id: self._in_order(n, request, self._init)}))
        # every random source (partitioner, backoff jitter, node choice) seeded: replayable runs
        seeded = random.Random
        with mock.patch.object(random, "Random", lambda seed=None: seeded(0 if seed is None else seed)):
            self.producer = KafkaProducer({"bootstrap.servers": "b1:9092", **config},
                                          clock=self.clock, selector=self.selector)
        if not self.selector.wait_parked(STALL_S):
            raise AssertionError("the sender thread never reached its first poll")

    # --- stepping ---------------------------------------------------------------------------------

    @property
    def thread(self) -> threading.Thread:
        return self.producer._thread

    def step(self) -> None:
        """Let the sender run one loop step (no-op once its thread has ended)."""
        if not self.thread.is_alive() or self.selector.closed:
            return
        self.selector.grant()
        # it parks again, or ends (close), or stalls: never blocks anywhere else
        for _ in range(int(STALL_S / 0.01)):
            if self.selector.wait_parked(0.01) or not self.thread.is_alive():
                return
        raise AssertionError("the sender thread stalled: it did not come back to poll")

    def run_in_thread(self, fn, *, started, finished, steps: int, advance_ms: int = 20) -> Any:
        """Run ``fn`` (which blocks until the sender has done things: flush, close) on a helper
        thread while the test steps the sender, answers every Produce request and moves time.

        Deterministic, so hypothesis can replay and shrink a run: the test waits until
        ``started()`` holds (the helper has reached its wait, e.g. a flush is in progress), then
        steps until ``finished()`` holds (checked while the sender is parked), and only then
        joins the helper. Returns ``fn``'s result or raises its exception; AssertionError if
        ``finished()`` did not hold within ``steps`` sender steps or the helper did not return."""
        outcome: dict[str, Any] = {}

        def target() -> None:
            try:
                outcome["result"] = fn()
            except BaseException as exc:  # noqa: B036 - handed to the test thread
                outcome["error"] = exc

        helper = threading.Thread(target=target, daemon=True)
        helper.start()
        for _ in range(int(STALL_S / 0.001)):
            if started() or not helper.is_alive():
                break
            time.sleep(0.001)
        else:
            raise AssertionError(f"{fn} never reached its wait")
        for _ in range(steps):
            if finished() or not self.thread.is_alive():
                break
            while self.deferred:
                self.answer(None)
            self.step()
            self.clock.advance(advance_ms)
        else:
            raise AssertionError(f"{fn} was not done after {steps} sender steps")
        helper.join(STALL_S)
        if helper.is_alive():
            raise AssertionError(f"{fn} did not return although what it waits for is done")
        if "error" in outcome:
            raise outcome["error"]
        return outcome.get("result")

    # --- brokers ----------------------------------------------------------------------------------

    def _metadata(self, request) -> dict:
        wanted = {t.name for t in request.body.topics or ()}
        known = {name: count for name, count in self.topics.items() if name in wanted}
        leaders = {(name, p): self.leader_of(TopicPartition(name, p))
                   for name, count in known.items() for p in range(count)}
        brokers = [(n, f"b{n}", 9092) for n in (1, 2) if n not in self.gone]
        return metadata_body(brokers, known, leaders=leaders)

    def leader_of(self, tp: TopicPartition) -> int:
        """The partition's leader: as set in ``leaders`` (else by partition number), unless that
        node is gone: then the other one."""
        leader = self.leaders.get((tp.topic, tp.partition), 1 + tp.partition % 2)
        return 3 - leader if leader in self.gone else leader

    def node_goes(self, node_id: int) -> None:
        """``node_id`` leaves the cluster: out of Metadata (its partitions led by the other
        node), its connection reset, new connections refused."""
        self.gone.add(node_id)
        self.selector.brokers.pop((f"b{node_id}", 9092), None)
        self.drop(node_id)

    def node_returns(self, node_id: int) -> None:
        self.gone.discard(node_id)
        self.selector.add_broker(f"b{node_id}", 9092, self.brokers[node_id])

    @staticmethod
    def _init(request) -> dict:
        epoch = request.body.producer_epoch + 1 if request.body.producer_id >= 0 else 0
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": epoch}

    def _defer(self, node_id: int, request) -> None:
        self.produce_requests += 1
        self.deferred.append((node_id, self.brokers[node_id].connections, request, None))
        return None

    def _in_order(self, node_id: int, request, handler) -> Any:
        """``handler``'s answer now, or (as a broker answers a connection's requests in order)
        held until the deferred Produce requests before it on its connection are answered."""
        body = handler(request)
        connection = self.brokers[node_id].connections
        if any(n == node_id and c == connection for n, c, _, _ in self.deferred):
            self.deferred.append((node_id, connection, request, body))
            return None
        return body

    def _live(self, node_id: int, connection: int) -> bool:
        return connection == self.brokers[node_id].connections and self.selector.is_open(node_id)

    def _release_held(self) -> None:
        """Send the held answers that no deferred Produce precedes on their node any more."""
        blocked, keep = set(), []
        for entry in self.deferred:
            node_id, connection, request, body = entry
            if body is None or (node_id, connection) in blocked:
                blocked.add((node_id, connection))
                keep.append(entry)
            elif self._live(node_id, connection):
                self.selector.inject(node_id, ServerFraming.encode_response(
                    request.api, request.version, request.correlation_id, body))
        self.deferred = keep

    def answer(self, error_code: int | None) -> bool:
        """Answer the oldest deferred Produce request (see the module doc), then any answers held
        behind it; False if none could be answered (its connection is gone: dropped, or closed
        by a client timeout). :data:`LOST_REPLY`: process the request, then reset the connection
        before the answer goes out (a retry then meets DUPLICATE_SEQUENCE_NUMBER)."""
        self._release_held()
        if not self.deferred:
            return False
        node_id, connection, request, _ = self.deferred.pop(0)
        try:
            return self._answer_produce(node_id, connection, request, error_code)
        finally:
            self._release_held()

    def _answer_produce(self, node_id: int, connection: int, request, error_code: int | None) -> bool:
        if not self._live(node_id, connection):
            return False
        lost = error_code == LOST_REPLY
        topics = []
        for topic in request.body.topic_data:
            parts = [self._partition_answer(node_id, TopicPartition(topic.name, p.index), p.records,
                                            None if lost else error_code)
                     for p in topic.partition_data]
            topics.append({"name": topic.name, "partition_responses": parts})
        if lost:
            self.drop(node_id)
            return True
        self.selector.inject(node_id, ServerFraming.encode_response(
            request.api, request.version, request.correlation_id, {"responses": topics}))
        return True

    def drop(self, node_id: int) -> None:
        """The connection to ``node_id`` resets; its deferred requests are never answered."""
        if self.selector.is_open(node_id):
            self.selector.drop(node_id)

    def _partition_answer(self, node_id: int, tp: TopicPartition, records, error_code) -> dict:
        if error_code is not None:
            if error_code in ANSWERED_AFTER_THE_DUPLICATE_CHECK:
                offset = self._written_at(tp, next(read_batches(records)))
                if offset is not None:
                    return {"index": tp.partition, "error_code": DUPLICATE, "base_offset": offset}
            return {"index": tp.partition, "error_code": error_code, "base_offset": -1}
        if self.leader_of(tp) != node_id:
            return {"index": tp.partition, "error_code": 6, "base_offset": -1}   # NOT_LEADER
        batch = next(read_batches(records))
        values = [r.value for r in batch.records]
        if batch.producer_id < 0:                                   # not idempotent: write
            return self._write(tp, values)
        state = self._states[tp]
        if (batch.producer_id, batch.producer_epoch) != (state.producer_id, state.epoch):
            if batch.producer_epoch < state.epoch and batch.producer_id == state.producer_id:
                return {"index": tp.partition, "error_code": 47, "base_offset": -1}
            if batch.base_sequence != 0:
                return {"index": tp.partition, "error_code": OUT_OF_ORDER, "base_offset": -1}
            self._states[tp] = state = _PartitionState(batch.producer_id, batch.producer_epoch)
        for base, count, offset in state.written[-5:]:
            if base == batch.base_sequence and count == len(values):
                return {"index": tp.partition, "error_code": DUPLICATE, "base_offset": offset}
        if batch.base_sequence != state.next_sequence:
            return {"index": tp.partition, "error_code": OUT_OF_ORDER, "base_offset": -1}
        answer = self._write(tp, values)
        state.written.append((batch.base_sequence, len(values), answer["base_offset"]))
        state.next_sequence += len(values)
        return answer

    def _written_at(self, tp: TopicPartition, batch) -> int | None:
        """The offset of ``batch`` if this broker already wrote it (same producer id, epoch,
        sequence and count), else None."""
        state = self._states.get(tp)
        if state is None or batch.producer_id < 0 or (batch.producer_id, batch.producer_epoch) != (
                state.producer_id, state.epoch):
            return None
        for base, count, offset in state.written[-5:]:
            if base == batch.base_sequence and count == batch.record_count:
                return offset
        return None

    def _write(self, tp: TopicPartition, values: list[bytes]) -> dict:
        base = len(self.log[tp])
        self.log[tp].extend(values)
        return {"index": tp.partition, "error_code": 0, "base_offset": base}


__all__ = ["LockstepCluster", "LockstepSelector", "LOST_REPLY", "STALL_S", "METADATA"]
