"""A Sender wired to in-memory brokers (FakeSelector + FakeBroker) and a FakeClock.

``harness.hold_produce = True`` (or a set of node ids) makes the brokers take Produce requests
without answering. ``harness.defer_produce = True`` makes them take Produce requests and handle
them only at ``harness.answer_deferred()`` (oldest first; the answers reach the sender at its next
poll), so that several requests can be in flight at once.
The brokers keep a small log per partition and answer Produce from a script:
``harness.script(tp, {"error_code": 6}, ...)`` queues answers for ``tp`` (dict fields of the
partition response); an empty script means success at the log end offset. Like a broker that holds
no state for the producer, they check no sequence: whatever reaches them is written. InitProducerId answers
come from ``harness.init_answers`` (error codes; empty: success with ``harness.producer_id``,
1000 by default). Metadata names ``harness.cluster_id`` ("fake"): change it (and clear
``harness.log``) to stand for another cluster behind the same addresses.

Transactional (``transactional_id=...``): every broker answers FindCoordinator naming
``harness.coordinator`` (node 2 by default), and the coordinator answers AddPartitionsToTxn and
EndTxn from ``harness.txn_answers[api]`` (error codes; empty: success). ``transaction_version=2``
makes the brokers finalize ``transaction.version`` 2; EndTxn v5+ then returns the epoch + 1.
``harness.kill(node_id)`` drops a node's connection and refuses new ones.
"""

from __future__ import annotations

import random
from collections import defaultdict
from typing import Any, Callable

from spark_kafka_sink.client.metadata import Metadata
from spark_kafka_sink.client.network_client import NetworkClient, NetworkSettings
from spark_kafka_sink.producer.accumulator import RecordAccumulator
from spark_kafka_sink.producer.buffer_pool import BufferPool
from spark_kafka_sink.producer.transactions.idempotence import Idempotence
from spark_kafka_sink.producer.transactions.manager import TransactionManager
from spark_kafka_sink.producer.sender import Sender, SenderSettings
from spark_kafka_sink.protocol import (
    ADD_PARTITIONS_TO_TXN, END_TXN, FIND_COORDINATOR, INIT_PRODUCER_ID, METADATA, PRODUCE, ServerFraming,
)
from spark_kafka_sink.record import read_batches
from spark_kafka_sink.structs import TopicPartition

from ..client.fake_selector import FakeBroker, FakeSelector, metadata_body
from ..fakes import FakeClock

BROKERS = [(1, "b1", 9092), (2, "b2", 9092)]
TS = 1_700_000_000_000
PRODUCER_ID = 1000
MEMORY = 256 * 1024


class MidpointRandom(random.Random):
    """Jitter factor exactly 1.0: backoffs are the plain exponential values."""

    def uniform(self, a, b):
        return (a + b) / 2


