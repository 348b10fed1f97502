"""The Kafka wire protocol, sans I/O: bytes in, objects out.

Nothing here imports socket, selectors, threading, time, asyncio or pyspark. The pieces:

    primitives   Reader / Writer for ints, varints, strings, bytes, uuids, arrays, tagged fields
    types        field types (INT16, STRING, RECORDS, Array(...), ...)
    schema       Field and Schema: messages declared as data, encode/decode at any version
    values       Struct, the immutable decoded value
    api_message  ApiMessage: one API's key, version range and request/response schemas
    messages/    the declarations, one module per API;  apis: the registry (BY_KEY, ALL_APIS)
    headers      request/response headers;  frame_buffer: size-prefixed frame splitting
    framing      ClientFraming / ServerFraming (correlation ids, in-order responses)
    versions     VersionRange, negotiate(), ranges_from_api_versions()
"""

from .api_message import ApiMessage
from .apis import (
    ADD_PARTITIONS_TO_TXN, ALL_APIS, API_VERSIONS, BY_KEY, BY_NAME, CREATE_TOPICS, END_TXN, FETCH,
    FIND_COORDINATOR, INIT_PRODUCER_ID, LIST_OFFSETS, METADATA, PRODUCE, SASL_AUTHENTICATE,
    SASL_HANDSHAKE,
)
from .framing import ClientFraming, IncomingRequest, OutgoingRequest, Response, ServerFraming
from .schema import Field, Schema
from .values import Struct
from .versions import VersionRange, negotiate, ranges_from_api_versions

__all__ = [
    "ApiMessage", "Struct", "Field", "Schema", "VersionRange", "negotiate",
    "ranges_from_api_versions", "ClientFraming", "ServerFraming", "OutgoingRequest", "Response",
    "IncomingRequest", "ALL_APIS", "BY_KEY", "BY_NAME", "API_VERSIONS", "METADATA", "PRODUCE",
    "INIT_PRODUCER_ID", "CREATE_TOPICS", "FETCH", "LIST_OFFSETS", "FIND_COORDINATOR", "ADD_PARTITIONS_TO_TXN", "END_TXN",
    "SASL_HANDSHAKE", "SASL_AUTHENTICATE",
]
