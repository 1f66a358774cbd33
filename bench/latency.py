"""Per-record delivery latency and CPU per record: fastkafka against confluent-kafka at paced rates,
with the application thread busy or idle, on Apache Kafka and on tansu.

    python bench/latency.py [--broker kafka|tansu|both] [--rates 20000,200000] [--apps busy,idle]
                            [--seconds 5] [--warmup 1] [--size 100] [--partitions 6] [--rounds 3]
                            [--tick-us 1000] [--broker-warmup 3] [--fk-gil-free-io on|off]
                            [--out bench/results/latency.md]

Latency of a record = the time its completion callback runs − the time just before its send call,
both from ``time.perf_counter_ns()`` (CLOCK_MONOTONIC) in the same process: the send time on the
application thread, the completion time inside the callback. Producers: linger 5 ms, acks=all,
idempotent, ``--size``-byte values (no key), a ``--partitions``-partition topic, fresh per
measurement.

- fastkafka: ``Producer(linger_ms=5)`` (acks=all and idempotence are its defaults),
  ``produce(topic, value, on_delivery=cb)``; the callback runs on the producer's I/O thread.
- confluent-kafka: ``produce(topic, value, on_delivery=cb)`` with ``acks=all``,
  ``enable.idempotence=true``, ``linger.ms=5``; its callbacks run only inside ``poll()``, served as
  confluent applications do: ``poll(0)`` after every burst, and, when idle, ``poll(remaining)`` as
  the way to wait for the next burst (it returns early to run callbacks; it takes whole
  milliseconds, so the last fraction of a millisecond is slept).

Each record's callback is its own ``functools.partial`` carrying the send time (the same for both
clients).

Pacing: records go out in bursts, one every ``--tick-us`` µs (1 ms: 20 records per burst at 20k/s,
200 at 200k/s). A burst sends every record due by its start (``rate × elapsed − sent``), so a late
burst catches up and the achieved rate stays the asked one as long as the client keeps up; the
achieved rate (records / (last send − first send)) is reported. Between bursts the application
thread is either

- busy: a pure-Python loop (arithmetic, holding the GIL as a serialising application does) until
  the next tick; the interpreter's switch interval is left at its default;
- idle: asleep until the next tick (``time.sleep``; confluent-kafka: ``poll(remaining)``).

Each broker first takes ``--broker-warmup`` seconds of unmeasured records (fastkafka, idle, the
highest rate), so that its JIT and caches are not charged to the first round. A measurement runs
``--warmup`` seconds of paced records whose latencies are dropped, then
``--seconds`` measured, then ``flush()``. Every record's callback must have run without error (or
the measurement is FAILED); on Apache Kafka the topic must then hold every record sent.

CPU per record: the producer process's CPU time (``resource.getrusage(RUSAGE_SELF)``, user +
system, every thread of the process: the application thread, fastkafka's I/O thread or
librdkafka's threads) from the start of the measured records to ``flush()`` returning, divided by
the measured records. It is taken from the idle runs (application asleep between bursts, a
completion callback per record), so it is the client's cost plus the pacing loop and the
latency-recording callback, which both clients pay alike. That harness is measured on its own
too (``floor``: the same pacing and callbacks, each callback run inside the produce call, no
client), and the CPU table also gives each client's cost above it: (client − floor) per record,
fastkafka's over confluent-kafka's, per round.

Every measurement runs in its own child process (fresh interpreter) against a fresh topic; the
measurements are interleaved round-robin for ``--rounds`` rounds (in reverse order in even rounds).
Tables report medians over rounds; the p99 and CPU ratios against confluent-kafka are medians of
the per-round ratios (both clients measured in the same round on the same broker).
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from brokers import BROKERS, each_broker, stored_records  # noqa: E402
from harness import (emit, machine_section, median_field, median_or_none, paired_ratios,  # noqa: E402
                     result_line, round_order, run_child)
from pacing import APPS, CLIENTS, FLOOR, KEPT_UP, LINGER_MS, paced_child  # noqa: E402

P50_SLACK_MS = 1.5  # the target: p50 <= linger_ms + 1.5 ms with the application busy


# ------------------------------------------------------------------------------------ parent
def names_for(rates: list[int], apps: list[str]) -> list[tuple[str, str, int]]:
    """(client, app, rate) of every measurement, rate by rate, app by app, confluent-kafka next to
    fastkafka; with the application idle, also the harness floor (no client) for the CPU table."""
    return [(c, a, r) for r in rates for a in apps
            for c in (*CLIENTS, *((FLOOR,) if a == "idle" else ()))]


def key(client: str, app: str, rate: int) -> str:
    return f"{client}-{app}-{rate}"


def run_rounds(kind: str, broker, args, names) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {key(*n): [] for n in names}
    if args.broker_warmup > 0:  # the broker's JIT and page cache, before any measured round
        topic = "lat-broker-warmup"
        broker.create_topic(topic, args.partitions)
        r = run_child([sys.executable, os.path.abspath(__file__), "--_child", "fk", "idle",
                           str(max(n[2] for n in names)), broker.bootstrap, topic, "--seconds",
                           str(args.broker_warmup), "--warmup", "0", "--size", str(args.size)], args.timeout)
        print(f"{kind} broker warm-up: {r.get('failed') or 'done'}", flush=True)
        if kind == "kafka":
            try:
                broker.delete_topic(topic)
            except Exception:  # noqa: BLE001 - a topic left over costs disk only
                pass
    for rnd in range(1, args.rounds + 1):
        for client, app, rate in round_order(names, rnd):
            k = key(client, app, rate)
            topic = f"lat-{k}-r{rnd}"
            broker.create_topic(topic, args.partitions)
            cmd = [sys.executable, os.path.abspath(__file__), "--_child", client, app, str(rate),
                   broker.bootstrap, topic, "--seconds", str(args.seconds), "--warmup", str(args.warmup),
                   "--size", str(args.size), "--tick-us", str(args.tick_us),
                   "--fk-gil-free-io", args.fk_gil_free_io]
            r = run_child(cmd, args.timeout)
            if "failed" not in r:
                if r["errors"] or r["undelivered"] or r["completed"] != r["sent"]:
                    r["failed"] = (f"{r['completed']} of {r['sent']} callbacks, errors {r['errors']}, "
                                   f"undelivered {r['undelivered']}")
                elif kind == "kafka" and client != FLOOR:
                    try:
                        held = stored_records(broker.bootstrap, topic, args.partitions)
                    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
                        held = f"unknown ({type(e).__name__}: {e})"
                    if not isinstance(held, int) or held < r["total_sent"]:
                        r["failed"] = f"topic holds {held} records, {r['total_sent']} sent"
            if kind == "kafka":
                try:
                    broker.delete_topic(topic)
                except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
                    print(f"  (could not delete {topic}: {e})", flush=True)
            results[k].append(r)
            msg = r["failed"] if "failed" in r else (
                f"achieved {r['achieved']:>9,.0f}/s  p50 {r['p50']:6.2f}  p99 {r['p99']:6.2f}  "
                f"p99.9 {r['p999']:6.2f}  max {r['max']:7.2f} ms  cpu {r['cpu_us_per_record']:.2f} us/rec")
            print(f"{kind} round {rnd} {k:<16} {msg}", flush=True)
    return results


#: Median of ``field`` over the rounds, None when any round failed.
med = median_field


def per_round_ratio(a: list[dict], b: list[dict], field: str) -> float | None:
    """Median over rounds of a's ``field`` / b's (the two ran in the same round); None when a
    round of either failed."""
    return median_or_none(paired_ratios(a, b, field)) if len(a) == len(b) else None


def fmt(x: float | None, spec: str = ".2f") -> str:
    return "FAILED" if x is None else format(x, spec)


def latency_table(results: dict[str, list[dict]], rates: list[int], apps: list[str]) -> list[str]:
    lines = ["| paced rate | application thread | client | achieved rec/s | p50 ms | p99 ms | p99.9 ms "
             "| max ms | p99 / confluent p99 | rounds p50 / p99 ms |",
             "|---:|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for rate in rates:
        for app in apps:
            ref = results[key("ck", app, rate)]
            for c, cname in CLIENTS.items():
                rs = results[key(c, app, rate)]
                rounds = ", ".join("FAILED" if "failed" in r else f"{r['p50']:.1f} / {r['p99']:.1f}"
                                   for r in rs)
                ratio = per_round_ratio(rs, ref, "p99") if c != "ck" else 1.0
                name = f"**{cname}**" if c == "fk" else cname
                lines.append(f"| {rate:,} | {APPS[app]} | {name} | {fmt(med(rs, 'achieved'), ',.0f')} "
                             f"| {fmt(med(rs, 'p50'))} | {fmt(med(rs, 'p99'))} | {fmt(med(rs, 'p999'))} "
                             f"| {fmt(med(rs, 'max'))} | {fmt(ratio)} | {rounds} |")
    return lines


def above_floor_ratio(fk: list[dict], ck: list[dict], floor: list[dict]) -> float | None:
    """Median over rounds of (fastkafka − floor) / (confluent-kafka − floor), CPU per record, all
    three from the same round: the clients' own cost, without the harness both pay."""
    per = []
    for a, b, f in zip(fk, ck, floor):
        if "failed" in a or "failed" in b or "failed" in f:
            return None
        own = b["cpu_us_per_record"] - f["cpu_us_per_record"]
        if own <= 0:
            return None
        per.append((a["cpu_us_per_record"] - f["cpu_us_per_record"]) / own)
    return statistics.median(per) if per and len(per) == len(fk) else None


