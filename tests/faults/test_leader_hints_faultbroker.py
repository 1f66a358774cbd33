"""Leader hints (KIP-951) against the in-process fault broker.

Since Kafka 3.7 a Produce answer (v10+) that refuses a partition with NOT_LEADER_OR_FOLLOWER names
the partition's current leader and leader epoch (CurrentLeader) and, in NodeEndpoints, the address
of a leader the client may not know. The producer moves the partition's leader at once and retries
there without waiting for a Metadata answer. Here every Metadata answer after the move is held back
for several seconds (or tells of the old leader): the records still reach the new leader at once,
exactly once and in order, and ``metrics()["leader_hints_applied"]`` counts the hints taken.
"""
from __future__ import annotations

import time

import pytest

from faultbroker import Cluster, FaultBroker, delay, rewrite_response
from fastkafka import Producer
from fastkafka.protocol import ApiKey
from test_producer_faultbroker import assert_exactly_once

pytestmark = pytest.mark.faultbroker

NOT_LEADER_OR_FOLLOWER = 6
METADATA_HELD_S = 4.0      # how long Metadata answers are held back after a move
SETTINGS = dict(linger_ms=1, batch_size=512, retry_backoff_ms=100, request_timeout_ms=8000,
                delivery_timeout_ms=20000, metadata_max_age_ms=60_000, enable_idempotence=True)


def _send(p, prefix: bytes, n: int, futs: list) -> list:
    new = [(b"%s-%04d" % (prefix, i), None) for i in range(n)]
    new = [(v, p.send("t", v, partition=0)) for v, _ in new]
    futs.extend(new)
    return new


def _wait(futs, timeout: float) -> float:
    """Seconds until every future in ``futs`` succeeded."""
    t0 = time.monotonic()
    for _, f in futs:
        f.get(timeout)
    return time.monotonic() - t0


def _nodes_written(cluster, since: int = 0) -> list:
    return [sb.node_id for sb in cluster.batches("t", 0)[since:]]


def test_a_hint_moves_the_leader_without_waiting_for_metadata(no_leaks):
    cluster = Cluster()
    with FaultBroker(cluster) as old, FaultBroker(cluster) as new:
        cluster.create_topic("t", 1)
        cluster.set_leader("t", 0, old.node_id)
        with Producer(bootstrap_servers=old.bootstrap, **SETTINGS) as p:
            futs = []
            _wait(_send(p, b"a", 20, futs), 10)
            before = len(cluster.batches("t", 0))
            # From now on Metadata answers come METADATA_HELD_S late: only the hint can move it.
            for b in (old, new):
                b.script.on(ApiKey.METADATA, delay(METADATA_HELD_S), times=None)
            cluster.set_leader("t", 0, new.node_id)
            took = _wait(_send(p, b"b", 100, futs), 10)
            assert took < METADATA_HELD_S / 2, f"records waited {took:.2f} s for the leader move"
            assert_exactly_once(cluster, "t", 1, futs)
            assert set(_nodes_written(cluster, before)) == {new.node_id}
            m = p.metrics()
            assert m["leader_hints_applied"] >= 1, m
            assert m["errors"] == 0 and m["epoch_bumps"] == 0, m
            # the refusals the hint answered were NOT_LEADER_OR_FOLLOWER from the old leader
            refused = [r for r in old.received(ApiKey.PRODUCE)
                       if r.response and any(pr["error_code"] == NOT_LEADER_OR_FOLLOWER
                                             for t in r.response["responses"]
                                             for pr in t["partition_responses"])]
            assert refused
            for b in (old, new):
                b.script.clear()


