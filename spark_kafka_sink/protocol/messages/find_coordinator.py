"""FindCoordinator (key 10): the broker coordinating a group or transactional id.

From FindCoordinatorRequest.json / FindCoordinatorResponse.json. v1 adds KeyType (0 group,
1 transaction, 2 share) and error messages; v3 is the first flexible version; v4 batches keys
(CoordinatorKeys / Coordinators, KIP-699) and drops the single-key fields; v5 adds
TRANSACTION_ABORTABLE (KIP-890); v6 adds share groups (KIP-932).
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import INT8, INT16, INT32, STRING, Array

COORDINATOR = Schema("Coordinator", [
    Field("key", STRING, "4+"),
    Field("node_id", INT32, "4+"),
    Field("host", STRING, "4+"),
    Field("port", INT32, "4+"),
    Field("error_code", INT16, "4+"),
    Field("error_message", STRING, "4+", nullable_versions="4+"),
])

FIND_COORDINATOR = ApiMessage.declare(
    "FindCoordinator", 10, versions="0-6", flexible="3+",
    request=[
        Field("key", STRING, "0-3"),
        Field("key_type", INT8, "1+", default=0),
        Field("coordinator_keys", Array(STRING), "4+"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "1+"),
        Field("error_code", INT16, "0-3"),
        Field("error_message", STRING, "1-3", nullable_versions="1-3"),
        Field("node_id", INT32, "0-3"),
        Field("host", STRING, "0-3"),
        Field("port", INT32, "0-3"),
        Field("coordinators", Array(COORDINATOR), "4+"),
    ],
)