def cpu_table(results: dict[str, list[dict]], rates: list[int]) -> list[str]:
    lines = ["| paced rate | fastkafka µs/record | confluent-kafka µs/record | ratio (median of per-round) "
             "| harness floor µs/record | ratio above the floor | per round fastkafka / confluent-kafka / floor µs |",
             "|---:|---:|---:|---:|---:|---:|---|"]
    for rate in rates:
        fk, ck = results[key("fk", "idle", rate)], results[key("ck", "idle", rate)]
        floor = results.get(key(FLOOR, "idle", rate), [])
        rounds = ", ".join("FAILED" if "failed" in a or "failed" in b or "failed" in f else
                           f"{a['cpu_us_per_record']:.2f} / {b['cpu_us_per_record']:.2f} / "
                           f"{f['cpu_us_per_record']:.2f}"
                           for a, b, f in zip(fk, ck, floor))
        lines.append(f"| {rate:,} | {fmt(med(fk, 'cpu_us_per_record'))} | {fmt(med(ck, 'cpu_us_per_record'))} "
                     f"| {fmt(per_round_ratio(fk, ck, 'cpu_us_per_record'))} "
                     f"| {fmt(med(floor, 'cpu_us_per_record'))} | {fmt(above_floor_ratio(fk, ck, floor))} "
                     f"| {rounds} |")
    return lines


