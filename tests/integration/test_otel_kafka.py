"""The tracing interceptor on Apache Kafka: the W3C traceparent header that confluent-kafka's consumer
reads back names each record's span (trace id and span id), and a consumer continuing the trace
from it gets the producer span as its parent."""
from __future__ import annotations

import pytest

import opentelemetry.sdk  # noqa: E402,F401  (the test extra: a missing SDK fails here)

from opentelemetry.sdk.trace import TracerProvider  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter  # noqa: E402
from opentelemetry.trace import get_current_span  # noqa: E402
from opentelemetry.trace.propagation.tracecontext import TraceContextTextMapPropagator  # noqa: E402

from brokers import read_back_flat, unique_name  # noqa: E402
from fastkafka import Producer  # noqa: E402
from fastkafka.otel import TracingInterceptor  # noqa: E402


def test_traceparent_read_back_by_confluent_kafka_matches_the_spans(kafka_broker):
    topic = unique_name("otel")
    kafka_broker.create_topic(topic, 3)
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    ic = TracingInterceptor(provider, TraceContextTextMapPropagator())
    with Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=2, interceptors=[ic]) as p:
        mds = [p.send(topic, b"v%d" % i, key=b"k%d" % i, headers=[("app", b"x")]).get(30)
               for i in range(6)]
        assert p.send_batch(topic, [b"b0", b"b1"], partition=2).get(30) == 2
    msgs = read_back_flat(kafka_broker.bootstrap, topic, 3, 8)
    spans = {(s.attributes["messaging.destination.partition.id"],
              s.attributes["messaging.kafka.offset"]): s for s in exporter.get_finished_spans()}
    assert len(spans) == 8
    assert {(str(md.partition), md.offset) for md in mds} <= set(spans)
    for m in msgs:
        span = spans[(str(m.partition), m.offset)]
        headers = dict(m.headers)
        ctx = span.get_span_context()
        version, trace_id, span_id, flags = headers["traceparent"].decode().split("-")
        assert (version, int(trace_id, 16), int(span_id, 16), int(flags, 16)) == (
            "00", ctx.trace_id, ctx.span_id, int(ctx.trace_flags))
        assert ctx.trace_flags.sampled
        # the consumer's side: the extracted context is the producer span's
        carrier = {k: v.decode() for k, v in m.headers}
        remote = get_current_span(TraceContextTextMapPropagator().extract(carrier))
        assert remote.get_span_context().span_id == ctx.span_id
        assert span.attributes["messaging.destination.name"] == topic
        if m.value.startswith(b"v"):
            assert headers["app"] == b"x"
