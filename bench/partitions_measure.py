"""The measurements of ``bench/partitions.py``, run in its child processes (``python bench/partitions.py
--_child NAME BOOTSTRAP SHAPE PREFIX ...``): the shapes (``Shape``, ``parse_shape``), the records of
a shape (``workload``) and one function per client (``run_fastkafka``, ``run_confluent``, ``child``).
The method is in ``bench/partitions.py``'s docstring."""
from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass

from harness import ROOT, import_fastkafka_from

# name -> (client, variant)
MEASUREMENTS = {
    "fk_produce": ("fastkafka", "produce()"),
    "ck_produce": ("confluent-kafka", "produce()"),
    "fk_send": ("fastkafka", "send()"),
}

LINGER_MS = 5
CK_CHUNK = 10_000            # confluent-kafka: poll(0) after every CK_CHUNK records
CK_STATS_MS = 500            # confluent-kafka: statistics.interval.ms
#: confluent-kafka set like fastkafka's defaults (fastkafka/config.py): acks all, idempotent,
#: linger 5 ms, batch 256 KiB, 5 requests in flight, 64 MiB of buffer, 120 s delivery timeout,
#: 1 MiB requests; and the partitioner that places keys as fastkafka's (Java's murmur2).
CK_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": LINGER_MS,
    "partitioner": "murmur2_random",
    "batch.size": 256 * 1024,
    "max.in.flight.requests.per.connection": 5,
    "queue.buffering.max.kbytes": 64 * 1024,
    "queue.buffering.max.messages": 1_000_000,
    "message.timeout.ms": 120_000,
    "message.max.bytes": 1_048_576,
    "delivery.report.only.error": True,
}
#: fastkafka's metrics() counters kept (as differences over the timed part) per measurement.
FK_COUNTERS = ("records_sent", "batches_sent", "produce_requests", "errors", "retries", "batches_split",
               "batches_expired", "net_requests", "net_bytes_sent", "net_disconnects", "io_waits",
               "io_wakeups_written", "io_timers_armed", "io_gil_free_turns", "gil_free_requests",
               "gil_free_answers", "io_slow_gil_waits", "io_gil_wait_ms_total")



# ------------------------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class Shape:
    topics: int
    partitions: int
    keyed: bool

    @property
    def spec(self) -> str:
        return str(self.partitions) if self.topics == 1 else f"{self.topics}x{self.partitions}"

    @property
    def label(self) -> str:
        if self.topics == 1:
            return f"{self.partitions} partitions, keyed"
        return f"{self.topics} topics x {self.partitions} partitions, unkeyed"

    def topic_names(self, prefix: str) -> list[str]:
        return [prefix] if self.topics == 1 else [f"{prefix}-{i}" for i in range(self.topics)]


def parse_shape(spec: str) -> Shape:
    """``"300"``: one topic of 300 partitions, keyed; ``"100x6"``: 100 topics of 6, unkeyed."""
    spec = spec.strip().lower()
    try:
        if "x" in spec:
            t, p = spec.split("x", 1)
            shape = Shape(int(t), int(p), False)
        else:
            shape = Shape(1, int(spec), True)
    except ValueError:
        raise SystemExit(f"bad shape {spec!r}: P (one keyed topic of P partitions) or TxP "
                         "(T unkeyed topics of P partitions)") from None
    if shape.topics < 1 or shape.partitions < 1:
        raise SystemExit(f"bad shape {spec!r}: counts must be >= 1")
    return shape


def workload(shape: Shape, topics: list[str], records: int, size: int, keys: int):
    """Three lists of ``records`` items, the same for every client: the topic, key and value of
    each record. Keyed: one topic, key i mod ``keys``; unkeyed: topic i mod T, no key."""
    distinct = [os.urandom(size) for _ in range(1024)]
    values = [distinct[i % 1024] for i in range(records)]
    if shape.keyed:
        names = [b"key-%08d" % i for i in range(keys)]
        return [topics[0]] * records, [names[i % keys] for i in range(records)], values
    return [topics[i % len(topics)] for i in range(records)], [None] * records, values


# ------------------------------------------------------------------------------------ children
def run_fastkafka(bootstrap: str, shape: Shape, topics: list[str], tops: list, keys: list,
                  values: list, mode: str, cover: bool = False) -> dict:
    """``produce()`` or ``send()`` of every record, then flush(); fastkafka's defaults except
    linger_ms=5 (its default too, given explicitly). ``cover``: before the per-topic warm-up record,
    one record into every partition of every topic (the warm mode's prefill)."""
    from fastkafka import Producer

    p = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS)
    try:
        warm = [p.send(t, b"warm-up", None, part) for t in topics for part in range(shape.partitions)
                ] if cover else []
        warm += [p.send(t, b"warm-up", b"warm-up" if shape.keyed else None) for t in topics]
        for f in warm:
            f.get(timeout=60)
        m0 = p.metrics()
        one = p.produce if mode == "produce" else p.send
        c0, t0 = time.process_time(), time.perf_counter()
        for t, k, v in zip(tops, keys, values):
            one(t, v, k)
        undelivered = p.flush()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        m1 = p.metrics()
    finally:
        p.close()
    counters = {k: m1[k] - m0[k] for k in FK_COUNTERS}
    return {"seconds": elapsed, "undelivered": undelivered, "delivered": counters["records_sent"],
            "errors": counters["errors"], "batches": counters["batches_sent"],
            "requests": counters["produce_requests"], "batch_records": counters["records_sent"],
            "metrics": counters, "warmup_records": len(warm), "client_cpu_s": cpu}


