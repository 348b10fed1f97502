"""InitProducerId (key 22): a producer id and epoch for idempotence and transactions.

From InitProducerIdRequest.json / InitProducerIdResponse.json. v2 is the first flexible
version; v3 adds ProducerId / ProducerEpoch so a producer can bump its epoch (KIP-360); v4 adds
PRODUCER_FENCED; v5 adds TRANSACTION_ABORTABLE (KIP-890). This project speaks v3+ only.
"""

from ..api_message import ApiMessage
from ..schema import Field
from ..types import INT16, INT32, INT64, STRING

INIT_PRODUCER_ID = ApiMessage.declare(
    "InitProducerId", 22, versions="3-5", flexible="2+",
    request=[
        Field("transactional_id", STRING, "0+", nullable_versions="0+"),
        Field("transaction_timeout_ms", INT32, "0+"),
        Field("producer_id", INT64, "3+", default=-1),
        Field("producer_epoch", INT16, "3+", default=-1),
    ],
    response=[
        Field("throttle_time_ms", INT32, "0+"),
        Field("error_code", INT16, "0+"),
        Field("producer_id", INT64, "0+", default=-1),
        Field("producer_epoch", INT16, "0+"),
    ],
)
