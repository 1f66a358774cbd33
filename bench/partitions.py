"""Throughput over many partitions: fastkafka against confluent-kafka with keyed records spread over
6 to 1,000 partitions, and with unkeyed records spread over 100 topics.

    python bench/partitions.py [--records 200000] [--rounds 3] [--shapes 6,100,300,1000,100x6]
                               [--keys 20000] [--size 100] [--only fk_produce,ck_produce,fk_send]
                               [--fresh-topics] [--fastkafka-path DIR]
                               [--bootstrap-servers HOST:PORT] [--write | --out FILE]
    python bench/partitions.py --combine LABEL=RUN.md [LABEL=RUN.md ...] [--write | --out FILE]

Shapes (``--shapes``): ``P`` is one topic of P partitions written with keys (``--keys`` distinct
keys, record i has key i mod K, the default partitioner: murmur2 of the key, Java-compatible, for
fastkafka; ``partitioner=murmur2_random``, the same placement, for confluent-kafka); ``TxP`` is T
topics of P partitions written without keys, record i going to topic i mod T in the producer loop.
Values are ``--size`` random bytes (1,024 distinct values cycled).

Broker: one Apache Kafka KRaft node started for the run (``fastkafka_tools.apachekafka.KafkaCluster``,
the rig's default heap, full JIT), or ``--bootstrap-servers``. Every measurement runs in its own
child process: fastkafka ``produce()`` (``fk_produce``), confluent-kafka ``produce()``
(``ck_produce``) and fastkafka ``send()`` (``fk_send``), interleaved round by round, in reverse order
in even rounds (A B C, C B A, ...). Before the shapes every measurement runs once untimed
(``--warmup-records`` on a fresh 100-partition topic: the broker's JIT, the page cache).

Topics, two modes:

- warm (the default): per shape, each measurement has its own topics, created once for the run.
  Before the timed rounds each is written once, untimed, by its own client: one record into every
  partition, then a full pass of the same records as a round (so every partition holds real data,
  its segment and index files in use). Every timed round of that measurement then writes into the
  same topics; they are deleted after the shape. This is the steady state of a long-lived topic.
- fresh (``--fresh-topics``): every measurement gets topics created for it (and deleted after it),
  so its timed records are the first real writes into each partition, which cost Apache Kafka far
  more than later writes (at 1,000 partitions the broker, not the client, sets the rate).

fastkafka is imported from ``--fastkafka-path DIR`` (a source tree with its extensions built in
place; default: this repository): the children run with ``PYTHONPATH=DIR``, a fastkafka child checks
that ``fastkafka.__file__`` lies under DIR, and the report gives the tree's ``git rev-parse --short
HEAD`` (never the path).

Timing: from the first produce() to flush() returning with every record acknowledged. Before the
clock each producer connects, loads every topic's metadata and delivers one warm-up record per topic
(InitProducerId included). Beside each rate: records per batch and Produce requests per second
(fastkafka: ``Producer.metrics()``; confluent-kafka: its statistics JSON; the results file says which
fields).

Delivery is checked after the clock stops: fastkafka's flush() must leave 0 records undelivered and
``metrics()`` must count every record sent and no error; confluent-kafka's flush() must leave 0 and
no delivery report may be an error; and the broker must hold exactly the records sent plus the
warm-ups: fresh, latest - earliest offsets over every partition of every topic; warm, the latest
offsets of every partition taken before and after the round, their differences summed. A measurement
that fails a check shows FAILED. For keyed shapes the per-partition counts (fresh) or offset
differences (warm) of fastkafka and confluent-kafka in the same round are compared (both place keys
by Java's murmur2).

Results: a markdown table per shape (median rates, the median of the per-round ratios to
confluent-kafka, records per batch, requests per second) and every round's counts; printed, and
written to bench/results/partitions.md with ``--write`` (or to ``--out FILE``). ``--combine`` puts
runs written with ``--out`` into one file: a summary of the ratios and records per batch of every
run side by side, then each run's own text under a heading that names its label, fastkafka's commit,
its mode and its load average.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from brokers import BROKER_PROPERTIES, Topics  # noqa: E402
from harness import (build_fingerprint, cpu_model, fmt_rate, kafka_run_line, median_or_none,  # noqa: E402
                     paired_ratios, process_cpu_s, result_line, round_order, run_child, settle,
                     tree_commit, tree_env)
from partitions_measure import CK_CHUNK, CK_CONFIG, CK_STATS_MS, MEASUREMENTS, Shape, child, parse_shape  # noqa: E402

RESULTS = os.path.join(HERE, "results", "partitions.md")
REFERENCE = "ck_produce"
DEFAULT_SHAPES = "6,100,300,1000,100x6"


# ------------------------------------------------------------------------------------ parent
def child_env(fastkafka_path: str) -> dict:
    """The children's environment: ``PYTHONPATH`` starts with the fastkafka tree."""
    return tree_env(fastkafka_path)


