"""Produce requests in and per-partition results out, sans I/O (the sender's codec for Produce).

- :func:`produce_request_body` lays drained batches out as a ProduceRequest body (one topic entry
  per topic, one partition entry per batch; ``records()`` is called once per request, so a batch
  re-stamped after an epoch bump carries its new header).
- :func:`partition_results` turns a :class:`ClientResponse` into one :class:`PartitionResult` per
  batch: a disconnect becomes NETWORK_EXCEPTION and a request timeout REQUEST_TIMED_OUT (as Java's
  ``Sender.handleProduceResponse``); acks=0 (no body, written) is success at offset -1; a partition
  the broker did not answer becomes UNKNOWN_SERVER_ERROR.
- :func:`batch_error` builds the exception a batch fails with, carrying the broker's error
  message and per-record errors.
- :func:`leader_hints` reads KIP-951's current leaders and node endpoints (Produce v10+), which the
  sender applies to the metadata at once (``Metadata.update_leaders``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterable, Mapping

from .. import errors
from ..error_codes import ErrorCode
from ..client.requests import ClientResponse
from ..record.layout import HEADER_SIZE
from ..structs import Node, TopicPartition
from .producer_batch import ProducerBatch



@dataclass(frozen=True)
class RecordError:
    """One record the broker rejected (Produce v8+): its index in the batch and why."""

    batch_index: int
    message: str | None


@dataclass(frozen=True)
class PartitionResult:
    """The outcome of one batch in one request, as the broker (or the client) reported it."""

    error_code: int
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    error_message: str | None = None
    record_errors: tuple[RecordError, ...] = ()

    @property
    def error_class(self) -> type[errors.BrokerResponseError] | None:
        return errors.for_code(self.error_code)

    @property
    def retriable(self) -> bool:
        cls = self.error_class
        return cls is not None and cls.retriable

    @property
    def invalid_metadata(self) -> bool:
        cls = self.error_class
        return cls is not None and cls.invalid_metadata


def produce_request_body(batches: Iterable[ProducerBatch], *, acks: int, timeout_ms: int,
                         transactional_id: str | None = None) -> dict[str, Any]:
    """A ProduceRequest body carrying ``batches`` (at most one per partition)."""
    by_topic: dict[str, list[dict[str, Any]]] = {}
    for batch in batches:
        tp = batch.topic_partition
        by_topic.setdefault(tp.topic, []).append({"index": tp.partition, "records": batch.records()})
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": name, "partition_data": parts} for name, parts in by_topic.items()]}


def partition_results(response: ClientResponse,
                      batches: Mapping[TopicPartition, ProducerBatch]) -> dict[TopicPartition, PartitionResult]:
    """One result per batch of the request ``response`` completes (see the module docstring)."""
    node = response.node_id
    if response.timed_out:
        failed = PartitionResult(ErrorCode.REQUEST_TIMED_OUT,
                                 error_message=f"Disconnected from node {node} due to timeout")
        return {tp: failed for tp in batches}
    if response.disconnected or response.error is not None:
        reason = f"Disconnected from node {node}"
        if response.error is not None:
            reason = f"{reason}: {response.error}"
        return {tp: PartitionResult(ErrorCode.NETWORK_EXCEPTION, error_message=reason) for tp in batches}
    if response.body is None:                       # acks=0: done once written
        return {tp: PartitionResult(ErrorCode.NONE) for tp in batches}
    answered = _answered(response.body)
    missing = None
    results: dict[TopicPartition, PartitionResult] = {}
    for tp in batches:
        result = answered.get((tp.topic, tp.partition))
        if result is None:
            if missing is None:
                missing = PartitionResult(
                    ErrorCode.UNKNOWN_SERVER_ERROR,
                    error_message=f"node {node} sent no result for this partition")
            result = missing
        results[tp] = result
    return results


_LEADER_HINT_ERRORS = frozenset({ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.FENCED_LEADER_EPOCH})


def leader_hints(response: ClientResponse) -> tuple[dict[TopicPartition, tuple[int, int]], list[Node]]:
    """KIP-951 (Produce v10+): the partitions the broker says moved, ``tp -> (leader id,
    leader epoch)`` from the ``current_leader`` of those answered NOT_LEADER_OR_FOLLOWER or
    FENCED_LEADER_EPOCH, and the ``node_endpoints`` that say where those leaders are."""
    body = response.body
    if body is None or response.disconnected or response.error is not None:
        return {}, []
    hints: dict[TopicPartition, tuple[int, int]] = {}
    for topic in body.responses:
        for part in topic.partition_responses:
            leader = getattr(part, "current_leader", None)
            if part.error_code in _LEADER_HINT_ERRORS and leader is not None and leader.leader_id >= 0:
                hints[TopicPartition(topic.name, part.index)] = (leader.leader_id, leader.leader_epoch)
    if not hints:
        return {}, []
    nodes = [Node(e.node_id, e.host, e.port, e.rack) for e in (getattr(body, "node_endpoints", None) or ())]
    return hints, nodes


def _answered(body: Any) -> dict[tuple[str, int], PartitionResult]:
    """The broker's results by (topic, partition): plain tuples hash faster than TopicPartition."""
    results: dict[tuple[str, int], PartitionResult] = {}
    for topic in body.responses:
        name = topic.name
        for part in topic.partition_responses:
            record_errors = part.record_errors
            results[(name, part.index)] = PartitionResult(
                part.error_code, part.base_offset, part.log_append_time_ms, part.log_start_offset,
                part.error_message,
                tuple(RecordError(e.batch_index, e.batch_index_error_message)
                      for e in record_errors) if record_errors else ())
    return results


def batch_error(batch: ProducerBatch, result: PartitionResult) -> errors.KafkaError:
    """The exception ``batch`` fails with: the error code's class, with a message naming the
    partition, the broker's message and the records it rejected."""
    tp = batch.topic_partition
    if result.error_code == ErrorCode.TOPIC_AUTHORIZATION_FAILED:
        detail = f"Not authorized to access topics: [{tp.topic}]"
    elif result.error_code == ErrorCode.CLUSTER_AUTHORIZATION_FAILED:
        detail = "The producer is not authorized to do idempotent sends"
    elif result.error_code == ErrorCode.MESSAGE_TOO_LARGE:  # a batch of one: a larger one is split
        detail = (f"the broker refused a record of {batch.estimated_size_in_bytes - HEADER_SIZE} bytes "
                  f"({batch.size_in_bytes} bytes as a batch of one) as too large for the topic's "
                  f"max.message.bytes: {result.error_message or 'MESSAGE_TOO_LARGE'}")
    else:
        detail = f"{result.error_message or 'the broker refused the batch'}"
    text = f"{detail} (partition {tp}, {batch.record_count} record(s))"
    if result.record_errors:
        shown = "; ".join(f"record {e.batch_index}: {e.message or 'invalid'}"
                          for e in result.record_errors[:10])
        more = len(result.record_errors) - 10
        text = f"{text}; rejected records: {shown}" + (f" and {more} more" if more > 0 else "")
    error = errors.error_for(result.error_code, text)
    return error if error is not None else errors.KafkaError(f"batch failed without an error: {text}")
