"""Message definitions, written as data.

Facts (field order, types, versions, defaults, tags) follow the Apache Kafka JSON schemas in
``clients/src/main/resources/common/message/``; names are the snake_case of the schema names.
Only the versions listed in :data:`fastkafka.protocol.SUPPORTED_VERSIONS` are compiled, but fields
are described with their full version ranges so a later version bump only touches this file.
"""

from __future__ import annotations

from fastkafka.protocol.schema import Field as F
from fastkafka.protocol.schema import Message
from fastkafka.protocol.codec import row_type

# ------------------------------------------------------------------------------------------ Produce
PRODUCE_REQUEST = Message("ProduceRequest", 0, "3-11", "9+", [
    F("transactional_id", "string", "3+", nullable="3+", default=None),
    F("acks", "int16"),
    F("timeout_ms", "int32"),
    F("topic_data", "[]struct", fields=[
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_data", "[]struct", fields=[
            F("index", "int32"),
            F("records", "records", nullable="0+"),
        ]),
    ]),
])

PRODUCE_RESPONSE = Message("ProduceResponse", 0, "3-11", "9+", [
    F("responses", "[]struct", fields=[
        F("name", "string", "0-12"),
        F("topic_id", "uuid", "13+"),
        F("partition_responses", "[]struct", fields=[
            F("index", "int32"),
            F("error_code", "int16"),
            F("base_offset", "int64"),
            F("log_append_time_ms", "int64", "2+", default=-1),
            F("log_start_offset", "int64", "5+", default=-1),
            F("record_errors", "[]struct", "8+", fields=[
                F("batch_index", "int32", "8+"),
                F("batch_index_error_message", "string", "8+", nullable="8+", default=None),
            ]),
            F("error_message", "string", "8+", nullable="8+", default=None),
            F("current_leader", "struct", "10+", tag=0, fields=[
                F("leader_id", "int32", "10+", default=-1),
                F("leader_epoch", "int32", "10+", default=-1),
            ]),
        ]),
    ]),
    F("throttle_time_ms", "int32", "1+", default=0),
    F("node_endpoints", "[]struct", "10+", tag=0, fields=[
        F("node_id", "int32", "10+"),
        F("host", "string", "10+"),
        F("port", "int32", "10+"),
        F("rack", "string", "10+", nullable="10+", default=None),
    ]),
])

# ------------------------------------------------------------------------------------- ListOffsets
LIST_OFFSETS_REQUEST = Message("ListOffsetsRequest", 2, "1-8", "6+", [
    F("replica_id", "int32"),
    F("isolation_level", "int8", "2+"),
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("partitions", "[]struct", fields=[
            F("partition_index", "int32"),
            F("current_leader_epoch", "int32", "4+", default=-1),
            F("timestamp", "int64"),
            F("max_num_offsets", "int32", "0", default=1),
        ]),
    ]),
    F("timeout_ms", "int32", "10+"),
])

LIST_OFFSETS_RESPONSE = Message("ListOffsetsResponse", 2, "1-8", "6+", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("partitions", "[]struct", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
            F("old_style_offsets", "[]int64", "0"),
            F("timestamp", "int64", "1+", default=-1),
            F("offset", "int64", "1+", default=-1),
            F("leader_epoch", "int32", "4+", default=-1),
        ]),
    ]),
])

# ---------------------------------------------------------------------------------------- Metadata
METADATA_REQUEST = Message("MetadataRequest", 3, "1-12", "9+", [
    # None = all topics (v1+); [] = no topics.
    F("topics", "[]struct", nullable="1+", fields=[
        F("topic_id", "uuid", "10+"),
        F("name", "string", nullable="10+"),
    ]),
    F("allow_auto_topic_creation", "bool", "4+", default=True),
    F("include_cluster_authorized_operations", "bool", "8-10"),
    F("include_topic_authorized_operations", "bool", "8+"),
])

# A topic's partitions decode into compact rows: a broker may list a million of them.
MetadataPartition = row_type("MetadataPartition", (
    "error_code", "partition_index", "leader_id", "leader_epoch", "replica_nodes", "isr_nodes",
    "offline_replicas"), shared_lists=("replica_nodes", "isr_nodes", "offline_replicas"))

