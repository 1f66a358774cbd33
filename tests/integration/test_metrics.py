"""The Java producer's metrics (Producer.java_metrics) after a known workload on Apache Kafka:
consistent with what was sent, and close to the Java producer's own for the same workload."""
from __future__ import annotations

import json
import re
import time

import pytest

from brokers import unique_name
from fastkafka import Producer

N, SIZE, BATCH = 20_000, 100, 16_384
PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"


def _workload(kafka_broker, topic: str) -> tuple[dict, dict, float]:
    """N records of SIZE bytes (no key) in batches filled to BATCH bytes (linger long enough
    that none leaves by time but the last): java_metrics(), metrics(), and the seconds taken."""
    value = b"A" * SIZE
    t0 = time.monotonic()
    with Producer(bootstrap_servers=kafka_broker.bootstrap, acks="all", linger_ms=1000,
                  batch_size=BATCH) as p:
        futures = [p.send(topic, value) for _ in range(N)]
        p.flush()
        assert all(f.get(timeout=30).offset >= 0 for f in futures[-1:])
        return p.java_metrics(), p.metrics(), time.monotonic() - t0


@pytest.fixture(scope="module")
def workload(kafka_broker):
    topic = unique_name("jm")
    kafka_broker.create_topic(topic, 1)
    jm, counters, took = _workload(kafka_broker, topic)
    return topic, jm, counters, took


def test_java_named_values_match_the_workload(kafka_broker, workload):
    topic, jm, c, took = workload
    json.dumps(jm, allow_nan=False)
    g = jm["producer-metrics"]
    assert g["record-send-total"] == N == c["records_sent"]
    assert g["record-error-total"] == 0 and g["record-retry-total"] == 0
    # one batch per request (one partition): records per request == records per batch
    assert g["records-per-request-avg"] == pytest.approx(N / c["produce_requests"])
    t = jm["producer-topic-metrics"][topic]
    assert t["record-send-total"] == N
    assert g["batch-size-avg"] == pytest.approx(t["byte-total"] / c["batches_sent"])
    assert SIZE < g["batch-size-avg"] <= g["batch-size-max"] <= BATCH
    assert t["compression-rate"] == pytest.approx(1.0)          # no compression
    # every record is SIZE bytes of value plus a few bytes of framing
    assert SIZE < g["record-size-avg"] <= g["record-size-max"] < SIZE + 16
    # the whole run is in the first window: the rate is N over (its span + one window of 30 s)
    assert N / (took + 31) <= g["record-send-rate"] <= N / 30
    assert 0 <= g["request-latency-avg"] <= g["request-latency-max"] < 30_000
    assert g["record-queue-time-max"] >= g["record-queue-time-avg"] >= 0
    assert g["produce-throttle-time-max"] == 0
    assert g["connection-creation-total"] >= 1 and g["connection-count"] >= 1
    assert 0 <= g["io-wait-ratio"] <= 1
    assert g["metadata-age"] >= 0
    leader = kafka_broker.leader_of(topic, 0)
    node = jm["producer-node-metrics"][f"node-{leader}"]
    assert node["request-total"] >= c["produce_requests"]
    assert node["outgoing-byte-total"] >= t["byte-total"]
    assert node["request-latency-avg"] is not None and node["request-rate"] > 0


def _java_metrics_of_perf_tool(kafka_broker, topic: str) -> dict:
    out = kafka_broker.run_tool(
        PERF_MAIN, "--topic", topic, "--num-records", str(N), "--record-size", str(SIZE),
        "--throughput", "-1", "--print-metrics", "--producer-props",
        f"bootstrap.servers={kafka_broker.bootstrap}", "acks=all", "linger.ms=1000",
        f"batch.size={BATCH}", timeout=180)
    found = {}
    for m in re.finditer(r"^producer-metrics:([\w-]+):\{client-id=[^}]*\}\s*:\s*(\S+)$", out, re.M):
        found[m.group(1)] = float(m.group(2))
    assert "batch-size-avg" in found, out[-3000:]
    return found


def test_close_to_the_java_producer_for_the_same_workload(kafka_broker, workload):
    """The same records, batch size, linger and acks through Kafka's ProducerPerformance on a
    fresh topic. Both clients fill batches to batch.size with records of the same encoded size,
    so batch-size-avg and records-per-request-avg differ only through the last (partial) batch
    and where a batch's record count lands on the byte limit: within 3 % (one partial batch of
    ~140 is 0.7 %)."""
    _, jm, _, _ = workload
    topic = unique_name("jmj")
    kafka_broker.create_topic(topic, 1)
    java = _java_metrics_of_perf_tool(kafka_broker, topic)
    ours = jm["producer-metrics"]
    for name in ("batch-size-avg", "records-per-request-avg"):
        assert ours[name] == pytest.approx(java[name], rel=0.03), (name, ours[name], java[name])
    assert java["record-send-total"] == ours["record-send-total"] == N
