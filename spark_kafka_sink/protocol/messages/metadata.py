"""Metadata (key 3): brokers, topics, partitions and their leaders.

From MetadataRequest.json / MetadataResponse.json. Kafka 4 dropped v0-v3, so we start at v4
(which adds AllowAutoTopicCreation). v5 adds offline replicas, v7 leader epochs, v8 authorized
operations, v9 is the first flexible version, v10 adds topic ids, v11 drops the cluster
authorized operations (KIP-700), v12 lets topic names be null (lookup by id), v13 adds a
top-level error code (KIP-1102). A null ``topics`` array asks for all topics; an empty one for
none.
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, INT16, INT32, STRING, UUID, Array

_NO_OPERATIONS = -2147483648

REQUEST_TOPIC = Schema("MetadataRequestTopic", [
    Field("topic_id", UUID, "10+"),
    Field("name", STRING, "0+", nullable_versions="10+"),
])

BROKER = Schema("MetadataResponseBroker", [
    Field("node_id", INT32, "0+"),
    Field("host", STRING, "0+"),
    Field("port", INT32, "0+"),
    Field("rack", STRING, "1+", nullable_versions="1+", default=None),
])

PARTITION = Schema("MetadataResponsePartition", [
    Field("error_code", INT16, "0+"),
    Field("partition_index", INT32, "0+"),
    Field("leader_id", INT32, "0+"),
    Field("leader_epoch", INT32, "7+", default=-1),
    Field("replica_nodes", Array(INT32), "0+"),
    Field("isr_nodes", Array(INT32), "0+"),
    Field("offline_replicas", Array(INT32), "5+"),
])

TOPIC = Schema("MetadataResponseTopic", [
    Field("error_code", INT16, "0+"),
    Field("name", STRING, "0+", nullable_versions="12+"),
    Field("topic_id", UUID, "10+"),
    Field("is_internal", BOOL, "1+", default=False),
    Field("partitions", Array(PARTITION), "0+"),
    Field("topic_authorized_operations", INT32, "8+", default=_NO_OPERATIONS),
])

METADATA = ApiMessage.declare(
    "Metadata", 3, versions="4-13", flexible="9+",
    request=[
        Field("topics", Array(REQUEST_TOPIC), "0+", nullable_versions="1+"),
        Field("allow_auto_topic_creation", BOOL, "4+", default=True),
        Field("include_cluster_authorized_operations", BOOL, "8-10"),
        Field("include_topic_authorized_operations", BOOL, "8+"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "3+"),
        Field("brokers", Array(BROKER), "0+"),
        Field("cluster_id", STRING, "2+", nullable_versions="2+", default=None),
        Field("controller_id", INT32, "1+", default=-1),
        Field("topics", Array(TOPIC), "0+"),
        Field("cluster_authorized_operations", INT32, "8-10", default=_NO_OPERATIONS),
        Field("error_code", INT16, "13+"),
    ],
)