METADATA_RESPONSE = Message("MetadataResponse", 3, "1-12", "9+", [
    F("throttle_time_ms", "int32", "3+"),
    F("brokers", "[]struct", fields=[
        F("node_id", "int32"),
        F("host", "string"),
        F("port", "int32"),
        F("rack", "string", "1+", nullable="1+", default=None),
    ]),
    F("cluster_id", "string", "2+", nullable="2+", default=None),
    F("controller_id", "int32", "1+", default=-1),
    F("topics", "[]struct", fields=[
        F("error_code", "int16"),
        F("name", "string", nullable="12+"),
        F("topic_id", "uuid", "10+"),
        F("is_internal", "bool", "1+", default=False),
        F("partitions", "[]struct", row=MetadataPartition.convert, fields=[
            F("error_code", "int16"),
            F("partition_index", "int32"),
            F("leader_id", "int32"),
            F("leader_epoch", "int32", "7+", default=-1),
            F("replica_nodes", "[]int32"),
            F("isr_nodes", "[]int32"),
            F("offline_replicas", "[]int32", "5+"),
        ]),
        F("topic_authorized_operations", "int32", "8+", default=-2147483648),
    ]),
    F("cluster_authorized_operations", "int32", "8-10", default=-2147483648),
    F("error_code", "int16", "13+"),
])

# ------------------------------------------------------------------------------------- ApiVersions
API_VERSIONS_REQUEST = Message("ApiVersionsRequest", 18, "0-3", "3+", [
    F("client_software_name", "string", "3+"),
    F("client_software_version", "string", "3+"),
])

API_VERSIONS_RESPONSE = Message("ApiVersionsResponse", 18, "0-3", "3+", [
    F("error_code", "int16"),
    F("api_keys", "[]struct", fields=[
        F("api_key", "int16"),
        F("min_version", "int16"),
        F("max_version", "int16"),
    ]),
    F("throttle_time_ms", "int32", "1+"),
    F("supported_features", "[]struct", "3+", tag=0, fields=[
        F("name", "string", "3+"),
        F("min_version", "int16", "3+"),
        F("max_version", "int16", "3+"),
    ]),
    F("finalized_features_epoch", "int64", "3+", tag=1, default=-1),
    F("finalized_features", "[]struct", "3+", tag=2, fields=[
        F("name", "string", "3+"),
        F("max_version_level", "int16", "3+"),
        F("min_version_level", "int16", "3+"),
    ]),
    F("zk_migration_ready", "bool", "3+", tag=3, default=False),
])

# ------------------------------------------------------------------------------------ CreateTopics
CREATE_TOPICS_REQUEST = Message("CreateTopicsRequest", 19, "2-7", "5+", [
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("num_partitions", "int32"),
        F("replication_factor", "int16"),
        F("assignments", "[]struct", fields=[
            F("partition_index", "int32"),
            F("broker_ids", "[]int32"),
        ]),
        F("configs", "[]struct", fields=[
            F("name", "string"),
            F("value", "string", nullable="0+"),
        ]),
    ]),
    F("timeout_ms", "int32", default=60000),
    F("validate_only", "bool", "1+", default=False),
])

CREATE_TOPICS_RESPONSE = Message("CreateTopicsResponse", 19, "2-7", "5+", [
    F("throttle_time_ms", "int32", "2+"),
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("topic_id", "uuid", "7+"),
        F("error_code", "int16"),
        F("error_message", "string", "1+", nullable="0+"),
        F("topic_config_error_code", "int16", "5+", tag=0),
        F("num_partitions", "int32", "5+", default=-1),
        F("replication_factor", "int16", "5+", default=-1),
        F("configs", "[]struct", "5+", nullable="5+", fields=[
            F("name", "string", "5+"),
            F("value", "string", "5+", nullable="5+"),
            F("read_only", "bool", "5+"),
            F("config_source", "int8", "5+", default=-1),
            F("is_sensitive", "bool", "5+"),
        ]),
    ]),
])

# ------------------------------------------------------------------------------------ DeleteTopics
DELETE_TOPICS_REQUEST = Message("DeleteTopicsRequest", 20, "1-6", "4+", [
    F("topics", "[]struct", "6+", fields=[
        F("name", "string", "6+", nullable="6+", default=None),
        F("topic_id", "uuid", "6+"),
    ]),
    F("topic_names", "[]string", "0-5"),
    F("timeout_ms", "int32"),
])

