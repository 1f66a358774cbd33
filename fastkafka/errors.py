"""Exceptions raised by fastkafka.

Every exception is a :class:`KafkaError` carrying

* ``code`` -- the Kafka protocol error code, or a negative *client* code (see below),
* ``name`` -- the upper-case Kafka name (``"NOT_LEADER_OR_FOLLOWER"``),
* ``retriable`` -- the operation may succeed if simply tried again,
* ``invalid_metadata`` -- the cached cluster metadata is probably stale; refresh it before retrying,
* ``message`` -- the human readable text (the per-code description unless one was given).

``str(exc)`` is ``"NAME (code): message"``, e.g. ``"NOT_LEADER_OR_FOLLOWER (6): This server is not the
leader ..."``.

Broker error codes
------------------
One subclass per broker error code, each written as a row of the table below (facts taken from the
public Apache Kafka error list, ``Errors.java`` / the generated ``protocol_errors`` page). The class name
is the CamelCase of the Kafka name plus ``Error`` (``MESSAGE_TOO_LARGE`` -> ``MessageTooLargeError``,
``INVALID_TOPIC_EXCEPTION`` -> ``InvalidTopicError``, ``NETWORK_EXCEPTION`` -> ``NetworkExceptionError``),
except code 87 INVALID_RECORD, whose class is ``BrokerInvalidRecordError`` because
``InvalidRecordError`` is the client-side ``TypeError`` for a badly typed key/value/header.
``error_for_code(code, message=None)`` builds the instance for a code read off the wire; a code not in
the table gives an :class:`UnknownServerError`-like instance that keeps the unknown code.

Client-side errors
------------------
Errors detected by the client itself use negative codes at or below ``-100`` so they can never collide
with a broker code (the broker uses ``-1`` for UNKNOWN_SERVER_ERROR):

====================================  =====  =========  ================
class                                 code   retriable  invalid_metadata
====================================  =====  =========  ================
ConfigError (also ValueError)         -100   no         no
KafkaTimeoutError                     -101   yes        no
BufferExhaustedError                  -102   yes        no
DeliveryTimeoutError                  -103   yes        no
RecordTooLargeError                   -104   no         no
InvalidRecordError (also TypeError)   -105   no         no
MalformedRecordError (+ ValueError)   -130   no         no
SerializationError (InvalidRecord)    -131   no         no
UnknownPartitionError (+ ValueError)  -106   no         no
ProducerClosedError                   -107   no         no
NetworkError                          -108   yes        yes
DisconnectedError                     -109   yes        yes
CorrelationIdMismatchError            -110   yes        yes
CorruptFrameError                     -111   yes        yes
IllegalStateError                     -112   no         no
SaslAuthenticationError               -150   no         no
AwsCredentialsError (SaslAuth...)     -150   no         no
TransactionAbortedError               -160   no         no
AllBrokersDownError                   -170   yes        no
BrokersRecovered (a notice)           -171   no         no
====================================  =====  =========  ================

Errors that belong to no single record (every broker down, a failed authentication, a broker
without an API the producer needs, a fenced or fatally failed producer, broker data loss) are
handed to the producer's ``on_error`` hook (alias ``error_cb``); ``suppressed`` on such an error
counts the reports of the same kind (and broker) the hook's rate limit held back before it
(docs/observability.md).

``UnsupportedVersionError`` is the class for broker code 35 (UNSUPPORTED_VERSION); the client raises
the same class when version negotiation fails, so one ``except`` catches both. Likewise
``TransactionAbortableError`` is the class for broker code 120 (TRANSACTION_ABORTABLE) and the
error a transactional producer raises when its transaction can only be aborted.

``DeliveryTimeoutError`` and ``BufferExhaustedError`` inherit ``retriable=True`` from
``KafkaTimeoutError`` (as the Java client's ``TimeoutException`` does): retrying *the call* may succeed,
even though the producer itself never retries a record whose delivery timeout has expired.

All exceptions pickle and unpickle to an equal-looking instance (same class, code, message), so they
can cross process boundaries (Spark executors -> driver).
"""

from __future__ import annotations

import re
from types import MappingProxyType
from typing import Mapping, Optional