def check(r: dict, held: list[int] | None) -> dict:
    """Derived numbers of one measurement and its delivery check (``failed`` set when it failed)."""
    if "failed" in r:
        return r
    n = r["records"]
    r["rate"] = n / r["seconds"]
    r["records_per_batch"] = r["batch_records"] / r["batches"] if r["batches"] else None
    r["batches_per_request"] = r["batches"] / r["requests"] if r["requests"] else None
    r["requests_per_s"] = r["requests"] / r["seconds"]
    if r["undelivered"] or r["errors"] or r["delivered"] != n:
        r["failed"] = (f"delivered {r['delivered']} of {n}, {r['undelivered']} left by flush(), "
                       f"errors {r['errors']}")
    elif held is not None and sum(held) != n + r["warmup_records"]:
        r["failed"] = f"the broker holds {sum(held)} records, {n} + {r['warmup_records']} warm-up sent"
    return r


def child_cmd(name: str, bootstrap: str, shape: Shape, prefix: str, args, cover: bool = False) -> list[str]:
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap, shape.spec, prefix,
           "--records", str(args.records), "--size", str(args.size), "--keys", str(args.keys),
           "--fastkafka-path", args.fastkafka_path]
    return cmd + (["--_cover"] if cover else [])


def run_measured(topics: Topics, name: str, shape: Shape, prefix: str, args, broker_pid: int | None,
                 held, cover: bool = False) -> dict:
    """The broker left to go idle, one child process of ``name`` against ``prefix``'s topics, then
    ``held()`` (the records the broker took per partition, topic by topic) and the checks. With
    ``broker_pid``, the broker's CPU seconds while the child ran (connection, warm-up and the
    child's start included) are kept as ``broker_cpu_s``."""
    r_settle = settle(broker_pid)
    b0 = process_cpu_s(broker_pid)
    r = run_child(child_cmd(name, topics.bootstrap, shape, prefix, args, cover), args.timeout,
                  env=child_env(args.fastkafka_path))
    b1 = process_cpu_s(broker_pid)
    if b0 is not None and b1 is not None:
        r["broker_cpu_s"] = b1 - b0
    counts = None
    if "failed" not in r:
        try:
            counts = held()
        except Exception as e:  # noqa: BLE001
            r["failed"] = f"counting the records: {type(e).__name__}: {e}"
    r = check(r, counts)
    if counts is not None:
        r["empty_partitions"] = sum(1 for c in counts if not c)
        if shape.keyed:
            r["partition_counts"] = counts
    r["settle_s"] = r_settle
    r["load"] = os.getloadavg()[0]
    return r


def measure(topics: Topics, name: str, shape: Shape, prefix: str, args, broker_pid: int | None = None) -> dict:
    """Fresh topics, one child process of ``name`` against them, the checks (latest - earliest
    offsets), the topics deleted."""
    names = shape.topic_names(prefix)
    t0 = time.monotonic()
    try:
        topics.create(names, shape.partitions)
    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
        return {"failed": f"creating the topics: {type(e).__name__}: {e}", "load": os.getloadavg()[0]}
    setup = time.monotonic() - t0
    r = run_measured(topics, name, shape, prefix, args, broker_pid,
                     lambda: topics.counts(names, shape.partitions))
    r["topic_setup_s"] = setup
    try:
        topics.delete(names)
    except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
        print(f"  (could not delete {prefix}: {e})", flush=True)
    return r


def measure_warm(topics: Topics, name: str, shape: Shape, prefix: str, args,
                 broker_pid: int | None = None) -> dict:
    """One child process of ``name`` against ``prefix``'s existing topics; the records the broker
    took are the differences of every partition's latest offset before and after the round."""
    names = shape.topic_names(prefix)
    try:
        before = topics.latest(names, shape.partitions)
    except Exception as e:  # noqa: BLE001
        return {"failed": f"offsets before the round: {type(e).__name__}: {e}", "load": os.getloadavg()[0]}

    def held():
        after = topics.latest(names, shape.partitions)
        return [a - b for a, b in zip(after, before)]

    return run_measured(topics, name, shape, prefix, args, broker_pid, held)


def _log_line(r: dict) -> str:
    if "failed" in r:
        return "FAILED: " + r["failed"]
    return (f"{r['rate']:>10,.0f} rec/s  {r['seconds']:6.2f} s  batches {r['batches']:,}  "
            f"requests {r['requests']:,}  records/batch {r['records_per_batch']:.2f}")