def _ck_stats_after(p, stats: list, t_mono: float, timeout: float = 30.0) -> dict:
    """Serve ``p``'s callbacks until a statistics emit generated after ``t_mono`` (time.monotonic();
    the JSON's ``ts`` is librdkafka's monotonic clock in microseconds) has arrived; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.poll(0.05)
        if stats:
            last = json.loads(stats[-1])
            if last["ts"] > t_mono * 1e6:
                return last
    raise RuntimeError(f"no confluent-kafka statistics within {timeout:.0f}s "
                       f"(statistics.interval.ms={CK_STATS_MS})")


def _ck_produce_requests(st: dict) -> tuple[int, int]:
    """(Produce requests, all requests) sent so far, summed over the statistics' brokers."""
    produce = sum(b.get("req", {}).get("Produce", 0) for b in st["brokers"].values())
    return produce, sum(b.get("tx", 0) for b in st["brokers"].values())


def run_confluent(bootstrap: str, shape: Shape, topics: list[str], tops: list, keys: list,
                  values: list, cover: bool = False) -> dict:
    """confluent-kafka's produce() loop set like fastkafka's defaults (CK_CONFIG), ``poll(0)``
    every CK_CHUNK records, ``poll(0.01)`` and retry on BufferError, then flush(). Batches and
    requests come from its statistics (``statistics.interval.ms``; raw JSON strings kept while
    the clock runs, parsed after it stopped). ``cover``: as run_fastkafka's."""
    from confluent_kafka import Producer

    failed = [0]
    stats: list[str] = []

    def on_error_report(err, msg):  # delivery.report.only.error: failures only
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, **CK_CONFIG, "on_delivery": on_error_report,
                  "statistics.interval.ms": CK_STATS_MS, "stats_cb": stats.append})
    warmup = 0
    for t in topics:
        p.list_topics(t, timeout=30)
        for part in range(shape.partitions if cover else 0):
            p.produce(t, b"warm-up", None, partition=part)
            warmup += 1
            if warmup % CK_CHUNK == 0:
                p.poll(0)
        p.produce(t, b"warm-up", b"warm-up" if shape.keyed else None)
        warmup += 1
    if p.flush(60) != 0 or failed[0]:
        raise RuntimeError("warm-up records not delivered")
    # A statistics emit after the warm-up: its windows (batch counts) are rolled over, so the
    # emits that follow count only the timed records; its request counters are the baseline.
    base = _ck_stats_after(p, stats, time.monotonic())
    stats.clear()
    n = len(values)
    chunks = [(tops[i:i + CK_CHUNK], keys[i:i + CK_CHUNK], values[i:i + CK_CHUNK])
              for i in range(0, n, CK_CHUNK)]
    produce, poll = p.produce, p.poll
    c0, t0 = time.process_time(), time.perf_counter()
    for ct, ck, cv in chunks:
        for t, k, v in zip(ct, ck, cv):
            try:
                produce(t, v, k)
            except BufferError:
                while True:
                    poll(0.01)
                    try:
                        produce(t, v, k)
                        break
                    except BufferError:
                        pass
        poll(0)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    last = _ck_stats_after(p, stats, time.monotonic())
    emits = [json.loads(s) for s in stats]
    batches = sum(e["topics"][t]["batchcnt"]["cnt"] for e in emits for t in topics if t in e["topics"])
    batch_records = sum(e["topics"][t]["batchcnt"]["sum"] for e in emits for t in topics
                        if t in e["topics"])
    (req0, all0), (req1, all1) = _ck_produce_requests(base), _ck_produce_requests(last)
    return {"seconds": elapsed, "undelivered": remaining, "delivered": n - remaining - failed[0],
            "errors": failed[0], "batches": batches, "requests": req1 - req0,
            "batch_records": batch_records,
            "metrics": {"requests_all": all1 - all0, "stats_emits": len(emits)},
            "warmup_records": warmup, "client_cpu_s": cpu}


def child(name: str, bootstrap: str, shape: Shape, prefix: str, records: int, size: int,
          keys: int, fastkafka_path: str = ROOT, cover: bool = False) -> dict:
    topics = shape.topic_names(prefix)
    tops, ks, vs = workload(shape, topics, records, size, keys)
    if name in ("fk_produce", "fk_send"):
        import_fastkafka_from(fastkafka_path)
        r = run_fastkafka(bootstrap, shape, topics, tops, ks, vs, name[3:], cover)
    elif name == "ck_produce":
        r = run_confluent(bootstrap, shape, topics, tops, ks, vs, cover)
    else:
        raise SystemExit(f"unknown measurement {name!r}")
    r["records"] = records
    return r
