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
``--rounds`` rounds, in reverse order in even rounds (``harness.round_order``), so machine drift hits
every client alike; each broker's table reports medians over its rounds and ratios against the raw
ceiling, confluent-kafka (acks=all, idempotent) and the Java producer, all measured on that broker in
that run.

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
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from brokers import BROKERS, each_broker  # noqa: E402
from e2e_measure import (JAVA, JAVA_HEAP_MB, JAVA_PROPS, JAVA_WARM, MEASUREMENTS, PERF_MAIN,  # noqa: E402
                         child, java_line, java_supports_warmup, run_rounds)
from harness import (emit, failure_line, fmt_rate, machine_section, medians, ratio, ratio_table,  # noqa: E402
                     result_line)

REFERENCE = "ck_all"
#: Ratios read round by round (a measurement against the one it is judged by): fastkafka's loops
#: against confluent-kafka's, its send_batch against the raw ceiling, send() against the warmed-up
#: Java producer.
PAIRED = [("fk_send_all", REFERENCE), ("fk_produce_all", REFERENCE), ("fk_batch_list", "raw"),
          ("fk_batch_arrow", "raw"), ("fk_send_all", "java_warm")]


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
        print(result_line(r), flush=True)
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


if __name__ == "__main__":
    sys.exit(main())
