"""The Java producer's metrics (``producer.java_metrics()``) under the names that dashboards for
the Java client look for, for the exporters (``prometheus.py``, ``otel.py``):

- **Prometheus**: the names the Prometheus JMX exporter gives Java producer MBeans with its
  default export format (the minimal ``rules: [{pattern: ".*"}]`` config, no ``name`` in the
  rule): ``<domain>_<first key property value>_<attribute>``, every character outside
  ``[a-zA-Z0-9:_]`` as ``_`` and runs of ``_`` merged, the other key properties as labels. For
  ``kafka.producer:type=producer-node-metrics,client-id=x,node-id=node-1``'s
  ``request-latency-avg`` that is ``kafka_producer_producer_node_metrics_request_latency_avg
  {client_id="x",node_id="node-1"}``.
- **OpenTelemetry**: the instruments of opentelemetry-java-instrumentation's Kafka metrics
  bridge (``OpenTelemetryKafkaMetrics``): ``kafka.producer.<name with - as _>``, attributes
  ``client-id`` plus ``node-id`` or ``topic``; ``*-total`` as observable counters, the rest as
  observable gauges; a name Java reports both per client and per node or topic is reported only
  at the finer grain (``record-send-rate`` per topic, ``request-latency-avg`` per node), as that
  bridge does.

A value that is None (an average or maximum with no event in the windows; Java shows NaN) is
left out, never exported as 0 or NaN.
"""
from __future__ import annotations

import math
import re

from fastkafka.observability._java_metrics import NODE, TOPIC

#: the groups of java_metrics() and the key property (tag) that tells their entries apart
_GROUPS = {"producer-metrics": None, "producer-node-metrics": "node-id",
           "producer-topic-metrics": "topic"}
_UNSAFE = re.compile(r"[^a-zA-Z0-9:_]")
_RUNS = re.compile(r"__+")
#: names reported per node or per topic: OpenTelemetry reports them only there
_FINER = frozenset(name for name, _, _ in NODE + TOPIC)


def _number(value):
    """``value`` as a float, or None when it is not a finite number (None, NaN, a string)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    value = float(value)
    return value if math.isfinite(value) else None


def _entries(java: dict):
    """``(group, tag, tag value, {name: value})`` for each group entry of a java_metrics()
    document (tag None for producer-metrics)."""
    for group, tag in _GROUPS.items():
        body = java.get(group)
        if not isinstance(body, dict):
            continue
        if tag is None:
            yield group, None, None, body
        else:
            for key, metrics in body.items():
                if isinstance(metrics, dict):
                    yield group, tag, str(key), metrics


def jmx_name(group: str, name: str, domain: str = "kafka.producer") -> str:
    """The JMX exporter's default name of attribute ``name`` of MBean ``domain:type=group,...``:
    ``jmx_name("producer-metrics", "record-send-rate")`` ->
    ``kafka_producer_producer_metrics_record_send_rate``."""
    return _RUNS.sub("_", _UNSAFE.sub("_", f"{domain}_{group}_{name}"))


def jmx_samples(java: dict, client_id: str):
    """``(name, labels, value)`` per number of ``java`` (a java_metrics() document), named as
    the JMX exporter's default format names them; labels ``client_id`` and ``node_id``/
    ``topic``."""
    for group, tag, key, metrics in _entries(java):
        labels = {"client_id": client_id}
        if tag is not None:
            labels[_UNSAFE.sub("_", tag)] = key
        for name, value in metrics.items():
            v = _number(value)
            if v is not None:
                yield jmx_name(group, name), labels, v


def otel_name(name: str) -> str:
    """``record-send-rate`` -> ``kafka.producer.record_send_rate``."""
    return "kafka.producer." + name.replace("-", "_")


def otel_samples(java: dict, client_id: str) -> dict:
    """``{instrument name: (is_counter, [(attributes, value), ...])}`` of a java_metrics()
    document, as opentelemetry-java-instrumentation's Kafka metrics bridge names them."""
    out: dict[str, tuple] = {}
    for _group, tag, key, metrics in _entries(java):
        attrs = {"client-id": client_id}
        if tag is not None:
            attrs[tag] = key
        for name, value in metrics.items():
            if tag is None and name in _FINER:
                continue
            v = _number(value)
            if v is None:
                continue
            full = otel_name(name)
            entry = out.get(full)
            if entry is None:
                entry = out[full] = (name.endswith("-total"), [])
            entry[1].append((attrs, v))
    return out


def otel_names(java: dict) -> dict:
    """``{instrument name: is_counter}`` of every instrument :func:`otel_samples` can report for
    a producer whose java_metrics() is ``java``: its producer-metrics names and all the per-node
    and per-topic names, whether or not a node or topic has values yet (so the instruments can be
    made up front)."""
    names = [n for n in java.get("producer-metrics", {}) if n not in _FINER]
    names += [n for n, _, _ in NODE + TOPIC]
    return {otel_name(n): n.endswith("-total") for n in names}


def java_source(producer):
    """The callable giving ``producer``'s java_metrics(), also through the compatibility layers
    (the fastkafka producer underneath); None when there is none."""
    for obj in (producer, getattr(producer, "_p", None), getattr(producer, "_producer", None)):
        fn = getattr(obj, "java_metrics", None)
        if callable(fn):
            return fn
    return None