def verdicts(results: dict[str, list[dict]], rates: list[int], apps: list[str]) -> list[str]:
    """The issue's targets, met or not, from this broker's medians."""
    out = []
    limit = LINGER_MS + P50_SLACK_MS
    for rate in rates:
        if "busy" in apps:
            fk, ck = results[key("fk", "busy", rate)], results[key("ck", "busy", rate)]
            p50 = med(fk, "p50")
            r99 = per_round_ratio(fk, ck, "p99")
            behind = [f"{CLIENTS[c]} achieved {fmt(med(rs, 'achieved'), ',.0f')} rec/s"
                      for c, rs in (("fk", fk), ("ck", ck))
                      if med(rs, "achieved") is not None and med(rs, "achieved") < KEPT_UP * rate]
            note = (f" (not at the paced rate: {', '.join(behind)}, so its latency includes records "
                    "queued behind the application)") if behind else ""
            out.append(f"- {rate:,} rec/s, application busy: fastkafka p50 {fmt(p50)} ms against ≤ "
                       f"{limit:.1f} ms: {'n/a' if p50 is None else ('met' if p50 <= limit else 'not met')}; "
                       f"p99 {fmt(r99)}× confluent-kafka's against ≤ 1: "
                       f"{'n/a' if r99 is None else ('met' if r99 <= 1 else 'not met')}{note}.")
        if "idle" in apps:
            fk, ck = results[key("fk", "idle", rate)], results[key("ck", "idle", rate)]
            c = per_round_ratio(fk, ck, "cpu_us_per_record")
            own = above_floor_ratio(fk, ck, results.get(key(FLOOR, "idle", rate), []))
            out.append(f"- {rate:,} rec/s, CPU per record: {fmt(c)}× confluent-kafka's against ≤ 0.5: "
                       f"{'n/a' if c is None else ('met' if c <= 0.5 else 'not met')} "
                       f"({fmt(own)}× above the harness floor both pay).")
    return out


