"""The registry of the Kafka APIs this client speaks, with the version ranges we declare.

    API                     key  versions  flexible
    Produce                   0    3-12      9+
    Fetch                     1    4-11      12+ (flexible versions not declared)
    ListOffsets               2    1-5       6+  (flexible versions not declared)
    Metadata                  3    4-13      9+
    FindCoordinator          10    0-6       3+
    SaslHandshake            17    0-1       none
    ApiVersions              18    0-4       3+    (response header is always v0)
    CreateTopics             19    2-7       5+
    DescribeConfigs          32    1-4       4+
    InitProducerId           22    3-5       2+
    AddPartitionsToTxn       24    0-5       3+
    EndTxn                   26    0-5       3+
    SaslAuthenticate         36    0-2       2+
    AlterClientQuotas        49    0-1       1+
"""

from __future__ import annotations

from .api_message import ApiMessage
from .messages.api_versions import API_VERSIONS
from .messages.client_quotas import ALTER_CLIENT_QUOTAS
from .messages.create_topics import CREATE_TOPICS
from .messages.describe_configs import DESCRIBE_CONFIGS
from .messages.fetch import FETCH, LIST_OFFSETS
from .messages.find_coordinator import FIND_COORDINATOR
from .messages.init_producer_id import INIT_PRODUCER_ID
from .messages.metadata import METADATA
from .messages.produce import PRODUCE
from .messages.sasl import SASL_AUTHENTICATE, SASL_HANDSHAKE
from .messages.transactions import ADD_PARTITIONS_TO_TXN, END_TXN

ALL_APIS: tuple[ApiMessage, ...] = (
    PRODUCE, FETCH, LIST_OFFSETS, METADATA, FIND_COORDINATOR, SASL_HANDSHAKE, API_VERSIONS, CREATE_TOPICS,
    INIT_PRODUCER_ID, ADD_PARTITIONS_TO_TXN, END_TXN, SASL_AUTHENTICATE, DESCRIBE_CONFIGS,
    ALTER_CLIENT_QUOTAS,
)

BY_KEY: dict[int, ApiMessage] = {api.api_key: api for api in ALL_APIS}

BY_NAME: dict[str, ApiMessage] = {api.name: api for api in ALL_APIS}

__all__ = [
    "ALL_APIS", "BY_KEY", "BY_NAME", "API_VERSIONS", "METADATA", "PRODUCE", "FETCH", "LIST_OFFSETS", "INIT_PRODUCER_ID",
    "CREATE_TOPICS", "FIND_COORDINATOR", "ADD_PARTITIONS_TO_TXN", "END_TXN", "SASL_HANDSHAKE",
    "SASL_AUTHENTICATE", "DESCRIBE_CONFIGS", "ALTER_CLIENT_QUOTAS",
]
