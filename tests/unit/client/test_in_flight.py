"""InFlightRequests: the per-connection cap, unwritten requests, ordering and timeouts."""

from __future__ import annotations

import pytest

from spark_kafka_sink.client.in_flight import InFlightRequests
from spark_kafka_sink.client.requests import ClientRequest, InFlightRequest
from spark_kafka_sink.errors import IllegalStateError
from spark_kafka_sink.protocol import PRODUCE


def req(node: int, cid: int, send_ms: int = 0, timeout_ms: int = 1000, *,
        expect_response: bool = True) -> InFlightRequest:
    request = ClientRequest(node, PRODUCE, {}, created_ms=send_ms, expect_response=expect_response)
    return InFlightRequest(request, cid, 9, send_ms, timeout_ms)


def test_cap_per_connection_and_unwritten_newest_block_more_sends():
    inflight = InFlightRequests(2)
    assert inflight.can_send_more(1)
    inflight.add(req(1, 0))
    assert not inflight.can_send_more(1)             # its bytes are not written yet
    assert inflight.can_send_more(2)                 # other nodes are independent
    assert inflight.mark_written(1).correlation_id == 0
    assert inflight.can_send_more(1)
    inflight.add(req(1, 1))
    inflight.mark_written(1)
    assert not inflight.can_send_more(1)             # the cap
    assert inflight.count(1) == 2 and inflight.count() == 2
    inflight.complete_next(1)
    assert inflight.can_send_more(1)


def test_responses_complete_the_oldest_and_acks0_the_newest():
    inflight = InFlightRequests(5)
    for cid in range(3):
        inflight.add(req(1, cid))
        inflight.mark_written(1)
    inflight.add(req(1, 3, expect_response=False))
    assert inflight.last_sent(1).correlation_id == 3
    assert inflight.mark_written(1).correlation_id == 3
    assert inflight.complete_last_sent(1).correlation_id == 3
    assert [inflight.complete_next(1).correlation_id for _ in range(3)] == [0, 1, 2]
    with pytest.raises(IllegalStateError, match="no request in flight to node 1"):
        inflight.complete_next(1)


def test_complete_next_keeps_the_newest_unwritten_flag():
    inflight = InFlightRequests(5)
    inflight.add(req(1, 0))
    inflight.mark_written(1)
    inflight.add(req(1, 1))                          # being written
    inflight.complete_next(1)                        # the answer to 0 arrives meanwhile
    assert not inflight.can_send_more(1)


def test_clear_all_returns_oldest_first_and_resets_the_node():
    inflight = InFlightRequests(5)
    for cid in range(3):
        inflight.add(req(1, cid))
    assert [r.correlation_id for r in inflight.clear_all(1)] == [0, 1, 2]
    assert inflight.count(1) == 0 and inflight.can_send_more(1)
    assert inflight.clear_all(9) == []


def test_timed_out_nodes_use_each_requests_own_timeout():
    inflight = InFlightRequests(5)
    inflight.add(req(1, 0, send_ms=0, timeout_ms=1000))
    inflight.mark_written(1)
    inflight.add(req(1, 1, send_ms=100, timeout_ms=100))
    inflight.add(req(2, 0, send_ms=0, timeout_ms=5000))
    assert inflight.timed_out_nodes(200) == []
    assert inflight.timed_out_nodes(201) == [1]      # the newer request's shorter timeout
    assert inflight.next_deadline_ms() == 200
    assert inflight.timed_out_nodes(5001) == [1, 2]
    assert sorted(inflight.nodes()) == [1, 2]


def test_cap_must_be_positive():
    with pytest.raises(ValueError):
        InFlightRequests(0)
