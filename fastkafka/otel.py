"""OpenTelemetry for the producer: the import path of
:mod:`fastkafka.observability.otel`, which holds the code and the full description.

Tracing and metrics::

    from fastkafka.otel import MetricsBridge, TracingInterceptor

    p = Producer(bootstrap_servers="host:9092", interceptors=[TracingInterceptor()])
    MetricsBridge(p)

OpenTelemetry is not a dependency of fastkafka: ``pip install "fastkafka-producer[otel]"``.
"""
from __future__ import annotations

from fastkafka.observability.otel import MetricsBridge, TracingInterceptor

__all__ = ["TracingInterceptor", "MetricsBridge"]
