"""End-to-end throughput over TLS: fastkafka against confluent-kafka on the same TLS endpoint.

One Apache Kafka node (KRaft, full JIT) with a PLAINTEXT and an SSL listener (PEM certificates made
by ``fastkafka_tools.tlsrig``, server certificate for 127.0.0.1, TLS 1.3 negotiated). Each measurement runs
in its own process, in interleaved rounds; the table gives the medians. Every client: linger 5 ms,
acks=all with idempotence, no compression, records of ``--size`` bytes, ``--partitions`` partitions;
delivery is checked from the broker's offsets (every record must be stored).

    python bench/tls_e2e.py                       # 500k x 100 B, 3 rounds -> stdout
    python bench/tls_e2e.py --out bench/results/tls.md

Rows: fastkafka ``send()`` loop and ``send_batch(list)`` over TLS, confluent-kafka's ``produce()``
loop over TLS; the same fastkafka ``send()`` and confluent-kafka loops over PLAINTEXT for the cost of
TLS itself.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

LINGER_MS = 5
CHUNK = 100_000

# name -> (client, variant, listener)
MEASUREMENTS = {
    "fk_send_tls": ("fastkafka", "`send()` loop", "SSL"),
    "fk_batch_tls": ("fastkafka", "`send_batch(list)`", "SSL"),
    "ck_tls": ("confluent-kafka", "`produce()` loop", "SSL"),
    "fk_send_plain": ("fastkafka", "`send()` loop", "PLAINTEXT"),
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
    base = p.metrics()["records_sent"]
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
    m = p.metrics()
    p.close()
    return {"seconds": elapsed, "delivered": m["records_sent"] - base, "errors": m["errors"]}


def run_confluent(bootstrap: str, topic: str, values: list, tls: dict) -> dict:
    """bench/e2e.py's confluent-kafka loop (acks=all, idempotent), over TLS when ``tls`` is given."""
    from bench.e2e import run_confluent as loop

    extra = {"security.protocol": "SSL", "ssl.ca.location": tls["ssl_cafile"]} if tls else None
    return loop(bootstrap, topic, values, "all", extra)


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


