"""The Java producer's metrics, with its names and meanings, from the producer's windowed
statistics (fastkafka._net.sampled) and its gauges: what :meth:`fastkafka.Producer.java_metrics`
returns and ``stats_cb`` gets. The names, groups and what each one counts: docs/observability.md,
"Metrics"."""

from __future__ import annotations

from fastkafka._net.cells import monotonic_ms

#: (Java name, statistic, measure): the producer-metrics read from a statistic of
#: SampledRegistry.snapshot()["global"]; a measure is one of SampledStat.measure()'s keys.
PRODUCER = (
    ("record-send-rate", "records_per_request", "rate"),
    ("record-send-total", "records_per_request", "total"),
    ("records-per-request-avg", "records_per_request", "avg"),
    ("record-error-rate", "errors", "rate"),
    ("record-error-total", "errors", "total"),
    ("record-retry-rate", "retries", "rate"),
    ("record-retry-total", "retries", "total"),
    ("request-latency-avg", "latency", "avg"),
    ("request-latency-max", "latency", "max"),
    ("request-rate", "requests", "count_rate"),
    ("request-total", "requests", "events"),
    ("request-size-avg", "requests", "avg"),
    ("request-size-max", "requests", "max"),
    ("outgoing-byte-rate", "requests", "rate"),
    ("outgoing-byte-total", "requests", "total"),
    ("response-rate", "responses", "count_rate"),
    ("response-total", "responses", "events"),
    ("incoming-byte-rate", "responses", "rate"),
    ("incoming-byte-total", "responses", "total"),
    ("batch-size-avg", "batch_size", "avg"),
    ("batch-size-max", "batch_size", "max"),
    ("compression-rate-avg", "compression", "avg"),
    ("record-queue-time-avg", "queue_time", "avg"),
    ("record-queue-time-max", "queue_time", "max"),
    ("record-size-avg", "record_size", "avg"),
    ("record-size-max", "record_size", "max"),
    ("produce-throttle-time-avg", "throttle", "avg"),
    ("produce-throttle-time-max", "throttle", "max"),
    ("batch-split-rate", "splits", "count_rate"),
    ("batch-split-total", "splits", "events"),
    ("connection-creation-rate", "connections_created", "count_rate"),
    ("connection-creation-total", "connections_created", "events"),
    ("connection-close-rate", "connections_closed", "count_rate"),
    ("connection-close-total", "connections_closed", "events"),
    ("io-wait-time-ns-total", "io_wait", "total"),
)

NODE = (
    ("request-rate", "requests", "count_rate"),
    ("request-total", "requests", "events"),
    ("request-size-avg", "requests", "avg"),
    ("request-size-max", "requests", "max"),
    ("outgoing-byte-rate", "requests", "rate"),
    ("outgoing-byte-total", "requests", "total"),
    ("response-rate", "responses", "count_rate"),
    ("response-total", "responses", "events"),
    ("incoming-byte-rate", "responses", "rate"),
    ("incoming-byte-total", "responses", "total"),
    ("request-latency-avg", "latency", "avg"),
    ("request-latency-max", "latency", "max"),
)

TOPIC = (
    ("record-send-rate", "records", "rate"),
    ("record-send-total", "records", "total"),
    ("byte-rate", "bytes", "rate"),
    ("byte-total", "bytes", "total"),
    ("compression-rate", "compression", "avg"),
    ("record-error-rate", "errors", "rate"),
    ("record-error-total", "errors", "total"),
    ("record-retry-rate", "retries", "rate"),
    ("record-retry-total", "retries", "total"),
)

#: measures that count events or bytes: whole numbers
_WHOLE = ("total", "events")


def _named(table, stats: dict) -> dict:
    out = {}
    for name, stat, measure in table:
        v = stats[stat][measure]
        out[name] = int(v) if measure in _WHOLE and v is not None else v
    return out


def java_metrics(client, pool, metadata, now: int | None = None) -> dict:
    """``{"producer-metrics": {...}, "producer-node-metrics": {"node-1": {...}},
    "producer-topic-metrics": {"topic": {...}}}`` from the network client's SampledRegistry and
    the producer's gauges, measured at ``now`` (the producer's monotonic ms; default: now)."""
    if now is None:
        now = monotonic_ms()
    snap = client.sampled.snapshot(now)
    g = _named(PRODUCER, snap["global"])
    wait = snap["global"]["io_wait"]["rate"]
    g["io-wait-ratio"] = wait / 1e9 if wait is not None else None   # ns waited per s
    conns = list(client.connections.values())
    g["connection-count"] = sum(1 for c in conns if c.sock is not None)
    g["requests-in-flight"] = sum(c.in_flight_count() for c in conns)
    g["buffer-total-bytes"] = pool.total
    g["buffer-available-bytes"] = pool.available_memory
    g["bufferpool-wait-time-ns-total"] = pool.wait_time_ns
    g["waiting-threads"] = pool.queued
    refreshed = metadata.last_successful_refresh_ms
    g["metadata-age"] = (now - refreshed) / 1000.0 if refreshed else None
    return {
        "producer-metrics": g,
        "producer-node-metrics": {f"node-{node}": _named(NODE, s)
                                  for node, s in sorted(snap["nodes"].items())},
        "producer-topic-metrics": {topic: _named(TOPIC, s)
                                   for topic, s in sorted(snap["topics"].items())},
    }