def section(title: str, results, rates, apps, args, wall: float) -> list[str]:
    lines = [f"## {title}", "", f"{args.rounds} interleaved rounds, {wall:.0f} s.", "",
             "Delivery latency (callback time − send time), medians over rounds:", "",
             *latency_table(results, rates, apps), ""]
    if "idle" in apps:
        lines += ["CPU per record (the producer process, application idle, a callback per record):", "",
                  *cpu_table(results, rates), ""]
    lines += ["Targets:", "", *verdicts(results, rates, apps), ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--broker", choices=("kafka", "tansu", "both"), default="both")
    ap.add_argument("--rates", default="20000,200000", help="comma-separated paced rates, records/s")
    ap.add_argument("--apps", default="busy,idle", help="comma-separated: busy, idle")
    ap.add_argument("--seconds", type=float, default=5.0, help="measured seconds per measurement")
    ap.add_argument("--warmup", type=float, default=1.0, help="paced seconds before, not measured")
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--broker-warmup", type=float, default=3.0,
                    help="seconds of unmeasured records (fastkafka, idle, highest rate) per broker first")
    ap.add_argument("--tick-us", type=float, default=1000.0, help="µs between bursts")
    ap.add_argument("--kafka-heap-mb", type=int, default=1536, help="Apache Kafka broker's JVM heap")
    ap.add_argument("--timeout", type=float, default=180.0, help="per-measurement limit, seconds")
    ap.add_argument("--fk-gil-free-io", choices=("on", "off"), default="on",
                    help="fastkafka's gil_free_io setting (off: every batch sent from the GIL turn)")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "latency.md"))
    ap.add_argument("--_child", nargs=5, metavar=("CLIENT", "APP", "RATE", "BOOTSTRAP", "TOPIC"),
                    help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child:
        client, app, rate, bootstrap, topic = args._child
        r = paced_child(client, app, float(rate), bootstrap, topic, args)
        print(result_line(r), flush=True)
        return 0

    rates = [int(x) for x in args.rates.split(",") if x.strip()]
    apps = [a.strip() for a in args.apps.split(",") if a.strip()]
    for a in apps:
        if a not in APPS:
            raise SystemExit(f"unknown application state {a!r}; choose from {', '.join(APPS)}")
    names = names_for(rates, apps)
    kinds = list(BROKERS) if args.broker == "both" else [args.broker]
    wall0 = time.monotonic()
    load0 = os.getloadavg()[0]
    runs, broker_lines = each_broker(kinds, args, lambda kind, broker: run_rounds(kind, broker, args, names))
    sections: list[str] = []
    for title, results, seconds in runs:
        sections += section(title, results, rates, apps, args, seconds)
    wall = time.monotonic() - wall0
    lines = [
        "# Delivery latency and CPU per record",
        "",
        f"`python bench/latency.py --broker {args.broker} --rates {args.rates} --apps {args.apps} "
        f"--seconds {args.seconds:g} --warmup {args.warmup:g} --size {args.size} --partitions "
        f"{args.partitions} --rounds {args.rounds} --tick-us {args.tick_us:g} --broker-warmup "
        f"{args.broker_warmup:g} --fk-gil-free-io {args.fk_gil_free_io}` — "
        f"{time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s.",
        "",
        f"fastkafka's gil_free_io {args.fk_gil_free_io}. "
        f"{args.size}-byte values, linger {LINGER_MS} ms, acks=all, idempotent, {args.partitions} "
        f"partitions; bursts every {args.tick_us:g} µs; {args.warmup:g} s warm-up then {args.seconds:g} s "
        "measured per measurement, each in its own process. Latency = completion callback time − "
        "send time (perf_counter_ns). confluent-kafka's callbacks run in `poll()`: `poll(0)` after "
        "each burst, and `poll(remaining)` as its wait when idle. See the docstring of "
        "bench/latency.py for the method.",
        "",
        "Noise: a 2-core machine shared with the broker and other work; compare the clients by the "
        "ratios within one broker's section (same rounds).",
        "",
        *sections,
        *machine_section(broker_lines, load0),
    ]
    emit("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
