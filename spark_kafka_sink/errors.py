"""The error hierarchy.

Every error this package raises derives from :class:`KafkaError`. Errors a broker reports by code
are :class:`BrokerResponseError` subclasses, one per Kafka error code, written out below from the
table in :mod:`.error_codes` (``ErrorCode``: code, name, retriable, invalidates metadata); a unit
test checks they are current. ``for_code(code)`` maps a code to its class, ``error_for(code,
context)`` builds the error with the caller's context in the message and ``raise_for_code(code,
context)`` raises it. A code missing from the table is never taken for success: it is
UNKNOWN_SERVER_ERROR (:class:`UnknownBrokerError` keeps the code), as in Java.

Local errors (bad frames, bad batches, missing codecs, the embedded broker) have classes of their
own after the broker errors.
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


class UnsupportedVersionError(KafkaError):
    """No version of an API is supported by both this client and the broker."""


# --- broker errors, one class per code: written by `python -m spark_kafka_sink.error_codes` ---


class UnknownServerError(BrokerResponseError):
    """Kafka error code -1 (UNKNOWN_SERVER_ERROR)."""
    code, name = -1, "UNKNOWN_SERVER_ERROR"


class OffsetOutOfRangeError(BrokerResponseError):
    """Kafka error code 1 (OFFSET_OUT_OF_RANGE)."""
    code, name = 1, "OFFSET_OUT_OF_RANGE"


class CorruptMessageError(BrokerResponseError):
    """Kafka error code 2 (CORRUPT_MESSAGE)."""
    code, name = 2, "CORRUPT_MESSAGE"
    retriable, invalid_metadata = True, False


class UnknownTopicOrPartitionError(BrokerResponseError):
    """Kafka error code 3 (UNKNOWN_TOPIC_OR_PARTITION)."""
    code, name = 3, "UNKNOWN_TOPIC_OR_PARTITION"
    retriable, invalid_metadata = True, True


class InvalidFetchSizeError(BrokerResponseError):
    """Kafka error code 4 (INVALID_FETCH_SIZE)."""
    code, name = 4, "INVALID_FETCH_SIZE"


class LeaderNotAvailableError(BrokerResponseError):
    """Kafka error code 5 (LEADER_NOT_AVAILABLE)."""
    code, name = 5, "LEADER_NOT_AVAILABLE"
    retriable, invalid_metadata = True, True


class NotLeaderOrFollowerError(BrokerResponseError):
    """Kafka error code 6 (NOT_LEADER_OR_FOLLOWER)."""
    code, name = 6, "NOT_LEADER_OR_FOLLOWER"
    retriable, invalid_metadata = True, True


class RequestTimedOutError(BrokerResponseError):
    """Kafka error code 7 (REQUEST_TIMED_OUT)."""
    code, name = 7, "REQUEST_TIMED_OUT"
    retriable, invalid_metadata = True, False


class BrokerNotAvailableError(BrokerResponseError):
    """Kafka error code 8 (BROKER_NOT_AVAILABLE)."""
    code, name = 8, "BROKER_NOT_AVAILABLE"


class ReplicaNotAvailableError(BrokerResponseError):
    """Kafka error code 9 (REPLICA_NOT_AVAILABLE)."""
    code, name = 9, "REPLICA_NOT_AVAILABLE"
    retriable, invalid_metadata = True, True


class MessageTooLargeError(BrokerResponseError):
    """Kafka error code 10 (MESSAGE_TOO_LARGE)."""
    code, name = 10, "MESSAGE_TOO_LARGE"


class StaleControllerEpochError(BrokerResponseError):
    """Kafka error code 11 (STALE_CONTROLLER_EPOCH)."""
    code, name = 11, "STALE_CONTROLLER_EPOCH"


class OffsetMetadataTooLargeError(BrokerResponseError):
    """Kafka error code 12 (OFFSET_METADATA_TOO_LARGE)."""
    code, name = 12, "OFFSET_METADATA_TOO_LARGE"


class NetworkError(BrokerResponseError):
    """Kafka error code 13 (NETWORK_EXCEPTION)."""
    code, name = 13, "NETWORK_EXCEPTION"
    retriable, invalid_metadata = True, True


class CoordinatorLoadInProgressError(BrokerResponseError):
    """Kafka error code 14 (COORDINATOR_LOAD_IN_PROGRESS)."""
    code, name = 14, "COORDINATOR_LOAD_IN_PROGRESS"
    retriable, invalid_metadata = True, False


class CoordinatorNotAvailableError(BrokerResponseError):
    """Kafka error code 15 (COORDINATOR_NOT_AVAILABLE)."""
    code, name = 15, "COORDINATOR_NOT_AVAILABLE"
    retriable, invalid_metadata = True, False


class NotCoordinatorError(BrokerResponseError):
    """Kafka error code 16 (NOT_COORDINATOR)."""
    code, name = 16, "NOT_COORDINATOR"
    retriable, invalid_metadata = True, False


class InvalidTopicError(BrokerResponseError):
    """Kafka error code 17 (INVALID_TOPIC_EXCEPTION)."""
    code, name = 17, "INVALID_TOPIC_EXCEPTION"


class RecordListTooLargeError(BrokerResponseError):
    """Kafka error code 18 (RECORD_LIST_TOO_LARGE)."""
    code, name = 18, "RECORD_LIST_TOO_LARGE"


class NotEnoughReplicasError(BrokerResponseError):
    """Kafka error code 19 (NOT_ENOUGH_REPLICAS)."""
    code, name = 19, "NOT_ENOUGH_REPLICAS"
    retriable, invalid_metadata = True, False


class NotEnoughReplicasAfterAppendError(BrokerResponseError):
    """Kafka error code 20 (NOT_ENOUGH_REPLICAS_AFTER_APPEND)."""
    code, name = 20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND"
    retriable, invalid_metadata = True, False


class InvalidRequiredAcksError(BrokerResponseError):
    """Kafka error code 21 (INVALID_REQUIRED_ACKS)."""
    code, name = 21, "INVALID_REQUIRED_ACKS"


class IllegalGenerationError(BrokerResponseError):
    """Kafka error code 22 (ILLEGAL_GENERATION)."""
    code, name = 22, "ILLEGAL_GENERATION"


class InconsistentGroupProtocolError(BrokerResponseError):
    """Kafka error code 23 (INCONSISTENT_GROUP_PROTOCOL)."""
    code, name = 23, "INCONSISTENT_GROUP_PROTOCOL"


class InvalidGroupIdError(BrokerResponseError):
    """Kafka error code 24 (INVALID_GROUP_ID)."""
    code, name = 24, "INVALID_GROUP_ID"


class UnknownMemberIdError(BrokerResponseError):
    """Kafka error code 25 (UNKNOWN_MEMBER_ID)."""
    code, name = 25, "UNKNOWN_MEMBER_ID"


class InvalidSessionTimeoutError(BrokerResponseError):
    """Kafka error code 26 (INVALID_SESSION_TIMEOUT)."""
    code, name = 26, "INVALID_SESSION_TIMEOUT"


class RebalanceInProgressError(BrokerResponseError):
    """Kafka error code 27 (REBALANCE_IN_PROGRESS)."""
    code, name = 27, "REBALANCE_IN_PROGRESS"


class InvalidCommitOffsetSizeError(BrokerResponseError):
    """Kafka error code 28 (INVALID_COMMIT_OFFSET_SIZE)."""
    code, name = 28, "INVALID_COMMIT_OFFSET_SIZE"


class TopicAuthorizationFailedError(BrokerResponseError):
    """Kafka error code 29 (TOPIC_AUTHORIZATION_FAILED)."""
    code, name = 29, "TOPIC_AUTHORIZATION_FAILED"


class GroupAuthorizationFailedError(BrokerResponseError):
    """Kafka error code 30 (GROUP_AUTHORIZATION_FAILED)."""
    code, name = 30, "GROUP_AUTHORIZATION_FAILED"


class ClusterAuthorizationFailedError(BrokerResponseError):
    """Kafka error code 31 (CLUSTER_AUTHORIZATION_FAILED)."""
    code, name = 31, "CLUSTER_AUTHORIZATION_FAILED"


class InvalidTimestampError(BrokerResponseError):
    """Kafka error code 32 (INVALID_TIMESTAMP)."""
    code, name = 32, "INVALID_TIMESTAMP"


class UnsupportedSaslMechanismError(BrokerResponseError, AuthenticationError):
    """Kafka error code 33 (UNSUPPORTED_SASL_MECHANISM)."""
    code, name = 33, "UNSUPPORTED_SASL_MECHANISM"


class IllegalSaslStateError(BrokerResponseError, AuthenticationError):
    """Kafka error code 34 (ILLEGAL_SASL_STATE)."""
    code, name = 34, "ILLEGAL_SASL_STATE"


class UnsupportedVersionResponseError(BrokerResponseError, UnsupportedVersionError):
    """Kafka error code 35 (UNSUPPORTED_VERSION)."""
    code, name = 35, "UNSUPPORTED_VERSION"


class TopicAlreadyExistsError(BrokerResponseError):
    """Kafka error code 36 (TOPIC_ALREADY_EXISTS)."""
    code, name = 36, "TOPIC_ALREADY_EXISTS"


class InvalidPartitionsError(BrokerResponseError):
    """Kafka error code 37 (INVALID_PARTITIONS)."""
    code, name = 37, "INVALID_PARTITIONS"


class InvalidReplicationFactorError(BrokerResponseError):
    """Kafka error code 38 (INVALID_REPLICATION_FACTOR)."""
    code, name = 38, "INVALID_REPLICATION_FACTOR"


class InvalidReplicaAssignmentError(BrokerResponseError):
    """Kafka error code 39 (INVALID_REPLICA_ASSIGNMENT)."""
    code, name = 39, "INVALID_REPLICA_ASSIGNMENT"


class InvalidConfigError(BrokerResponseError):
    """Kafka error code 40 (INVALID_CONFIG)."""
    code, name = 40, "INVALID_CONFIG"


class NotControllerError(BrokerResponseError):
    """Kafka error code 41 (NOT_CONTROLLER)."""
    code, name = 41, "NOT_CONTROLLER"
    retriable, invalid_metadata = True, False


class InvalidRequestError(BrokerResponseError):
    """Kafka error code 42 (INVALID_REQUEST)."""
    code, name = 42, "INVALID_REQUEST"


class UnsupportedForMessageFormatError(BrokerResponseError):
    """Kafka error code 43 (UNSUPPORTED_FOR_MESSAGE_FORMAT)."""
    code, name = 43, "UNSUPPORTED_FOR_MESSAGE_FORMAT"


class PolicyViolationError(BrokerResponseError):
    """Kafka error code 44 (POLICY_VIOLATION)."""
    code, name = 44, "POLICY_VIOLATION"


class OutOfOrderSequenceNumberError(BrokerResponseError):
    """Kafka error code 45 (OUT_OF_ORDER_SEQUENCE_NUMBER)."""
    code, name = 45, "OUT_OF_ORDER_SEQUENCE_NUMBER"


class DuplicateSequenceNumberError(BrokerResponseError):
    """Kafka error code 46 (DUPLICATE_SEQUENCE_NUMBER)."""
    code, name = 46, "DUPLICATE_SEQUENCE_NUMBER"


class InvalidProducerEpochError(BrokerResponseError):
    """Kafka error code 47 (INVALID_PRODUCER_EPOCH)."""
    code, name = 47, "INVALID_PRODUCER_EPOCH"


class InvalidTxnStateError(BrokerResponseError):
    """Kafka error code 48 (INVALID_TXN_STATE)."""
    code, name = 48, "INVALID_TXN_STATE"


class InvalidProducerIdMappingError(BrokerResponseError):
    """Kafka error code 49 (INVALID_PRODUCER_ID_MAPPING)."""
    code, name = 49, "INVALID_PRODUCER_ID_MAPPING"


class InvalidTransactionTimeoutError(BrokerResponseError):
    """Kafka error code 50 (INVALID_TRANSACTION_TIMEOUT)."""
    code, name = 50, "INVALID_TRANSACTION_TIMEOUT"


class ConcurrentTransactionsError(BrokerResponseError):
    """Kafka error code 51 (CONCURRENT_TRANSACTIONS)."""
    code, name = 51, "CONCURRENT_TRANSACTIONS"
    retriable, invalid_metadata = True, False


class TransactionCoordinatorFencedError(BrokerResponseError):
    """Kafka error code 52 (TRANSACTION_COORDINATOR_FENCED)."""
    code, name = 52, "TRANSACTION_COORDINATOR_FENCED"


class TransactionalIdAuthorizationFailedError(BrokerResponseError):
    """Kafka error code 53 (TRANSACTIONAL_ID_AUTHORIZATION_FAILED)."""
    code, name = 53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"


class SecurityDisabledError(BrokerResponseError):
    """Kafka error code 54 (SECURITY_DISABLED)."""
    code, name = 54, "SECURITY_DISABLED"


class OperationNotAttemptedError(BrokerResponseError):
    """Kafka error code 55 (OPERATION_NOT_ATTEMPTED)."""
    code, name = 55, "OPERATION_NOT_ATTEMPTED"


class KafkaStorageError(BrokerResponseError):
    """Kafka error code 56 (KAFKA_STORAGE_ERROR)."""
    code, name = 56, "KAFKA_STORAGE_ERROR"
    retriable, invalid_metadata = True, True


class LogDirNotFoundError(BrokerResponseError):
    """Kafka error code 57 (LOG_DIR_NOT_FOUND)."""
    code, name = 57, "LOG_DIR_NOT_FOUND"


class SaslAuthenticationFailedError(BrokerResponseError, AuthenticationError):
    """Kafka error code 58 (SASL_AUTHENTICATION_FAILED)."""
    code, name = 58, "SASL_AUTHENTICATION_FAILED"


class UnknownProducerIdError(BrokerResponseError):
    """Kafka error code 59 (UNKNOWN_PRODUCER_ID)."""
    code, name = 59, "UNKNOWN_PRODUCER_ID"


class ReassignmentInProgressError(BrokerResponseError):
    """Kafka error code 60 (REASSIGNMENT_IN_PROGRESS)."""
    code, name = 60, "REASSIGNMENT_IN_PROGRESS"


class DelegationTokenAuthDisabledError(BrokerResponseError):
    """Kafka error code 61 (DELEGATION_TOKEN_AUTH_DISABLED)."""
    code, name = 61, "DELEGATION_TOKEN_AUTH_DISABLED"


class DelegationTokenNotFoundError(BrokerResponseError):
    """Kafka error code 62 (DELEGATION_TOKEN_NOT_FOUND)."""
    code, name = 62, "DELEGATION_TOKEN_NOT_FOUND"


class DelegationTokenOwnerMismatchError(BrokerResponseError):
    """Kafka error code 63 (DELEGATION_TOKEN_OWNER_MISMATCH)."""
    code, name = 63, "DELEGATION_TOKEN_OWNER_MISMATCH"


class DelegationTokenRequestNotAllowedError(BrokerResponseError):
    """Kafka error code 64 (DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)."""
    code, name = 64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED"


class DelegationTokenAuthorizationFailedError(BrokerResponseError):
    """Kafka error code 65 (DELEGATION_TOKEN_AUTHORIZATION_FAILED)."""
    code, name = 65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED"


class DelegationTokenExpiredError(BrokerResponseError):
    """Kafka error code 66 (DELEGATION_TOKEN_EXPIRED)."""
    code, name = 66, "DELEGATION_TOKEN_EXPIRED"


class InvalidPrincipalTypeError(BrokerResponseError):
    """Kafka error code 67 (INVALID_PRINCIPAL_TYPE)."""
    code, name = 67, "INVALID_PRINCIPAL_TYPE"


class NonEmptyGroupError(BrokerResponseError):
    """Kafka error code 68 (NON_EMPTY_GROUP)."""
    code, name = 68, "NON_EMPTY_GROUP"


class GroupIdNotFoundError(BrokerResponseError):
    """Kafka error code 69 (GROUP_ID_NOT_FOUND)."""
    code, name = 69, "GROUP_ID_NOT_FOUND"


class FetchSessionIdNotFoundError(BrokerResponseError):
    """Kafka error code 70 (FETCH_SESSION_ID_NOT_FOUND)."""
    code, name = 70, "FETCH_SESSION_ID_NOT_FOUND"
    retriable, invalid_metadata = True, False


class InvalidFetchSessionEpochError(BrokerResponseError):
    """Kafka error code 71 (INVALID_FETCH_SESSION_EPOCH)."""
    code, name = 71, "INVALID_FETCH_SESSION_EPOCH"
    retriable, invalid_metadata = True, False


class ListenerNotFoundError(BrokerResponseError):
    """Kafka error code 72 (LISTENER_NOT_FOUND)."""
    code, name = 72, "LISTENER_NOT_FOUND"
    retriable, invalid_metadata = True, True


class TopicDeletionDisabledError(BrokerResponseError):
    """Kafka error code 73 (TOPIC_DELETION_DISABLED)."""
    code, name = 73, "TOPIC_DELETION_DISABLED"


class FencedLeaderEpochError(BrokerResponseError):
    """Kafka error code 74 (FENCED_LEADER_EPOCH)."""
    code, name = 74, "FENCED_LEADER_EPOCH"
    retriable, invalid_metadata = True, True


class UnknownLeaderEpochError(BrokerResponseError):
    """Kafka error code 75 (UNKNOWN_LEADER_EPOCH)."""
    code, name = 75, "UNKNOWN_LEADER_EPOCH"
    retriable, invalid_metadata = True, True


class UnsupportedCompressionTypeError(BrokerResponseError):
    """Kafka error code 76 (UNSUPPORTED_COMPRESSION_TYPE)."""
    code, name = 76, "UNSUPPORTED_COMPRESSION_TYPE"


class StaleBrokerEpochError(BrokerResponseError):
    """Kafka error code 77 (STALE_BROKER_EPOCH)."""
    code, name = 77, "STALE_BROKER_EPOCH"


class OffsetNotAvailableError(BrokerResponseError):
    """Kafka error code 78 (OFFSET_NOT_AVAILABLE)."""
    code, name = 78, "OFFSET_NOT_AVAILABLE"
    retriable, invalid_metadata = True, False


class MemberIdRequiredError(BrokerResponseError):
    """Kafka error code 79 (MEMBER_ID_REQUIRED)."""
    code, name = 79, "MEMBER_ID_REQUIRED"


class PreferredLeaderNotAvailableError(BrokerResponseError):
    """Kafka error code 80 (PREFERRED_LEADER_NOT_AVAILABLE)."""
    code, name = 80, "PREFERRED_LEADER_NOT_AVAILABLE"
    retriable, invalid_metadata = True, True


class GroupMaxSizeReachedError(BrokerResponseError):
    """Kafka error code 81 (GROUP_MAX_SIZE_REACHED)."""
    code, name = 81, "GROUP_MAX_SIZE_REACHED"


class FencedInstanceIdError(BrokerResponseError):
    """Kafka error code 82 (FENCED_INSTANCE_ID)."""
    code, name = 82, "FENCED_INSTANCE_ID"


class EligibleLeadersNotAvailableError(BrokerResponseError):
    """Kafka error code 83 (ELIGIBLE_LEADERS_NOT_AVAILABLE)."""
    code, name = 83, "ELIGIBLE_LEADERS_NOT_AVAILABLE"
    retriable, invalid_metadata = True, True


class ElectionNotNeededError(BrokerResponseError):
    """Kafka error code 84 (ELECTION_NOT_NEEDED)."""
    code, name = 84, "ELECTION_NOT_NEEDED"
    retriable, invalid_metadata = True, True


class NoReassignmentInProgressError(BrokerResponseError):
    """Kafka error code 85 (NO_REASSIGNMENT_IN_PROGRESS)."""
    code, name = 85, "NO_REASSIGNMENT_IN_PROGRESS"


class GroupSubscribedToTopicError(BrokerResponseError):
    """Kafka error code 86 (GROUP_SUBSCRIBED_TO_TOPIC)."""
    code, name = 86, "GROUP_SUBSCRIBED_TO_TOPIC"


class InvalidRecordError(BrokerResponseError):
    """Kafka error code 87 (INVALID_RECORD)."""
    code, name = 87, "INVALID_RECORD"


class UnstableOffsetCommitError(BrokerResponseError):
    """Kafka error code 88 (UNSTABLE_OFFSET_COMMIT)."""
    code, name = 88, "UNSTABLE_OFFSET_COMMIT"
    retriable, invalid_metadata = True, False


class ThrottlingQuotaExceededError(BrokerResponseError):
    """Kafka error code 89 (THROTTLING_QUOTA_EXCEEDED)."""
    code, name = 89, "THROTTLING_QUOTA_EXCEEDED"
    retriable, invalid_metadata = True, False


class ProducerFencedError(BrokerResponseError):
    """Kafka error code 90 (PRODUCER_FENCED)."""
    code, name = 90, "PRODUCER_FENCED"


class ResourceNotFoundError(BrokerResponseError):
    """Kafka error code 91 (RESOURCE_NOT_FOUND)."""
    code, name = 91, "RESOURCE_NOT_FOUND"


class DuplicateResourceError(BrokerResponseError):
    """Kafka error code 92 (DUPLICATE_RESOURCE)."""
    code, name = 92, "DUPLICATE_RESOURCE"


class UnacceptableCredentialError(BrokerResponseError):
    """Kafka error code 93 (UNACCEPTABLE_CREDENTIAL)."""
    code, name = 93, "UNACCEPTABLE_CREDENTIAL"


class InconsistentVoterSetError(BrokerResponseError):
    """Kafka error code 94 (INCONSISTENT_VOTER_SET)."""
    code, name = 94, "INCONSISTENT_VOTER_SET"


class InvalidUpdateVersionError(BrokerResponseError):
    """Kafka error code 95 (INVALID_UPDATE_VERSION)."""
    code, name = 95, "INVALID_UPDATE_VERSION"


class FeatureUpdateFailedError(BrokerResponseError):
    """Kafka error code 96 (FEATURE_UPDATE_FAILED)."""
    code, name = 96, "FEATURE_UPDATE_FAILED"


class PrincipalDeserializationFailureError(BrokerResponseError):
    """Kafka error code 97 (PRINCIPAL_DESERIALIZATION_FAILURE)."""
    code, name = 97, "PRINCIPAL_DESERIALIZATION_FAILURE"


class SnapshotNotFoundError(BrokerResponseError):
    """Kafka error code 98 (SNAPSHOT_NOT_FOUND)."""
    code, name = 98, "SNAPSHOT_NOT_FOUND"


class PositionOutOfRangeError(BrokerResponseError):
    """Kafka error code 99 (POSITION_OUT_OF_RANGE)."""
    code, name = 99, "POSITION_OUT_OF_RANGE"


class UnknownTopicIdError(BrokerResponseError):
    """Kafka error code 100 (UNKNOWN_TOPIC_ID)."""
    code, name = 100, "UNKNOWN_TOPIC_ID"
    retriable, invalid_metadata = True, True


class DuplicateBrokerRegistrationError(BrokerResponseError):
    """Kafka error code 101 (DUPLICATE_BROKER_REGISTRATION)."""
    code, name = 101, "DUPLICATE_BROKER_REGISTRATION"


class BrokerIdNotRegisteredError(BrokerResponseError):
    """Kafka error code 102 (BROKER_ID_NOT_REGISTERED)."""
    code, name = 102, "BROKER_ID_NOT_REGISTERED"


class InconsistentTopicIdError(BrokerResponseError):
    """Kafka error code 103 (INCONSISTENT_TOPIC_ID)."""
    code, name = 103, "INCONSISTENT_TOPIC_ID"
    retriable, invalid_metadata = True, True


class InconsistentClusterIdError(BrokerResponseError):
    """Kafka error code 104 (INCONSISTENT_CLUSTER_ID)."""
    code, name = 104, "INCONSISTENT_CLUSTER_ID"


class TransactionalIdNotFoundError(BrokerResponseError):
    """Kafka error code 105 (TRANSACTIONAL_ID_NOT_FOUND)."""
    code, name = 105, "TRANSACTIONAL_ID_NOT_FOUND"


class FetchSessionTopicIdError(BrokerResponseError):
    """Kafka error code 106 (FETCH_SESSION_TOPIC_ID_ERROR)."""
    code, name = 106, "FETCH_SESSION_TOPIC_ID_ERROR"
    retriable, invalid_metadata = True, False


class IneligibleReplicaError(BrokerResponseError):
    """Kafka error code 107 (INELIGIBLE_REPLICA)."""
    code, name = 107, "INELIGIBLE_REPLICA"


class NewLeaderElectedError(BrokerResponseError):
    """Kafka error code 108 (NEW_LEADER_ELECTED)."""
    code, name = 108, "NEW_LEADER_ELECTED"


class OffsetMovedToTieredStorageError(BrokerResponseError):
    """Kafka error code 109 (OFFSET_MOVED_TO_TIERED_STORAGE)."""
    code, name = 109, "OFFSET_MOVED_TO_TIERED_STORAGE"


class FencedMemberEpochError(BrokerResponseError):
    """Kafka error code 110 (FENCED_MEMBER_EPOCH)."""
    code, name = 110, "FENCED_MEMBER_EPOCH"


class UnreleasedInstanceIdError(BrokerResponseError):
    """Kafka error code 111 (UNRELEASED_INSTANCE_ID)."""
    code, name = 111, "UNRELEASED_INSTANCE_ID"


class UnsupportedAssignorError(BrokerResponseError):
    """Kafka error code 112 (UNSUPPORTED_ASSIGNOR)."""
    code, name = 112, "UNSUPPORTED_ASSIGNOR"


class StaleMemberEpochError(BrokerResponseError):
    """Kafka error code 113 (STALE_MEMBER_EPOCH)."""
    code, name = 113, "STALE_MEMBER_EPOCH"


class MismatchedEndpointTypeError(BrokerResponseError):
    """Kafka error code 114 (MISMATCHED_ENDPOINT_TYPE)."""
    code, name = 114, "MISMATCHED_ENDPOINT_TYPE"


class UnsupportedEndpointTypeError(BrokerResponseError):
    """Kafka error code 115 (UNSUPPORTED_ENDPOINT_TYPE)."""
    code, name = 115, "UNSUPPORTED_ENDPOINT_TYPE"


class UnknownControllerIdError(BrokerResponseError):
    """Kafka error code 116 (UNKNOWN_CONTROLLER_ID)."""
    code, name = 116, "UNKNOWN_CONTROLLER_ID"


class UnknownSubscriptionIdError(BrokerResponseError):
    """Kafka error code 117 (UNKNOWN_SUBSCRIPTION_ID)."""
    code, name = 117, "UNKNOWN_SUBSCRIPTION_ID"


class TelemetryTooLargeError(BrokerResponseError):
    """Kafka error code 118 (TELEMETRY_TOO_LARGE)."""
    code, name = 118, "TELEMETRY_TOO_LARGE"


class InvalidRegistrationError(BrokerResponseError):
    """Kafka error code 119 (INVALID_REGISTRATION)."""
    code, name = 119, "INVALID_REGISTRATION"


class TransactionAbortableError(BrokerResponseError):
    """Kafka error code 120 (TRANSACTION_ABORTABLE)."""
    code, name = 120, "TRANSACTION_ABORTABLE"


class InvalidRecordStateError(BrokerResponseError):
    """Kafka error code 121 (INVALID_RECORD_STATE)."""
    code, name = 121, "INVALID_RECORD_STATE"


class ShareSessionNotFoundError(BrokerResponseError):
    """Kafka error code 122 (SHARE_SESSION_NOT_FOUND)."""
    code, name = 122, "SHARE_SESSION_NOT_FOUND"
    retriable, invalid_metadata = True, False


class InvalidShareSessionEpochError(BrokerResponseError):
    """Kafka error code 123 (INVALID_SHARE_SESSION_EPOCH)."""
    code, name = 123, "INVALID_SHARE_SESSION_EPOCH"
    retriable, invalid_metadata = True, False


class FencedStateEpochError(BrokerResponseError):
    """Kafka error code 124 (FENCED_STATE_EPOCH)."""
    code, name = 124, "FENCED_STATE_EPOCH"


class InvalidVoterKeyError(BrokerResponseError):
    """Kafka error code 125 (INVALID_VOTER_KEY)."""
    code, name = 125, "INVALID_VOTER_KEY"


class DuplicateVoterError(BrokerResponseError):
    """Kafka error code 126 (DUPLICATE_VOTER)."""
    code, name = 126, "DUPLICATE_VOTER"


class VoterNotFoundError(BrokerResponseError):
    """Kafka error code 127 (VOTER_NOT_FOUND)."""
    code, name = 127, "VOTER_NOT_FOUND"


class InvalidRegularExpressionError(BrokerResponseError):
    """Kafka error code 128 (INVALID_REGULAR_EXPRESSION)."""
    code, name = 128, "INVALID_REGULAR_EXPRESSION"


class RebootstrapRequiredError(BrokerResponseError):
    """Kafka error code 129 (REBOOTSTRAP_REQUIRED)."""
    code, name = 129, "REBOOTSTRAP_REQUIRED"


# the names these classes had before (kept for code written against them)
UnknownServerErrorError = UnknownServerError
NetworkExceptionError = NetworkError
InvalidTopicExceptionError = InvalidTopicError
KafkaStorageErrorError = KafkaStorageError
FetchSessionTopicIdErrorError = FetchSessionTopicIdError
# Java's RecordTooLargeException is the exception of code 10: the producer raises it for a
# record over max.request.size / buffer.memory, the broker answers it for a batch too large
RecordTooLargeError = MessageTooLargeError

# every class above derives directly from BrokerResponseError
_BY_CODE: dict[int, type[BrokerResponseError]] = {
    cls.code: cls for cls in BrokerResponseError.__subclasses__()}

# --- end of the written broker errors ---


class UnknownBrokerError(UnknownServerError):
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
    return _BY_CODE.get(code, UnknownServerError)


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


class RecordContentError(KafkaError, ValueError):
    """A record that cannot be built from its input: a negative timestamp, a header with a null
    key, a null topic. The message names the row or value at fault."""


RECORD_ERRORS: tuple[type[BaseException], ...] = (
    RecordContentError, InvalidPartitionError, InvalidTopicError, MessageTooLargeError,
    InvalidRecordError, InvalidTimestampError, CorruptMessageError)
"""The errors that concern one record alone: the producer refuses it before sending (its content,
partition, topic name or size), or the broker refuses it on its own (MESSAGE_TOO_LARGE for a single
record, INVALID_RECORD, INVALID_TIMESTAMP, CORRUPT_MESSAGE; from the broker, only for a batch of
one record: ``ProducerBatch.refused_alone``). Everything else (authentication,
authorization, timeouts, a fenced producer, a broken connection) concerns the producer, the network
or the cluster: no per-record policy applies to it."""


def is_record_error(error: BaseException | None) -> bool:
    """Whether ``error`` concerns one record alone (see :data:`RECORD_ERRORS`)."""
    return isinstance(error, RECORD_ERRORS)


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


class ClusterChangedError(KafkaError):
    """The cluster behind ``bootstrap.servers`` was replaced by another one (its cluster id
    changed). The message names both cluster ids and what it means for the record or transaction
    at hand: a transactional producer cannot go on (its transaction was in the old cluster), and a
    record whose request was answered after the change has an unknown outcome."""


class TransactionAbortedError(KafkaError):
    """The record's transaction was aborted before the record was sent: by
    ``abort_transaction()``, or because an earlier error made the transaction abortable (Java's
    ``TransactionAbortedException``). The message names the cause."""


class MetadataTimeoutError(KafkaTimeoutError):
    """A topic's metadata did not arrive within ``max.block.ms``; the message names the topic and
    the time waited (Java: "Topic t not present in metadata after 60000 ms")."""


class PropertiesError(KafkaError, ValueError):
    """A malformed line of a properties file; ``source`` and ``line`` say where."""

    def __init__(self, source: str, line: int, message: str):
        super().__init__(f"{source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.detail = message

    def __reduce__(self):  # picklable (Spark ships errors between processes)
        return (type(self), (self.source, self.line, self.detail))


# --- Spark sink errors ----------------------------------------------------------------------

class JobError(KafkaError):
    """A job's argument or input is wrong; the message names the argument or column at fault."""


