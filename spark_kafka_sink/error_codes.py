"""Kafka's error codes: one table, as Java's ``Errors`` enum (``ErrorCode``).

Each code has a name, and two properties the client acts on: ``retriable`` (a retry may succeed)
and ``invalid_metadata`` (the client's metadata is stale: fetch it again). ``ErrorCode.for_code``
maps a code this client does not know (a newer broker's) to ``UNKNOWN_SERVER_ERROR``, as Java's
``Errors.forCode`` does: an unknown code is never taken for success.

The exception class of each code lives in :mod:`spark_kafka_sink.errors`, written out from this
table by :func:`render_broker_errors` (``python -m spark_kafka_sink.error_codes`` rewrites that
section; a unit test checks it is current).
"""

from __future__ import annotations

import re
from enum import IntEnum


class ErrorCode(IntEnum):
    """A Kafka error code (``NONE`` = 0: no error)."""

    UNKNOWN_SERVER_ERROR = -1
    NONE = 0
    OFFSET_OUT_OF_RANGE = 1
    CORRUPT_MESSAGE = 2
    UNKNOWN_TOPIC_OR_PARTITION = 3
    INVALID_FETCH_SIZE = 4
    LEADER_NOT_AVAILABLE = 5
    NOT_LEADER_OR_FOLLOWER = 6
    REQUEST_TIMED_OUT = 7
    BROKER_NOT_AVAILABLE = 8
    REPLICA_NOT_AVAILABLE = 9
    MESSAGE_TOO_LARGE = 10
    STALE_CONTROLLER_EPOCH = 11
    OFFSET_METADATA_TOO_LARGE = 12
    NETWORK_EXCEPTION = 13
    COORDINATOR_LOAD_IN_PROGRESS = 14
    COORDINATOR_NOT_AVAILABLE = 15
    NOT_COORDINATOR = 16
    INVALID_TOPIC_EXCEPTION = 17
    RECORD_LIST_TOO_LARGE = 18
    NOT_ENOUGH_REPLICAS = 19
    NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
    INVALID_REQUIRED_ACKS = 21
    ILLEGAL_GENERATION = 22
    INCONSISTENT_GROUP_PROTOCOL = 23
    INVALID_GROUP_ID = 24
    UNKNOWN_MEMBER_ID = 25
    INVALID_SESSION_TIMEOUT = 26
    REBALANCE_IN_PROGRESS = 27
    INVALID_COMMIT_OFFSET_SIZE = 28
    TOPIC_AUTHORIZATION_FAILED = 29
    GROUP_AUTHORIZATION_FAILED = 30
    CLUSTER_AUTHORIZATION_FAILED = 31
    INVALID_TIMESTAMP = 32
    UNSUPPORTED_SASL_MECHANISM = 33
    ILLEGAL_SASL_STATE = 34
    UNSUPPORTED_VERSION = 35
    TOPIC_ALREADY_EXISTS = 36
    INVALID_PARTITIONS = 37
    INVALID_REPLICATION_FACTOR = 38
    INVALID_REPLICA_ASSIGNMENT = 39
    INVALID_CONFIG = 40
    NOT_CONTROLLER = 41
    INVALID_REQUEST = 42
    UNSUPPORTED_FOR_MESSAGE_FORMAT = 43
    POLICY_VIOLATION = 44
    OUT_OF_ORDER_SEQUENCE_NUMBER = 45
    DUPLICATE_SEQUENCE_NUMBER = 46
    INVALID_PRODUCER_EPOCH = 47
    INVALID_TXN_STATE = 48
    INVALID_PRODUCER_ID_MAPPING = 49
    INVALID_TRANSACTION_TIMEOUT = 50
    CONCURRENT_TRANSACTIONS = 51
    TRANSACTION_COORDINATOR_FENCED = 52
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
    SECURITY_DISABLED = 54
    OPERATION_NOT_ATTEMPTED = 55
    KAFKA_STORAGE_ERROR = 56
    LOG_DIR_NOT_FOUND = 57
    SASL_AUTHENTICATION_FAILED = 58
    UNKNOWN_PRODUCER_ID = 59
    REASSIGNMENT_IN_PROGRESS = 60
    DELEGATION_TOKEN_AUTH_DISABLED = 61
    DELEGATION_TOKEN_NOT_FOUND = 62
    DELEGATION_TOKEN_OWNER_MISMATCH = 63
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED = 64
    DELEGATION_TOKEN_AUTHORIZATION_FAILED = 65
    DELEGATION_TOKEN_EXPIRED = 66
    INVALID_PRINCIPAL_TYPE = 67
    NON_EMPTY_GROUP = 68
    GROUP_ID_NOT_FOUND = 69
    FETCH_SESSION_ID_NOT_FOUND = 70
    INVALID_FETCH_SESSION_EPOCH = 71
    LISTENER_NOT_FOUND = 72
    TOPIC_DELETION_DISABLED = 73
    FENCED_LEADER_EPOCH = 74
    UNKNOWN_LEADER_EPOCH = 75
    UNSUPPORTED_COMPRESSION_TYPE = 76
    STALE_BROKER_EPOCH = 77
    OFFSET_NOT_AVAILABLE = 78
    MEMBER_ID_REQUIRED = 79
    PREFERRED_LEADER_NOT_AVAILABLE = 80
    GROUP_MAX_SIZE_REACHED = 81
    FENCED_INSTANCE_ID = 82
    ELIGIBLE_LEADERS_NOT_AVAILABLE = 83
    ELECTION_NOT_NEEDED = 84
    NO_REASSIGNMENT_IN_PROGRESS = 85
    GROUP_SUBSCRIBED_TO_TOPIC = 86
    INVALID_RECORD = 87
    UNSTABLE_OFFSET_COMMIT = 88
    THROTTLING_QUOTA_EXCEEDED = 89
    PRODUCER_FENCED = 90
    RESOURCE_NOT_FOUND = 91
    DUPLICATE_RESOURCE = 92
    UNACCEPTABLE_CREDENTIAL = 93
    INCONSISTENT_VOTER_SET = 94
    INVALID_UPDATE_VERSION = 95
    FEATURE_UPDATE_FAILED = 96
    PRINCIPAL_DESERIALIZATION_FAILURE = 97
    SNAPSHOT_NOT_FOUND = 98
    POSITION_OUT_OF_RANGE = 99
    UNKNOWN_TOPIC_ID = 100
    DUPLICATE_BROKER_REGISTRATION = 101
    BROKER_ID_NOT_REGISTERED = 102
    INCONSISTENT_TOPIC_ID = 103
    INCONSISTENT_CLUSTER_ID = 104
    TRANSACTIONAL_ID_NOT_FOUND = 105
    FETCH_SESSION_TOPIC_ID_ERROR = 106
    INELIGIBLE_REPLICA = 107
    NEW_LEADER_ELECTED = 108
    OFFSET_MOVED_TO_TIERED_STORAGE = 109
    FENCED_MEMBER_EPOCH = 110
    UNRELEASED_INSTANCE_ID = 111
    UNSUPPORTED_ASSIGNOR = 112
    STALE_MEMBER_EPOCH = 113
    MISMATCHED_ENDPOINT_TYPE = 114
    UNSUPPORTED_ENDPOINT_TYPE = 115
    UNKNOWN_CONTROLLER_ID = 116
    UNKNOWN_SUBSCRIPTION_ID = 117
    TELEMETRY_TOO_LARGE = 118
    INVALID_REGISTRATION = 119
    TRANSACTION_ABORTABLE = 120
    INVALID_RECORD_STATE = 121
    SHARE_SESSION_NOT_FOUND = 122
    INVALID_SHARE_SESSION_EPOCH = 123
    FENCED_STATE_EPOCH = 124
    INVALID_VOTER_KEY = 125
    DUPLICATE_VOTER = 126
    VOTER_NOT_FOUND = 127
    INVALID_REGULAR_EXPRESSION = 128
    REBOOTSTRAP_REQUIRED = 129

    @classmethod
    def for_code(cls, code: int) -> "ErrorCode":
        """The member for ``code``; ``UNKNOWN_SERVER_ERROR`` for a code missing from the table."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN_SERVER_ERROR

    @property
    def retriable(self) -> bool:
        return self in _RETRIABLE

    @property
    def invalid_metadata(self) -> bool:
        return self in _INVALID_METADATA


_RETRIABLE = frozenset({
    ErrorCode.CONCURRENT_TRANSACTIONS, ErrorCode.COORDINATOR_LOAD_IN_PROGRESS,
    ErrorCode.COORDINATOR_NOT_AVAILABLE, ErrorCode.CORRUPT_MESSAGE, ErrorCode.ELECTION_NOT_NEEDED,
    ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE, ErrorCode.FENCED_LEADER_EPOCH,
    ErrorCode.FETCH_SESSION_ID_NOT_FOUND, ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR,
    ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.INVALID_FETCH_SESSION_EPOCH,
    ErrorCode.INVALID_SHARE_SESSION_EPOCH, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.LISTENER_NOT_FOUND, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_CONTROLLER, ErrorCode.NOT_COORDINATOR, ErrorCode.NOT_ENOUGH_REPLICAS,
    ErrorCode.NOT_ENOUGH_REPLICAS_AFTER_APPEND, ErrorCode.NOT_LEADER_OR_FOLLOWER,
    ErrorCode.OFFSET_NOT_AVAILABLE, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.REQUEST_TIMED_OUT,
    ErrorCode.SHARE_SESSION_NOT_FOUND, ErrorCode.THROTTLING_QUOTA_EXCEEDED,
    ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION, ErrorCode.UNSTABLE_OFFSET_COMMIT,
})

_INVALID_METADATA = frozenset({
    ErrorCode.ELECTION_NOT_NEEDED, ErrorCode.ELIGIBLE_LEADERS_NOT_AVAILABLE,
    ErrorCode.FENCED_LEADER_EPOCH, ErrorCode.INCONSISTENT_TOPIC_ID, ErrorCode.KAFKA_STORAGE_ERROR,
    ErrorCode.LEADER_NOT_AVAILABLE, ErrorCode.LISTENER_NOT_FOUND, ErrorCode.NETWORK_EXCEPTION,
    ErrorCode.NOT_LEADER_OR_FOLLOWER, ErrorCode.PREFERRED_LEADER_NOT_AVAILABLE,
    ErrorCode.REPLICA_NOT_AVAILABLE, ErrorCode.UNKNOWN_LEADER_EPOCH, ErrorCode.UNKNOWN_TOPIC_ID,
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION,
})

# codes that mean "authentication failed": their classes also derive from AuthenticationError
AUTHENTICATION_CODES = frozenset({ErrorCode.UNSUPPORTED_SASL_MECHANISM, ErrorCode.ILLEGAL_SASL_STATE,
                                  ErrorCode.SASL_AUTHENTICATION_FAILED})

# a code whose natural class name a local error already has: the broker's class derives from that
# local class too (``except UnsupportedVersionError`` catches both) and takes this name
_NAMES_TAKEN = {ErrorCode.UNSUPPORTED_VERSION: ("UnsupportedVersionResponseError", "UnsupportedVersionError")}

# the names the classes had before they were written out (kept as aliases)
_OLD_NAMES = {ErrorCode.UNKNOWN_SERVER_ERROR: "UnknownServerErrorError",
              ErrorCode.NETWORK_EXCEPTION: "NetworkExceptionError",
              ErrorCode.INVALID_TOPIC_EXCEPTION: "InvalidTopicExceptionError",
              ErrorCode.KAFKA_STORAGE_ERROR: "KafkaStorageErrorError",
              ErrorCode.FETCH_SESSION_TOPIC_ID_ERROR: "FetchSessionTopicIdErrorError"}

BEGIN = "# --- broker errors, one class per code: written by `python -m spark_kafka_sink.error_codes` ---"
END = "# --- end of the written broker errors ---"


def class_name(code: ErrorCode) -> str:
    """The exception class name of ``code``: its words in CamelCase, a trailing ``_ERROR`` or
    ``_EXCEPTION`` dropped, ``Error`` added (``INVALID_TOPIC_EXCEPTION``: ``InvalidTopicError``)."""
    if code in _NAMES_TAKEN:
        return _NAMES_TAKEN[code][0]
    words = re.sub(r"_(ERROR|EXCEPTION)$", "", code.name).split("_")
    return "".join(word.capitalize() for word in words) + "Error"


def render_broker_errors() -> str:
    """The source of the broker error classes in :mod:`spark_kafka_sink.errors`, markers included."""
    out = [BEGIN, ""]
    for code in ErrorCode:
        if code is ErrorCode.NONE:
            continue
        bases = ["BrokerResponseError"]
        if code in AUTHENTICATION_CODES:
            bases.append("AuthenticationError")
        if code in _NAMES_TAKEN:
            bases.append(_NAMES_TAKEN[code][1])
        out += ["", f"class {class_name(code)}({', '.join(bases)}):",
                f'    """Kafka error code {int(code)} ({code.name})."""',
                f'    code, name = {int(code)}, "{code.name}"']
        if code.retriable or code.invalid_metadata:
            out.append(f"    retriable, invalid_metadata = {code.retriable}, {code.invalid_metadata}")
        out.append("")
    out += ["", "# the names these classes had before (kept for code written against them)"]
    out += [f"{old} = {class_name(code)}" for code, old in _OLD_NAMES.items()]
    out += ["# Java's RecordTooLargeException is the exception of code 10: the producer raises it for a",
            "# record over max.request.size / buffer.memory, the broker answers it for a batch too large",
            "RecordTooLargeError = MessageTooLargeError", "",
            "# every class above derives directly from BrokerResponseError",
            "_BY_CODE: dict[int, type[BrokerResponseError]] = {",
            "    cls.code: cls for cls in BrokerResponseError.__subclasses__()}", "", END]
    return "\n".join(out) + "\n"


def _rewrite(path: str) -> None:
    """Replace the section between the markers in ``path`` (errors.py) with the rendered one."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    start, stop = text.index(BEGIN), text.index(END) + len(END) + 1
    with open(path, "w", encoding="utf-8") as f:
        f.write(text[:start] + render_broker_errors() + text[stop:])


if __name__ == "__main__":
    import pathlib

    _rewrite(str(pathlib.Path(__file__).with_name("errors.py")))