DELETE_TOPICS_RESPONSE = Message("DeleteTopicsResponse", 20, "1-6", "4+", [
    F("throttle_time_ms", "int32", "1+"),
    F("responses", "[]struct", fields=[
        F("name", "string", nullable="6+"),
        F("topic_id", "uuid", "6+"),
        F("error_code", "int16"),
        F("error_message", "string", "5+", nullable="5+", default=None),
    ]),
])

# ---------------------------------------------------------------------------------- InitProducerId
INIT_PRODUCER_ID_REQUEST = Message("InitProducerIdRequest", 22, "0-5", "2+", [
    # Schema default is "" (not null): an idempotent, non-transactional producer must pass None.
    F("transactional_id", "string", nullable="0+"),
    F("transaction_timeout_ms", "int32"),
    F("producer_id", "int64", "3+", default=-1),
    F("producer_epoch", "int16", "3+", default=-1),
])

INIT_PRODUCER_ID_RESPONSE = Message("InitProducerIdResponse", 22, "0-5", "2+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("producer_id", "int64", default=-1),
    F("producer_epoch", "int16"),
])

# ---------------------------------------------------------------------------------- SaslHandshake
# Version 1 means the authentication bytes then travel in SaslAuthenticate requests (not raw).
SASL_HANDSHAKE_REQUEST = Message("SaslHandshakeRequest", 17, "0-1", "none", [
    F("mechanism", "string"),
])

SASL_HANDSHAKE_RESPONSE = Message("SaslHandshakeResponse", 17, "0-1", "none", [
    F("error_code", "int16"),
    F("mechanisms", "[]string"),
])

# ------------------------------------------------------------------------------- SaslAuthenticate
SASL_AUTHENTICATE_REQUEST = Message("SaslAuthenticateRequest", 36, "0-2", "2+", [
    F("auth_bytes", "bytes"),
])

SASL_AUTHENTICATE_RESPONSE = Message("SaslAuthenticateResponse", 36, "0-2", "2+", [
    F("error_code", "int16"),
    F("error_message", "string", nullable="0+"),
    F("auth_bytes", "bytes"),
    F("session_lifetime_ms", "int64", "1+", default=0),
])

# ------------------------------------------------------------------------ FindCoordinator (10)
# key_type: 0 = consumer group, 1 = transaction. Versions 1-3 (one key per request).
FIND_COORDINATOR_REQUEST = Message("FindCoordinatorRequest", 10, "1-3", "3+", [
    F("key", "string", "0-3"),
    F("key_type", "int8", "1+", default=0),
])

FIND_COORDINATOR_RESPONSE = Message("FindCoordinatorResponse", 10, "1-3", "3+", [
    F("throttle_time_ms", "int32", "1+", default=0),
    F("error_code", "int16", "0-3"),
    F("error_message", "string", "1-3", nullable="1-3"),
    F("node_id", "int32", "0-3"),
    F("host", "string", "0-3"),
    F("port", "int32", "0-3"),
])

# --------------------------------------------------------------------- AddPartitionsToTxn (24)
# Versions 0-3 are the client's (4+ batch several transactions and are broker-to-broker).
ADD_PARTITIONS_TO_TXN_REQUEST = Message("AddPartitionsToTxnRequest", 24, "0-3", "3+", [
    F("v3_and_below_transactional_id", "string", "0-3"),
    F("v3_and_below_producer_id", "int64", "0-3"),
    F("v3_and_below_producer_epoch", "int16", "0-3"),
    F("v3_and_below_topics", "[]struct", "0-3", fields=[
        F("name", "string"),
        F("partitions", "[]int32"),
    ]),
])

ADD_PARTITIONS_TO_TXN_RESPONSE = Message("AddPartitionsToTxnResponse", 24, "0-3", "3+", [
    F("throttle_time_ms", "int32"),
    F("results_by_topic_v3_and_below", "[]struct", "0-3", fields=[
        F("name", "string"),
        F("results_by_partition", "[]struct", fields=[
            F("partition_index", "int32"),
            F("partition_error_code", "int16"),
        ]),
    ]),
])