class SchemaError(KafkaError, ValueError):
    """A DataFrame's columns cannot be written to Kafka: ``value`` missing, or a sink column of the
    wrong type. Raised on the driver before any task runs; the message names every bad column, its
    type and the types it may have."""


# --- serialization errors (key.format / value.format) ---------------------------------------

class AvroSchemaError(ConfigError):
    """An Avro schema is malformed (not JSON, an unknown type, a bad name, a duplicate), or does
    not fit the Arrow column it is to encode. Raised before any row is encoded (on the driver, for
    the sink); ``path`` names the field at fault (``value.address.zip``), or is empty for the
    schema as a whole, and ``detail`` says what is wrong."""

    def __init__(self, path: str, detail: str):
        super().__init__(f"{path}: {detail}" if path else detail)
        self.path = path
        self.detail = detail

    def __reduce__(self):  # picklable (Spark ships errors between processes)
        return (type(self), (self.path, self.detail))


class SerializationError(RecordContentError):
    """One row's key or value cannot be serialized in its format: a decimal too large for the
    schema's precision, a string outside an enum's symbols, a null where the schema has no null,
    a null map key. A record error (:func:`is_record_error`): ``row`` is the input row, ``path``
    the field (``value.items[2].price``), ``reason`` what is wrong with its value."""

    def __init__(self, row: int, path: str, reason: str):
        super().__init__(f"row {row}: {path}: {reason}")
        self.row = row
        self.path = path
        self.reason = reason

    def __reduce__(self):  # picklable (Spark ships errors between processes)
        return (type(self), (self.row, self.path, self.reason))