__all__ = [
    "KafkaError",
    "error_for_code",
    "ERROR_TABLE",
    "ConfigError",
    "KafkaTimeoutError",
    "BufferExhaustedError",
    "DeliveryTimeoutError",
    "RecordTooLargeError",
    "InvalidRecordError",
    "MalformedRecordError",
    "SerializationError",
    "UnknownPartitionError",
    "ProducerClosedError",
    "NetworkError",
    "DisconnectedError",
    "CorrelationIdMismatchError",
    "CorruptFrameError",
    "IllegalStateError",
    "SaslAuthenticationError",
    "AwsCredentialsError",
    "UnsupportedVersionError",
    "UnknownServerError",
    "TransactionAbortedError",
    "TransactionAbortableError",
    "AllBrokersDownError",
    "BrokersRecovered",
    # the classes of the broker error codes (the table below)
    "OffsetOutOfRangeError", "CorruptMessageError",
    "UnknownTopicOrPartitionError", "InvalidFetchSizeError", "LeaderNotAvailableError",
    "NotLeaderOrFollowerError", "RequestTimedOutError", "BrokerNotAvailableError",
    "ReplicaNotAvailableError", "MessageTooLargeError", "StaleControllerEpochError",
    "OffsetMetadataTooLargeError", "NetworkExceptionError", "CoordinatorLoadInProgressError",
    "CoordinatorNotAvailableError", "NotCoordinatorError", "InvalidTopicError",
    "RecordListTooLargeError", "NotEnoughReplicasError", "NotEnoughReplicasAfterAppendError",
    "InvalidRequiredAcksError", "IllegalGenerationError", "InconsistentGroupProtocolError",
    "InvalidGroupIdError", "UnknownMemberIdError", "InvalidSessionTimeoutError",
    "RebalanceInProgressError", "InvalidCommitOffsetSizeError", "TopicAuthorizationFailedError",
    "GroupAuthorizationFailedError", "ClusterAuthorizationFailedError", "InvalidTimestampError",
    "UnsupportedSaslMechanismError", "IllegalSaslStateError", "TopicAlreadyExistsError",
    "InvalidPartitionsError", "InvalidReplicationFactorError", "InvalidReplicaAssignmentError",
    "InvalidConfigError", "NotControllerError", "InvalidRequestError",
    "UnsupportedForMessageFormatError", "PolicyViolationError", "OutOfOrderSequenceNumberError",
    "DuplicateSequenceNumberError", "InvalidProducerEpochError", "InvalidTxnStateError",
    "InvalidProducerIdMappingError", "InvalidTransactionTimeoutError",
    "ConcurrentTransactionsError", "TransactionCoordinatorFencedError",
    "TransactionalIdAuthorizationFailedError", "SecurityDisabledError",
    "OperationNotAttemptedError", "KafkaStorageError", "LogDirNotFoundError",
    "SaslAuthenticationFailedError", "UnknownProducerIdError", "ReassignmentInProgressError",
    "DelegationTokenAuthDisabledError", "DelegationTokenNotFoundError",
    "DelegationTokenOwnerMismatchError", "DelegationTokenRequestNotAllowedError",
    "DelegationTokenAuthorizationFailedError", "DelegationTokenExpiredError",
    "InvalidPrincipalTypeError", "NonEmptyGroupError", "GroupIdNotFoundError",
    "FetchSessionIdNotFoundError", "InvalidFetchSessionEpochError", "ListenerNotFoundError",
    "TopicDeletionDisabledError", "FencedLeaderEpochError", "UnknownLeaderEpochError",
    "UnsupportedCompressionTypeError", "StaleBrokerEpochError", "OffsetNotAvailableError",
    "MemberIdRequiredError", "PreferredLeaderNotAvailableError", "GroupMaxSizeReachedError",
    "FencedInstanceIdError", "EligibleLeadersNotAvailableError", "ElectionNotNeededError",
    "NoReassignmentInProgressError", "GroupSubscribedToTopicError", "BrokerInvalidRecordError",
    "UnstableOffsetCommitError", "ThrottlingQuotaExceededError", "ProducerFencedError",
    "ResourceNotFoundError", "DuplicateResourceError", "UnacceptableCredentialError",
    "InconsistentVoterSetError", "InvalidUpdateVersionError", "FeatureUpdateFailedError",
    "PrincipalDeserializationFailureError", "SnapshotNotFoundError", "PositionOutOfRangeError",
    "UnknownTopicIdError", "DuplicateBrokerRegistrationError", "BrokerIdNotRegisteredError",
    "InconsistentTopicIdError", "InconsistentClusterIdError", "TransactionalIdNotFoundError",
    "FetchSessionTopicIdError", "IneligibleReplicaError", "NewLeaderElectedError",
    "OffsetMovedToTieredStorageError", "FencedMemberEpochError", "UnreleasedInstanceIdError",
    "UnsupportedAssignorError", "StaleMemberEpochError", "MismatchedEndpointTypeError",
    "UnsupportedEndpointTypeError", "UnknownControllerIdError", "UnknownSubscriptionIdError",
    "TelemetryTooLargeError", "InvalidRegistrationError", "InvalidRecordStateError",
    "ShareSessionNotFoundError", "InvalidShareSessionEpochError", "FencedStateEpochError",
    "InvalidVoterKeyError", "DuplicateVoterError", "VoterNotFoundError",
]


def _rebuild(cls, message, code, state):
    """Unpickle helper: rebuild without calling a subclass ``__init__`` with unexpected arguments."""
    exc = cls.__new__(cls)
    KafkaError.__init__(exc, message, code=code)
    if state:
        exc.__dict__.update(state)
    return exc


class KafkaError(Exception):
    """Base class of every fastkafka error.

    >>> e = error_for_code(6)
    >>> isinstance(e, KafkaError), e.retriable, e.invalid_metadata
    (True, True, True)
    """

    code: Optional[int] = None
    name: str = "KAFKA_ERROR"
    retriable: bool = False
    invalid_metadata: bool = False
    description: str = "A Kafka error."
    #: On an error handed to ``on_error``: how many reports of the same kind (and broker) the
    #: rate limit (``error_report_interval_ms``) held back since the last one that was delivered.
    suppressed: int = 0

    def __init__(self, message: Optional[str] = None, *, code: Optional[int] = None):
        if message is None:
            message = self.description
        super().__init__(message)
        self.message = message
        if code is not None and code != type(self).code:
            self.code = code  # instance override (generic class for an unknown broker code)

    def __str__(self) -> str:
        if self.code is None:
            return f"{self.name}: {self.message}"
        return f"{self.name} ({self.code}): {self.message}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.message!r}, code={self.code!r})"

    def __reduce__(self):
        state = {k: v for k, v in self.__dict__.items() if k not in ("message", "code")}
        return (_rebuild, (type(self), self.message, self.code, state))


class BrokerError(KafkaError):
    """Base of the classes generated for broker error codes."""


# Names the CamelCase rule would give to two different classes.
_CLASS_NAME_OVERRIDES = {
    "INVALID_RECORD": "BrokerInvalidRecordError",  # 87; InvalidRecordError is the client-side TypeError
}


def _class_name(kafka_name: str) -> str:
    if kafka_name in _CLASS_NAME_OVERRIDES:
        return _CLASS_NAME_OVERRIDES[kafka_name]
    words = kafka_name.split("_")
    if words[-1] == "EXCEPTION" and len(words) > 2:
        words = words[:-1]  # INVALID_TOPIC_EXCEPTION -> InvalidTopicError
    elif words[-1] == "ERROR":
        words = words[:-1]  # KAFKA_STORAGE_ERROR -> KafkaStorageError
    return "".join(w.capitalize() for w in words) + "Error"


