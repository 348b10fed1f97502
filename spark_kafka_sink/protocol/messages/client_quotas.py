"""AlterClientQuotas (key 49): set or remove client quotas (KIP-546), e.g. a default
``producer_byte_rate`` for every client, which makes a broker throttle producers (KIP-219).

From AlterClientQuotasRequest.json / AlterClientQuotasResponse.json: v0 and v1 differ only in
that v1 is flexible. An entity is a list of (type, name) pairs: type ``user``, ``client-id`` or
``ip``; a null name is that type's default.
"""

from ..api_message import ApiMessage
from ..schema import Field, Schema
from ..types import BOOL, FLOAT64, INT16, INT32, STRING, Array

ENTITY = Schema("AlterClientQuotasEntity", [
    Field("entity_type", STRING, "0+"),
    Field("entity_name", STRING, "0+", nullable_versions="0+"),
])

OP = Schema("AlterClientQuotasOp", [
    Field("key", STRING, "0+"),
    Field("value", FLOAT64, "0+"),
    Field("remove", BOOL, "0+"),
])

ENTRY = Schema("AlterClientQuotasEntry", [
    Field("entity", Array(ENTITY), "0+"),
    Field("ops", Array(OP), "0+"),
])

ENTRY_RESULT = Schema("AlterClientQuotasEntryResult", [
    Field("error_code", INT16, "0+"),
    Field("error_message", STRING, "0+", nullable_versions="0+"),
    Field("entity", Array(ENTITY), "0+"),
])

ALTER_CLIENT_QUOTAS = ApiMessage.declare(
    "AlterClientQuotas", 49, versions="0-1", flexible="1+",
    request=[
        Field("entries", Array(ENTRY), "0+"),
        Field("validate_only", BOOL, "0+"),
    ],
    response=[
        Field("throttle_time_ms", INT32, "0+"),
        Field("entries", Array(ENTRY_RESULT), "0+"),
    ],
)
