"""The measurements of ``bench/e2e.py`` (also run by ``bench/txn_e2e.py``, ``bench/tls_e2e.py`` and
``bench/ab.py``): the catalogue of measurement names (``MEASUREMENTS``), one function per client run
in a child process (``child``: ``python bench/e2e.py --_child NAME BOOTSTRAP TOPIC ...``), and the
rounds that run them on one broker and check what it holds (``run_rounds``)."""

from __future__ import annotations

import os
import re
import socket
import struct
import subprocess
import sys
import time

from brokers import committed_records, stored_records
from harness import HERE, round_order, run_child

#: the script whose ``--_child`` runs one measurement
SCRIPT = os.path.join(HERE, "e2e.py")


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

JAVA = "java"
JAVA_WARM = "java_warm"

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

def java_line() -> str:
    """The Java runtime and the perf tool's jars (kafka-clients and kafka-tools versions)."""
    from fastkafka_tools.apachekafka import ensure_jars

    java = subprocess.run(["java", "-version"], capture_output=True, text=True).stderr.splitlines()
    jars = sorted(os.listdir(ensure_jars("tools")))
    pick = [j[:-4] for j in jars if re.match(r"kafka-(clients|tools)-\d", j)]
    return (f"- Java producer: {', '.join(pick)} (ProducerPerformance), "
            f"{java[0] if java else 'java ?'}, heap {JAVA_HEAP_MB} MiB, full JIT, SerialGC")


def run_rounds(kind: str, broker, args, names: list[str], java_warmup: int,
               committed: bool = False) -> dict[str, list[dict]]:
    """Every measurement of ``names`` once per round, in reverse order in even rounds
    (``harness.round_order``), each in a child process (``harness.run_child``). On
    Apache Kafka the topic must then hold at least the delivered records (latest - earliest
    offsets), or with ``committed`` exactly them as a read_committed consumer reads them
    (``committed_records``: no transaction left open, none aborted, nothing twice)."""
    results: dict[str, list[dict]] = {n: [] for n in names}
    for rnd in range(1, args.rounds + 1):
        for name in round_order(names, rnd):
            topic = f"e2e-{name}-r{rnd}".replace("_", "-")
            broker.create_topic(topic, args.partitions)
            cmd = [sys.executable, SCRIPT, "--_child", name, broker.bootstrap, topic,
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