_BY_CODE: dict = {}
_TABLE: dict = {}


def _row(code, name, retriable, invalid_metadata, description) -> None:
    """One row of the broker error-code table (``ERROR_TABLE``)."""
    _TABLE[code] = (name, retriable, invalid_metadata, description)


def _broker(code, name, retriable, invalid_metadata, description) -> type[BrokerError]:
    """One row of the table and its class: a :class:`BrokerError` subclass named by
    ``_class_name`` (the name it is assigned to; tests/unit/fastkafka/test_errors.py checks
    each), the class of ``code`` for :func:`error_for_code`."""
    _row(code, name, retriable, invalid_metadata, description)
    cls_name = _class_name(name)
    cls = type(
        cls_name,
        (BrokerError,),
        {
            "code": code,
            "name": name,
            "retriable": retriable,
            "invalid_metadata": invalid_metadata,
            "description": description,
            "__doc__": f"Kafka error {code} {name}: {description}",
            "__module__": __name__,
            "__qualname__": cls_name,
        },
    )
    _BY_CODE[code] = cls
    return cls


# --------------------------------------------------------------------------------------------------
# The broker error-code table: (code, NAME, retriable, invalid_metadata, description).
# retriable = the Java exception is a RetriableException; invalid_metadata = it is an
# InvalidMetadataException (the client must refresh metadata before retrying).
# --------------------------------------------------------------------------------------------------
_T, _F = True, False
UnknownServerError = _broker(-1, "UNKNOWN_SERVER_ERROR", _F, _F, "The server experienced an unexpected error when processing the request.")
OffsetOutOfRangeError = _broker(1, "OFFSET_OUT_OF_RANGE", _F, _F, "The requested offset is not within the range of offsets maintained by the server.")
CorruptMessageError = _broker(2, "CORRUPT_MESSAGE", _T, _F, "This message has failed its CRC checksum, exceeds the valid size, has a null key for a compacted topic, or is otherwise corrupt.")
UnknownTopicOrPartitionError = _broker(3, "UNKNOWN_TOPIC_OR_PARTITION", _T, _T, "This server does not host this topic-partition.")
InvalidFetchSizeError = _broker(4, "INVALID_FETCH_SIZE", _F, _F, "The requested fetch size is invalid.")
LeaderNotAvailableError = _broker(5, "LEADER_NOT_AVAILABLE", _T, _T, "There is no leader for this topic-partition as we are in the middle of a leadership election.")
NotLeaderOrFollowerError = _broker(6, "NOT_LEADER_OR_FOLLOWER", _T, _T, "This server is not the leader (or, for replica requests, not a replica) of that topic-partition.")
RequestTimedOutError = _broker(7, "REQUEST_TIMED_OUT", _T, _F, "The request timed out.")
BrokerNotAvailableError = _broker(8, "BROKER_NOT_AVAILABLE", _F, _F, "The broker is not available.")
ReplicaNotAvailableError = _broker(9, "REPLICA_NOT_AVAILABLE", _T, _T, "The replica is not available for the requested topic-partition.")
MessageTooLargeError = _broker(10, "MESSAGE_TOO_LARGE", _F, _F, "The request included a message larger than the max message size the server will accept.")
StaleControllerEpochError = _broker(11, "STALE_CONTROLLER_EPOCH", _F, _F, "The controller moved to another broker.")
OffsetMetadataTooLargeError = _broker(12, "OFFSET_METADATA_TOO_LARGE", _F, _F, "The metadata field of the offset request was too large.")
NetworkExceptionError = _broker(13, "NETWORK_EXCEPTION", _T, _T, "The server disconnected before a response was received.")
CoordinatorLoadInProgressError = _broker(14, "COORDINATOR_LOAD_IN_PROGRESS", _T, _F, "The coordinator is loading and hence can't process requests.")
CoordinatorNotAvailableError = _broker(15, "COORDINATOR_NOT_AVAILABLE", _T, _F, "The coordinator is not available.")
NotCoordinatorError = _broker(16, "NOT_COORDINATOR", _T, _F, "This is not the correct coordinator.")
InvalidTopicError = _broker(17, "INVALID_TOPIC_EXCEPTION", _F, _F, "The request attempted to perform an operation on an invalid topic.")
RecordListTooLargeError = _broker(18, "RECORD_LIST_TOO_LARGE", _F, _F, "The request included message batch larger than the configured segment size on the server.")
NotEnoughReplicasError = _broker(19, "NOT_ENOUGH_REPLICAS", _T, _F, "Messages are rejected since there are fewer in-sync replicas than required.")
NotEnoughReplicasAfterAppendError = _broker(20, "NOT_ENOUGH_REPLICAS_AFTER_APPEND", _T, _F, "Messages are written to the log, but to fewer in-sync replicas than required.")
InvalidRequiredAcksError = _broker(21, "INVALID_REQUIRED_ACKS", _F, _F, "Produce request specified an invalid value for required acks.")
IllegalGenerationError = _broker(22, "ILLEGAL_GENERATION", _F, _F, "Specified group generation id is not valid.")
InconsistentGroupProtocolError = _broker(23, "INCONSISTENT_GROUP_PROTOCOL", _F, _F, "The group member's supported protocols are incompatible with those of existing members.")
InvalidGroupIdError = _broker(24, "INVALID_GROUP_ID", _F, _F, "The configured groupId is invalid.")
UnknownMemberIdError = _broker(25, "UNKNOWN_MEMBER_ID", _F, _F, "The coordinator is not aware of this member.")
InvalidSessionTimeoutError = _broker(26, "INVALID_SESSION_TIMEOUT", _F, _F, "The session timeout is not within the range allowed by the broker.")
RebalanceInProgressError = _broker(27, "REBALANCE_IN_PROGRESS", _F, _F, "The group is rebalancing, so a rejoin is needed.")
InvalidCommitOffsetSizeError = _broker(28, "INVALID_COMMIT_OFFSET_SIZE", _F, _F, "The committing offset data size is not valid.")
TopicAuthorizationFailedError = _broker(29, "TOPIC_AUTHORIZATION_FAILED", _F, _F, "Topic authorization failed.")
GroupAuthorizationFailedError = _broker(30, "GROUP_AUTHORIZATION_FAILED", _F, _F, "Group authorization failed.")
ClusterAuthorizationFailedError = _broker(31, "CLUSTER_AUTHORIZATION_FAILED", _F, _F, "Cluster authorization failed.")
InvalidTimestampError = _broker(32, "INVALID_TIMESTAMP", _F, _F, "The timestamp of the message is out of acceptable range.")
UnsupportedSaslMechanismError = _broker(33, "UNSUPPORTED_SASL_MECHANISM", _F, _F, "The broker does not support the requested SASL mechanism.")
IllegalSaslStateError = _broker(34, "ILLEGAL_SASL_STATE", _F, _F, "Request is not valid given the current SASL state.")
UnsupportedVersionError = _broker(35, "UNSUPPORTED_VERSION", _F, _F, "The version of API is not supported.")
TopicAlreadyExistsError = _broker(36, "TOPIC_ALREADY_EXISTS", _F, _F, "Topic with this name already exists.")
InvalidPartitionsError = _broker(37, "INVALID_PARTITIONS", _F, _F, "Number of partitions is below 1.")
InvalidReplicationFactorError = _broker(38, "INVALID_REPLICATION_FACTOR", _F, _F, "Replication factor is below 1 or larger than the number of available brokers.")
InvalidReplicaAssignmentError = _broker(39, "INVALID_REPLICA_ASSIGNMENT", _F, _F, "Replica assignment is invalid.")
InvalidConfigError = _broker(40, "INVALID_CONFIG", _F, _F, "Configuration is invalid.")
NotControllerError = _broker(41, "NOT_CONTROLLER", _T, _F, "This is not the correct controller for this cluster.")
InvalidRequestError = _broker(42, "INVALID_REQUEST", _F, _F, "The request is malformed or was sent to an incompatible broker; see the broker logs.")
UnsupportedForMessageFormatError = _broker(43, "UNSUPPORTED_FOR_MESSAGE_FORMAT", _F, _F, "The message format version on the broker does not support the request.")
PolicyViolationError = _broker(44, "POLICY_VIOLATION", _F, _F, "Request parameters do not satisfy the configured policy.")
OutOfOrderSequenceNumberError = _broker(45, "OUT_OF_ORDER_SEQUENCE_NUMBER", _F, _F, "The broker received an out of order sequence number.")
DuplicateSequenceNumberError = _broker(46, "DUPLICATE_SEQUENCE_NUMBER", _F, _F, "The broker received a duplicate sequence number.")
InvalidProducerEpochError = _broker(47, "INVALID_PRODUCER_EPOCH", _F, _F, "Producer attempted to produce with an old epoch.")
InvalidTxnStateError = _broker(48, "INVALID_TXN_STATE", _F, _F, "The producer attempted a transactional operation in an invalid state.")
InvalidProducerIdMappingError = _broker(49, "INVALID_PRODUCER_ID_MAPPING", _F, _F, "The producer attempted to use a producer id which is not currently assigned to its transactional id.")
InvalidTransactionTimeoutError = _broker(50, "INVALID_TRANSACTION_TIMEOUT", _F, _F, "The transaction timeout is larger than the maximum value allowed by the broker.")
ConcurrentTransactionsError = _broker(51, "CONCURRENT_TRANSACTIONS", _T, _F, "The producer attempted to update a transaction while another concurrent operation on the same transaction was ongoing.")
TransactionCoordinatorFencedError = _broker(52, "TRANSACTION_COORDINATOR_FENCED", _F, _F, "The transaction coordinator sending a WriteTxnMarker is no longer the current coordinator for a given producer.")
TransactionalIdAuthorizationFailedError = _broker(53, "TRANSACTIONAL_ID_AUTHORIZATION_FAILED", _F, _F, "Transactional Id authorization failed.")
SecurityDisabledError = _broker(54, "SECURITY_DISABLED", _F, _F, "Security features are disabled.")
OperationNotAttemptedError = _broker(55, "OPERATION_NOT_ATTEMPTED", _F, _F, "The broker did not attempt to execute this operation (another operation in the batch failed).")
KafkaStorageError = _broker(56, "KAFKA_STORAGE_ERROR", _T, _T, "Disk error when trying to access log file on the disk.")
LogDirNotFoundError = _broker(57, "LOG_DIR_NOT_FOUND", _F, _F, "The user-specified log directory is not found in the broker config.")
SaslAuthenticationFailedError = _broker(58, "SASL_AUTHENTICATION_FAILED", _F, _F, "SASL Authentication failed.")
UnknownProducerIdError = _broker(59, "UNKNOWN_PRODUCER_ID", _F, _F, "The broker could not locate the producer metadata associated with the producer id.")
ReassignmentInProgressError = _broker(60, "REASSIGNMENT_IN_PROGRESS", _F, _F, "A partition reassignment is in progress.")
DelegationTokenAuthDisabledError = _broker(61, "DELEGATION_TOKEN_AUTH_DISABLED", _F, _F, "Delegation Token feature is not enabled.")
DelegationTokenNotFoundError = _broker(62, "DELEGATION_TOKEN_NOT_FOUND", _F, _F, "Delegation Token is not found on server.")
DelegationTokenOwnerMismatchError = _broker(63, "DELEGATION_TOKEN_OWNER_MISMATCH", _F, _F, "Specified Principal is not valid Owner/Renewer.")
DelegationTokenRequestNotAllowedError = _broker(64, "DELEGATION_TOKEN_REQUEST_NOT_ALLOWED", _F, _F, "Delegation Token requests are not allowed on PLAINTEXT/1-way SSL channels and on delegation token authenticated channels.")
DelegationTokenAuthorizationFailedError = _broker(65, "DELEGATION_TOKEN_AUTHORIZATION_FAILED", _F, _F, "Delegation Token authorization failed.")
DelegationTokenExpiredError = _broker(66, "DELEGATION_TOKEN_EXPIRED", _F, _F, "Delegation Token is expired.")
InvalidPrincipalTypeError = _broker(67, "INVALID_PRINCIPAL_TYPE", _F, _F, "Supplied principalType is not supported.")
NonEmptyGroupError = _broker(68, "NON_EMPTY_GROUP", _F, _F, "The group is not empty.")
GroupIdNotFoundError = _broker(69, "GROUP_ID_NOT_FOUND", _F, _F, "The group id does not exist.")
FetchSessionIdNotFoundError = _broker(70, "FETCH_SESSION_ID_NOT_FOUND", _T, _F, "The fetch session ID was not found.")
InvalidFetchSessionEpochError = _broker(71, "INVALID_FETCH_SESSION_EPOCH", _T, _F, "The fetch session epoch is invalid.")
ListenerNotFoundError = _broker(72, "LISTENER_NOT_FOUND", _T, _T, "There is no listener on the leader broker that matches the listener on which metadata request was processed.")
TopicDeletionDisabledError = _broker(73, "TOPIC_DELETION_DISABLED", _F, _F, "Topic deletion is disabled.")
FencedLeaderEpochError = _broker(74, "FENCED_LEADER_EPOCH", _T, _T, "The leader epoch in the request is older than the epoch on the broker.")
UnknownLeaderEpochError = _broker(75, "UNKNOWN_LEADER_EPOCH", _T, _F, "The leader epoch in the request is newer than the epoch on the broker.")
UnsupportedCompressionTypeError = _broker(76, "UNSUPPORTED_COMPRESSION_TYPE", _F, _F, "The requesting client does not support the compression type of given partition.")
StaleBrokerEpochError = _broker(77, "STALE_BROKER_EPOCH", _F, _F, "Broker epoch has changed.")
OffsetNotAvailableError = _broker(78, "OFFSET_NOT_AVAILABLE", _T, _F, "The leader high watermark has not caught up from a recent leader election so the offsets cannot be guaranteed to be monotonically increasing.")
MemberIdRequiredError = _broker(79, "MEMBER_ID_REQUIRED", _F, _F, "The group member needs to have a valid member id before actually entering a consumer group.")
PreferredLeaderNotAvailableError = _broker(80, "PREFERRED_LEADER_NOT_AVAILABLE", _T, _T, "The preferred leader was not available.")
GroupMaxSizeReachedError = _broker(81, "GROUP_MAX_SIZE_REACHED", _F, _F, "The consumer group has reached its max size.")
FencedInstanceIdError = _broker(82, "FENCED_INSTANCE_ID", _F, _F, "The broker rejected this static consumer since another consumer with the same group.instance.id has registered with a different member.id.")
EligibleLeadersNotAvailableError = _broker(83, "ELIGIBLE_LEADERS_NOT_AVAILABLE", _T, _T, "Eligible topic partition leaders are not available.")
ElectionNotNeededError = _broker(84, "ELECTION_NOT_NEEDED", _T, _T, "Leader election not needed for topic partition.")
NoReassignmentInProgressError = _broker(85, "NO_REASSIGNMENT_IN_PROGRESS", _F, _F, "No partition reassignment is in progress.")
GroupSubscribedToTopicError = _broker(86, "GROUP_SUBSCRIBED_TO_TOPIC", _F, _F, "Deleting offsets of a topic is forbidden while the consumer group is actively subscribed to it.")
BrokerInvalidRecordError = _broker(87, "INVALID_RECORD", _F, _F, "This record has failed the validation on broker and hence will be rejected.")
UnstableOffsetCommitError = _broker(88, "UNSTABLE_OFFSET_COMMIT", _T, _F, "There are unstable offsets that need to be cleared.")
ThrottlingQuotaExceededError = _broker(89, "THROTTLING_QUOTA_EXCEEDED", _T, _F, "The throttling quota has been exceeded.")
ProducerFencedError = _broker(90, "PRODUCER_FENCED", _F, _F, "There is a newer producer with the same transactionalId which fences the current one.")
ResourceNotFoundError = _broker(91, "RESOURCE_NOT_FOUND", _F, _F, "A request illegally referred to a resource that does not exist.")
DuplicateResourceError = _broker(92, "DUPLICATE_RESOURCE", _F, _F, "A request illegally referred to the same resource twice.")
UnacceptableCredentialError = _broker(93, "UNACCEPTABLE_CREDENTIAL", _F, _F, "Requested credential would not meet criteria for acceptability.")
InconsistentVoterSetError = _broker(94, "INCONSISTENT_VOTER_SET", _F, _F, "Either the sender or recipient of a voter-only request is not one of the expected voters.")
InvalidUpdateVersionError = _broker(95, "INVALID_UPDATE_VERSION", _F, _F, "The given update version was invalid.")
FeatureUpdateFailedError = _broker(96, "FEATURE_UPDATE_FAILED", _F, _F, "Unable to update finalized features due to an unexpected server error.")
PrincipalDeserializationFailureError = _broker(97, "PRINCIPAL_DESERIALIZATION_FAILURE", _F, _F, "Request principal deserialization failed during forwarding.")
SnapshotNotFoundError = _broker(98, "SNAPSHOT_NOT_FOUND", _F, _F, "Requested snapshot was not found.")
PositionOutOfRangeError = _broker(99, "POSITION_OUT_OF_RANGE", _F, _F, "Requested position is not greater than or equal to zero, and less than the size of the snapshot.")
UnknownTopicIdError = _broker(100, "UNKNOWN_TOPIC_ID", _T, _T, "This server does not host this topic ID.")
DuplicateBrokerRegistrationError = _broker(101, "DUPLICATE_BROKER_REGISTRATION", _F, _F, "This broker ID is already in use.")
BrokerIdNotRegisteredError = _broker(102, "BROKER_ID_NOT_REGISTERED", _F, _F, "The given broker ID was not registered.")
InconsistentTopicIdError = _broker(103, "INCONSISTENT_TOPIC_ID", _T, _T, "The log's topic ID did not match the topic ID in the request.")
InconsistentClusterIdError = _broker(104, "INCONSISTENT_CLUSTER_ID", _F, _F, "The clusterId in the request does not match that found on the server.")
TransactionalIdNotFoundError = _broker(105, "TRANSACTIONAL_ID_NOT_FOUND", _F, _F, "The transactionalId could not be found.")
FetchSessionTopicIdError = _broker(106, "FETCH_SESSION_TOPIC_ID_ERROR", _T, _F, "The fetch session encountered inconsistent topic ID usage.")
IneligibleReplicaError = _broker(107, "INELIGIBLE_REPLICA", _F, _F, "The new ISR contains at least one ineligible replica.")
NewLeaderElectedError = _broker(108, "NEW_LEADER_ELECTED", _F, _F, "The AlterPartition request updated the partition state but the leader has changed.")
OffsetMovedToTieredStorageError = _broker(109, "OFFSET_MOVED_TO_TIERED_STORAGE", _F, _F, "The requested offset is moved to tiered storage.")
FencedMemberEpochError = _broker(110, "FENCED_MEMBER_EPOCH", _F, _F, "The member epoch is fenced by the group coordinator.")
UnreleasedInstanceIdError = _broker(111, "UNRELEASED_INSTANCE_ID", _F, _F, "The instance ID is still used by another member in the consumer group.")
UnsupportedAssignorError = _broker(112, "UNSUPPORTED_ASSIGNOR", _F, _F, "The assignor or its version range is not supported by the consumer group.")
StaleMemberEpochError = _broker(113, "STALE_MEMBER_EPOCH", _F, _F, "The member epoch is stale; retry after receiving the updated member epoch.")
MismatchedEndpointTypeError = _broker(114, "MISMATCHED_ENDPOINT_TYPE", _F, _F, "The request was sent to an endpoint of the wrong type.")
UnsupportedEndpointTypeError = _broker(115, "UNSUPPORTED_ENDPOINT_TYPE", _F, _F, "This endpoint type is not supported yet.")
UnknownControllerIdError = _broker(116, "UNKNOWN_CONTROLLER_ID", _F, _F, "This controller ID is not known.")
UnknownSubscriptionIdError = _broker(117, "UNKNOWN_SUBSCRIPTION_ID", _F, _F, "Client sent a push telemetry request with an invalid or outdated subscription ID.")
TelemetryTooLargeError = _broker(118, "TELEMETRY_TOO_LARGE", _F, _F, "Client sent a push telemetry request larger than the maximum size the broker will accept.")
InvalidRegistrationError = _broker(119, "INVALID_REGISTRATION", _F, _F, "The controller has considered the broker registration to be invalid.")
_row(120, "TRANSACTION_ABORTABLE", _F, _F, "The server encountered an error with the transaction; the client can abort the transaction to continue.")   # class: TransactionAbortableError, below
InvalidRecordStateError = _broker(121, "INVALID_RECORD_STATE", _F, _F, "The record state is invalid; the acknowledgement of delivery could not be completed.")
ShareSessionNotFoundError = _broker(122, "SHARE_SESSION_NOT_FOUND", _T, _F, "The share session was not found.")
InvalidShareSessionEpochError = _broker(123, "INVALID_SHARE_SESSION_EPOCH", _T, _F, "The share session epoch is invalid.")
FencedStateEpochError = _broker(124, "FENCED_STATE_EPOCH", _F, _F, "The share coordinator rejected the request because the share-group state epoch did not match.")
InvalidVoterKeyError = _broker(125, "INVALID_VOTER_KEY", _F, _F, "The voter key doesn't match the receiving replica's key.")
DuplicateVoterError = _broker(126, "DUPLICATE_VOTER", _F, _F, "The voter is already part of the set of voters.")
VoterNotFoundError = _broker(127, "VOTER_NOT_FOUND", _F, _F, "The voter is not part of the set of voters.")
del _T, _F

