"""An in-memory cluster for tests that run a real ``KafkaProducer`` with its sender thread.

``ThreadedFakeSelector`` is a FakeSelector whose ``poll`` waits in real time (until woken, at most
a few ms), so a real sender thread neither spins nor oversleeps; ``Cluster`` is one FakeBroker
leading every partition of ``topics`` (``t`` with two partitions; change it to grow a topic) that writes and acknowledges Produce requests (keeping every
batch it was sent, decoded) unless ``hold`` is set, and answers InitProducerId.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from spark_kafka_sink.producer.producer import KafkaProducer
from spark_kafka_sink.protocol import INIT_PRODUCER_ID, METADATA, PRODUCE
from spark_kafka_sink.record import read_batches

from ..client.fake_selector import FakeBroker, FakeSelector, metadata_body

BROKERS = [(1, "b1", 9092)]


class ThreadedFakeSelector(FakeSelector):
    """A FakeSelector for a real sender thread: ``poll`` waits (real time) until woken or its
    timeout, capped at a few ms, so the thread neither spins nor sleeps through the test."""

    def __init__(self) -> None:
        super().__init__()
        self._woken = threading.Event()

    def poll(self, timeout_ms: int):
        self._woken.wait(min(timeout_ms, 5) / 1000)
        self._woken.clear()
        return super().poll(timeout_ms)

    def wakeup(self) -> None:
        super().wakeup()
        self._woken.set()


class Cluster:
    """One in-memory broker leading ``t``'s two partitions; Produce is written and acknowledged
    unless ``hold`` is set (then requests are taken and never answered)."""

    def __init__(self) -> None:
        self.selector = ThreadedFakeSelector()
        self.offsets: dict[tuple[str, int], int] = defaultdict(int)
        self.batches: dict[tuple[str, int], list] = defaultdict(list)   # decoded, as written
        self.hold = False
        self.topics = {"t": 2}                 # what Metadata answers: topic -> partition count
        self.metadata_delay_s = 0.0
        self._producers: list[KafkaProducer] = []
        self.broker = self.selector.add_broker("b1", 9092, FakeBroker(
            1, metadata=self._metadata, handlers={PRODUCE.api_key: self._produce,
                                                   INIT_PRODUCER_ID.api_key: self._init}))

    def _metadata(self, request):
        if self.metadata_delay_s:                # a slow answer (on the sender thread, as I/O)
            time.sleep(self.metadata_delay_s)
        wanted = {t.name for t in request.body.topics or ()}
        known = {name: count for name, count in self.topics.items() if name in wanted}
        unknown = {name: (0, 3) for name in wanted - set(known)}   # UNKNOWN_TOPIC_OR_PARTITION
        return metadata_body(BROKERS, {**known, **unknown})

    def producer(self, **config) -> KafkaProducer:
        """A producer bootstrapped from this cluster (``linger.ms`` 0 unless ``config`` says);
        :meth:`close_producers` closes every one made here."""
        producer = KafkaProducer({"bootstrap.servers": "b1:9092", "linger.ms": 0, **config},
                                 selector=self.selector)
        self._producers.append(producer)
        return producer

    def close_producers(self) -> None:
        for producer in self._producers:
            producer.close(0)

    def metadata_requests(self, topic: str | None = None) -> int:
        """Metadata requests so far; with ``topic``, only those asking for it (the sender's
        first update, for brokers only, comes whenever its thread gets there)."""
        requests = self.broker.requests_for(METADATA)
        if topic is not None:
            requests = [r for r in requests if topic in {t.name for t in r.body.topics or ()}]
        return len(requests)

    @staticmethod
    def _init(request):
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": 1000, "producer_epoch": 0}

    def _produce(self, request):
        if self.hold:
            return None
        topics = []
        for topic in request.body.topic_data:
            parts = []
            for part in topic.partition_data:
                key = (topic.name, part.index)
                batch = next(read_batches(part.records))
                parts.append({"index": part.index, "error_code": 0, "base_offset": self.offsets[key]})
                self.offsets[key] += len(batch.records)
                self.batches[key].append(batch)
            topics.append({"name": topic.name, "partition_responses": parts})
        return {"responses": topics}
