"""The ``stats_cb`` document of :class:`fastkafka.compat.confluent.Producer`: librdkafka's
statistics schema (STATISTICS.md: top level, ``brokers``, ``topics``, window stats, ``eos``) for
the fields fastkafka can fill from what it measures (``java_metrics()``, its windowed statistics,
``metrics()``, the connections), and nothing else: a field fastkafka does not measure is left out,
never filled with a made-up value. What is left out and why: docs/migration.md, "stats_cb".
"""
from __future__ import annotations

import time

from fastkafka._net.cells import monotonic_ms

#: fastkafka's connection states (fastkafka/_net/connection.pyx State) as librdkafka's broker
#: states: the handshake (TLS, ApiVersions, SASL) is one state here
_STATES = {0: "DOWN", 1: "CONNECT", 2: "APIVERSION_QUERY", 3: "UP"}


def _window(measure: dict | None, scale: float = 1.0) -> dict | None:
    """librdkafka's window stats ``{"avg", "max"}`` (integers, times ``scale``) from a sampled
    statistic's measure; None when its windows hold no event. min, sum, cnt, stddev and the
    percentiles are not kept by fastkafka's windows (sums, counts and maxima of Java's samples,
    no histogram) and are left out."""
    if not measure or measure.get("avg") is None:
        return None
    out = {"avg": int(round(measure["avg"] * scale))}
    if measure.get("max") is not None:
        out["max"] = int(round(measure["max"] * scale))
    return out


def _broker_name(node: int, addr) -> tuple[str, str]:
    nodename = f"{addr[0]}:{addr[1]}" if addr else ""
    return (f"{nodename}/{node}" if node >= 0 else f"{nodename}/bootstrap"), nodename


def _brokers(client, java_nodes: dict, snap_nodes: dict) -> dict:
    """``brokers``: one entry per broker with a connection or node metrics."""
    conns = dict(client.connections)
    nodes = set(conns)
    for key in java_nodes:
        try:
            nodes.add(int(key[len("node-"):]))
        except ValueError:
            continue
    out = {}
    for node in sorted(nodes):
        conn = conns.get(node)
        addr = (conn.host, conn.port) if conn is not None else client._address(node)
        name, nodename = _broker_name(node, addr)
        b = {"name": name, "nodeid": node if node >= 0 else -1, "nodename": nodename,
             "source": "learned" if node >= 0 else "configured",
             "state": _STATES.get(conn.status, "DOWN") if conn is not None else "INIT"}
        if conn is not None:
            b["waitresp_cnt"] = conn.in_flight_count()
        jm = java_nodes.get(f"node-{node}")
        if jm is not None:
            b.update({"tx": jm["request-total"], "txbytes": jm["outgoing-byte-total"],
                      "rx": jm["response-total"], "rxbytes": jm["incoming-byte-total"]})
        rtt = _window((snap_nodes.get(node) or {}).get("latency"), 1000.0)     # ms -> µs
        if rtt is not None:
            b["rtt"] = rtt
        out[name] = b
    return out


def _topics(snap_topics: dict) -> dict:
    """``topics``: per topic the batch sizes (bytes, as sent) and record counts per batch."""
    out = {}
    for topic, stats in sorted(snap_topics.items()):
        t = {"topic": topic}
        size = _window(stats.get("bytes"))
        count = _window(stats.get("records"))
        if size is not None:
            t["batchsize"] = size
        if count is not None:
            t["batchcnt"] = count
        out[topic] = t
    return out


def stats_document(fk, *, msg_cnt: int, msg_max: int, started: float) -> dict:
    """The document for ``stats_cb`` of the compatibility producer over the fastkafka producer
    ``fk``: ``msg_cnt`` and ``msg_max`` as the layer counts them, ``started`` its
    ``time.monotonic()`` at creation."""
    now_ms = monotonic_ms()
    client = fk._client
    snap = client.sampled.snapshot(now_ms)
    java = fk.java_metrics()
    m = fk.metrics()
    g = java["producer-metrics"]
    mono = time.monotonic()
    doc = {
        "name": fk._name, "client_id": fk.config.client_id, "type": "producer",
        "ts": int(mono * 1e6), "time": int(time.time()), "age": int((mono - started) * 1e6),
        "msg_cnt": msg_cnt, "msg_size": fk._acc.stats()["bytes_queued"], "msg_max": msg_max,
        "msg_size_max": fk.config.buffer_memory,
        "tx": g["request-total"], "tx_bytes": g["outgoing-byte-total"],
        "rx": g["response-total"], "rx_bytes": g["incoming-byte-total"],
        "txmsgs": g["record-send-total"],
        "rxmsgs": 0, "rxmsg_bytes": 0,          # a producer consumes nothing
        "brokers": _brokers(client, java["producer-node-metrics"], snap["nodes"]),
        "topics": _topics(snap["topics"]),
    }
    if m.get("producer_id", -1) >= 0:
        doc["eos"] = {"producer_id": m["producer_id"], "producer_epoch": m["producer_epoch"]}
    doc["fastkafka-metrics"] = m
    doc["java-metrics"] = java
    return doc
