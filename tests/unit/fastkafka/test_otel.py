"""fastkafka.otel: the tracing interceptor's spans (OpenTelemetry SDK's InMemorySpanExporter) and
the traceparent header the broker stored; the metrics bridge read with the SDK's
InMemoryMetricReader; the error naming the package when OpenTelemetry is missing."""
from __future__ import annotations

import subprocess
import sys
import time

import pytest
from kafka.record.default_records import DefaultRecordBatch

import opentelemetry.sdk  # noqa: E402,F401  (the test extra: a missing SDK fails here)

from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.metrics import MeterProvider  # noqa: E402
from opentelemetry.sdk.metrics.export import InMemoryMetricReader  # noqa: E402
from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import SpanKind, StatusCode  # noqa: E402

from faultbroker import partition_error  # noqa: E402
from fastkafka import Producer  # noqa: E402
from fastkafka.otel import MetricsBridge, TracingInterceptor  # noqa: E402
from fastkafka.protocol import ApiKey  # noqa: E402

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)


@pytest.fixture
def spans():
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


def stored_headers(fb, topic, partition=0):
    out = []
    for sb in fb.cluster.batches(topic, partition):
        out.extend(dict(r.headers) for r in DefaultRecordBatch(sb.data))
    return out


def traceparent(span) -> bytes:
    ctx = span.get_span_context()
    return b"00-%032x-%016x-%02x" % (ctx.trace_id, ctx.span_id, int(ctx.trace_flags))


def test_a_producer_span_per_record_with_the_messaging_attributes(fb, spans):
    provider, exporter = spans
    fb.create_topic("orders", 2)
    ic = TracingInterceptor(provider, client_id="app-1", legacy_attributes=True)
    parent_tracer = provider.get_tracer("test")
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[ic], **FAST) as p:
        with parent_tracer.start_as_current_span("handler") as parent:
            md = p.send("orders", b"hello", key=b"k1", partition=1,
                        headers=[("traceparent", b"stale")]).get(10)
            p.produce("orders", None, key=b"\xff", partition=0)
            p.flush(10)
    by_name = {}
    for s in exporter.get_finished_spans():
        by_name.setdefault(s.name, []).append(s)
    sends = by_name["send orders"]
    assert len(sends) == 2
    first = next(s for s in sends if s.attributes["messaging.destination.partition.id"] == "1")
    assert first.kind is SpanKind.PRODUCER
    assert first.parent.span_id == parent.get_span_context().span_id
    assert dict(first.attributes) == {
        "messaging.system": "kafka", "messaging.destination.name": "orders",
        "messaging.operation.type": "send", "messaging.operation.name": "send",
        "messaging.client.id": "app-1", "messaging.message.body.size": 5,
        "messaging.kafka.message.key": "k1",
        "messaging.destination.partition.id": "1", "messaging.kafka.destination.partition": 1,
        "messaging.kafka.offset": md.offset, "messaging.kafka.message.offset": md.offset}
    assert first.status.status_code is StatusCode.UNSET
    tomb = next(s for s in sends if s is not first)
    assert tomb.attributes["messaging.kafka.message.tombstone"] is True
    assert "messaging.kafka.message.key" not in tomb.attributes     # not UTF-8
    # the header the broker stored is the span's context (the stale one replaced)
    [h1] = stored_headers(fb, "orders", 1)
    assert h1 == {"traceparent": traceparent(first)}
    [h0] = stored_headers(fb, "orders", 0)
    assert h0["traceparent"] == traceparent(tomb)


def test_a_failed_record_ends_its_span_with_the_error(fb, spans):
    provider, exporter = spans
    fb.create_topic("t", 1)
    fb.script.on(ApiKey.PRODUCE, partition_error(87), times=1)      # INVALID_RECORD
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[TracingInterceptor(provider)],
                  enable_idempotence=False, retries=0, **FAST) as p:
        with pytest.raises(Exception) as e:
            p.send("t", b"x").get(10)
        with pytest.raises(Exception):
            p.send("t", b"y", partition=5)          # refused at send: the span ends too
    failed, refused = sorted(exporter.get_finished_spans(), key=lambda s: s.start_time)
    assert failed.status.status_code is StatusCode.ERROR
    assert failed.attributes["error.type"] == e.value.name
    assert failed.events[0].name == "exception"
    assert "messaging.kafka.offset" not in failed.attributes
    assert refused.status.status_code is StatusCode.ERROR
    assert refused.attributes["messaging.destination.partition.id"] == "5"


def test_send_batch_spans_one_per_record(fb, spans):
    provider, exporter = spans
    fb.create_topic("t", 1)
    with Producer(bootstrap_servers=fb.bootstrap, interceptors=[TracingInterceptor(provider)],
                  **FAST) as p:
        assert p.send_batch("t", [b"a", b"bb", b"ccc"]).get(10) == 3
    got = sorted(exporter.get_finished_spans(), key=lambda s: s.attributes["messaging.kafka.offset"])
    assert [s.attributes["messaging.message.body.size"] for s in got] == [1, 2, 3]
    assert [h["traceparent"] for h in stored_headers(fb, "t")] == [traceparent(s) for s in got]