class RecordingMetrics:
    """The six calls the sender makes (``SenderMetrics``), recorded."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple]] = []

    def on_produce_request(self, node_id, batches, now_ms):
        self.calls.append(("request", (node_id, len(batches))))

    def on_drain(self, now_ms):
        self.calls.append(("drain", ()))

    def on_response(self, node_id, latency_ms):
        self.calls.append(("response", (node_id, latency_ms)))

    def on_retry(self, topic, record_count):
        self.calls.append(("retry", (topic, record_count)))

    def on_error(self, topic, record_count):
        self.calls.append(("error", (topic, record_count)))

    def on_split(self, topic):
        self.calls.append(("split", (topic,)))

    def names(self) -> list[str]:
        return [name for name, _ in self.calls]


class Harness:
    def __init__(self, *, topics: dict[str, int] | None = None, idempotent: bool = False,
                 acks: int = -1, retries: int = 2**31 - 1, linger_ms: int = 0,
                 batch_size: int = 1024, max_in_flight: int = 5, client_max_in_flight: int | None = None,
                 delivery_timeout_ms: int = 120_000, request_timeout_ms: int = 30_000,
                 max_request_size: int = 1 << 20, retry_backoff_ms: int = 100,
                 metrics: Any = None, brokers=BROKERS, transactional_id: str | None = None,
                 transaction_version: int = 1, transaction_timeout_ms: int = 60_000,
                 use_leader_hints: bool = True):
        self.clock = FakeClock()
        self.sel = FakeSelector()
        self.topics = dict({"t": 2} if topics is None else topics)
        self.leaders: dict[tuple[str, int], int] = {}   # (topic, partition) -> node, else round-robin
        self.brokers_spec = brokers
        self.brokers: dict[int, FakeBroker] = {}
        self.coordinator = 2 if len(brokers) > 1 else brokers[0][0]
        self.txn_answers: dict[Any, list[int]] = defaultdict(list)
        self.epoch = 0                                # the coordinator's epoch for the id
        features = {"transaction.version": transaction_version} if transaction_version >= 2 else None
        for node_id, host, port in brokers:
            self.brokers[node_id] = self.sel.add_broker(host, port, FakeBroker(
                node_id, metadata=self._metadata_answer, features=features,
                handlers={PRODUCE.api_key: lambda request, n=node_id: self._produce_answer(n, request),
                          INIT_PRODUCER_ID.api_key: self._init_answer,
                          FIND_COORDINATOR.api_key: self._find_coordinator_answer,
                          ADD_PARTITIONS_TO_TXN.api_key: self._add_partitions_answer,
                          END_TXN.api_key: self._end_txn_answer}))
        self.scripts: dict[TopicPartition, list[dict]] = defaultdict(list)
        self.log: dict[TopicPartition, list] = defaultdict(list)   # (pid, epoch, seq, values)
        self.init_answers: list[int] = []
        self.producer_id = PRODUCER_ID
        self.cluster_id = "fake"
        self.hold_produce: bool | set[int] = False   # True, or the node ids that hold Produce
        self.defer_produce = False                    # handle Produce at answer_deferred()
        self.deferred: list[tuple[int, Any]] = []     # (node id, request), oldest first
        self.metadata = Metadata([("b1", 9092)], retry_backoff_ms=retry_backoff_ms,
                                 retry_backoff_max_ms=1000, rng=MidpointRandom())
        self.pool = BufferPool(MEMORY, batch_size, clock=self.clock)
        self.transaction_manager = TransactionManager(transactional_id, transaction_timeout_ms) \
            if idempotent or transactional_id else None
        self.idempotence = None if self.transaction_manager is None \
            else Idempotence(self.transaction_manager)
        self.accumulator = RecordAccumulator(
            batch_size=batch_size, linger_ms=linger_ms, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=1000, delivery_timeout_ms=delivery_timeout_ms,
            buffer_pool=self.pool, clock=self.clock,
            transaction_manager=self.transaction_manager if transactional_id else None,
            idempotence=self.idempotence, rng=MidpointRandom())
        self.client = NetworkClient(
            selector=self.sel, metadata=self.metadata, clock=self.clock,
            settings=NetworkSettings(request_timeout_ms=request_timeout_ms,
                                     max_in_flight_requests_per_connection=client_max_in_flight or max_in_flight),
            rng=MidpointRandom(0))
        self.settings = SenderSettings(
            acks=acks, retries=retries, max_request_size=max_request_size,
            request_timeout_ms=request_timeout_ms, delivery_timeout_ms=delivery_timeout_ms,
            max_in_flight_requests_per_connection=max_in_flight, retry_backoff_ms=retry_backoff_ms,
            retry_backoff_max_ms=1000, use_leader_hints=use_leader_hints)
        self.sender = Sender(client=self.client, metadata=self.metadata, accumulator=self.accumulator,
                             clock=self.clock, settings=self.settings, idempotence=self.idempotence,
                             metrics=metrics)

    # --- time and stepping ------------------------------------------------------------------------

    @property
    def now(self) -> int:
        return self.clock.monotonic_ms()

    def step(self, times: int = 1) -> None:
        for _ in range(times):
            self.sender.run_once()

    def move_leader(self, tp: TopicPartition, node_id: int) -> None:
        """The brokers now name ``node_id`` the leader of ``tp``; the sender learns it at once."""
        self.leaders[(tp.topic, tp.partition)] = node_id
        self.metadata.request_update(self.now)
        self.run_until(lambda: self.metadata.snapshot.leader_for(tp).node_id == node_id,
                       advance_ms=20)

    def run_until(self, check: Callable[[], bool], *, max_steps: int = 60, advance_ms: int = 0) -> int:
        """Step until ``check()``; moves the clock ``advance_ms`` after each step. Steps taken."""
        for steps in range(max_steps):
            if check():
                return steps
            self.sender.run_once()
            self.clock.advance(advance_ms)
        raise AssertionError(f"condition not met after {max_steps} steps")

    def bootstrap(self, *topics: str) -> None:
        """Know the topics' leaders (and so the cluster) before the test starts."""
        for topic in topics or tuple(self.topics):
            self.metadata.add_topic(topic, self.now)
        self.run_until(lambda: all(self.metadata.snapshot.partition_count(t) for t in
                                   (topics or self.topics)))

    def append(self, tp: TopicPartition, value: bytes = b"v" * 10, key: bytes | None = b"k"):
        return self.append_record(tp, TS, key, value)

    def append_record(self, tp: TopicPartition, timestamp_ms: int, key: bytes | None,
                      value: bytes | None, headers=None, callback=None):
        """One record appended to ``tp`` as ``send()`` would (no wait for memory); its future."""
        future, *_ = self.accumulator.append(self.accumulator.partition_queue(tp), timestamp_ms, key,
                                             value, headers, callback, 0, self.now)
        return future

    # --- what the brokers saw ---------------------------------------------------------------------

    def requests(self, api, node_id: int | None = None) -> list:
        brokers = self.brokers.values() if node_id is None else [self.brokers[node_id]]
        return [r for b in brokers for r in b.requests_for(api)]

    def all_requests(self, node_id: int) -> list:
        return list(self.brokers[node_id].requests)

    def produce_batches(self, node_id: int | None = None) -> list[dict[TopicPartition, Any]]:
        """Per Produce request seen: partition -> decoded record batch."""
        out = []
        for request in self.requests(PRODUCE, node_id):
            out.append({TopicPartition(t.name, p.index): next(read_batches(p.records))
                        for t in request.body.topic_data for p in t.partition_data})
        return out

    # --- broker behaviour -------------------------------------------------------------------------

    def script(self, tp: TopicPartition, *answers: dict) -> None:
        self.scripts[tp].extend(answers)

    def _metadata_answer(self, request) -> dict:
        wanted = {t.name for t in (request.body.topics or ())}
        known = {name: count for name, count in self.topics.items() if name in wanted}
        return metadata_body(self.brokers_spec, known, leaders=self.leaders, cluster_id=self.cluster_id)

    def answer_deferred(self, count: int | None = None) -> int:
        """Handle the oldest ``count`` (default: all) deferred Produce requests now, as the broker
        would (script, else append to the log); the answers reach the sender at its next poll.
        Returns how many were answered."""
        answering = self.deferred[:count] if count is not None else list(self.deferred)
        del self.deferred[:len(answering)]
        for node_id, request in answering:
            body = self._produce_body(request)
            self.sel.inject(node_id, ServerFraming.encode_response(
                request.api, request.version, request.correlation_id, body))
        return len(answering)

    def _produce_answer(self, node_id: int, request) -> dict | None:
        hold = self.hold_produce
        if hold is True or (isinstance(hold, set) and node_id in hold):
            return None
        if self.defer_produce:
            self.deferred.append((node_id, request))
            return None
        return self._produce_body(request)

    def _produce_body(self, request) -> dict:
        topics = []
        for topic in request.body.topic_data:
            parts = [self._append(TopicPartition(topic.name, p.index), p.records)
                     for p in topic.partition_data]
            topics.append({"name": topic.name, "partition_responses": parts})
        return {"responses": topics}

    def _append(self, tp: TopicPartition, records) -> dict:
        script = self.scripts.get(tp)
        answer = script.pop(0) if script else None     # a scripted None: write as usual
        if answer is not None:
            return {"index": tp.partition, "base_offset": -1, **answer}
        batch = next(read_batches(records))
        base = len(self.log[tp])
        for record in batch.records:
            self.log[tp].append((batch.producer_id, batch.producer_epoch, batch.base_sequence,
                                 record.value))
        return {"index": tp.partition, "error_code": 0, "base_offset": base}

    def kill(self, node_id: int) -> None:
        """The node is gone: its connection drops and new ones are refused."""
        for address, broker in list(self.sel.brokers.items()):
            if broker.node_id == node_id:
                del self.sel.brokers[address]
        if self.sel.is_open(node_id):
            self.sel.drop(node_id)

    def _find_coordinator_answer(self, request) -> dict:
        node = next(spec for spec in self.brokers_spec if spec[0] == self.coordinator)
        found = {"node_id": node[0], "host": node[1], "port": node[2], "error_code": 0,
                 "error_message": None}
        if request.version >= 4:
            return {"throttle_time_ms": 0, "coordinators": [
                {"key": request.body.coordinator_keys[0], **found}]}
        return {"throttle_time_ms": 0, **found}

    def _add_partitions_answer(self, request) -> dict:
        error = self.txn_answers[ADD_PARTITIONS_TO_TXN].pop(0) if self.txn_answers[ADD_PARTITIONS_TO_TXN] else 0
        return {"throttle_time_ms": 0, "results_by_topic_v3_and_below": [
            {"name": topic.name, "results_by_partition": [
                {"partition_index": p, "partition_error_code": error} for p in topic.partitions]}
            for topic in request.body.v3_and_below_topics]}

    def _end_txn_answer(self, request) -> dict:
        error = self.txn_answers[END_TXN].pop(0) if self.txn_answers[END_TXN] else 0
        if error == 0 and request.version >= 5:
            self.epoch = request.body.producer_epoch + 1
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": PRODUCER_ID,
                    "producer_epoch": self.epoch}
        return {"throttle_time_ms": 0, "error_code": error}

    def _init_answer(self, request) -> dict:
        error = self.init_answers.pop(0) if self.init_answers else 0
        epoch = request.body.producer_epoch + 1 if request.body.producer_id >= 0 else 0
        return {"throttle_time_ms": 0, "error_code": error,
                "producer_id": self.producer_id if error == 0 else -1,
                "producer_epoch": epoch if error == 0 else -1}


__all__ = ["Harness", "RecordingMetrics", "TS", "PRODUCER_ID", "MEMORY", "METADATA", "PRODUCE",
           "INIT_PRODUCER_ID", "FIND_COORDINATOR", "ADD_PARTITIONS_TO_TXN", "END_TXN"]