# ------------------------------------------------------------------------ AddOffsetsToTxn (25)
ADD_OFFSETS_TO_TXN_REQUEST = Message("AddOffsetsToTxnRequest", 25, "0-3", "3+", [
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("group_id", "string"),
])

ADD_OFFSETS_TO_TXN_RESPONSE = Message("AddOffsetsToTxnResponse", 25, "0-3", "3+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
])

# -------------------------------------------------------------------------------- EndTxn (26)
END_TXN_REQUEST = Message("EndTxnRequest", 26, "0-3", "3+", [
    F("transactional_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("committed", "bool"),
])

END_TXN_RESPONSE = Message("EndTxnResponse", 26, "0-3", "3+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
])

# ----------------------------------------------------------------------- TxnOffsetCommit (28)
TXN_OFFSET_COMMIT_REQUEST = Message("TxnOffsetCommitRequest", 28, "0-3", "3+", [
    F("transactional_id", "string"),
    F("group_id", "string"),
    F("producer_id", "int64"),
    F("producer_epoch", "int16"),
    F("generation_id", "int32", "3+", default=-1),
    F("member_id", "string", "3+", default=""),
    F("group_instance_id", "string", "3+", nullable="3+", default=None),
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("partitions", "[]struct", fields=[
            F("partition_index", "int32"),
            F("committed_offset", "int64"),
            F("committed_leader_epoch", "int32", "2+", default=-1),
            F("committed_metadata", "string", nullable="0+"),
        ]),
    ]),
])

TXN_OFFSET_COMMIT_RESPONSE = Message("TxnOffsetCommitResponse", 28, "0-3", "3+", [
    F("throttle_time_ms", "int32"),
    F("topics", "[]struct", fields=[
        F("name", "string"),
        F("partitions", "[]struct", fields=[
            F("partition_index", "int32"),
            F("error_code", "int16"),
        ]),
    ]),
])

# ---------------------------------------------------------------------- ListTransactions (66)
LIST_TRANSACTIONS_REQUEST = Message("ListTransactionsRequest", 66, "0-1", "0+", [
    F("state_filters", "[]string"),
    F("producer_id_filters", "[]int64"),
    F("duration_filter", "int64", "1+", default=-1),
])

LIST_TRANSACTIONS_RESPONSE = Message("ListTransactionsResponse", 66, "0-1", "0+", [
    F("throttle_time_ms", "int32"),
    F("error_code", "int16"),
    F("unknown_state_filters", "[]string"),
    F("transaction_states", "[]struct", fields=[
        F("transactional_id", "string"),
        F("producer_id", "int64"),
        F("transaction_state", "string"),
    ]),
])

# --------------------------------------------------------------------------------------- (api key)
REQUESTS = {m.api_key: m for m in (
    PRODUCE_REQUEST, LIST_OFFSETS_REQUEST, METADATA_REQUEST, API_VERSIONS_REQUEST,
    CREATE_TOPICS_REQUEST, DELETE_TOPICS_REQUEST, INIT_PRODUCER_ID_REQUEST,
    SASL_HANDSHAKE_REQUEST, SASL_AUTHENTICATE_REQUEST, FIND_COORDINATOR_REQUEST,
    ADD_PARTITIONS_TO_TXN_REQUEST, ADD_OFFSETS_TO_TXN_REQUEST, END_TXN_REQUEST,
    TXN_OFFSET_COMMIT_REQUEST, LIST_TRANSACTIONS_REQUEST)}
RESPONSES = {m.api_key: m for m in (
    PRODUCE_RESPONSE, LIST_OFFSETS_RESPONSE, METADATA_RESPONSE, API_VERSIONS_RESPONSE,
    CREATE_TOPICS_RESPONSE, DELETE_TOPICS_RESPONSE, INIT_PRODUCER_ID_RESPONSE,
    SASL_HANDSHAKE_RESPONSE, SASL_AUTHENTICATE_RESPONSE, FIND_COORDINATOR_RESPONSE,
    ADD_PARTITIONS_TO_TXN_RESPONSE, ADD_OFFSETS_TO_TXN_RESPONSE, END_TXN_RESPONSE,
    TXN_OFFSET_COMMIT_RESPONSE, LIST_TRANSACTIONS_RESPONSE)}
