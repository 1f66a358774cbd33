"""Metadata answers are validated before use; repeated requests back off exponentially."""
from __future__ import annotations

import pytest

from fastkafka._net.backoff import Backoff
from fastkafka._net.cluster import Metadata, broker_address_problem, cluster_from_response
from fastkafka.errors import InvalidBrokerResponseError, error_for_code


def _body(brokers, partitions):
    return {"brokers": [{"node_id": n, "host": h, "port": p} for n, h, p in brokers],
            "controller_id": 1,
            "topics": [{"name": "t", "error_code": 0, "partitions": [
                {"error_code": 0, "partition_index": i, "leader_id": leader, "leader_epoch": 0,
                 "replica_nodes": [leader], "isr_nodes": [leader]} for i, leader in partitions]}]}


def test_valid_answer_is_kept_as_it_is():
    problems = []
    c = cluster_from_response(_body([(1, "a", 9092), (2, "b", 9093)], [(0, 1), (1, 2)]), problems)
    assert problems == []
    assert sorted(c.brokers) == [1, 2] and c.partition_count("t") == 2
    assert c.leader_for("t", 1) == 2 and c.available_partitions("t") == [0, 1]


@pytest.mark.parametrize("indexes", [[2**31 - 1], [0, 2], [1], [0, 0], [-1, 0]])
def test_partition_numbers_must_be_dense(indexes):
    problems = []
    c = cluster_from_response(_body([(1, "a", 9092)], [(i, 1) for i in indexes]), problems)
    assert c.partition_count("t") == 0
    assert len(problems) == 1 and "not 0.." in problems[0]
    err = error_for_code(c.topic_error("t"), c.topics["t"].error_message)
    assert isinstance(err, InvalidBrokerResponseError) and err.retriable
    assert str(indexes[-1]) in str(err)


def test_leader_not_among_the_brokers_counts_as_no_leader():
    c = cluster_from_response(_body([(1, "a", 9092)], [(0, 1), (1, 7)]))
    assert c.leader_for("t", 0) == 1 and c.leader_for("t", 1) == -1
    assert c.available_partitions("t") == [0]


@pytest.mark.parametrize("host,port,why", [
    ("h" * 64 + ".example", 9092, "64 characters"),
    ("", 9092, "no host"),
    ("a..b", 9092, "empty label"),
    ("a" * 254, 9092, "254 characters"),
    ("ok", 0, "outside 1..65535"),
    ("ok", 70000, "outside 1..65535"),
    ("::zz", 9092, "IPv6"),
])
def test_unusable_broker_addresses_are_left_out(host, port, why):
    assert why in broker_address_problem(host, port)
    problems = []
    c = cluster_from_response(_body([(1, host, port), (2, "good", 9092)], [(0, 1), (1, 2)]), problems)
    assert list(c.brokers) == [2]
    assert c.leader_for("t", 0) == -1 and c.leader_for("t", 1) == 2
    assert why in problems[0]


@pytest.mark.parametrize("host", ["localhost", "kafka-1.internal.example.com", "127.0.0.1", "::1",
                                  "bücher.example"])
def test_usable_addresses(host):
    assert broker_address_problem(host, 9092) is None


def test_repeated_node_id_is_left_out():
    problems = []
    c = cluster_from_response(_body([(1, "a", 9092), (1, "b", 9093)], [(0, 1)]), problems)
    assert c.broker(1).host == "a" and "listed twice" in problems[0]


def test_backoff_grows_to_the_cap_with_jitter_and_resets():
    b = Backoff(100, 1000, rand=lambda: 0.5)          # no jitter at the midpoint
    assert [b.failed() for _ in range(6)] == [100, 200, 400, 800, 1000, 1000]
    b.succeeded()
    assert b.delay_ms() == 0 and b.failed() == 100
    low, high = Backoff(100, 1000, rand=lambda: 0.0), Backoff(100, 1000, rand=lambda: 1.0)
    assert (low.failed(), high.failed()) == (80, 120)
    assert Backoff(0, 1000).failed() == 0


def test_refresh_due_readable_from_c_follows_every_change():
    """The network client reads Metadata.refresh_due.at_ms every turn instead of calling
    time_to_next_update(): asked for, answered, failed, rebootstrapped and aged, it says the same."""
    m = Metadata([("h", 1)], metadata_max_age_ms=5000, refresh_backoff_ms=100)
    m.backoff._rand = lambda: 0.5
    assert m.time_to_next_update(0) == 100 and m.refresh_due.at_ms == 100   # first: asked for
    m.update(cluster_from_response(_body([(1, "a", 9092)], [])), 1000)
    assert m.refresh_due.at_ms == 6000                  # answered: due when it is 5000 ms old
    assert m.time_to_next_update(5999) == 1 and m.time_to_next_update(7000) == 0
    m.request_update()
    assert m.refresh_due.at_ms == 1100                  # asked for: after the backoff only
    m.failed_update(2000, InvalidBrokerResponseError("x"))
    assert m.refresh_due.at_ms == 2100                  # failed: backoff from the attempt
    m.update(cluster_from_response(_body([(1, "a", 9092)], [])), 3000)
    assert m.add_topic("t") and m.refresh_due.at_ms == 3000   # a new topic: at once, no backoff
    m.rebootstrap()
    assert m.time_to_next_update(3000) == 0


def test_a_new_topic_is_asked_for_at_once_and_one_still_missing_backs_off():
    # Each first send to a topic waits for its metadata: with the backoff between refreshes, 100
    # new topics took 100 x 100 ms. A topic not yet asked for is due at once; one that was asked
    # for and is still missing (being created) backs off exponentially.
    m = Metadata([("h", 1)], refresh_backoff_ms=100, refresh_backoff_max_ms=1000)
    m.backoff._rand = lambda: 0.5
    m.update(cluster_from_response(_body([(1, "a", 9092)], [])), 1000)
    assert m.add_topic("a") and m.time_to_next_update(1001) == 0
    assert m.request_topics() == ["a"]                 # the request being built asks for "a"
    assert m.add_topic("b")                            # tracked while that request is under way
    m.update(cluster_from_response(_body([(1, "a", 9092)], [])), 1002)    # neither known yet
    assert m.backoff.failures == 1                     # "a" was asked for: it backs off...
    assert m.time_to_next_update(1002) == 0            # ...but "b" was not: asked for at once
    assert sorted(m.request_topics()) == ["a", "b"]
    m.update(cluster_from_response(_body([(1, "a", 9092)], [])), 1003)
    assert m.backoff.failures == 2 and m.time_to_next_update(1003) == 200   # both asked, missing
    m.failed_update(1004, InvalidBrokerResponseError("x"))
    assert m.add_topic("c") and m.time_to_next_update(1004) > 0   # failing: the backoff holds


def test_metadata_refresh_backs_off_while_failing():
    m = Metadata([("h", 1)], refresh_backoff_ms=100, refresh_backoff_max_ms=1000)
    m.backoff._rand = lambda: 0.5
    gaps = []
    now = 0
    for _ in range(6):
        m.failed_update(now, InvalidBrokerResponseError("x"))
        gaps.append(m.time_to_next_update(now))
    assert gaps == [100, 200, 400, 800, 1000, 1000]
    m.update(cluster_from_response(_body([(1, "a", 9092)], [(0, 1)])), now)
    m.request_update()                                 # a success resets the gap to the base
    assert m.time_to_next_update(now) == 100
