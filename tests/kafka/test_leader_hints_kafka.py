"""Leader hints (KIP-951) on a 3-node Apache Kafka cluster while an idempotent producer streams.

Apache Kafka (3.7+) answers a Produce request (v10+) for a partition it no longer leads with
NOT_LEADER_OR_FOLLOWER and the partition's current leader and leader epoch (CurrentLeader), plus the
leader's address (NodeEndpoints). The producer moves the partition's leader at once and retries
there without waiting for a Metadata answer. Leaders are moved twice while the paced stream of
tests/kafka/test_failover.py runs (about 2,000 keyed records a second into 6 partitions):

1. by reassignment: each partition's replicas become the two nodes other than its leader, so the
   controller must move the leadership;
2. by a preferred leader election: the replicas are reassigned back with the first leader first,
   and LeaderElectionCommand makes it the leader again.

Each move must be answered by leader hints (``metrics()["leader_hints_applied"]`` grows with each),
and the topic, read back by confluent-kafka's consumer, must hold every record exactly once, in send
order per partition, at the offsets the futures reported (test_failover's ``_verify``).
"""
from __future__ import annotations

import json
import time

import pytest

from test_failover import NPART, REASSIGN, PacedStream, _run_election, _verify, _wait_full_isr
from brokers import unique_name

pytestmark = [pytest.mark.broker, pytest.mark.timeout(240)]

MOVE_TIMEOUT = 60.0


def _reassign(kc, topic: str, target: dict, path) -> None:
    path.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": topic, "partition": p, "replicas": r} for p, r in sorted(target.items())]}))
    kc.run_tool(REASSIGN, "--bootstrap-server", kc.bootstrap, "--reassignment-json-file", str(path),
                "--execute")


def _wait_for(kc, topic: str, done, what: str) -> dict:
    deadline = time.monotonic() + MOVE_TIMEOUT
    while True:
        now = {p.partition: p for p in kc.partitions(topic)}
        if done(now):
            return now
        assert time.monotonic() < deadline, f"{what} not done within {MOVE_TIMEOUT}s: {now}"
        time.sleep(0.1)


def test_leader_hints_on_reassignment_and_preferred_election(kafka_cluster3, tmp_path):
    kc = kafka_cluster3
    _wait_full_isr(kc)
    topic = unique_name("hints")
    kc.create_topic(topic, NPART)
    s = PacedStream(kc.bootstrap, topic, keyed=True).start()
    try:
        s.wait_flowing()
        # the producer speaks Produce v10+ with every node (the versions that carry the hints)
        versions = {c.node_id: c.version_for(0) for c in s.producer._client.connections.values()
                    if c.node_id >= 0 and c.versions}
        assert versions and min(versions.values()) >= 10, versions
        before = {p.partition: p for p in kc.partitions(topic)}
        first = {p: info.leader for p, info in before.items()}

        # 1. reassignment away from each leader: the leadership has to move
        others = {p: [r for r in info.replicas if r != info.leader] for p, info in before.items()}
        s.event(f"reassign without the leaders: {others}")
        _reassign(kc, topic, others, tmp_path / "away.json")
        now = _wait_for(kc, topic, lambda now: all(list(now[p].replicas) == others[p]
                                                   and now[p].leader in others[p] for p in others),
                        "the reassignment away from the leaders")
        s.event(f"leaders now {[now[p].leader for p in sorted(now)]}")
        s.wait_flowing()
        after_reassign = s.producer.metrics()["leader_hints_applied"]
        s.event(f"leader hints applied: {after_reassign}")

        # 2. the first leaders back as preferred replicas, then a preferred leader election
        back = {p: [first[p]] + others[p] for p in first}
        s.event(f"reassign back: {back}")
        _reassign(kc, topic, back, tmp_path / "back.json")
        _wait_for(kc, topic, lambda now: all(list(now[p].replicas) == back[p] for p in back),
                  "the reassignment back")
        _wait_full_isr(kc, topics={topic})
        s.event("preferred leader election")
        out = _run_election(kc)
        now = _wait_for(kc, topic, lambda now: all(now[p].leader == first[p] for p in first),
                        f"the preferred election ({out[-500:]})")
        s.event(f"leaders back: {[now[p].leader for p in sorted(now)]}")
        s.wait_flowing()
        s.stop_and_close()
        numbers = _verify(kc, s, "leader-hints")
        m = s.producer.metrics()
        print(f"\nLEADER HINTS: applied after the reassignment {after_reassign}, in all "
              f"{m['leader_hints_applied']} (ignored {m['leader_hints_ignored']}), retries "
              f"{m['retries']}, longest stall {numbers['longest_stall_s']} s", flush=True)
        assert after_reassign >= 1, "no leader hint taken when the reassignment moved the leaders"
        assert m["leader_hints_applied"] > after_reassign, "no leader hint taken in the election"
        assert m["errors"] == 0, m
    finally:
        s.abandon()
