"""AddPartitionsToTxn (key 24) and EndTxn (key 26): the producer side of transactions.

From AddPartitionsToTxnRequest/Response.json: v2 adds PRODUCER_FENCED, v3 is the first flexible
version, v4 batches several transactions (brokers use v4+, clients v3 and below: the V3AndBelow*
fields), v5 adds TRANSACTION_ABORTABLE (KIP-890).

From EndTxnRequest/Response.json: v2 adds PRODUCER_FENCED, v3 is the first flexible version, v4
adds TRANSACTION_ABORTABLE, v5 always bumps the epoch and returns the new producer id and epoch
(KIP-890).
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, INT16, INT32, INT64, STRING, Array

TXN_TOPIC = Schema("AddPartitionsToTxnTopic", [
    Field("name", STRING, "0+"),
    Field("partitions", Array(INT32), "0+"),
])

TXN_TRANSACTION = Schema("AddPartitionsToTxnTransaction", [
    Field("transactional_id", STRING, "4+"),
    Field("producer_id", INT64, "4+"),
    Field("producer_epoch", INT16, "4+"),
    Field("verify_only", BOOL, "4+", default=False),
    Field("topics", Array(TXN_TOPIC), "4+"),
])

TXN_PARTITION_RESULT = Schema("AddPartitionsToTxnPartitionResult", [
    Field("partition_index", INT32, "0+"),
    Field("partition_error_code", INT16, "0+"),
])

TXN_TOPIC_RESULT = Schema("AddPartitionsToTxnTopicResult", [
    Field("name", STRING, "0+"),
    Field("results_by_partition", Array(TXN_PARTITION_RESULT), "0+"),
])

TXN_RESULT = Schema("AddPartitionsToTxnResult", [
    Field("transactional_id", STRING, "4+"),
    Field("topic_results", Array(TXN_TOPIC_RESULT), "4+"),
])

ADD_PARTITIONS_TO_TXN = ApiMessage.declare(
    "AddPartitionsToTxn", 24, versions="0-5", flexible="3+",
    request=[
        Field("transactions", Array(TXN_TRANSACTION), "4+"),
        Field("v3_and_below_transactional_id", STRING, "0-3"),
        Field("v3_and_below_producer_id", INT64, "0-3"),
        Field("v3_and_below_producer_epoch", INT16, "0-3"),
        Field("v3_and_below_topics", Array(TXN_TOPIC), "0-3"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "4+"),
        Field("results_by_transaction", Array(TXN_RESULT), "4+"),
        Field("results_by_topic_v3_and_below", Array(TXN_TOPIC_RESULT), "0-3"),
    ],
)

END_TXN = ApiMessage.declare(
    "EndTxn", 26, versions="0-5", flexible="3+",
    request=[
        Field("transactional_id", STRING, "0+"),
        Field("producer_id", INT64, "0+"),
        Field("producer_epoch", INT16, "0+"),
        Field("committed", BOOL, "0+"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("producer_id", INT64, "5+", default=-1),
        Field("producer_epoch", INT16, "5+", default=-1),
    ],
)
