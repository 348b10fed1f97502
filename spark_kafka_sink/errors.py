"""The error hierarchy.

Every error this package raises derives from :class:`KafkaError`. Errors a broker reports by code
are :class:`BrokerResponseError` subclasses, one per Kafka error code, generated from the table
below (code, name, retriable, invalidates metadata). ``for_code(code)`` maps a code to its class,
``error_for(code, context)`` builds the error with the caller's context in the message and
``raise_for_code(code, context)`` raises it. A code missing from the table is never taken for
success: it is UNKNOWN_SERVER_ERROR (:class:`UnknownBrokerError` keeps the code), as in Java.

Local errors (bad frames, bad batches, missing codecs, the embedded broker) have classes of their
own below the table.
"""

from __future__ import annotations


class KafkaError(Exception):
    """Base class of every error raised by spark_kafka_sink."""

    retriable = False
    invalid_metadata = False


class BrokerResponseError(KafkaError):
    """An error code returned by a broker in a response."""

    code = -1
    name = "UNKNOWN_SERVER_ERROR"

    def __init__(self, message: str = ""):
        self.message = message
        text = f"[Error {self.code}] {self.name}"
        super().__init__(f"{text}: {message}" if message else text)

    def __reduce__(self):  # picklable without prefixing the code twice (Spark ships errors)
        return (type(self), (self.message,))


class AuthenticationError(KafkaError):
    """Authentication with a broker failed: SASL credentials refused, a SASL mechanism the broker
    does not enable, or a TLS handshake that failed (certificate not trusted, host name mismatch).

    Not retriable by the caller's retries: the node is backed off (``reconnect.backoff.ms``
    growing to ``reconnect.backoff.max.ms``) and waiting sends fail with it. The message names
    the broker, the mechanism and the user, never a password."""


# Broker codes that mean "authentication failed": their classes also derive from AuthenticationError.
_AUTHENTICATION_CODES = frozenset({33, 34, 58})  # UNSUPPORTED_SASL_MECHANISM, ILLEGAL_SASL_STATE,
#                                                   SASL_AUTHENTICATION_FAILED