def prefill(topics: Topics, shape: Shape, prefixes: dict[str, str], args, log, broker_pid) -> dict:
    """Warm mode, once per shape: every measurement's topics created, then written once by that
    measurement's own client: one record into every partition, then the same records as a round
    (untimed for the results; its counts are kept and shown). ``{name: result}``; a failure to
    create is kept as that measurement's ``failed``."""
    out: dict[str, dict] = {}
    for name, prefix in prefixes.items():
        t0 = time.monotonic()
        try:
            topics.create(shape.topic_names(prefix), shape.partitions)
        except Exception as e:  # noqa: BLE001
            out[name] = {"failed": f"creating the topics: {type(e).__name__}: {e}"}
            continue
        out[name] = {"topic_setup_s": time.monotonic() - t0}
    for name, prefix in prefixes.items():
        if "failed" in out[name]:
            log(f"{shape.spec:<6} prefill {name:<11} FAILED: {out[name]['failed']}")
            continue
        names = shape.topic_names(prefix)
        r = run_measured(topics, name, shape, prefix, args, broker_pid,
                         lambda: topics.counts(names, shape.partitions), cover=True)
        r["topic_setup_s"] = out[name]["topic_setup_s"]
        if "failed" not in r and r.get("empty_partitions"):
            r["failed"] = f"{r['empty_partitions']} partition(s) still empty after the prefill"
        out[name] = r
        log(f"{shape.spec:<6} prefill {name:<11} {_log_line(r)}")
    return out


def run_benchmark(bootstrap: str, args, log=print, broker_pid: int | None = None) -> dict:
    """Every shape's rounds (after the untimed warm-up pass). Returns ``{"shapes": {spec:
    {name: [round result, ...]}}, "prefill": {spec: {name: result}} (warm mode), "warmup": [...],
    "loads": [...], "mode": "warm" | "fresh", "fastkafka_commit": ...}``."""
    topics = Topics(bootstrap)
    run_id = uuid.uuid4().hex[:6]
    names = args.names
    fingerprint = build_fingerprint(args.fastkafka_path)
    out = {"shapes": {}, "prefill": {}, "warmup": [], "loads": [os.getloadavg()[0]],
           "mode": "fresh" if args.fresh_topics else "warm",
           "fastkafka_commit": tree_commit(args.fastkafka_path),
           "fastkafka_is_repo": os.path.realpath(args.fastkafka_path) == os.path.realpath(ROOT)}
    if args.warmup_records:
        wargs = argparse.Namespace(**{**vars(args), "records": args.warmup_records})
        for name in names:
            r = measure(topics, name, Shape(1, 100, True), f"pw-{run_id}-warmup-{name}".replace("_", "-"),
                        wargs, broker_pid)
            out["warmup"].append((name, r))
            log(f"warm-up  {name:<11} " + (r["failed"] if "failed" in r else f"{r['rate']:>10,.0f} rec/s"))
    for spec in args.shapes:
        shape = parse_shape(spec)
        res: dict[str, list[dict]] = {n: [] for n in names}
        prefixes = {n: f"pw-{run_id}-{shape.spec}-{n}".replace("_", "-") for n in names}
        pre = {}
        if not args.fresh_topics:
            pre = out["prefill"][shape.spec] = prefill(topics, shape, prefixes, args, log, broker_pid)
        try:
            for rnd in range(1, args.rounds + 1):
                for order, name in enumerate(round_order(names, rnd)):
                    if args.fresh_topics:
                        prefix = f"pw-{run_id}-{shape.spec}-{name}-r{rnd}".replace("_", "-")
                        r = measure(topics, name, shape, prefix, args, broker_pid)
                    elif "creating the topics" in pre[name].get("failed", ""):
                        r = {"failed": pre[name]["failed"], "load": os.getloadavg()[0]}
                    else:
                        r = measure_warm(topics, name, shape, prefixes[name], args, broker_pid)
                    r["round"], r["order"] = rnd, order
                    res[name].append(r)
                    out["loads"].append(r["load"])
                    log(f"{shape.spec:<6} round {rnd} {name:<11} {_log_line(r)}")
        finally:
            for name, r in pre.items():
                if "creating the topics" in r.get("failed", ""):
                    continue
                try:
                    topics.delete(shape.topic_names(prefixes[name]))
                except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
                    print(f"  (could not delete {prefixes[name]}: {e})", flush=True)
        out["shapes"][shape.spec] = res
    out["rebuilt_during_run"] = build_fingerprint(args.fastkafka_path) != fingerprint
    return out


# ------------------------------------------------------------------------------------ report
def summarize(res: dict[str, list[dict]]) -> dict[str, dict]:
    """Per measurement: medians over the rounds (None when a round failed) and the per-round
    ratios to confluent-kafka."""
    out = {}
    for name, rounds in res.items():
        ok = all("failed" not in r for r in rounds) and rounds
        get = (lambda key: median_or_none([r.get(key) for r in rounds])) if ok else (lambda key: None)
        ratios = paired_ratios(rounds, res[REFERENCE]) if REFERENCE in res else []
        out[name] = {"rate": get("rate"), "records_per_batch": get("records_per_batch"),
                     "requests_per_s": get("requests_per_s"),
                     "batches_per_request": get("batches_per_request"),
                     "ratios": ratios, "ratio": median_or_none(ratios) if ratios else None}
    return out