#: code -> (NAME, retriable, invalid_metadata, description): the table above.
ERROR_TABLE = _TABLE




# --------------------------------------------------------------------------------------------------
# Client-side errors.
# --------------------------------------------------------------------------------------------------
class ConfigError(KafkaError, ValueError):
    """A configuration value is missing, of the wrong type or out of range."""

    code, name, description = -100, "CONFIG_ERROR", "Invalid configuration."


class KafkaTimeoutError(KafkaError):
    """An operation did not complete in time (metadata wait, flush, ...).

    A metadata wait that timed out while brokers could not be reached names them in its message,
    and ``connection_errors`` maps each such ``"host:port"`` to its last connection error
    (``"connection refused"``, ``"name resolution failed: ..."``, ``"connection timed out ..."``).
    """

    code, name, retriable, description = -101, "KAFKA_TIMEOUT", True, "The operation timed out."
    connection_errors: Mapping[str, str] = MappingProxyType({})


class BufferExhaustedError(KafkaTimeoutError):
    """The buffer pool had no memory for a new batch within ``max_block_ms``."""

    code, name, description = -102, "BUFFER_EXHAUSTED", "Failed to allocate memory within max_block_ms."


class DeliveryTimeoutError(KafkaTimeoutError):
    """A record expired (``delivery_timeout_ms``) before it was acknowledged."""

    code, name, description = -103, "DELIVERY_TIMEOUT", "The record expired before it could be delivered."


