"""ListOffsets (key 2) and Fetch (key 1): reading a partition back, as the sink's commit log does.

From ListOffsetsRequest/Response.json: Kafka 4 dropped v0; v1 returns one offset per partition
(timestamp -1: the log end, -2: the log start); v2 adds the isolation level and throttle time; v4
the leader epoch; v6 is the first flexible version. Declared here: v1-v5, enough for a reader.

From FetchRequest/Response.json: Kafka 4 dropped v0-v3; v4 adds the isolation level and the
aborted transactions; v5 log start offsets; v7 fetch sessions (session id 0, epoch -1: none);
v9 the current leader epoch; v11 the rack id and preferred read replica; v12 is the first
flexible version and v13 switches to topic ids. Declared here: v4-v11, topic names, no tags.
``records`` holds RecordBatch bytes (possibly a truncated last batch, as the broker sends them).
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import INT8, INT16, INT32, INT64, RECORDS, STRING, Array

LIST_OFFSETS_PARTITION = Schema("ListOffsetsPartition", [
    Field("partition_index", INT32, "0+"),
    Field("current_leader_epoch", INT32, "4+", default=-1),
    Field("timestamp", INT64, "0+"),
])

LIST_OFFSETS_TOPIC = Schema("ListOffsetsTopic", [
    Field("name", STRING, "0+"),
    Field("partitions", Array(LIST_OFFSETS_PARTITION), "0+"),
])

LIST_OFFSETS_PARTITION_RESPONSE = Schema("ListOffsetsPartitionResponse", [
    Field("partition_index", INT32, "0+"),
    Field("error_code", INT16, "0+"),
    Field("timestamp", INT64, "1+", default=-1),
    Field("offset", INT64, "1+", default=-1),
    Field("leader_epoch", INT32, "4+", default=-1),
])

LIST_OFFSETS_TOPIC_RESPONSE = Schema("ListOffsetsTopicResponse", [
    Field("name", STRING, "0+"),
    Field("partitions", Array(LIST_OFFSETS_PARTITION_RESPONSE), "0+"),
])

LIST_OFFSETS = ApiMessage.declare(
    "ListOffsets", 2, versions="1-5", flexible="6+",
    request=[
        Field("replica_id", INT32, "0+"),            # a client sends -1
        Field("isolation_level", INT8, "2+", default=0),
        Field("topics", Array(LIST_OFFSETS_TOPIC), "0+"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "2+", default=0),
        Field("topics", Array(LIST_OFFSETS_TOPIC_RESPONSE), "0+"),
    ],
)

FETCH_PARTITION = Schema("FetchPartition", [
    Field("partition", INT32, "0+"),
    Field("current_leader_epoch", INT32, "9+", default=-1),
    Field("fetch_offset", INT64, "0+"),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("partition_max_bytes", INT32, "0+"),
])

FETCH_TOPIC = Schema("FetchTopic", [
    Field("topic", STRING, "0+"),
    Field("partitions", Array(FETCH_PARTITION), "0+"),
])

FORGOTTEN_TOPIC = Schema("ForgottenTopic", [
    Field("topic", STRING, "7+"),
    Field("partitions", Array(INT32), "7+"),
])

ABORTED_TRANSACTION = Schema("AbortedTransaction", [
    Field("producer_id", INT64, "4+"),
    Field("first_offset", INT64, "4+"),
])

FETCH_PARTITION_RESPONSE = Schema("PartitionData", [
    Field("partition_index", INT32, "0+"),
    Field("error_code", INT16, "0+"),
    Field("high_watermark", INT64, "0+"),
    Field("last_stable_offset", INT64, "4+", default=-1),
    Field("log_start_offset", INT64, "5+", default=-1),
    Field("aborted_transactions", Array(ABORTED_TRANSACTION), "4+", nullable_versions="4+"),
    Field("preferred_read_replica", INT32, "11+", default=-1),
    Field("records", RECORDS, "0+", nullable_versions="0+"),
])

FETCH_TOPIC_RESPONSE = Schema("FetchableTopicResponse", [
    Field("topic", STRING, "0+"),
    Field("partitions", Array(FETCH_PARTITION_RESPONSE), "0+"),
])

FETCH = ApiMessage.declare(
    "Fetch", 1, versions="4-11", flexible="12+",
    request=[
        Field("replica_id", INT32, "0+", default=-1),
        Field("max_wait_ms", INT32, "0+"),
        Field("min_bytes", INT32, "0+"),
        Field("max_bytes", INT32, "3+", default=0x7FFFFFFF),
        Field("isolation_level", INT8, "4+", default=0),
        Field("session_id", INT32, "7+", default=0),
        Field("session_epoch", INT32, "7+", default=-1),
        Field("topics", Array(FETCH_TOPIC), "0+"),
        Field("forgotten_topics_data", Array(FORGOTTEN_TOPIC), "7+"),
        Field("rack_id", STRING, "11+", default=""),
    ],
    response=[
        Field("throttle_time_ms", INT32, "1+", default=0),
        Field("error_code", INT16, "7+", default=0),
        Field("session_id", INT32, "7+", default=0),
        Field("responses", Array(FETCH_TOPIC_RESPONSE), "0+"),
    ],
)