def _num(x, fmt="{:,.0f}") -> str:
    return fmt.format(x) if x is not None else "n/a"


def summary_table(report: dict, names: list[str]) -> list[str]:
    """One row per shape: the median rates, fastkafka's median per-round ratios to confluent-kafka,
    records per batch and Produce requests per second of each measurement."""
    label = {n: " ".join(MEASUREMENTS[n]) for n in names}
    fk = [n for n in names if n != REFERENCE]
    head = ["shape"] + [f"{label[n]} records/s" for n in names]
    if REFERENCE in names:
        head += [f"{label[n]} / confluent-kafka" for n in fk]
    head += [f"{label[n]} records/batch" for n in names] + [f"{label[n]} requests/s" for n in names]
    lines = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for spec, res in report["shapes"].items():
        s = summarize(res)
        cells = [parse_shape(spec).label] + [fmt_rate(s[n]["rate"]) for n in names]
        if REFERENCE in names:
            cells += [_num(s[n]["ratio"], "{:.2f}") for n in fk]
        cells += [_num(s[n]["records_per_batch"], "{:,.1f}") for n in names]
        cells += [_num(s[n]["requests_per_s"], "{:,.0f}") for n in names]
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def prefill_lines(pre: dict[str, dict], names: list[str]) -> list[str]:
    """Warm mode: one line on the untimed prefill pass of each measurement's topics."""
    parts = []
    for n in names:
        r = pre.get(n, {})
        label = " ".join(MEASUREMENTS[n])
        if "failed" in r:
            parts.append(f"{label} FAILED ({r['failed'].replace('|', '/')})")
        else:
            parts.append(f"{label} {fmt_rate(r['rate'])} records/s, {_num(r['records_per_batch'], '{:,.1f}')} "
                         f"records/batch, broker CPU {_num(r.get('broker_cpu_s'), '{:.2f}')} s")
    return ["Prefill (untimed; each client's own topics, fresh, one record into every partition before its "
            "clock, then the same records as a round; every partition held data afterwards unless marked "
            "FAILED): " + "; ".join(parts) + ".", ""]


def shape_section(spec: str, res: dict[str, list[dict]], names: list[str], pre: dict | None = None) -> list[str]:
    shape = parse_shape(spec)
    s = summarize(res)
    lines = [f"## {shape.label}", ""] + (prefill_lines(pre, names) if pre else []) + [
             "| client | median records/s | vs confluent-kafka: median of per-round ratios | per-round ratios "
             "| median records/batch | median batches/request | median Produce requests/s | rounds (records/s) |",
             "|---|---:|---:|---|---:|---:|---:|---|"]
    for n in names:
        rounds = res[n]
        rates = ", ".join(fmt_rate(r.get("rate")) if "failed" not in r else "FAILED" for r in rounds)
        why = next((r["failed"] for r in rounds if "failed" in r), None)
        if why:
            rates += f" ({why.replace('|', '/')})"
        ratio = "1.00" if n == REFERENCE else _num(s[n]["ratio"], "{:.2f}")
        per = "" if n == REFERENCE else ", ".join(_num(x, "{:.2f}") for x in s[n]["ratios"])
        lines.append(f"| {' '.join(MEASUREMENTS[n])} | {fmt_rate(s[n]['rate'])} | {ratio} | {per} "
                     f"| {_num(s[n]['records_per_batch'], '{:,.2f}')} "
                     f"| {_num(s[n]['batches_per_request'], '{:,.1f}')} "
                     f"| {_num(s[n]['requests_per_s'])} | {rates} |")
    lines += ["", "Every round (records and batches counted over the timed part only; warm-up records "
              "excluded):", "",
              "| round | client | records | seconds | records/s | batches | Produce requests | records/batch "
              "| batches/request | requests/s | detail |",
              "|---:|---|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    rows = sorted(((r.get("round", i + 1), n, r) for n in names for i, r in enumerate(res[n])),
                  key=lambda x: (x[0], x[2].get("order", 0)))
    for rnd, n, r in rows:
        label = " ".join(MEASUREMENTS[n])
        if "failed" in r and "batches" not in r:
            lines.append(f"| {rnd} | {label} | | | FAILED | | | | | | {r['failed'].replace('|', '/')} |")
            continue
        m = r.get("metrics", {})
        if n.startswith("fk_"):
            detail = (f"GIL-free requests {m.get('gil_free_requests', 0):,}, retries {m.get('retries', 0)}, "
                      f"bytes sent {m.get('net_bytes_sent', 0):,}, I/O waits {m.get('io_waits', 0):,}")
        else:
            detail = f"all requests {m.get('requests_all', 0):,}, statistics emits {m.get('stats_emits', 0)}"
        cpu = f"client CPU {r['client_cpu_s']:.2f} s" if r.get("client_cpu_s") is not None else ""
        if r.get("broker_cpu_s") is not None:
            cpu += f", broker CPU {r['broker_cpu_s']:.2f} s"
        detail = f"{cpu}; {detail}" if cpu else detail
        if "failed" in r:
            detail = "FAILED: " + r["failed"].replace("|", "/") + "; " + detail
        lines.append(f"| {rnd} | {label} | {r['records']:,} | {r['seconds']:.2f} | {fmt_rate(r['rate'])} "
                     f"| {r['batches']:,} | {r['requests']:,} | {_num(r['records_per_batch'], '{:,.2f}')} "
                     f"| {_num(r['batches_per_request'], '{:,.1f}')} | {_num(r['requests_per_s'])} | {detail} |")
    if shape.keyed and "fk_produce" in res and REFERENCE in res:
        same = [a.get("partition_counts") is not None and a.get("partition_counts") == b.get("partition_counts")
                for a, b in zip(res["fk_produce"], res[REFERENCE])]
        what = ("records each partition took in the round (latest offset after - before)" if pre is not None
                else "record counts")
        lines += ["", f"Per-partition {what} of fastkafka produce() and confluent-kafka in the same "
                  "round identical (same key placement): " + ", ".join("yes" if x else "no" for x in same) + "."]
    lines.append("")
    return lines


