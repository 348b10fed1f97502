"""SaslHandshake (key 17) and SaslAuthenticate (key 36): SASL authentication.

From SaslHandshakeRequest/Response.json: v0 and v1 have the same layout (v1 means the tokens
that follow are wrapped in SaslAuthenticate); never flexible (KAFKA-9577).

From SaslAuthenticateRequest/Response.json: v1 adds the session lifetime; v2 is the first
flexible version.
"""

from ..api_message import ApiMessage
from ..schema import Field
from ..types import BYTES, INT16, INT64, STRING, Array

SASL_HANDSHAKE = ApiMessage.declare(
    "SaslHandshake", 17, versions="0-1", flexible="none",
    request=[
        Field("mechanism", STRING, "0+"),
    ],
    response=[
        Field("error_code", INT16, "0+"),
        Field("mechanisms", Array(STRING), "0+"),
    ],
)

SASL_AUTHENTICATE = ApiMessage.declare(
    "SaslAuthenticate", 36, versions="0-2", flexible="2+",
    request=[
        Field("auth_bytes", BYTES, "0+"),
    ],
    response=[
        Field("error_code", INT16, "0+"),
        Field("error_message", STRING, "0+", nullable_versions="0+"),
        Field("auth_bytes", BYTES, "0+"),
        Field("session_lifetime_ms", INT64, "1+", default=0),
    ],
)