class RecordTooLargeError(KafkaError):
    """A record is larger than ``max_request_size`` or the buffer pool."""

    code, name, description = -104, "RECORD_TOO_LARGE", "The record is larger than the configured maximum."


class InvalidRecordError(KafkaError, TypeError):
    """A key, value or header has the wrong type."""

    code, name, description = -105, "INVALID_RECORD_ARGUMENT", "The record has an invalid key, value or header."


class MalformedRecordError(InvalidRecordError, ValueError):
    """An argument of ``send``/``produce``/``send_batch`` has an accepted type but a value that cannot
    be used: a released memoryview, a buffer that is not contiguous, a header key that cannot be
    encoded as UTF-8, a negative timestamp, a ``keys`` or ``partition`` list whose length differs
    from ``values``. Also an :class:`InvalidRecordError`, so one ``except`` catches every bad input;
    and a ``ValueError``, as Python raises for such values."""

    code, name, description = (-130, "MALFORMED_RECORD_ARGUMENT",
                               "A record argument has the right type but an unusable value.")


class SerializationError(InvalidRecordError):
    """A ``key_serializer`` or ``value_serializer`` raised, or returned something that is not
    bytes-like, str or None. ``field`` is ``"key"`` or ``"value"``, ``topic`` the record's topic;
    the serializer's exception is the ``__cause__``. Raised by ``send``/``produce``/``send_batch``
    before the record (or any record of the call) is queued. An :class:`InvalidRecordError`, so
    one ``except`` catches every bad input."""

    code, name, description = (-131, "SERIALIZATION_ERROR",
                               "A key or value serializer failed or returned an unusable type.")
    field: Optional[str] = None
    topic: Optional[str] = None

    def __init__(self, message: Optional[str] = None, *, field: Optional[str] = None,
                 topic: Optional[str] = None, code: Optional[int] = None):
        super().__init__(message, code=code)
        self.field = field
        self.topic = topic