def machine_lines(broker_line: str, loads: list[float], note: str | None, report: dict | None = None) -> list[str]:
    import importlib.metadata as md

    try:
        import confluent_kafka
        ck = f"confluent-kafka {md.version('confluent-kafka')}, librdkafka {confluent_kafka.libversion()[0]}"
    except Exception:  # noqa: BLE001
        ck = "confluent-kafka (not installed)"
    report = report or {}
    commit = report.get("fastkafka_commit") or tree_commit(ROOT)
    if report.get("fastkafka_is_repo", True):
        where = "built in place in this repository"
    else:
        script = subprocess.run(["git", "log", "-1", "--format=%h", "--", "bench/partitions.py"], cwd=ROOT,
                                capture_output=True, text=True).stdout.strip() or "?"
        where = (f"imported from `--fastkafka-path` (a separate source tree built in place); this script as of "
                 f"git {script}")
    if report.get("rebuilt_during_run"):
        where += "; WARNING: its compiled extensions changed during the run (a rebuild)"
    lines = ["Machine:",
             f"- nproc: {os.cpu_count()} ({cpu_model()})",
             f"- Python {platform.python_version()}, {platform.platform()}",
             f"- fastkafka at git {commit}, {where}; {ck}",
             f"- {broker_line}",
             f"- load average (1 min), at the start / after each measurement: min {min(loads):.2f}, "
             f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (start {loads[0]:.2f}, "
             f"end {loads[-1]:.2f})"]
    if note:
        lines.append(f"- {note}")
    return lines + [""]


MODE_TEXT = {
    "warm": ("Warm topics (the default mode): per shape, each client measurement has its own topics, created "
             "once for the run and written once, untimed, by that client before the rounds (one record into "
             "every partition, then the same records as a round), so every partition holds data; every timed "
             "round writes into those same topics (the steady state of a long-lived topic); deleted after the "
             "shape."),
    "fresh": ("Fresh topics per measurement (`--fresh-topics`): created for it and deleted after it, so the "
              "timed records are the first real writes into each partition, which cost the broker far more "
              "than later writes."),
}


def render(report: dict, args, wall: float, broker_line: str) -> str:
    names = args.names
    mode = report.get("mode", "fresh" if getattr(args, "fresh_topics", False) else "warm")
    cmd = (f"python bench/partitions.py --records {args.records} --rounds {args.rounds} "
           f"--shapes {','.join(args.shapes)} --keys {args.keys} --size {args.size}")
    if names != list(MEASUREMENTS):
        cmd += f" --only {','.join(names)}"
    if mode == "fresh":
        cmd += " --fresh-topics"
    if not report.get("fastkafka_is_repo", True):
        cmd += " --fastkafka-path DIR"
    if os.environ.get("FASTKAFKA_KAFKA_DATA_ROOT") and not args.bootstrap_servers:
        cmd = f"FASTKAFKA_KAFKA_DATA_ROOT={os.environ['FASTKAFKA_KAFKA_DATA_ROOT']} {cmd}"
    lines = [
        "# Throughput over many partitions: fastkafka and confluent-kafka",
        "",
        f"`{cmd}` — {time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s.",
        "",
        f"{args.records:,} records per measurement, {args.size}-byte random values. Keyed shapes: one topic, "
        f"{args.keys:,} distinct keys (record i has key i mod {args.keys:,}), each client's default "
        "Java-compatible murmur2 placement (confluent-kafka: `partitioner=murmur2_random`). Unkeyed "
        "shape: record i goes to topic i mod T, no key (fastkafka's sticky null-key partitioner, "
        "confluent-kafka's `murmur2_random`, which is random for null keys, made sticky by its default "
        f"`sticky.partitioning.linger.ms=10`). {MODE_TEXT[mode]} Rate = records / (first "
        "produce() -> flush() returned, every record acknowledged); medians over "
        f"{args.rounds} interleaved rounds (order reversed in even rounds); the ratio to confluent-kafka "
        "is the median of the per-round ratios (the two ran one after the other in that round).",
        "",
        f"Mode: **{mode}**. fastkafka at git {report.get('fastkafka_commit', '?')}.",
        "",
        "Noise: a 2-core machine shared with the broker (which needs most of a core at these rates) and "
        "with whatever else runs on it; compare the clients by the ratios, measured in the same rounds.",
        "",
        "## Summary",
        "",
        *summary_table(report, names),
        "",
    ]
    for spec, res in report["shapes"].items():
        lines += shape_section(spec, res, names, report.get("prefill", {}).get(spec) if mode == "warm" else None)
    lines += [
        "Settings and counters:",
        "- fastkafka: `Producer(bootstrap_servers=..., linger_ms=5)`, otherwise its defaults (acks=all, "
        "idempotence on, batch_size 256 KiB, buffer 64 MiB, 5 requests in flight per connection, "
        "max_request_size 1 MiB, partitioner murmur2). Loop: `for t, k, v in zip(topics, keys, values): "
        "p.produce(t, v, k)` (or `p.send(t, v, k)`, its future dropped), then `p.flush()`. Counters: "
        "differences of `Producer.metrics()` taken after the warm-up and after `flush()`: "
        "`batches_sent` (batches put into Produce requests, both by the GIL turn and the GIL-free turn; "
        "a retried batch counts again, see retries), `produce_requests` (Produce requests sent), "
        "`records_sent` (records acknowledged); records/batch = records_sent / batches_sent; "
        "`gil_free_requests` is the part of the requests the GIL-free I/O turn sent.",
        "- confluent-kafka: "
        + ", ".join(f"`{k}={v}`" for k, v in CK_CONFIG.items() if k != "delivery.report.only.error")
        + f" (fastkafka's defaults), `delivery.report.only.error=true` with a global on_delivery that "
        f"counts failures, `statistics.interval.ms={CK_STATS_MS}`. Loop: the same zip, `produce(t, v, k)`, "
        f"`poll(0)` every {CK_CHUNK:,} records, `poll(0.01)` and retry on BufferError, then `flush()`. "
        "Counters from its statistics JSON (kept as strings while the clock runs, parsed afterwards): "
        "batches = the sum over every emit after the warm-up of each topic's `batchcnt.cnt` (a window "
        "histogram of records per batch, rolled over at every emit; the warm-up's batches fall in the "
        "window of an emit generated after the warm-up's flush, which is dropped, and the last emit is "
        "one generated after the timed flush returned); records/batch = the sum of those windows' "
        "`batchcnt.sum` (must equal the records sent) / batches; Produce requests = the difference of "
        "`brokers[*].req.Produce` (cumulative) between those two emits (`brokers[*].tx`, every request "
        "type, in the detail column). Statistics at this interval cost it a little (a JSON of every "
        "partition twice a second).",
        "- Delivery: fastkafka: `flush()` returned 0 undelivered, `records_sent` = records and no "
        "error; confluent-kafka: `flush()` left 0 and no error report; both: "
        + ("the differences of every partition's latest offset before and after the round "
           if mode == "warm" else "latest - earliest offsets over every partition of the measurement's topics ")
        + "(confluent-kafka's `AdminClient.list_offsets`), summed, equal to the records plus one warm-up "
        "record per topic" + ("; the prefill also had to leave no partition empty." if mode == "warm" else "."),
        "- Detail column: client CPU = the child process's CPU time (all its threads) over the timed part; "
        "broker CPU = the broker process's user + system CPU time while the child ran (its start, "
        "connection and warm-up included), when the broker's process is known.",
        "- Topics are created (one CreateTopics for all of a measurement's topics, then waiting until "
        "every partition answers ListOffsets) "
        + ("once per shape for each measurement, before its prefill, and deleted after the shape's rounds"
           if mode == "warm" else "before the child process starts and deleted after the count")
        + "; neither is timed. Before starting each child, the benchmark waits "
        "until the broker process is idle (below 0.15 of a core in two successive 0.25 s windows, at most "
        "20 s; only when it knows the broker's process). Each measurement runs in a fresh child process. "
        + (f"Before the rounds, every measurement ran once untimed with {args.warmup_records:,} records "
           "on a fresh 100-partition topic (broker JIT, page cache)." if args.warmup_records else
           "No untimed warm-up pass (`--warmup-records 0`)."),
        "",
        *machine_lines(broker_line, report["loads"], args.note, report),
    ]
    return "\n".join(lines)


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def parse_run(text: str) -> dict:
    """What ``combine`` needs from one run's markdown (as ``render`` writes it, or an older run of
    this script): the summary rows by shape label ({column header: cell}), fastkafka's commit, the
    mode, the command and the load average."""
    lines = text.splitlines()
    i = next((k for k, ln in enumerate(lines) if ln.startswith("| shape |")), None)
    if i is None:
        raise SystemExit("--combine: a file without the summary table (| shape | ...) of a run")
    head = _cells(lines[i])
    rows = {}
    for ln in lines[i + 2:]:
        if not ln.startswith("| "):
            break
        cells = _cells(ln)
        rows[cells[0]] = dict(zip(head, cells))
    commit = re.search(r"fastkafka at git ([0-9a-f?]+(?: \(uncommitted[^)]*\))?)", text)
    mode = re.search(r"^Mode: \*\*(\w+)\*\*", text, re.M)
    load = re.search(r"load average \(1 min\)[^:]*: min ([\d.]+), median ([\d.]+), max ([\d.]+)", text)
    cmd = re.search(r"^`((?:\w+=\S+ )*python bench/partitions\.py[^`]*)` — (.*)$", text, re.M)
    return {"rows": rows,
            "commit": commit.group(1) if commit else "?",
            "mode": mode.group(1) if mode else ("fresh" if "Fresh topics per measurement" in text else "?"),
            "load": tuple(float(x) for x in load.groups()) if load else None,
            "cmd": cmd.group(1) if cmd else "?", "when": cmd.group(2).rstrip(".") if cmd else "?"}


def demote(text: str) -> list[str]:
    """A run's lines under a heading of the combined file: its own title dropped, every other
    heading one level down."""
    lines = text.rstrip("\n").splitlines()
    if lines and lines[0].startswith("# "):
        lines = lines[1:]
    while lines and not lines[0].strip():
        lines = lines[1:]
    return ["#" + ln if re.match(r"#+ ", ln) else ln for ln in lines]


def combine(runs: list[tuple[str, str]], note: str | None = None) -> str:
    """One results file from several runs' markdown (``[(label, text)]``): the summary of the
    ratios to confluent-kafka and the records per batch of every run side by side, shape by shape,
    then each run's own text."""
    parsed = [(label, parse_run(text), text) for label, text in runs]
    shapes: list[str] = []
    for _, pr, _ in parsed:
        shapes += [sh for sh in pr["rows"] if sh not in shapes]
    fk, ck, fks = (" ".join(MEASUREMENTS[n]) for n in ("fk_produce", "ck_produce", "fk_send"))
    labels = [label for label, _, _ in parsed]
    head = (["shape"] + [f"produce()/ck {lb}" for lb in labels] + [f"send()/ck {lb}" for lb in labels]
            + [f"records/batch fk/ck {lb}" for lb in labels])
    table = ["| " + " | ".join(head) + " |", "|---|" + "---:|" * (len(head) - 1)]
    for sh in shapes:
        cells = [sh]
        for col in (f"{fk} / confluent-kafka", f"{fks} / confluent-kafka"):
            cells += [pr["rows"].get(sh, {}).get(col, "") or "-" for _, pr, _ in parsed]
        for _, pr, _ in parsed:
            row = pr["rows"].get(sh, {})
            a, b = row.get(f"{fk} records/batch"), row.get(f"{ck} records/batch")
            cells.append(f"{a} / {b}" if a and b else "-")
        table.append("| " + " | ".join(cells) + " |")

    def load(pr):
        lo = pr["load"]
        return f"load average (1 min) median {lo[1]:.2f} (min {lo[0]:.2f}, max {lo[2]:.2f})" if lo else "load ?"

    out = ["# Throughput over many partitions: fastkafka and confluent-kafka, warm and fresh topics", ""]
    if note:
        out += [note, ""]
    out += ["Runs of `bench/partitions.py` side by side (`--combine`); each run's full text follows under its "
            "label. Ratios: fastkafka's rate over confluent-kafka's, the median of the per-round ratios (the "
            "clients ran one after the other in every round); records/batch fk/ck: medians over the rounds, "
            "fastkafka produce() / confluent-kafka produce(). Warm: every partition written before the timed rounds "
            "(a long-lived topic); fresh: the timed records are each partition's first writes.", "",
            "## Summary", "", *table, "", "Runs:", ""]
    for label, pr, _ in parsed:
        out.append(f"- **{label}**: fastkafka at git {pr['commit']}, {pr['mode']} topics, {pr['when']}, "
                   f"{load(pr)}; `{pr['cmd']}`")
    out.append("")
    for label, pr, text in parsed:
        out += [f"## {label}: fastkafka at git {pr['commit']}, {pr['mode']} topics, {load(pr)}", ""]
        out += demote(text) + [""]
    return "\n".join(out)


def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000, help="records per measurement")
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--shapes", default=DEFAULT_SHAPES,
                    help="comma-separated: P (one keyed topic of P partitions) or TxP (T unkeyed topics "
                         "of P partitions); default %(default)s")
    ap.add_argument("--keys", type=int, default=20_000, help="distinct keys of the keyed shapes")
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--only", default="", help="comma-separated measurements: " + ",".join(MEASUREMENTS))
    ap.add_argument("--warmup-records", type=int, default=50_000,
                    help="records of the untimed warm-up pass before the rounds (0: none)")
    ap.add_argument("--fresh-topics", action="store_true",
                    help="fresh topics for every measurement (default: warm topics, created and written once "
                         "per shape and client, then written by every round)")
    ap.add_argument("--fastkafka-path", default=ROOT, metavar="DIR",
                    help="import fastkafka in the children from this source tree (extensions built in place); "
                         "default: this repository")
    ap.add_argument("--combine", nargs="+", metavar="LABEL=FILE", default=None,
                    help="instead of measuring: put runs written with --out into one results file "
                         "(--write or --out), a side-by-side summary first")
    ap.add_argument("--bootstrap-servers", default=None,
                    help="use this broker instead of starting one Apache Kafka node")
    ap.add_argument("--kafka-heap-mb", type=int, default=None,
                    help="heap of the started broker (default: the rig's, KafkaCluster's default)")
    ap.add_argument("--kafka-jit", choices=("full", "c1"), default="full")
    ap.add_argument("--broker-pid", type=int, default=None,
                    help="with --bootstrap-servers: the broker's process id, to report its CPU time")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-measurement limit, seconds")
    ap.add_argument("--write", action="store_true", help="write the results to bench/results/partitions.md")
    ap.add_argument("--out", default=None, help="write the results to this file instead")
    ap.add_argument("--note", default=None, help="a line added to the results' Machine section")
    ap.add_argument("--_child", nargs=4, metavar=("NAME", "BOOTSTRAP", "SHAPE", "PREFIX"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--_cover", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.fastkafka_path = os.path.abspath(args.fastkafka_path)
    if not os.path.isdir(os.path.join(args.fastkafka_path, "fastkafka")):
        raise SystemExit("--fastkafka-path: no fastkafka/ package in that directory")
    args.names = [n.strip() for n in args.only.split(",") if n.strip()] or list(MEASUREMENTS)
    for n in args.names:
        if n not in MEASUREMENTS:
            raise SystemExit(f"unknown measurement {n!r}; choose from {', '.join(MEASUREMENTS)}")
    args.names = [n for n in MEASUREMENTS if n in args.names]  # fixed order: fk, ck, fk send
    args.shapes = [parse_shape(s).spec for s in args.shapes.split(",") if s.strip()]
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._child:
        name, bootstrap, spec, prefix = args._child
        r = child(name, bootstrap, parse_shape(spec), prefix, args.records, args.size, args.keys,
                  args.fastkafka_path, args._cover)
        print(result_line(r), flush=True)
        return 0
    if args.combine:
        out = args.out or (RESULTS if args.write else None)
        runs = []
        for item in args.combine:
            label, sep, path = item.partition("=")
            if not sep or not label.strip():
                raise SystemExit(f"--combine: {item!r} is not LABEL=FILE")
            with open(path) as f:
                runs.append((label.strip(), f.read()))
        text = combine(runs, args.note)
        if out:
            with open(out, "w") as f:
                f.write(text)
        else:
            print(text)
        return 0

    wall0 = time.monotonic()
    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        broker_line = f"broker: {bootstrap} (given with --bootstrap-servers)"
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        kw = {"heap_mb": args.kafka_heap_mb} if args.kafka_heap_mb else {}
        broker = KafkaCluster(nodes=1, jit=args.kafka_jit, properties=BROKER_PROPERTIES, **kw).start(timeout=180)
        bootstrap = broker.bootstrap
        broker_line = kafka_run_line(broker.version, broker.heap_mb, args.kafka_jit, broker.data_place)
    try:
        report = run_benchmark(bootstrap, args, log=lambda s: print(s, flush=True),
                               broker_pid=broker.pid if broker is not None else args.broker_pid)
    finally:
        if broker is not None:
            broker.stop()
    text = render(report, args, time.monotonic() - wall0, broker_line)
    print()
    print(text)
    out = args.out or (RESULTS if args.write else None)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)
    return 0 if all("failed" not in r for res in report["shapes"].values()
                    for rs in res.values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
