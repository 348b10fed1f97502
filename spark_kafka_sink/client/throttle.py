"""Broker throttling (KIP-219): which responses ask the client itself to hold back.

A broker over a client quota (bytes or request time) answers at once and puts the time the
client should wait in the response's ``throttle_time_ms``; it also stops reading that connection
for the time. For the API versions below (the first of each made with KIP-219, Kafka 2.0) the
client must send nothing more to that broker until the time is up, as Java's
``AbstractResponse.shouldClientThrottle`` says; older versions were delayed by the broker
itself, and other APIs (SASL, quota administration) never ask.

The network client applies it (``NetworkClient._maybe_throttle``): the node is not ready until
then, the sender's poll waits for it (``poll_delay``), and requests already in flight get the
throttled time added before they can time out. Every response's throttle time, throttled or
not, goes to the producer's ``produce-throttle-time-avg`` / ``-max``, as Java records it.
"""

from __future__ import annotations

from ..protocol.api_message import ApiMessage

__all__ = ["CLIENT_THROTTLE_FROM", "client_should_throttle"]

CLIENT_THROTTLE_FROM: dict[int, int] = {
    0: 6,    # Produce
    1: 8,    # Fetch
    2: 3,    # ListOffsets
    3: 6,    # Metadata
    10: 2,   # FindCoordinator
    18: 2,   # ApiVersions
    19: 3,   # CreateTopics
    22: 1,   # InitProducerId
    24: 1,   # AddPartitionsToTxn
    25: 1,   # AddOffsetsToTxn
    26: 1,   # EndTxn
    28: 1,   # TxnOffsetCommit
    32: 2,   # DescribeConfigs
}
"""API key -> the first version whose throttled responses the client must honour itself."""


def client_should_throttle(api: ApiMessage, version: int) -> bool:
    """Whether a response of ``api`` at ``version`` with a throttle time asks the client to wait."""
    first = CLIENT_THROTTLE_FROM.get(api.api_key)
    return first is not None and version >= first