def test_a_hint_of_an_older_or_equal_epoch_is_ignored(no_leaks):
    cluster = Cluster()
    with FaultBroker(cluster) as old, FaultBroker(cluster) as new:
        cluster.create_topic("t", 1)
        cluster.set_leader("t", 0, new.node_id)     # epoch 1: the producer learns it from metadata
        stale = {"n": 0}

        def stale_hint(resp, header, body):
            # the new leader refuses once, naming the old leader with the old epoch (0)
            stale["n"] += 1
            parts = [{**pr, "error_code": NOT_LEADER_OR_FOLLOWER, "base_offset": -1,
                      "current_leader": {"leader_id": old.node_id, "leader_epoch": 0}}
                     for pr in resp["responses"][0]["partition_responses"]]
            return {**resp, "responses": [{**resp["responses"][0], "partition_responses": parts}]}

        with Producer(bootstrap_servers=old.bootstrap, **SETTINGS) as p:
            futs = []
            _wait(_send(p, b"a", 5, futs), 10)
            # (the fault broker's append happens before the rewrite: the refused batch is stored
            # and its retry is recognised as a duplicate, as after a lost answer)
            new.script.on(ApiKey.PRODUCE, rewrite_response(stale_hint), times=1)
            _wait(_send(p, b"b", 20, futs), 10)
            assert stale["n"] == 1
            assert_exactly_once(cluster, "t", 1, futs)
            assert set(_nodes_written(cluster)) == {new.node_id}
            assert old.received(ApiKey.PRODUCE) == [], "a stale hint sent records to the old leader"
            m = p.metrics()
            assert m["leader_hints_applied"] == 0 and m["leader_hints_ignored"] == 1, m
            assert p._metadata.cluster.leader_for("t", 0) == new.node_id


def test_a_hint_naming_a_node_only_the_endpoints_know(no_leaks):
    """The new leader is a broker no Metadata answer lists (and they still name the old leader
    with the old epoch): its address comes from the answer's NodeEndpoints; the stale Metadata
    answers that follow do not move the partition back."""
    cluster = Cluster()
    with FaultBroker(cluster) as old, FaultBroker(cluster) as far:
        cluster.create_topic("t", 1)
        cluster.set_leader("t", 0, old.node_id)
        old_epoch = cluster.leader_epochs[("t", 0)]

        def without_far(resp, header, body):
            brokers = [b for b in resp["brokers"] if b["node_id"] != far.node_id]
            topics = [{**t, "partitions": [
                {**pt, "leader_id": old.node_id, "leader_epoch": old_epoch, "replica_nodes": [old.node_id],
                 "isr_nodes": [old.node_id]} if pt["leader_id"] == far.node_id else pt
                for pt in t["partitions"]]} for t in resp["topics"]]
            return {**resp, "brokers": brokers, "topics": topics}

        def with_endpoints(resp, header, body):
            return {**resp, "node_endpoints": [
                {"node_id": far.node_id, "host": far.host, "port": far.port, "rack": None}]}

        for b in (old, far):
            b.script.on(ApiKey.METADATA, rewrite_response(without_far), times=None)
        old.script.on(ApiKey.PRODUCE, rewrite_response(with_endpoints), times=None)
        with Producer(bootstrap_servers=old.bootstrap, **{**SETTINGS, "metadata_max_age_ms": 200}) as p:
            futs = []
            _wait(_send(p, b"a", 10, futs), 10)
            assert far.node_id not in p._metadata.cluster.brokers
            before = len(cluster.batches("t", 0))
            cluster.set_leader("t", 0, far.node_id)
            _wait(_send(p, b"b", 50, futs), 10)
            time.sleep(0.5)    # stale Metadata answers (max age 200 ms) arrive meanwhile
            _wait(_send(p, b"c", 50, futs), 10)
            assert_exactly_once(cluster, "t", 1, futs)
            assert set(_nodes_written(cluster, before)) == {far.node_id}
            view = p._metadata.cluster
            assert view.leader_for("t", 0) == far.node_id
            assert view.leader_epoch("t", 0) == old_epoch + 1
            m = p.metrics()
            assert m["leader_hints_applied"] >= 1 and m["errors"] == 0, m
            for b in (old, far):
                b.script.clear()
