"""Produce (key 0): record batches to partition leaders.

From ProduceRequest.json / ProduceResponse.json. Kafka 4 dropped v0-v2; v3 adds the
transactional id and record batch v2; v5 adds LogStartOffset; v7 allows zstd; v8 adds per-record
errors; v9 is the first flexible version; v10 adds the tagged CurrentLeader / NodeEndpoints
(KIP-951); v11-v12 only add error codes (KIP-890). v13 switches to topic ids and is not declared.
``records`` holds RecordBatch bytes.
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import INT16, INT32, INT64, RECORDS, STRING, Array

PARTITION_DATA = Schema("PartitionProduceData", [
    Field("index", INT32, "0+"),
    Field("records", RECORDS, "0+", nullable_versions="0+"),
])

TOPIC_DATA = Schema("TopicProduceData", [
    Field("name", STRING, "0+"),
    Field("partition_data", Array(PARTITION_DATA), "0+"),
])

BATCH_INDEX_AND_ERROR = Schema("BatchIndexAndErrorMessage", [
    Field("batch_index", INT32, "8+"),
    Field("batch_index_error_message", STRING, "8+", nullable_versions="8+", default=None),
])

LEADER_ID_AND_EPOCH = Schema("LeaderIdAndEpoch", [
    Field("leader_id", INT32, "10+", default=-1),
    Field("leader_epoch", INT32, "10+", default=-1),
])

PARTITION_RESPONSE = Schema("PartitionProduceResponse", [
    Field("index", INT32, "0+"),
    Field("error_code", INT16, "0+"),
    Field("base_offset", INT64, "0+"),
    Field("log_append_time_ms", INT64, "2+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("record_errors", Array(BATCH_INDEX_AND_ERROR), "8+"),
    Field("error_message", STRING, "8+", nullable_versions="8+", default=None),
    Field("current_leader", LEADER_ID_AND_EPOCH, "10+", tag=0, tagged_versions="10+"),
])

TOPIC_RESPONSE = Schema("TopicProduceResponse", [
    Field("name", STRING, "0+"),
    Field("partition_responses", Array(PARTITION_RESPONSE), "0+"),
])

NODE_ENDPOINT = Schema("NodeEndpoint", [
    Field("node_id", INT32, "10+"),
    Field("host", STRING, "10+"),
    Field("port", INT32, "10+"),
    Field("rack", STRING, "10+", nullable_versions="10+", default=None),
])

PRODUCE = ApiMessage.declare(
    "Produce", 0, versions="3-12", flexible="9+",
    request=[
        Field("transactional_id", STRING, "3+", nullable_versions="3+", default=None),
        Field("acks", INT16, "0+"),
        Field("timeout_ms", INT32, "0+"),
        Field("topic_data", Array(TOPIC_DATA), "0+"),
    ],
    response=[
        Field("responses", Array(TOPIC_RESPONSE), "0+"),
        Field("throttle_time_ms", INT32, "1+", default=0),
        Field("node_endpoints", Array(NODE_ENDPOINT), "10+", tag=0, tagged_versions="10+"),
    ],
)
