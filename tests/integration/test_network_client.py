"""The NetworkClient with the real Selector against the embedded Apache Kafka.

It bootstraps, learns a new topic's partitions through the metadata updater while a user thread
waits in ``await_topic`` (the producer's first send), produces batches with acks=-1 and acks=0,
and confluent-kafka's consumer (an independent client) reads every record back. Every loop is
bounded in polls and in time.
"""

from __future__ import annotations

import os
import threading
import time
import uuid

import pytest

from spark_kafka_sink.client.metadata import Metadata
from spark_kafka_sink.client.network_client import NetworkClient, NetworkSettings
from spark_kafka_sink.client.requests import ClientRequest, ClientResponse
from spark_kafka_sink.client.selector import Selector
from spark_kafka_sink.clock import SYSTEM_CLOCK
from spark_kafka_sink.errors import MetadataTimeoutError, for_code
from spark_kafka_sink.protocol import PRODUCE
from spark_kafka_sink.record import RecordBatchBuilder
from spark_kafka_sink.structs import TopicPartition

from ..helpers import addresses, create_topic
from ..verify import consume_all

pytestmark = pytest.mark.broker

MAX_POLLS = 20_000
BASE_TS = 1_700_000_000_000


class Driver:
    """The sender thread's role: poll the client in a bounded loop."""

    def __init__(self, bootstrap: str):
        self.clock = SYSTEM_CLOCK
        self.metadata = Metadata(addresses(bootstrap))
        self.client = NetworkClient(
            selector=Selector(clock=self.clock, connections_max_idle_ms=540_000),
            metadata=self.metadata, clock=self.clock,
            settings=NetworkSettings(client_id="it-network-client", request_timeout_ms=15_000))
        self.responses: list[ClientResponse] = []

    def now(self) -> int:
        return self.clock.monotonic_ms()

    def drive(self, done, what: str, timeout_s: float = 30.0):
        deadline = time.monotonic() + timeout_s
        for _ in range(MAX_POLLS):
            result = done()
            if result:
                return result
            if time.monotonic() > deadline:
                break
            self.responses += self.client.poll(50, self.now())
        raise AssertionError(f"timed out waiting for {what}")

    def produce(self, topic: str, partition: int, records: list[tuple[bytes, bytes]], acks: int,
                attempts: int = 20) -> ClientResponse:
        """Send one batch to the partition's leader and drive until it completes; retriable
        errors (a leader not settled right after creation) are retried a bounded number of times."""
        for _ in range(attempts):
            leader = self.metadata.snapshot.leader_for(TopicPartition(topic, partition))
            self.drive(lambda: self.client.ready(leader.node_id, self.now()),
                       f"node {leader.node_id} ready")
            request = ClientRequest(leader.node_id, PRODUCE, _produce_body(
                topic, partition, records, acks), created_ms=self.now(), expect_response=acks != 0)
            self.client.send(request, self.now())
            response = self.drive(lambda: _completed(self.responses, request), "the produce")
            if acks == 0 or response.disconnected:
                return response
            error = for_code(response.body.responses[0].partition_responses[0].error_code)
            if error is None or not error.retriable:
                return response
            self.metadata.request_update(self.now())
            time.sleep(0.1)
        return response


def _completed(responses: list[ClientResponse], request: ClientRequest) -> ClientResponse | None:
    return next((r for r in responses if r.request is request), None)


def _produce_body(topic, partition, records, acks):
    builder = RecordBatchBuilder(batch_size=1 << 20)
    for i, (key, value) in enumerate(records):
        assert builder.append(BASE_TS + i, key, value, [("i", str(i).encode())]) is not None
    return {"acks": acks, "timeout_ms": 15_000, "topic_data": [
        {"name": topic, "partition_data": [{"index": partition, "records": builder.build()}]}]}


def _await_in_thread(metadata: Metadata, topic: str, max_wait_ms: int):
    outcome: dict = {}

    def wait():
        try:
            outcome["snapshot"] = metadata.await_topic(topic, max_wait_ms, SYSTEM_CLOCK)
        except Exception as exc:          # handed to the test thread
            outcome["error"] = exc
    thread = threading.Thread(target=wait, daemon=True)
    thread.start()
    return thread, outcome


def test_network_client_fetches_metadata_and_produces_with_acks_all_and_zero(kafka):
    topic = f"netclient-{uuid.uuid4().hex[:8]}"
    create_topic(kafka.bootstrap_servers, topic, 2)
    fds_before = len(os.listdir("/proc/self/fd"))
    driver = Driver(kafka.bootstrap_servers)
    try:
        thread, outcome = _await_in_thread(driver.metadata, topic, 30_000)
        driver.drive(lambda: not thread.is_alive(), "await_topic to return")
        assert "error" not in outcome, outcome.get("error")
        snapshot = outcome["snapshot"]
        assert snapshot.partition_count(topic) == 2
        assert all(node_id >= 0 for node_id in snapshot.nodes)        # real brokers now

        first = [(f"k{i}".encode(), f"all-{i}".encode()) for i in range(10)]
        response = driver.produce(topic, 0, first, acks=-1)
        part = response.body.responses[0].partition_responses[0]
        assert (part.error_code, part.base_offset) == (0, 0)
        assert response.version == driver.client._connections[response.node_id].version_for(PRODUCE)

        fire_and_forget = [(None, f"zero-{i}".encode()) for i in range(5)]
        response = driver.produce(topic, 0, fire_and_forget, acks=0)
        assert response.body is None and not response.disconnected

        other = [(b"p1", f"one-{i}".encode()) for i in range(5)]
        part = driver.produce(topic, 1, other, acks=-1).body.responses[0].partition_responses[0]
        assert part.error_code == 0
        assert driver.client.in_flight_request_count() == 0
    finally:
        driver.client.close()
    assert len(os.listdir("/proc/self/fd")) == fds_before

    consumed = consume_all(kafka.bootstrap_servers, topic, 2, expected_count=20)
    assert [m.value for m in consumed[0]] == [v for _, v in first + fire_and_forget]
    assert [m.key for m in consumed[0]] == [k for k, _ in first + fire_and_forget]
    assert [m.offset for m in consumed[0]] == list(range(15))
    assert [m.value for m in consumed[1]] == [v for _, v in other]
    assert consumed[0][3].headers == [("i", b"3")]


def test_await_topic_for_a_missing_topic_times_out_without_creating_it(kafka):
    topic = f"missing-{uuid.uuid4().hex[:8]}"
    driver = Driver(kafka.bootstrap_servers)
    try:
        thread, outcome = _await_in_thread(driver.metadata, topic, 1_500)
        driver.drive(lambda: not thread.is_alive(), "await_topic to give up", timeout_s=15)
        error = outcome.get("error")
        assert isinstance(error, MetadataTimeoutError), outcome
        assert str(error) == (f"Topic {topic} not present in metadata after 1500 ms: the cluster "
                              f"answered, and topic {topic} does not exist (UNKNOWN_TOPIC_OR_PARTITION); "
                              "this producer never creates topics: create it first")
        assert driver.metadata.snapshot.topic_error(topic) == 3       # UNKNOWN_TOPIC_OR_PARTITION
    finally:
        driver.client.close()