class UnknownPartitionError(KafkaError, ValueError):
    """An explicit partition number is not in the topic."""

    code, name, description = -106, "UNKNOWN_PARTITION", "The partition does not exist in the topic."


class ProducerClosedError(KafkaError):
    """The producer was closed; no more sends are accepted."""

    code, name, description = -107, "PRODUCER_CLOSED", "The producer is closed."


class NetworkError(KafkaError):
    """A connection-level failure; retry after refreshing metadata."""

    code, name, description = -108, "NETWORK_ERROR", "A network error occurred."
    retriable = True
    invalid_metadata = True


class DisconnectedError(NetworkError):
    """The connection was closed (by the peer or by us) with requests in flight."""

    code, name, description = -109, "DISCONNECTED", "The connection was closed."


class CorrelationIdMismatchError(NetworkError):
    """A response's correlation id is not that of the oldest in-flight request."""

    code, name, description = -110, "CORRELATION_ID_MISMATCH", "The response's correlation id does not match the request."


class CorruptFrameError(NetworkError):
    """A frame could not be decoded (truncated, garbled or of an unexpected format)."""

    code, name, description = -111, "CORRUPT_FRAME", "The frame could not be decoded."


class IllegalStateError(KafkaError):
    """An operation was called in a state that does not allow it."""

    code, name, description = -112, "ILLEGAL_STATE", "The operation is not allowed in the current state."


