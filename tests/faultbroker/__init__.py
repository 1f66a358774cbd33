"""In-process, fault-injecting Kafka test broker (Kafka's socket-server model; see ``server``).

    from faultbroker import FaultBroker, Cluster, split_frames, partition_error
"""
from .broker import FaultBroker, RequestRecord, SaslServer
from .cluster import Cluster, StoredBatch, parse_batches
from .script import (Action, Rule, Script, delay, disconnect_before_response, disconnect_mid_response,
                     no_response, oversized_size_prefix, partition_error, rewrite_response, slow_read,
                     split_frames, wrong_correlation_id)

__all__ = [
    "FaultBroker", "RequestRecord", "SaslServer", "Cluster", "StoredBatch", "parse_batches", "Action", "Rule", "Script",
    "delay", "disconnect_before_response", "disconnect_mid_response", "no_response",
    "oversized_size_prefix", "partition_error", "rewrite_response", "slow_read", "split_frames",
    "wrong_correlation_id",
]