def test_metrics_bridge_reports_counters_and_gauges(fb):
    fb.create_topic("t", 1)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with Producer(bootstrap_servers=fb.bootstrap, client_id="svc", **FAST) as p:
        MetricsBridge(p, provider)
        for i in range(7):
            p.send("t", b"v%d" % i)
        p.flush(10)
        data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    sent = metrics["fastkafka.producer.records_sent"]
    assert type(sent.data).__name__ == "Sum" and sent.data.is_monotonic
    [point] = sent.data.data_points
    assert point.value == 7 and dict(point.attributes) == {"client_id": "svc"}
    queued = metrics["fastkafka.producer.records_queued"]
    assert type(queued.data).__name__ == "Gauge" and queued.data.data_points[0].value == 0
    assert "fastkafka.producer.tls_data_path" not in metrics        # strings left out


def test_metrics_bridge_labels_nested_groups_and_picks_up_new_names():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    class Fake:
        def __init__(self):
            self.m = {"records_sent": 1, "nodes": {}}

        def metrics(self):
            return self.m

    fake = Fake()
    bridge = MetricsBridge(fake, provider, client_id="c")
    fake.m = {"records_sent": 2, "nodes": {"1": {"request-latency-avg": 3.5}},
              "producer-topic-metrics": {"t": {"record-send-total": 9}}}
    reader.get_metrics_data()                 # sees the new names; instruments made after it
    for _ in range(100):
        if "fastkafka.producer.request_latency_avg" in bridge._instruments:
            break
        time.sleep(0.01)
    bridge._snap = None
    data = reader.get_metrics_data()
    metrics = {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
               for m in sm.metrics}
    [lat] = metrics["fastkafka.producer.request_latency_avg"].data.data_points
    assert lat.value == 3.5 and dict(lat.attributes) == {"client_id": "c", "node": "1"}
    total = metrics["fastkafka.producer.record_send_total"]
    assert total.data.is_monotonic and dict(total.data.data_points[0].attributes) == {
        "client_id": "c", "topic": "t"}


def collected(reader):
    data = reader.get_metrics_data()
    return {m.name: m for rm in data.resource_metrics for sm in rm.scope_metrics
            for m in sm.metrics}


def test_metrics_bridge_java_names_as_the_java_instrumentation_names_them():
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])

    class Fake:
        def metrics(self):
            return {"records_sent": 4}

        def java_metrics(self):
            return {"producer-metrics": {"record-send-total": 4, "record-send-rate": 0.1,
                                         "batch-size-avg": 120.0, "record-queue-time-max": None,
                                         "request-latency-avg": 9.0},
                    "producer-node-metrics": {"node-3": {"request-latency-avg": 2.0}},
                    "producer-topic-metrics": {"t": {"record-send-total": 4,
                                                     "record-send-rate": 0.1}}}

    fake = Fake()
    MetricsBridge(fake, provider, client_id="c")
    metrics = collected(reader)
    java = {n: m for n, m in metrics.items() if n.startswith("kafka.")}
    assert set(java) == {"kafka.producer.record_send_total", "kafka.producer.record_send_rate",
                         "kafka.producer.batch_size_avg", "kafka.producer.request_latency_avg"}
    total = java["kafka.producer.record_send_total"].data
    assert type(total).__name__ == "Sum" and total.is_monotonic
    # reported per topic only (the finer grain), not also per client
    assert [(dict(pt.attributes), pt.value) for pt in total.data_points] == [
        ({"client-id": "c", "topic": "t"}, 4)]
    rate = java["kafka.producer.record_send_rate"].data
    assert type(rate).__name__ == "Gauge"
    [batch] = java["kafka.producer.batch_size_avg"].data.data_points
    assert dict(batch.attributes) == {"client-id": "c"} and batch.value == 120.0
    assert [(dict(pt.attributes), pt.value)
            for pt in java["kafka.producer.request_latency_avg"].data.data_points] == [
        ({"client-id": "c", "node-id": "node-3"}, 2.0)]
    assert "fastkafka.producer.records_sent" in metrics
    reader2 = InMemoryMetricReader()
    MetricsBridge(fake, MeterProvider(metric_readers=[reader2]), client_id="c", java=False)
    assert not any(n.startswith("kafka.") for n in collected(reader2))


def test_metrics_bridge_java_names_of_a_real_producer(fb):
    fb.create_topic("t", 1)
    reader = InMemoryMetricReader()
    provider = MeterProvider(metric_readers=[reader])
    with Producer(bootstrap_servers=fb.bootstrap, client_id="svc", **FAST) as p:
        MetricsBridge(p, provider)
        for i in range(6):
            p.send("t", b"v%d" % i)
        p.flush(10)
        collected(reader)                      # instruments for values that appeared
        for _ in range(100):
            metrics = collected(reader)
            if "kafka.producer.batch_size_avg" in metrics:
                break
            time.sleep(0.06)
    [sent] = metrics["kafka.producer.record_send_total"].data.data_points
    assert dict(sent.attributes) == {"client-id": "svc", "topic": "t"} and sent.value == 6
    [batch] = metrics["kafka.producer.batch_size_avg"].data.data_points
    assert batch.value > 61                     # a batch has its 61-byte header and records
    lat = metrics["kafka.producer.request_latency_avg"].data.data_points
    assert lat and all(pt.attributes["node-id"].startswith("node-") for pt in lat)


def test_missing_opentelemetry_names_the_package():
    code = ("import sys; sys.modules['opentelemetry'] = None\n"
            "from fastkafka.otel import TracingInterceptor\n"
            "try:\n    TracingInterceptor()\nexcept ImportError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert 'pip install "fastkafka-producer[otel]"' in out.stdout, out.stderr
