"""End-to-end throughput over TLS: fastkafka against confluent-kafka on the same TLS endpoint.

One Apache Kafka node (KRaft, full JIT) with a PLAINTEXT and an SSL listener (PEM certificates made
by ``fastkafka_tools.tlsrig``, server certificate for 127.0.0.1, TLS 1.3 negotiated). Each
measurement runs in its own process, in interleaved rounds (in reverse order in even rounds); the
table gives the medians. Every client: linger 5 ms, acks=all with idempotence, no compression,
records of ``--size`` bytes, ``--partitions`` partitions; delivery is checked from the broker's
offsets (every record must be stored).

    python bench/tls_e2e.py                       # 500k x 100 B, 3 rounds -> stdout
    python bench/tls_e2e.py --out bench/results/tls.md

Rows: fastkafka ``send()`` loop and ``send_batch(list)`` over TLS, confluent-kafka's ``produce()``
loop over TLS; the same fastkafka ``send()``, ``send_batch`` and confluent-kafka loops over PLAINTEXT
for the cost of TLS itself. fastkafka's rows also give the process's CPU time per record (all its
threads, ``time.process_time``) and the share of its Produce requests the I/O thread's GIL-free turn
sent; the TLS / plaintext ratio of that CPU per record, paired by round, closes the table.
"""
from __future__ import annotations

import argparse
import os
import platform
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from brokers import stored_records  # noqa: E402
from harness import median_field, result_line, round_order, run_child  # noqa: E402
from tls_measure import MEASUREMENTS, child  # noqa: E402


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
        print(result_line(child(name, bootstrap, topic, args.records, args.size, cafile)), flush=True)
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
                for name in (names if rnd == 0 else round_order(names, rnd)):
                    topic = f"tls-{name}-r{rnd}".replace("_", "-")
                    kc.create_topic(topic, args.partitions)
                    bootstrap = kc.bootstrap_for(MEASUREMENTS[name][2])
                    cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap,
                           topic, pki.ca, "--records",
                           str(args.records if rnd else args.warmup_records), "--size", str(args.size)]
                    r = run_child(cmd, args.timeout)
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

    med = {n: median_field(results[n], "rate") for n in names}

    def ratio(a, b):
        return f"{a / b:.2f}" if a and b else "-"

    import confluent_kafka
    import ssl

    from fastkafka._net.transport import TlsPipe

    probe = ssl.create_default_context().wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(),
                                                  server_hostname="probe")
    data_path = ("`TlsPipe` (OpenSSL calls on the I/O thread: with the GIL held on its GIL turn, "
                 "without it on its GIL-free turn)"
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
        "| client | variant | listener | median records/s | median MB/s | vs confluent-kafka on the same listener | CPU µs/record (median) | GIL-free requests | rounds (records/s) |",
        "|---|---|---|---:|---:|---:|---:|---:|---|",
    ]
    for n in names:
        client, variant, listener = MEASUREMENTS[n]
        peer = med.get("ck_tls" if listener == "SSL" else "ck_plain")
        rounds = ", ".join(f"{r['rate']:,.0f}" if "failed" not in r else f"failed ({r['failed']})"
                           for r in results[n])
        m = med[n]
        cpu = median_field(results[n], "cpu_us_per_record")
        ok = [r for r in results[n] if "failed" not in r and r.get("produce_requests")]
        share = (f"{sum(r['gil_free_requests'] for r in ok) / sum(r['produce_requests'] for r in ok):.0%}"
                 if ok else "-")
        lines.append(f"| {'**fastkafka**' if client == 'fastkafka' else client} | {variant} | {listener} | "
                     f"{f'{m:,.0f}' if m else '-'} | {f'{m * args.size / 1e6:,.1f}' if m else '-'} | "
                     f"{ratio(m, peer)} | {f'{cpu:.2f}' if cpu else '-'} | {share} | {rounds} |")
    if med.get("fk_send_tls") and med.get("fk_send_plain"):
        lines += ["", f"TLS costs fastkafka's `send()` loop {1 - med['fk_send_tls'] / med['fk_send_plain']:.0%} "
                      f"of its plaintext rate here"
                  + (f"; confluent-kafka {1 - med['ck_tls'] / med['ck_plain']:.0%}."
                     if med.get("ck_tls") and med.get("ck_plain") else ".")]
    lines.append("")
    for tls_name, plain_name, what in (("fk_send_tls", "fk_send_plain", "`send()`"),
                                       ("fk_batch_tls", "fk_batch_plain", "`send_batch`")):
        pairs = [(a["cpu_us_per_record"] / b["cpu_us_per_record"])
                 for a, b in zip(results.get(tls_name, []), results.get(plain_name, []))
                 if "failed" not in a and "failed" not in b]
        if pairs:
            pairs_text = ", ".join(f"{x:.2f}" for x in pairs)
            lines.append(f"fastkafka {what}: CPU per record over TLS / plaintext, paired by round: "
                         f"median **{sorted(pairs)[len(pairs) // 2]:.2f}x** ({pairs_text}).")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
