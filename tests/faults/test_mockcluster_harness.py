"""The ctypes wrapper around librdkafka's mock cluster works, proven with confluent-kafka as client."""
from __future__ import annotations

import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient

from mockcluster import ApiKeys, MockCluster, MockClusterError

pytestmark = pytest.mark.mock

NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10


def leaders(bootstrap: str, topic: str) -> dict[int, int]:
    md = AdminClient({"bootstrap.servers": bootstrap}).list_topics(topic=topic, timeout=10)
    return {p.id: p.leader for p in md.topics[topic].partitions.values()}


def producer(bootstrap: str, **extra) -> Producer:
    conf = {"bootstrap.servers": bootstrap, "linger.ms": 0, "retry.backoff.ms": 20,
            "enable.idempotence": False, "log_level": 0}
    conf.update(extra)
    return Producer(conf)


def produce_one(p: Producer, topic: str, partition: int, value: bytes, timeout: float = 15.0):
    """Produce one record and return (error, partition, offset) from its delivery report."""
    reports = []
    p.produce(topic, value, partition=partition,
              on_delivery=lambda err, msg: reports.append((err, msg.partition(), msg.offset())))
    assert p.flush(timeout) == 0, "delivery report did not arrive"
    assert len(reports) == 1
    return reports[0]


def consume_all(bootstrap: str, topic: str, partition: int, n: int, timeout: float = 15.0) -> list[bytes]:
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": f"g-{time.monotonic_ns()}",
                  "enable.auto.commit": False, "check.crcs": True, "log_level": 0})
    out = []
    try:
        c.assign([TopicPartition(topic, partition, OFFSET_BEGINNING)])
        deadline = time.monotonic() + timeout
        while len(out) < n and time.monotonic() < deadline:
            m = c.poll(0.2)
            if m is None:
                continue
            assert m.error() is None or m.error().code() == KafkaError._PARTITION_EOF, m.error()
            if m.error() is None:
                out.append(m.value())
    finally:
        c.close()
    return out


def produce_requests_by_broker(mc: MockCluster) -> dict[int, int]:
    counts: dict[int, int] = {}
    for broker_id, api_key, _ts in mc.requests():
        if api_key == ApiKeys.PRODUCE:
            counts[broker_id] = counts.get(broker_id, 0) + 1
    return counts


def test_three_brokers_and_round_robin_leaders(mock_cluster):
    boot = mock_cluster.bootstraps.split(",")
    assert len(boot) == 3 and all(b.startswith("127.0.0.1:") or b.startswith("localhost:") for b in boot)
    mock_cluster.create_topic("six", 6, 1)
    assert leaders(mock_cluster.bootstraps, "six") == {0: 1, 1: 2, 2: 3, 3: 1, 4: 2, 5: 3}


def test_produce_lands_and_follows_leader_move(mock_cluster):
    mock_cluster.create_topic("moving", 6, 1)
    p = producer(mock_cluster.bootstraps)
    for part in range(6):
        err, got_part, off = produce_one(p, "moving", part, b"before-%d" % part)
        assert err is None and got_part == part and off == 0
    assert produce_requests_by_broker(mock_cluster).keys() == {1, 2, 3}

    mock_cluster.clear_requests()
    mock_cluster.set_leader("moving", 0, 3)          # partition 0 was led by broker 1
    assert leaders(mock_cluster.bootstraps, "moving")[0] == 3
    err, _, off = produce_one(p, "moving", 0, b"after")
    assert err is None and off == 1
    # the record that landed was written to the new leader (broker 3 answered a Produce)
    assert produce_requests_by_broker(mock_cluster).get(3, 0) >= 1
    assert consume_all(mock_cluster.bootstraps, "moving", 0, 2) == [b"before-0", b"after"]


def test_pushed_retriable_errors_are_retried(mock_cluster):
    mock_cluster.create_topic("retry", 1, 1)
    p = producer(mock_cluster.bootstraps)
    assert produce_one(p, "retry", 0, b"warmup")[0] is None
    mock_cluster.clear_requests()
    mock_cluster.push_request_errors(ApiKeys.PRODUCE, [REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER,
                                                       REQUEST_TIMED_OUT])
    err, _, off = produce_one(p, "retry", 0, b"x")
    assert err is None and off == 1
    # three failed attempts, then the one that succeeded
    assert produce_requests_by_broker(mock_cluster) == {1: 4}
    assert consume_all(mock_cluster.bootstraps, "retry", 0, 2) == [b"warmup", b"x"]


def test_pushed_fatal_error_fails_delivery(mock_cluster):
    mock_cluster.create_topic("fatal", 1, 1)
    p = producer(mock_cluster.bootstraps)
    assert produce_one(p, "fatal", 0, b"warmup")[0] is None
    mock_cluster.push_request_errors(ApiKeys.PRODUCE, [MESSAGE_TOO_LARGE])
    err, _, _ = produce_one(p, "fatal", 0, b"y")
    assert err is not None and err.code() == MESSAGE_TOO_LARGE
    mock_cluster.clear_request_errors(ApiKeys.PRODUCE)
    assert produce_one(p, "fatal", 0, b"z")[0] is None


def test_broker_down_then_up(mock_cluster):
    mock_cluster.create_topic("updown", 3, 1)        # partition 0 led by broker 1
    p = producer(mock_cluster.bootstraps, **{"message.timeout.ms": 20000})
    assert produce_one(p, "updown", 0, b"a")[0] is None
    mock_cluster.broker_down(1)
    reports = []
    p.produce("updown", b"b", partition=0, on_delivery=lambda e, m: reports.append((e, m.offset())))
    assert p.flush(1.5) == 1 and reports == [], "delivered to a broker that is down"
    mock_cluster.broker_up(1)
    assert p.flush(15) == 0
    assert len(reports) == 1 and reports[0][0] is None and reports[0][1] == 1
    assert consume_all(mock_cluster.bootstraps, "updown", 0, 2) == [b"a", b"b"]


def test_rtt_delays_responses(mock_cluster):
    mock_cluster.create_topic("slow", 1, 1)
    p = producer(mock_cluster.bootstraps)
    assert produce_one(p, "slow", 0, b"warm")[0] is None
    mock_cluster.set_rtt(1, 400)
    t0 = time.monotonic()
    assert produce_one(p, "slow", 0, b"slow")[0] is None
    assert time.monotonic() - t0 >= 0.35
    mock_cluster.set_rtt(1, 0)


def test_context_manager_destroys():
    with MockCluster(2) as mc:
        assert len(mc.bootstraps.split(",")) == 2
    # using it after destroy() is the harness's own error, not a crash inside librdkafka
    with pytest.raises(MockClusterError, match="mock cluster destroyed"):
        mc.bootstraps
    with pytest.raises(MockClusterError, match="mock cluster destroyed"):
        mc.create_topic("late", 1)
    mc.destroy()                                     # a second destroy is harmless
