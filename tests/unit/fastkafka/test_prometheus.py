"""fastkafka.prometheus: producer.metrics() through prometheus_client's exposition
(generate_latest on a CollectorRegistry), counters and gauges, client_id and group labels."""
from __future__ import annotations

import gc
import subprocess
import sys
import types

import pytest


from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from prometheus_client.parser import text_string_to_metric_families  # noqa: E402

from fastkafka import Producer  # noqa: E402
from fastkafka.prometheus import ProducerCollector, register  # noqa: E402

pytestmark = pytest.mark.faultbroker


def scrape(registry):
    """{(family name, type): {(sample name, frozenset(labels)): value}}"""
    out = {}
    for fam in text_string_to_metric_families(generate_latest(registry).decode()):
        out[(fam.name, fam.type)] = {(s.name, frozenset(s.labels.items())): s.value
                                     for s in fam.samples}
    return out


def test_a_scrape_has_counters_and_gauges_labelled_with_client_id(fb):
    fb.create_topic("t", 1)
    registry = CollectorRegistry()
    with Producer(bootstrap_servers=fb.bootstrap, client_id="svc-a", linger_ms=2) as p:
        register(p, registry)
        for i in range(5):
            p.send("t", b"v%d" % i)
        p.flush(10)
        got = scrape(registry)
        m = p.metrics()
    label = frozenset({("client_id", "svc-a")})
    assert got[("fastkafka_producer_records_sent", "counter")] == {
        ("fastkafka_producer_records_sent_total", label): 5.0}
    sent = got[("fastkafka_producer_net_bytes_sent", "counter")][
        ("fastkafka_producer_net_bytes_sent_total", label)]
    assert 0 < sent <= m["net_bytes_sent"]
    assert got[("fastkafka_producer_buffer_total_bytes", "gauge")] == {
        ("fastkafka_producer_buffer_total_bytes", label): float(m["buffer_total_bytes"])}
    assert ("fastkafka_producer_records_queued", "gauge") in got
    # the counter already named ..._total keeps one _total
    assert ("fastkafka_producer_io_gil_wait_ms", "counter") in got
    assert not any("tls_data_path" in name for name, _ in got)     # strings left out


def test_nested_groups_become_labels_and_dropped_producers_vanish():
    class Fake:
        def __init__(self, m, client_id):
            self.m, self.config = m, types.SimpleNamespace(client_id=client_id)

        def metrics(self):
            return self.m

    a = Fake({"records_sent": 3, "producer-node-metrics": {"node-1": {"request-latency-avg": 2.5},
                                                           "node-2": {"request-latency-avg": 4.0}},
              "topics": {"orders": {"record-send-total": 11, "ok": True}}, "state": "x"}, "a")
    b = Fake({"records_sent": 4}, "b")
    registry = CollectorRegistry()
    ProducerCollector(a, b, registry=registry)
    got = scrape(registry)
    assert got[("fastkafka_producer_records_sent", "counter")] == {
        ("fastkafka_producer_records_sent_total", frozenset({("client_id", "a")})): 3.0,
        ("fastkafka_producer_records_sent_total", frozenset({("client_id", "b")})): 4.0}
    lat = got[("fastkafka_producer_request_latency_avg", "gauge")]
    assert lat == {("fastkafka_producer_request_latency_avg",
                    frozenset({("client_id", "a"), ("node", "node-1")})): 2.5,
                   ("fastkafka_producer_request_latency_avg",
                    frozenset({("client_id", "a"), ("node", "node-2")})): 4.0}
    assert got[("fastkafka_producer_record_send", "counter")] == {
        ("fastkafka_producer_record_send_total",
         frozenset({("client_id", "a"), ("topic", "orders")})): 11.0}
    assert got[("fastkafka_producer_ok", "gauge")] == {
        ("fastkafka_producer_ok", frozenset({("client_id", "a"), ("topic", "orders")})): 1.0}
    del a
    gc.collect()
    got = scrape(registry)
    assert got[("fastkafka_producer_records_sent", "counter")] == {
        ("fastkafka_producer_records_sent_total", frozenset({("client_id", "b")})): 4.0}
    assert ("fastkafka_producer_request_latency_avg", "gauge") not in got


