"""A leader move while the old leader still holds batches it wrote but has not answered for.

Seen on a 3-node Apache Kafka 4.4 cluster (tests/kafka/test_failover.py, a reassignment and a preferred
election): the old leader had written a batch and replicated it, but answered NOT_LEADER_OR_FOLLOWER
because leadership moved while the batch waited for acks=all. Meanwhile the producer had learnt the new
leader and sent it later batches of the partition; the new leader took them (the batch before them was
in its log). By the time the batch was retried, more than the five batches a broker remembers per
producer had followed it: it was neither a recognisable duplicate nor the next sequence, and the
broker answered OUT_OF_ORDER_SEQUENCE_NUMBER on every retry until the producer closed.

The producer now keeps an idempotent partition's batches in flight to one node at a time, so the
retry reaches the new leader before anything later and is recognised as a duplicate. The fault broker
plays the old leader: it appends every batch it gets, answers NOT_LEADER_OR_FOLLOWER a second later,
and the test moves the leader as soon as the first such batch is written.
"""
from __future__ import annotations

import time

import pytest

from faultbroker import Cluster, FaultBroker, delay, partition_error
from fastkafka import Producer
from fastkafka.protocol import ApiKey
from test_producer_faultbroker import assert_exactly_once

pytestmark = pytest.mark.faultbroker

NOT_LEADER_OR_FOLLOWER = 6


def test_batches_written_by_the_old_leader_are_not_overtaken(no_leaks):
    cluster = Cluster()
    with FaultBroker(cluster) as old, FaultBroker(cluster) as new:
        cluster.create_topic("t", 1)
        cluster.set_leader("t", 0, old.node_id)
        with Producer(bootstrap_servers=old.bootstrap, linger_ms=0, batch_size=256,
                      retry_backoff_ms=20, metadata_max_age_ms=100, request_timeout_ms=5000,
                      delivery_timeout_ms=12000) as p:
            futs = [(b"a-%03d" % i, p.send("t", b"a-%03d" % i)) for i in range(20)]
            for _, f in futs:
                f.get(10)
            # From now on the old leader writes what it gets (also once the leader has moved: it has
            # not learnt it yet) and answers NOT_LEADER a second later.
            written_late = old.script.on(ApiKey.PRODUCE, partition_error(
                NOT_LEADER_OR_FOLLOWER, append="as_leader"), times=None)
            old.script.on(ApiKey.PRODUCE, delay(1.0), times=None)
            moved = False
            for i in range(300):
                v = b"v-%05d" % i
                futs.append((v, p.send("t", v)))
                if not moved and written_late.fired:
                    cluster.set_leader("t", 0, new.node_id)   # what the producer learns next
                    moved = True
                time.sleep(0.005)
            assert moved, "no Produce request reached the old leader after the rule was armed"
            assert_exactly_once(cluster, "t", 1, futs, timeout=20)
            m = p.metrics()
            assert m["epoch_bumps"] == 0 and m["errors"] == 0, m
        # The new leader got only the old leader's batches again and what followed them: it
        # appended at least one batch, and the old one wrote the rest.
        nodes = [sb.node_id for sb in cluster.batches("t", 0)]
        assert new.node_id in nodes and old.node_id in nodes
