"""Leader hints (KIP-951) in the cluster view: Metadata.apply_leader_hints and the epoch check of
Metadata.update (a partition's leader never moves backwards by leader epoch)."""
from __future__ import annotations

from fastkafka._net.cluster import BrokerInfo, Cluster, Metadata, PartitionInfo, TopicInfo


def _cluster(leaders, epochs, brokers=(1, 2, 3)):
    parts = tuple(PartitionInfo("t", i, leader, epoch, (leader,), (leader,))
                  for i, (leader, epoch) in enumerate(zip(leaders, epochs)))
    return Cluster([BrokerInfo(n, "127.0.0.1", 9000 + n) for n in brokers],
                   [TopicInfo("t", 0, parts), TopicInfo("u", 0, (PartitionInfo("u", 0, 1, 3),))])


def _metadata(cluster):
    md = Metadata([("127.0.0.1", 9001)], refresh_backoff_ms=100)
    md.update(cluster, 1_000)
    md.request_topics()
    return md


def test_a_newer_epoch_moves_the_leader_at_once_and_asks_for_a_refresh():
    md = _metadata(_cluster([1, 2], [5, 5]))
    version = md.version
    before = md.cluster
    assert md.time_to_next_update(1_000) > 0      # nothing asked for yet
    taken = md.apply_leader_hints({("t", 0): (3, 6)})
    assert taken == [("t", 0)]
    c = md.cluster
    assert (c.leader_for("t", 0), c.leader_epoch("t", 0)) == (3, 6)
    assert c.leader_for("t", 1) == 2 and c.leader_for("u", 0) == 1   # the others unchanged
    assert c.topics["u"] is before.topics["u"]                        # shared, not rebuilt
    assert c.available_partitions("t") == [0, 1]
    assert md.version == version                   # send() waits on nothing new
    assert md.need_update and md.time_to_next_update(1_100) == 0


def test_an_older_or_equal_epoch_is_ignored():
    md = _metadata(_cluster([1, 2], [5, 5]))
    before = md.cluster
    assert md.apply_leader_hints({("t", 0): (3, 5), ("t", 1): (3, 4)}) == []
    assert md.cluster is before
    # nor a partition or topic the view does not have, nor a leader with no known address
    assert md.apply_leader_hints({("t", 7): (3, 9), ("x", 0): (3, 9), ("t", 0): (9, 9)}) == []
    assert md.cluster is before


def test_an_unknown_leader_comes_with_its_endpoint():
    md = _metadata(_cluster([1, 2], [5, 5]))
    endpoints = [(4, "127.0.0.1", 9004, "rack-b"), (5, "", 0, None)]
    assert md.apply_leader_hints({("t", 1): (4, 6), ("t", 0): (5, 6)}, endpoints) == [("t", 1)]
    c = md.cluster
    assert c.leader_for("t", 1) == 4
    assert c.broker(4) == BrokerInfo(4, "127.0.0.1", 9004, "rack-b")
    assert c.broker(5) is None and c.leader_for("t", 0) == 1   # an unusable address: ignored


def test_metadata_older_than_a_hint_does_not_move_the_leader_back():
    md = _metadata(_cluster([1, 2], [5, 5]))
    md.apply_leader_hints({("t", 0): (4, 6)}, [(4, "127.0.0.1", 9004, None)])
    # a broker that has not learnt of the move: leader 1 at epoch 5, and no node 4
    md.update(_cluster([1, 2], [5, 5]), 2_000)
    c = md.cluster
    assert (c.leader_for("t", 0), c.leader_epoch("t", 0)) == (4, 6)
    assert c.broker(4) is not None
    # a newer answer wins, including for the other partitions
    md.update(_cluster([2, 3], [7, 6]), 3_000)
    c = md.cluster
    assert (c.leader_for("t", 0), c.leader_epoch("t", 0)) == (2, 7)
    assert (c.leader_for("t", 1), c.leader_epoch("t", 1)) == (3, 6)
    # an answer at the same epoch stands as it is
    md.update(_cluster([3, 3], [7, 6]), 4_000)
    assert md.cluster.leader_for("t", 0) == 3


def test_metadata_never_moves_a_leader_back_by_epoch():
    md = _metadata(_cluster([1, 2], [5, 5]))
    md.update(_cluster([2, 1], [4, 6]), 2_000)
    c = md.cluster
    assert (c.leader_for("t", 0), c.leader_epoch("t", 0)) == (1, 5)   # epoch 4 < 5: kept
    assert (c.leader_for("t", 1), c.leader_epoch("t", 1)) == (1, 6)
    # epochs unknown (-1: an old Metadata version) are taken as they come
    md.update(_cluster([3, 3], [-1, -1]), 3_000)
    assert md.cluster.leader_for("t", 0) == 3