# ------------------------------------------------------------------------------------ parent
def stored_records(bootstrap: str, topic: str, partitions: int) -> int:
    from fastkafka.admin import Admin

    with Admin(bootstrap_servers=bootstrap, client_id="tls-bench-check") as admin:
        return sum(admin.list_offsets(topic, p, "latest", timeout_ms=30000)
                   - admin.list_offsets(topic, p, "earliest", timeout_ms=30000)
                   for p in range(partitions))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--warmup-records", type=int, default=200_000,
                    help="records each client writes once before the rounds (the broker's JIT "
                         "compiles its TLS path; not counted)")
    ap.add_argument("--kafka-heap-mb", type=int, default=1024)
    ap.add_argument("--only", default=",".join(MEASUREMENTS), help="comma-separated measurements")
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--out", default=None, help="write the markdown table here (also printed)")
    ap.add_argument("--_child", nargs=4, metavar=("NAME", "BOOTSTRAP", "TOPIC", "CAFILE"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        name, bootstrap, topic, cafile = args._child
        print("RESULT " + json.dumps(child(name, bootstrap, topic, args.records, args.size, cafile)),
              flush=True)
        return 0

    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import kafka_ssl_listener, make_pki

    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {n!r} (known: {', '.join(MEASUREMENTS)})")
    load_start = os.getloadavg()[0]
    wall0 = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="fastkafka-tls-bench-") as tmp:
        pki = make_pki(os.path.join(tmp, "pki"))
        kc = KafkaCluster(nodes=1, jit="full", heap_mb=args.kafka_heap_mb, listeners={"SSL": "SSL"},
                          properties=kafka_ssl_listener("SSL", pki.server, pki.ca))
        if kc.cluster_id.startswith("-"):
            kc.cluster_id = "A" + kc.cluster_id[1:]
        kc.start(timeout=180)
        results: dict[str, list[dict]] = {n: [] for n in names}
        try:
            for rnd in range(0 if args.warmup_records else 1, args.rounds + 1):
                for name in names:
                    topic = f"tls-{name}-r{rnd}".replace("_", "-")
                    kc.create_topic(topic, args.partitions)
                    bootstrap = kc.bootstrap_for(MEASUREMENTS[name][2])
                    cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap,
                           topic, pki.ca, "--records",
                           str(args.records if rnd else args.warmup_records), "--size", str(args.size)]
                    try:
                        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=args.timeout,
                                            cwd=ROOT)
                        line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")), None)
                        r = (json.loads(line[7:]) if line is not None else
                             {"failed": f"exit {cp.returncode}: {(cp.stderr or cp.stdout).strip()[-400:]}"})
                    except subprocess.TimeoutExpired:
                        r = {"failed": f"timed out after {args.timeout:.0f}s"}
                    if "failed" not in r:
                        r["rate"] = r["records"] / r["seconds"]
                        held = stored_records(kc.bootstrap, topic, args.partitions)
                        if r["delivered"] != r["records"] or r["errors"] or held < r["records"] + 1:
                            r["failed"] = (f"delivered {r['delivered']} of {r['records']}, errors "
                                           f"{r['errors']}, topic holds {held} (+1 warm-up expected)")
                    kc.delete_topic(topic)
                    if rnd == 0:
                        done = r["failed"] if "failed" in r else f"{r['rate']:,.0f} rec/s"
                        print(f"warm-up {name:<14} {done}", flush=True)
                        continue
                    results[name].append(r)
                    msg = r["failed"] if "failed" in r else f"{r['rate']:>12,.0f} rec/s  {r['seconds']:.2f}s"
                    print(f"round {rnd} {name:<14} {msg}", flush=True)
        finally:
            kc.stop()
    wall = time.monotonic() - wall0

    med = {}
    for n in names:
        ok = [r["rate"] for r in results[n] if "failed" not in r]
        med[n] = statistics.median(ok) if ok and len(ok) == len(results[n]) else None

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "-"

    import confluent_kafka
    import ssl

    from fastkafka._net.transport import TlsPipe

    probe = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(),
                                                  server_hostname="probe")
    data_path = ("`TlsPipe` (OpenSSL calls on the I/O thread with the GIL held)"
                 if TlsPipe.attach(probe) is not None else
                 "`ssl.SSLObject` read/write (TlsPipe not available in this Python)")

    lines = [
        "# fastkafka over TLS: end to end against Apache Kafka's SSL listener",
        "",
        f"`python bench/tls_e2e.py --records {args.records} --size {args.size} --partitions "
        f"{args.partitions} --rounds {args.rounds}` (after a warm-up run of {args.warmup_records:,} records per client, not counted); one Apache Kafka {kc.version} node (KRaft, full "
        f"JIT, heap {args.kafka_heap_mb} MiB) with a PLAINTEXT and an SSL listener (PEM key store, "
        f"TLS 1.3, ECDSA P-256 certificate), on the same machine as the clients.",
        f"Machine: {os.cpu_count()} cores, {platform.python_implementation()} "
        f"{platform.python_version()}, {ssl.OPENSSL_VERSION}, confluent-kafka "
        f"{confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}); load average "
        f"{load_start:.2f} at the start, {os.getloadavg()[0]:.2f} at the end; {wall:.0f} s.",
        "Every client: linger 5 ms, acks=all + idempotence, no compression; each measurement in its "
        "own process, rounds interleaved; records counted from the broker's offsets.",
        f"fastkafka's TLS data path: {data_path}.",
        "",
        "| client | variant | listener | median records/s | median MB/s | vs confluent-kafka on the same listener | rounds (records/s) |",
        "|---|---|---|---:|---:|---:|---|",
    ]
    for n in names:
        client, variant, listener = MEASUREMENTS[n]
        peer = med.get("ck_tls" if listener == "SSL" else "ck_plain")
        rounds = ", ".join(f"{r['rate']:,.0f}" if "failed" not in r else f"failed ({r['failed']})"
                           for r in results[n])
        m = med[n]
        lines.append(f"| {'**fastkafka**' if client == 'fastkafka' else client} | {variant} | {listener} | "
                     f"{f'{m:,.0f}' if m else '-'} | {f'{m * args.size / 1e6:,.1f}' if m else '-'} | "
                     f"{ratio(m, peer)} | {rounds} |")
    if med.get("fk_send_tls") and med.get("fk_send_plain"):
        lines += ["", f"TLS costs fastkafka's `send()` loop {1 - med['fk_send_tls'] / med['fk_send_plain']:.0%} "
                      f"of its plaintext rate here"
                  + (f"; confluent-kafka {1 - med['ck_tls'] / med['ck_plain']:.0%}."
                     if med.get("ck_tls") and med.get("ck_plain") else ".")]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
