"""CreateTopics (key 19): create topics (admin calls, tests, the demo).

From CreateTopicsRequest.json / CreateTopicsResponse.json. Kafka 4 dropped v0-v1; v2 adds
throttle time; v4 makes partitions/replication factor optional (-1, KIP-464); v5 is the first
flexible version and returns the topic configs (KIP-525); v6 may return THROTTLING_QUOTA_EXCEEDED;
v7 returns the topic id.
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, INT8, INT16, INT32, STRING, UUID, Array

ASSIGNMENT = Schema("CreatableReplicaAssignment", [
    Field("partition_index", INT32, "0+"),
    Field("broker_ids", Array(INT32), "0+"),
])

TOPIC_CONFIG = Schema("CreatableTopicConfig", [
    Field("name", STRING, "0+"),
    Field("value", STRING, "0+", nullable_versions="0+"),
])

TOPIC = Schema("CreatableTopic", [
    Field("name", STRING, "0+"),
    Field("num_partitions", INT32, "0+"),
    Field("replication_factor", INT16, "0+"),
    Field("assignments", Array(ASSIGNMENT), "0+"),
    Field("configs", Array(TOPIC_CONFIG), "0+"),
])

RESULT_CONFIG = Schema("CreatableTopicConfigs", [
    Field("name", STRING, "5+"),
    Field("value", STRING, "5+", nullable_versions="5+"),
    Field("read_only", BOOL, "5+"),
    Field("config_source", INT8, "5+", default=-1),
    Field("is_sensitive", BOOL, "5+"),
])

TOPIC_RESULT = Schema("CreatableTopicResult", [
    Field("name", STRING, "0+"),
    Field("topic_id", UUID, "7+"),
    Field("error_code", INT16, "0+"),
    Field("error_message", STRING, "1+", nullable_versions="0+"),
    Field("topic_config_error_code", INT16, "5+", tag=0, tagged_versions="5+"),
    Field("num_partitions", INT32, "5+", default=-1),
    Field("replication_factor", INT16, "5+", default=-1),
    Field("configs", Array(RESULT_CONFIG), "5+", nullable_versions="5+"),
])

CREATE_TOPICS = ApiMessage.declare(
    "CreateTopics", 19, versions="2-7", flexible="5+",
    request=[
        Field("topics", Array(TOPIC), "0+"),
        Field("timeout_ms", INT32, "0+", default=60000),
        Field("validate_only", BOOL, "1+", default=False),
    ],
    response=[
        Field("throttle_time_ms", INT32, "2+"),
        Field("topics", Array(TOPIC_RESULT), "0+"),
    ],
)
