"""The measurements of ``bench/tls_e2e.py`` (``tls_send`` of ``bench/ab.py`` runs ``child`` too): one
function per client, run in a child process, over the SSL or the PLAINTEXT listener."""
from __future__ import annotations

import os
import time

from e2e_measure import run_confluent as confluent_loop

LINGER_MS = 5
CHUNK = 100_000

# name -> (client, variant, listener)
MEASUREMENTS = {
    "fk_send_tls": ("fastkafka", "`send()` loop", "SSL"),
    "fk_batch_tls": ("fastkafka", "`send_batch(list)`", "SSL"),
    "ck_tls": ("confluent-kafka", "`produce()` loop", "SSL"),
    "fk_send_plain": ("fastkafka", "`send()` loop", "PLAINTEXT"),
    "fk_batch_plain": ("fastkafka", "`send_batch(list)`", "PLAINTEXT"),
    "ck_plain": ("confluent-kafka", "`produce()` loop", "PLAINTEXT"),
}


def make_values(n: int, size: int) -> list:
    distinct = [os.urandom(size) for _ in range(1024)]
    return (distinct * (n // len(distinct) + 1))[:n]


# ------------------------------------------------------------------------------------ children
def run_fastkafka(bootstrap: str, topic: str, values: list, mode: str, tls: dict) -> dict:
    from fastkafka import Producer

    p = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, **tls)
    p.send(topic, b"warm-up").get(timeout=30)
    m0 = p.metrics()
    base = m0["records_sent"]
    c0 = time.process_time()          # the whole process: application and I/O threads
    t0 = time.perf_counter()
    if mode == "send":
        send = p.send
        for v in values:
            send(topic, v)
    else:
        for i in range(0, len(values), CHUNK):
            p.send_batch(topic, values[i:i + CHUNK])
    p.flush()
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    m = p.metrics()
    p.close()
    delivered = m["records_sent"] - base
    return {"seconds": elapsed, "delivered": delivered, "errors": m["errors"], "cpu_seconds": cpu,
            "cpu_us_per_record": cpu * 1e6 / max(delivered, 1),
            "gil_free_requests": m["gil_free_requests"] - m0["gil_free_requests"],
            "produce_requests": m["produce_requests"] - m0["produce_requests"]}


def run_confluent(bootstrap: str, topic: str, values: list, tls: dict) -> dict:
    """bench/e2e.py's confluent-kafka loop (acks=all, idempotent), over TLS when ``tls`` is given."""
    extra = {"security.protocol": "SSL", "ssl.ca.location": tls["ssl_cafile"]} if tls else None
    return confluent_loop(bootstrap, topic, values, "all", extra)


def child(name: str, bootstrap: str, topic: str, records: int, size: int, cafile: str) -> dict:
    values = make_values(records, size)
    tls = {"security_protocol": "SSL", "ssl_cafile": cafile} if MEASUREMENTS[name][2] == "SSL" else {}
    if name.startswith("fk_send"):
        r = run_fastkafka(bootstrap, topic, values, "send", tls)
    elif name.startswith("fk_batch"):
        r = run_fastkafka(bootstrap, topic, values, "batch", tls)
    else:
        r = run_confluent(bootstrap, topic, values, tls)
    r["records"] = records
    return r
