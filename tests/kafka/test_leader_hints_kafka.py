"""Leader hints (KIP-951) on a 3-node Apache Kafka cluster while an idempotent producer streams.

Apache Kafka (3.7+) answers a Produce request (v10+) for a partition it no longer leads with
NOT_LEADER_OR_FOLLOWER and the partition's current leader and leader epoch (CurrentLeader), plus the
leader's address (NodeEndpoints). The producer moves the partition's leader at once and retries
there without waiting for a Metadata answer. Leaders are moved twice while the paced stream of
tests/kafka/test_failover.py runs (about 2,000 keyed records a second into 6 partitions):

1. by a preferred leader election: the replica order is changed (AlterPartitionReassignments, no
   data moves) so that the leader is the last replica, and ElectLeaders (PREFERRED) makes the new
   first replica the leader;
2. by reassignment: each partition's replicas become the two nodes other than its new leader, so
   the controller must move the leadership again.

Both go through kafka-python's admin client. Each move must be answered by leader hints (``metrics()["leader_hints_applied"]`` grows with each),
and the topic, read back by confluent-kafka's consumer, must hold every record exactly once, in send
order per partition, at the offsets the futures reported (test_failover's ``_verify``).
"""
from __future__ import annotations

import json
import time

import pytest

from kafka import TopicPartition
from kafka.admin import KafkaAdminClient

from test_failover import NPART, PacedStream, _verify, _wait_full_isr
from brokers import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

MOVE_TIMEOUT = 60.0


def _reassign(admin, topic: str, target: dict) -> None:
    """AlterPartitionReassignments (kafka-python's admin client: a request, where Kafka's
    command-line tool starts a JVM, 10-20 s on a busy 2-core machine)."""
    errors = admin.alter_partition_reassignments(
        {TopicPartition(topic, p): r for p, r in target.items()}, timeout_ms=30_000)
    assert not [e for e in errors.values() if e is not None], errors


def _wait_for(kc, topic: str, done, what: str) -> dict:
    deadline = time.monotonic() + MOVE_TIMEOUT
    while True:
        now = {p.partition: p for p in kc.partitions(topic)}
        if done(now):
            return now
        assert time.monotonic() < deadline, f"{what} not done within {MOVE_TIMEOUT}s: {now}"
        time.sleep(0.1)


def test_leader_hints_on_reassignment_and_preferred_election(kafka_cluster3):
    kc = kafka_cluster3
    _wait_full_isr(kc)
    topic = unique_name("hints")
    kc.create_topic(topic, NPART)
    admin = KafkaAdminClient(bootstrap_servers=kc.bootstrap)
    s = PacedStream(kc.bootstrap, topic, keyed=True).start()
    try:
        s.wait_flowing()
        # the producer speaks Produce v10+ with every node (the versions that carry the hints)
        versions = {c.node_id: c.version_for(0) for c in s.producer._client.connections.values()
                    if c.node_id >= 0 and c.versions}
        assert versions and min(versions.values()) >= 10, versions
        before = {p.partition: p for p in kc.partitions(topic)}

        # 1. the current leaders last in the replica order (a reassignment that moves no data),
        #    then a preferred leader election: each partition's second replica becomes the leader
        order = {p: [r for r in info.replicas if r != info.leader] + [info.leader]
                 for p, info in before.items()}
        s.event(f"reassign (replica order): {order}")
        _reassign(admin, topic, order)
        _wait_for(kc, topic, lambda now: all(list(now[p].replicas) == order[p] for p in order),
                  "the replica-order reassignment")
        s.event("preferred leader election")
        admin.elect_leaders(0, {topic: sorted(order)}, timeout_ms=30_000)   # 0: PREFERRED
        now = _wait_for(kc, topic, lambda now: all(now[p].leader == order[p][0] for p in order),
                        "the preferred election")
        s.event(f"leaders now {[now[p].leader for p in sorted(now)]}")
        s.wait_flowing()
        after_election = s.producer.metrics()["leader_hints_applied"]
        s.event(f"leader hints applied: {after_election}")

        # 2. a reassignment without the leaders elected in 1: the controller has to move them
        away = {p: order[p][1:] for p in order}
        s.event(f"reassign without the leaders: {away}")
        _reassign(admin, topic, away)
        now = _wait_for(kc, topic, lambda now: all(list(now[p].replicas) == away[p]
                                                   and now[p].leader in away[p] for p in away),
                        "the reassignment away from the leaders")
        s.event(f"leaders now {[now[p].leader for p in sorted(now)]}")
        s.wait_flowing()
        s.stop_and_close()
        numbers = _verify(kc, s, "leader-hints")
        m = s.producer.metrics()
        print(f"\nLEADER HINTS: applied after the election {after_election}, in all "
              f"{m['leader_hints_applied']} (ignored {m['leader_hints_ignored']}), retries "
              f"{m['retries']}, longest stall {numbers['longest_stall_s']} s", flush=True)
        assert after_election >= 1, "no leader hint taken when the election moved the leaders"
        assert m["leader_hints_applied"] > after_election, "no leader hint taken in the reassignment"
        assert m["errors"] == 0, m
    finally:
        s.abandon()
        admin.close()