def test_bad_arguments_and_missing_package():
    with pytest.raises(TypeError, match="at least one producer"):
        ProducerCollector(registry=False)
    with pytest.raises(TypeError, match="objects with metrics"):
        ProducerCollector(object(), registry=False)
    code = ("import sys; sys.modules['prometheus_client'] = None\n"
            "from fastkafka.prometheus import ProducerCollector\n"
            "class P:\n    def metrics(self): return {}\n"
            "try:\n    ProducerCollector(P())\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert "pip install prometheus_client" in out.stdout, out.stderr


JAVA = {"producer-metrics": {"record-send-total": 12, "record-send-rate": 0.4,
                             "batch-size-avg": None, "request-latency-max": float("nan"),
                             "metadata-age": 1.5},
        "producer-node-metrics": {"node-1": {"request-latency-avg": 2.5, "request-total": 3},
                                  "node-2": {"request-latency-avg": None}},
        "producer-topic-metrics": {"orders.eu": {"byte-rate": 30.0}}}


class JavaFake:
    config = types.SimpleNamespace(client_id="j")

    def metrics(self):
        return {"records_sent": 12}

    def java_metrics(self):
        return JAVA


def test_java_metrics_under_the_jmx_exporters_default_names():
    registry = CollectorRegistry()
    p = JavaFake()
    ProducerCollector(p, registry=registry)
    got = scrape(registry)
    j = frozenset({("client_id", "j")})
    java = {k: v for k, v in got.items() if k[0].startswith("kafka_producer_")}
    assert java == {
        ("kafka_producer_producer_metrics_record_send_total", "gauge"): {
            ("kafka_producer_producer_metrics_record_send_total", j): 12.0},
        ("kafka_producer_producer_metrics_record_send_rate", "gauge"): {
            ("kafka_producer_producer_metrics_record_send_rate", j): 0.4},
        ("kafka_producer_producer_metrics_metadata_age", "gauge"): {
            ("kafka_producer_producer_metrics_metadata_age", j): 1.5},
        ("kafka_producer_producer_node_metrics_request_latency_avg", "gauge"): {
            ("kafka_producer_producer_node_metrics_request_latency_avg",
             j | {("node_id", "node-1")}): 2.5},          # node-2's None left out
        ("kafka_producer_producer_node_metrics_request_total", "gauge"): {
            ("kafka_producer_producer_node_metrics_request_total", j | {("node_id", "node-1")}): 3.0},
        ("kafka_producer_producer_topic_metrics_byte_rate", "gauge"): {
            ("kafka_producer_producer_topic_metrics_byte_rate", j | {("topic", "orders.eu")}): 30.0},
    }     # batch-size-avg (None) and request-latency-max (NaN) are not exported
    assert ("fastkafka_producer_records_sent", "counter") in got
    registry = CollectorRegistry()
    ProducerCollector(p, registry=registry, java=False)
    assert not any(name.startswith("kafka_") for name, _ in scrape(registry))


def test_java_metrics_of_a_real_producer_and_of_the_compat_layers(fb):
    from fastkafka.compat import confluent, kafka_python

    fb.create_topic("t", 1)
    registry = CollectorRegistry()
    with Producer(bootstrap_servers=fb.bootstrap, client_id="svc-j", linger_ms=2) as p:
        register(p, registry)
        for i in range(5):
            p.send("t", b"v%d" % i)
        p.flush(10)
        got = scrape(registry)
        nodes = {n for n, m in p.java_metrics()["producer-node-metrics"].items()
                 if m["request-latency-avg"] is not None}
    label = frozenset({("client_id", "svc-j")})
    assert got[("kafka_producer_producer_topic_metrics_record_send_total", "gauge")] == {
        ("kafka_producer_producer_topic_metrics_record_send_total",
         label | {("topic", "t")}): 5.0}
    assert got[("kafka_producer_producer_metrics_record_send_total", "gauge")] == {
        ("kafka_producer_producer_metrics_record_send_total", label): 5.0}
    lat = got[("kafka_producer_producer_node_metrics_request_latency_avg", "gauge")]
    assert nodes and all(n.startswith("node-") for n in nodes) and all(v >= 0 for v in lat.values())
    assert {dict(labels)["node_id"] for _, labels in lat} == nodes
    for make in (lambda: confluent.Producer({"bootstrap.servers": fb.bootstrap,
                                             "client.id": "cf"}),
                 lambda: kafka_python.KafkaProducer(bootstrap_servers=fb.bootstrap,
                                                    client_id="kp")):
        q = make()
        try:
            registry = CollectorRegistry()
            ProducerCollector(q, registry=registry)
            assert ("kafka_producer_producer_metrics_buffer_total_bytes", "gauge") in scrape(registry)
        finally:
            q.flush(10)
            (q.close() if hasattr(q, "close") else None)