class SaslAuthenticationError(KafkaError):
    """SASL authentication with a broker failed: wrong credentials (the broker's
    SASL_AUTHENTICATION_FAILED), a mechanism the broker does not offer (UNSUPPORTED_SASL_MECHANISM;
    the message names the ones it offers), a broker that could not prove it knows the password
    (SCRAM server signature), or a token provider that failed. Not retriable: the connection is
    closed, sends and metadata waits that depend on it fail with this error at once, and the node
    is tried again only after ``reconnect_backoff_max_ms``. ``node``, ``host``, ``port``,
    ``mechanism`` and ``broker_code`` (the broker's error code, or None) say which broker and what
    failed; the message never contains a password or token."""

    code, name, description = (-150, "SASL_AUTHENTICATION_ERROR",
                               "SASL authentication with a broker failed.")

    def __init__(self, message=None, *, node=None, host=None, port=None, mechanism=None,
                 broker_code=None):
        super().__init__(message)
        self.node = node
        self.host = host
        self.port = port
        self.mechanism = mechanism
        self.broker_code = broker_code


_BY_CODE[SaslAuthenticationError.code] = SaslAuthenticationError


class AwsCredentialsError(SaslAuthenticationError):
    """The AWS credentials of an Amazon MSK IAM login (:mod:`fastkafka.aws`) could not be had:
    ``source`` names the source that failed ("environment", "web identity", "profile 'x'",
    "container", "instance metadata", "chain" when none had any). A SaslAuthenticationError: the
    producer reports it as a failed login of the node it was connecting to. The message never
    contains a key, session token or web identity token."""

    def __init__(self, message=None, *, source=None, **kw):
        super().__init__(message, **kw)
        self.source = source


class InvalidBrokerResponseError(NetworkError):
    """A broker's answer decoded, but cannot be used as it is: metadata whose partition numbers or
    leaders do not add up, a producer id of -1 without an error, a node lacking an API the client
    needs. The connection or the answer is dropped and the request retried after a backoff."""

    code, name, retriable, description = (-120, "INVALID_BROKER_RESPONSE", True,
                                          "The broker's answer cannot be used.")


class ProducerForkedError(IllegalStateError):
    """The producer was created in another process: it was inherited through ``fork()``, and its
    I/O thread does not exist in this process. Create a new producer after the fork."""

    code, name, description = -121, "PRODUCER_FORKED", "The producer was created before a fork."


class BrokerDataLossError(KafkaError):
    """A broker no longer has records it acknowledged: the partition's idempotent sequence no
    longer follows the last acknowledged batch (OUT_OF_ORDER_SEQUENCE_NUMBER on the batch that
    should be next). Delivered to the producer's ``on_error`` hook; the producer bumps its epoch
    and goes on with the records not yet acknowledged. ``node``, ``topic``, ``partition``,
    ``acked_sequence_end`` and ``acked_offset`` name what was lost as far as the producer knows."""

    code, name, description = (-122, "BROKER_DATA_LOSS",
                               "The broker no longer has records it acknowledged.")

    def __init__(self, message=None, *, node=None, topic=None, partition=None,
                 acked_sequence_end=None, acked_offset=None):
        super().__init__(message)
        self.node = node
        self.topic = topic
        self.partition = partition
        self.acked_sequence_end = acked_sequence_end
        self.acked_offset = acked_offset