# code, name, retriable, invalid_metadata — as in Apache Kafka's Errors enum.
_CODES = (
    (-1, "UNKNOWN_SERVER_ERROR", False, False),
    (1, "OFFSET_OUT_OF_RANGE", False, False),
    (2, "CORRUPT_MESSAGE", True, False),
    (3, "UNKNOWN_TOPIC_OR_PARTITION", True, True),
    (4, "INVALID_FETCH_SIZE", False, False),
    (5, "LEADER_NOT_AVAILABLE", True, True),
    (6, "NOT_LEADER_OR_FOLLOWER", True, True),
    (7, "REQUEST_TIMED_OUT", True, False),
    (8, "BROKER_NOT_AVAILABLE", False, False),
    (9, "REPLICA_NOT_AVAILABLE", True, True),
    (10, "MESSAGE_TOO_LARGE", False, False),
    (11, "STALE_CONTROLLER_EPOCH", False, False),
    (12, "OFFSET_METADATA_TOO_LARGE", False, False),
    (13, "NETWORK_EXCEPTION", True, True),
    (14, "COORDINATOR_LOAD_IN_PROGRESS", True, False),
    (15, "COORDINATOR_NOT_AVAILABLE", True, False),
    (16, "NOT_COORDINATOR", True, False),
    (17, "INVALID_TOPIC_EXCEPTION", False, False),
    (18, "RECORD_LIST_TOO_LARGE", False, False),
    (19, "NOT_ENOUGH_REPLICAS", True, False),
    (20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", True, False),
    (21, "INVALID_REQUIRED_ACKS", False, False),
    (22, "ILLEGAL_GENERATION", False, False),
    (23, "INCONSISTENT_GROUP_PROTOCOL", False, False),
    (24, "INVALID_GROUP_ID", False, False),
    (25, "UNKNOWN_MEMBER_ID", False, False),
    (26, "INVALID_SESSION_TIMEOUT", False, False),
    (27, "REBALANCE_IN_PROGRESS", False, False),
    (28, "INVALID_COMMIT_OFFSET_SIZE", False, False),
    (29, "TOPIC_AUTHORIZATION_FAILED", False, False),
    (30, "GROUP_AUTHORIZATION_FAILED", False, False),
    (31, "CLUSTER_AUTHORIZATION_FAILED", False, False),
    (32, "INVALID_TIMESTAMP", False, False),
    (33, "UNSUPPORTED_SASL_MECHANISM", False, False),
    (34, "ILLEGAL_SASL_STATE", False, False),
    (35, "UNSUPPORTED_VERSION", False, False),
    (36, "TOPIC_ALREADY_EXISTS", False, False),
    (37, "INVALID_PARTITIONS", False, False),
    (38, "INVALID_REPLICATION_FACTOR", False, False),
    (39, "INVALID_REPLICA_ASSIGNMENT", False, False),
    (40, "INVALID_CONFIG", False, False),
    (41, "NOT_CONTROLLER", True, False),
    (42, "INVALID_REQUEST", False, False),
    (43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", False, False),
    (44, "POLICY_VIOLATION", False, False),
    (45, "OUT_OF_ORDER_SEQUENCE_NUMBER", False, False),
    (46, "DUPLICATE_SEQUENCE_NUMBER", False, False),
    (47, "INVALID_PRODUCER_EPOCH", False, False),
    (48, "INVALID_TXN_STATE", False, False),
    (49, "INVALID_PRODUCER_ID_MAPPING", False, False),
    (50, "INVALID_TRANSACTION_TIMEOUT", False, False),
    (51, "CONCURRENT_TRANSACTIONS", True, False),
    (52, "TRANSACTION_COORDINATOR_FENCED", False, False),
    (53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", False, False),
    (54, "SECURITY_DISABLED", False, False),
    (55, "OPERATION_NOT_ATTEMPTED", False, False),
    (56, "KAFKA_STORAGE_ERROR", True, True),
    (57, "LOG_DIR_NOT_FOUND", False, False),
    (58, "SASL_AUTHENTICATION_FAILED", False, False),
    (59, "UNKNOWN_PRODUCER_ID", False, False),
    (60, "REASSIGNMENT_IN_PROGRESS", False, False),
    (61, "DELEGATION_TOKEN_AUTH_DISABLED", False, False),
    (62, "DELEGATION_TOKEN_NOT_FOUND", False, False),
    (63, "DELEGATION_TOKEN_OWNER_MISMATCH", False, False),
    (64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", False, False),
    (65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", False, False),
    (66, "DELEGATION_TOKEN_EXPIRED", False, False),
    (67, "INVALID_PRINCIPAL_TYPE", False, False),
    (68, "NON_EMPTY_GROUP", False, False),
    (69, "GROUP_ID_NOT_FOUND", False, False),
    (70, "FETCH_SESSION_ID_NOT_FOUND", True, False),
    (71, "INVALID_FETCH_SESSION_EPOCH", True, False),
    (72, "LISTENER_NOT_FOUND", True, True),
    (73, "TOPIC_DELETION_DISABLED", False, False),
    (74, "FENCED_LEADER_EPOCH", True, True),
    (75, "UNKNOWN_LEADER_EPOCH", True, True),
    (76, "UNSUPPORTED_COMPRESSION_TYPE", False, False),
    (77, "STALE_BROKER_EPOCH", False, False),
    (78, "OFFSET_NOT_AVAILABLE", True, False),
    (79, "MEMBER_ID_REQUIRED", False, False),
    (80, "PREFERRED_LEADER_NOT_AVAILABLE", True, True),
    (81, "GROUP_MAX_SIZE_REACHED", False, False),
    (82, "FENCED_INSTANCE_ID", False, False),
    (83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", True, True),
    (84, "ELECTION_NOT_NEEDED", True, True),
    (85, "NO_REASSIGNMENT_IN_PROGRESS", False, False),
    (86, "GROUP_SUBSCRIBED_TO_TOPIC", False, False),
    (87, "INVALID_RECORD", False, False),
    (88, "UNSTABLE_OFFSET_COMMIT", True, False),
    (89, "THROTTLING_QUOTA_EXCEEDED", True, False),
    (90, "PRODUCER_FENCED", False, False),
    (91, "RESOURCE_NOT_FOUND", False, False),
    (92, "DUPLICATE_RESOURCE", False, False),
    (93, "UNACCEPTABLE_CREDENTIAL", False, False),
    (94, "INCONSISTENT_VOTER_SET", False, False),
    (95, "INVALID_UPDATE_VERSION", False, False),
    (96, "FEATURE_UPDATE_FAILED", False, False),
    (97, "PRINCIPAL_DESERIALIZATION_FAILURE", False, False),
    (98, "SNAPSHOT_NOT_FOUND", False, False),
    (99, "POSITION_OUT_OF_RANGE", False, False),
    (100, "UNKNOWN_TOPIC_ID", True, True),
    (101, "DUPLICATE_BROKER_REGISTRATION", False, False),
    (102, "BROKER_ID_NOT_REGISTERED", False, False),
    (103, "INCONSISTENT_TOPIC_ID", True, True),
    (104, "INCONSISTENT_CLUSTER_ID", False, False),
    (105, "TRANSACTIONAL_ID_NOT_FOUND", False, False),
    (106, "FETCH_SESSION_TOPIC_ID_ERROR", True, False),
    (107, "INELIGIBLE_REPLICA", False, False),
    (108, "NEW_LEADER_ELECTED", False, False),
    (109, "OFFSET_MOVED_TO_TIERED_STORAGE", False, False),
    (110, "FENCED_MEMBER_EPOCH", False, False),
    (111, "UNRELEASED_INSTANCE_ID", False, False),
    (112, "UNSUPPORTED_ASSIGNOR", False, False),
    (113, "STALE_MEMBER_EPOCH", False, False),
    (114, "MISMATCHED_ENDPOINT_TYPE", False, False),
    (115, "UNSUPPORTED_ENDPOINT_TYPE", False, False),
    (116, "UNKNOWN_CONTROLLER_ID", False, False),
    (117, "UNKNOWN_SUBSCRIPTION_ID", False, False),
    (118, "TELEMETRY_TOO_LARGE", False, False),
    (119, "INVALID_REGISTRATION", False, False),
    (120, "TRANSACTION_ABORTABLE", False, False),
    (121, "INVALID_RECORD_STATE", False, False),
    (122, "SHARE_SESSION_NOT_FOUND", True, False),
    (123, "INVALID_SHARE_SESSION_EPOCH", True, False),
    (124, "FENCED_STATE_EPOCH", False, False),
    (125, "INVALID_VOTER_KEY", False, False),
    (126, "DUPLICATE_VOTER", False, False),
    (127, "VOTER_NOT_FOUND", False, False),
    (128, "INVALID_REGULAR_EXPRESSION", False, False),
    (129, "REBOOTSTRAP_REQUIRED", False, False),
)


def _class_name(name: str) -> str:
    return "".join(part.capitalize() for part in name.split("_")) + "Error"


_BY_CODE: dict[int, type[BrokerResponseError]] = {}
for _code, _name, _retriable, _invalid in _CODES:
    _cls = type(
        _class_name(_name),
        (BrokerResponseError, AuthenticationError) if _code in _AUTHENTICATION_CODES
        else (BrokerResponseError,),
        {"code": _code, "name": _name, "retriable": _retriable, "invalid_metadata": _invalid,
         "__module__": __name__, "__doc__": f"Kafka error code {_code} ({_name})."},
    )
    _BY_CODE[_code] = _cls
    globals()[_cls.__name__] = _cls
del _code, _name, _retriable, _invalid, _cls


# Java's RecordTooLargeException is the exception of code 10: the producer raises it before sending a
# record too large for max.request.size / buffer.memory, the broker answers it for a batch too large.
RecordTooLargeError = MessageTooLargeError  # noqa: F821 (defined by the loop above)


class UnknownBrokerError(UnknownServerErrorError):  # noqa: F821 (defined by the loop above)
    """An error code this client has no class for (a newer broker's, or a broken one's).

    As Java's ``Errors.forCode`` does, such a code is UNKNOWN_SERVER_ERROR (code -1, not
    retriable): never success, never retried forever. The code the broker sent is kept in
    ``broker_code`` and in the message."""

    def __init__(self, broker_code: int, message: str = ""):
        self.broker_code = broker_code
        self.context = message
        unknown = f"the broker answered error code {broker_code}, which this client does not know"
        super().__init__(f"{message} ({unknown})" if message else unknown)

    def __reduce__(self):
        return (type(self), (self.broker_code, self.context))


def for_code(code: int) -> type[BrokerResponseError] | None:
    """The error class for a broker error code: ``None`` for code 0 (no error) and only then;
    a code missing from the table is UNKNOWN_SERVER_ERROR (Java's ``Errors.forCode``). Use
    :func:`error_for` to build the error: it keeps an unknown code in the message."""
    if code == 0:
        return None
    return _BY_CODE.get(code, UnknownServerErrorError)  # noqa: F821


def error_for(code: int, message: str = "") -> BrokerResponseError | None:
    """The error for a broker error code with ``message`` as context; ``None`` for code 0.
    An unknown code gives :class:`UnknownBrokerError` (an UNKNOWN_SERVER_ERROR naming it)."""
    if code == 0:
        return None
    cls = _BY_CODE.get(code)
    return UnknownBrokerError(code, message) if cls is None else cls(message)


def raise_for_code(code: int, message: str = "") -> None:
    """Raise the error for ``code`` with ``message`` as context; return quietly for code 0."""
    error = error_for(code, message)
    if error is not None:
        raise error


# --- local errors ---------------------------------------------------------------------------

class ProtocolError(KafkaError):
    """Bytes on the wire do not match the Kafka protocol (truncated, oversized, mismatched)."""


class FrameTooLargeError(ProtocolError):
    """A frame announces a size over the configured maximum."""


class CorrelationIdMismatchError(ProtocolError):
    """A response arrived whose correlation id is not the one expected next."""


class UnsupportedVersionError(KafkaError):
    """No version of an API is supported by both this client and the broker."""


class SslAuthenticationError(AuthenticationError):
    """The TLS handshake with a broker failed (Java's ``SslAuthenticationException``); the
    message says why, e.g. "certificate verify failed" or a host name mismatch."""


class ConfigError(KafkaError, ValueError):
    """A configuration property is unknown, malformed, out of range, or conflicts with another.

    The message names the property and the allowed values; it never contains a secret's value.
    """


class EncodeError(KafkaError, ValueError):
    """A message body cannot be encoded: an unknown field, a wrong type, a value out of range,
    or null where the version does not allow it."""


class KafkaConnectionError(KafkaError):
    """A connection to a broker failed: refused, reset, closed by the peer, or timed out."""

    retriable = True


class IllegalStateError(KafkaError, RuntimeError):
    """An operation the current state does not allow: a send to a node that is not ready, a
    connection state change the transition table forbids, or use after close."""


class CorruptRecordError(KafkaError):
    """A record batch failed validation (CRC, framing, lengths) while decoding."""

    retriable = True


class UnknownCodecError(CorruptRecordError):
    """A record batch names a compression codec id that does not exist."""

    retriable = False


class CodecUnavailableError(KafkaError):
    """A codec is known but the library it needs is not installed."""


class BrokerLaunchError(KafkaError):
    """The embedded Apache Kafka broker could not be resolved, started or reached."""


class InvalidPartitionError(KafkaError, ValueError):
    """A record names a partition the topic does not have (negative, or not below the count)."""

    def __init__(self, topic: str, partition: int, num_partitions: int, row: int | None = None,
                 rows_out_of_range: int = 1):
        """``row``: the input row that asked for it (whole-column sends), and how many rows did."""
        self.topic = topic
        self.partition = partition
        self.num_partitions = num_partitions
        self.row = row
        self.rows_out_of_range = rows_out_of_range
        where = "" if row is None else f"row {row}: "
        more = "" if rows_out_of_range <= 1 else f" ({rows_out_of_range} rows are out of range)"
        super().__init__(f"{where}invalid partition {partition} for topic {topic!r}: it has "
                         f"{num_partitions} partition(s), so valid partitions are "
                         f"0..{num_partitions - 1}{more}")

    def __reduce__(self):  # picklable (Spark ships errors from executors)
        return (type(self), (self.topic, self.partition, self.num_partitions, self.row,
                             self.rows_out_of_range))


# --- producer errors ------------------------------------------------------------------------

class KafkaTimeoutError(KafkaError, TimeoutError):
    """A producer deadline passed: a batch expired (``delivery.timeout.ms``), or an operation
    could not finish within ``max.block.ms``. Retriable, as Java's ``TimeoutException``."""

    retriable = True


class BufferExhaustedError(KafkaTimeoutError):
    """``buffer.memory`` stayed full for longer than ``max.block.ms`` while a send waited for room
    (Java's ``BufferExhaustedException``)."""


class ProducerClosedError(KafkaError):
    """The producer (or its accumulator or buffer pool) was closed: no new record is accepted,
    and sends still waiting for memory are failed."""


class MetadataTimeoutError(KafkaTimeoutError):
    """A topic's metadata did not arrive within ``max.block.ms``; the message names the topic and
    the time waited (Java: "Topic t not present in metadata after 60000 ms")."""


# --- Spark sink errors ----------------------------------------------------------------------

class SchemaError(KafkaError, ValueError):
    """A DataFrame's columns cannot be written to Kafka: ``value`` missing, or a sink column of the
    wrong type. Raised on the driver before any task runs; the message names every bad column, its
    type and the types it may have."""
