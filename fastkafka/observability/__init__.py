"""Everything the producer exposes for monitoring, in one place (docs/observability.md).

- ``_counters``: the producer's own counters, what :meth:`fastkafka.Producer.metrics` returns.
- ``_java_metrics``: the Java producer's metrics (names, groups and meanings) computed from the
  producer's windowed statistics (``fastkafka._net.sampled``) and gauges: what
  :meth:`fastkafka.Producer.java_metrics` returns and ``stats_cb`` gets.
- ``otel``: OpenTelemetry, a tracing interceptor (:class:`~fastkafka.otel.TracingInterceptor`)
  and a metrics bridge (:class:`~fastkafka.otel.MetricsBridge`); imported by users as
  :mod:`fastkafka.otel`.
- ``prometheus``: a ``prometheus_client`` collector (:class:`~fastkafka.prometheus.ProducerCollector`);
  imported by users as :mod:`fastkafka.prometheus`.
- ``_metric_walk``: ``metrics()`` as numeric samples, and ``_java_export``: the Java metrics under
  the names the Java client's dashboards know (JMX exporter, OpenTelemetry's Kafka bridge), both
  shared by the two exporters.

The package belongs to the API layer (docs/internals.md, "Layers"). Importing it imports nothing:
the exporters load their optional dependency (``opentelemetry-api``, ``prometheus_client``) only
when imported themselves.
"""