class TlsError(NetworkError):
    """A TLS connection to a broker failed in a way that may pass (the broker closed the connection
    during the TLS handshake, a TLS record that does not decrypt). Retried like a disconnect."""

    code, name, description = -140, "TLS_ERROR", "A TLS connection to a broker failed."


class TlsAuthenticationError(KafkaError):
    """The TLS handshake with a broker failed for a reason that retrying does not fix: its
    certificate is not trusted (unknown CA, expired, issued for another host) or it refused the
    client (no client certificate where mutual TLS is required, an unknown one). Not retriable:
    sends waiting for metadata fail with it at once."""

    code, name, description = (-141, "TLS_AUTHENTICATION_FAILED",
                               "TLS authentication with a broker failed.")
    retriable = False
    node: Optional[int] = None      # the broker's node id, host and port (set when reported)
    host: Optional[str] = None
    port: Optional[int] = None


class AllBrokersDownError(KafkaError):
    """No broker can be reached: every broker the producer knows (from metadata, or the bootstrap
    addresses before the first metadata) has failed its last connection attempt since it was last
    connected, and no connection is ready. Handed to ``on_error`` once per outage (the transition),
    never per retry; the producer keeps trying, records wait (up to ``delivery_timeout_ms``).
    ``brokers`` maps each ``"host:port"`` to its last connection error. When a connection becomes
    ready again, :class:`BrokersRecovered` follows. librdkafka's ``_ALL_BROKERS_DOWN``."""

    code, name, retriable, description = (-170, "ALL_BROKERS_DOWN", True,
                                          "No broker can be reached.")
    brokers: Mapping[str, str] = MappingProxyType({})

    def __init__(self, message=None, *, brokers=None):
        super().__init__(message)
        if brokers is not None:
            self.brokers = dict(brokers)


class BrokersRecovered(KafkaError):
    """A notice, not a failure: after an :class:`AllBrokersDownError`, a connection to a broker is
    ready again. Handed to ``on_error`` once per outage, and only when the outage itself was
    reported. ``node``, ``host`` and ``port`` name the broker reached first; ``down_ms`` is how long
    no broker could be reached."""

    code, name, description = (-171, "BROKERS_RECOVERED",
                               "A broker can be reached again after every broker was down.")

    def __init__(self, message=None, *, node=None, host=None, port=None, down_ms=None):
        super().__init__(message)
        self.node = node
        self.host = host
        self.port = port
        self.down_ms = down_ms


class TransactionAbortedError(KafkaError):
    """The record was not sent: its transaction was aborted (by ``abort_transaction()``, or
    because an earlier record of the transaction failed) before the record left the producer.
    Nothing of it is visible to ``read_committed`` consumers."""

    code, name, description = (-160, "TRANSACTION_ABORTED",
                               "The record's transaction was aborted before it was sent.")


class TransactionAbortableError(BrokerError):
    """The current transaction cannot be committed (a record of it failed, a partition could not
    be added to it, the broker refused a step): call ``abort_transaction()``; the producer stays
    usable for the next transaction. ``cause`` is the error behind it (None when the broker itself
    answered TRANSACTION_ABORTABLE). The class of broker code 120 TRANSACTION_ABORTABLE too, so one
    ``except`` catches both."""

    code, name, retriable, invalid_metadata, description = (120, "TRANSACTION_ABORTABLE", False, False,
                                                            ERROR_TABLE[120][3])

    def __init__(self, message=None, *, code=None, cause=None):
        super().__init__(message, code=code)
        self.cause = cause


_BY_CODE[120] = TransactionAbortableError


UnsupportedVersionError.__doc__ = (
    "Broker error 35 UNSUPPORTED_VERSION; also raised by the client when no API version is supported "
    "by both sides (``fastkafka.protocol.pick_version``)."
)

_CLIENT_CLASSES = (
    ConfigError, KafkaTimeoutError, BufferExhaustedError, DeliveryTimeoutError, RecordTooLargeError,
    InvalidRecordError, UnknownPartitionError, ProducerClosedError, NetworkError, DisconnectedError,
    CorrelationIdMismatchError, CorruptFrameError, IllegalStateError, MalformedRecordError, InvalidBrokerResponseError,
    ProducerForkedError, BrokerDataLossError, TransactionAbortedError, SerializationError,
)
for _cls in _CLIENT_CLASSES:
    _BY_CODE[_cls.code] = _cls
del _cls
_BY_CODE[TlsError.code] = TlsError
_BY_CODE[TlsAuthenticationError.code] = TlsAuthenticationError
_BY_CODE[AllBrokersDownError.code] = AllBrokersDownError
_BY_CODE[BrokersRecovered.code] = BrokersRecovered


def error_class_for_code(code: int) -> type:
    """The class for ``code``; :class:`UnknownServerError` for a code not in the table."""
    return _BY_CODE.get(code, UnknownServerError)


def error_for_code(code: int, message: Optional[str] = None) -> Optional[KafkaError]:
    """The exception instance for a Kafka error code read off the wire.

    ``code`` 0 (NONE) returns ``None``. An unknown code returns an :class:`UnknownServerError`
    instance whose ``.code`` is the unknown code.

    >>> str(error_for_code(10))
    'MESSAGE_TOO_LARGE (10): The request included a message larger than the max message size the server will accept.'
    >>> error_for_code(999).code
    999
    """
    if code == 0:
        return None
    cls = _BY_CODE.get(code)
    if cls is None:
        return UnknownServerError(
            message if message is not None else f"Unknown error code {code} from the broker.", code=code
        )
    return cls(message)


_NAME_RE = re.compile(r"^[A-Z][A-Z0-9_]*$")
assert all(_NAME_RE.match(n) for n, *_ in ERROR_TABLE.values())
