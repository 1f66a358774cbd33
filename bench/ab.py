"""Two builds of fastkafka side by side on one broker: the guard for a change to a hot path.

    python bench/ab.py --before ../fk-before --after . [--rounds 5] [--records 1000000]
                       [--only fk_send_all,tls_send,lat_busy_20000,...] [--keyed 100,1000]
                       [--latency-rates 20000,200000] [--latency-apps busy,idle]
                       [--latency-seconds 5] [--latency-warmup 1] [--tls-warmup-records 200000]
                       [--out FILE]

``--before`` and ``--after`` are source trees with their extensions built in place (a checkout
of the commit before the change: ``git worktree add DIR COMMIT`` then ``python setup.py build_ext
--inplace`` there). Each measurement runs in a child process whose ``PYTHONPATH`` is that tree,
so the same script, broker and values time both builds; rounds are paired (before and after run
back to back, the order alternating from round to round) and the report gives the median of the
per-round ratios after/before.

Measurements (``--only``, comma-separated; without it the guard set, marked *):

- those of ``bench/e2e.py`` (``fk_send_all``*, ``fk_produce_all``*, ``fk_batch_list``*,
  ``fk_batch_arrow``*, ... on a ``--partitions`` topic, default 6), run by the tree's own
  ``bench/e2e.py``;
- ``tls_send``*: the ``send()`` loop of ``bench/tls_e2e.py`` (``--records`` records of 100 B, linger
  5 ms) over TLS to the broker's SSL listener (Kafka's own TLS, PEM certificates made for the run
  by ``fastkafka_tools.tlsrig``), ``--partitions`` partitions;
- ``lat_<app>_<rate>``*: per-record delivery latency (completion callback time − send time) of
  ``bench/latency.py``'s fastkafka child: ``produce()`` paced at ``<rate>`` records/s in bursts
  every ``--tick-us`` µs, the application thread ``busy`` (a Python loop between bursts) or
  ``idle`` (asleep), ``--latency-warmup`` seconds unmeasured then ``--latency-seconds`` measured,
  on a ``--partitions`` topic; p50 and p99 (and CPU per record). The guard set has every
  ``--latency-apps`` x ``--latency-rates`` (default busy,idle x 20000,200000); ``--only lat`` stands
  for the same four;
- ``keyed<N>`` (``--keyed``): ``produce()`` of 100-byte values with 20,000 distinct keys into an
  N-partition topic.

Ratios are after / before for every measurement: for the rates (records/s) above 1 is faster, for
the latencies (µs) below 1 is faster; the report also gives each build's medians. The TLS and
latency children are this repository's (``bench/tls_e2e.py``, ``bench/latency.py``, run through
this script), importing fastkafka from the tree under test (checked in the child); their topics'
records are counted from the broker's offsets afterwards (every record sent must be stored).

Every topic is fresh and written once before the clock starts in each child (the broker's first
write into a new partition is slow for every client). Before the first round the broker is warmed
untimed with the after build: a TLS run of ``--tls-warmup-records`` (its TLS path) and
``--latency-broker-warmup`` seconds of paced records. One Apache Kafka node (``KafkaCluster``,
with an SSL listener when ``tls_send`` is measured), or ``--bootstrap-servers`` (then
``tls_send`` needs ``--tls-bootstrap-servers`` and ``--tls-cafile``).

A default (guard) run takes about 20 s for the broker and the warm-ups, then about 65 s a round
on the 2-core reference VM (5 rounds: about 6 minutes).
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import tls_measure  # noqa: E402
from brokers import stored_records  # noqa: E402
from e2e_measure import MEASUREMENTS  # noqa: E402
from harness import (build_fingerprint, cpu_us_per_record, failure_line, import_fastkafka_from,  # noqa: E402
                     median_field, median_or_none, paired_ratios, result_line, round_order, run_child,
                     tree_commit, tree_env)
from pacing import APPS, KEPT_UP, paced_child  # noqa: E402

#: Round by round, after's field / before's (``harness.paired_ratios``).
paired = paired_ratios

KEYS = 20_000
LINGER_MS = 5
SIZE = 100
THROUGHPUT_GUARD = ["fk_send_all", "fk_produce_all", "fk_batch_list", "fk_batch_arrow"]
TLS = "tls_send"
LATENCY = "lat"       # in --only: every --latency-apps x --latency-rates


# ------------------------------------------------------------------------------------ pure helpers
def latency_name(app: str, rate: int) -> str:
    return f"lat_{app}_{rate}"


def parse_latency(name: str) -> tuple[str, int] | None:
    """(app, rate) of a latency measurement's name (``lat_busy_20000``), None for another kind.
    Raises ValueError for a ``lat_`` name with an unknown application state or a bad rate."""
    if not name.startswith("lat_"):
        return None
    app, _, rate = name[4:].partition("_")
    if app not in APPS or not rate.isdigit() or int(rate) <= 0:
        raise ValueError(f"{name!r}: latency measurements are lat_<{'|'.join(APPS)}>_<records/s>")
    return app, int(rate)


def select(only: str | None, keyed: str, rates: list[int], apps: list[str]) -> list[str]:
    """The measurements of a run, in order, each once: ``only`` (comma-separated; ``lat`` expands
    to every app x rate), else the guard set (the throughput four, ``tls_send``, the latencies);
    then ``keyed<N>`` for every N of ``keyed``. Raises ValueError for an unknown name."""
    lat = [latency_name(a, r) for r in rates for a in apps]
    if only is None:
        names = THROUGHPUT_GUARD + [TLS] + lat
    else:
        names = []
        for n in (x.strip() for x in only.split(",")):
            names += lat if n == LATENCY else [n] if n else []
    names += [f"keyed{int(k)}" for k in keyed.split(",") if k.strip()]
    out = []
    for n in names:
        if n in out:
            continue
        known = (n in MEASUREMENTS or n == TLS or parse_latency(n) is not None
                 or (n.startswith("keyed") and n[5:].isdigit()))
        if not known:
            raise ValueError(f"unknown measurement {n!r}")
        out.append(n)
    return out


def is_latency(name: str) -> bool:
    return name.startswith("lat_")


def _num(x: float | None, spec: str) -> str:
    return "failed" if x is None else format(x, spec)


def _rounds(per: list[float | None]) -> str:
    return ", ".join("failed" if x is None else f"{x:.2f}" for x in per)


def throughput_table(names: list[str], results: dict) -> list[str]:
    """Records/s of each build (medians over rounds) and after/before per round (higher is better)."""
    lines = ["| measurement | before rec/s | after rec/s | median ratio after/before (≥ 1: no slower) "
             "| per-round ratios | child CPU µs/record before / after | CPU median ratio after/before "
             "(≤ 1: no more work) |",
             "|---|---:|---:|---:|---|---:|---:|"]
    for name in names:
        b, a = results[(name, "before")], results[(name, "after")]
        per = paired(a, b, "rate")
        cpu = paired(a, b, "cpu_us")
        lines.append(f"| {name} | {_num(median_field(b, 'rate'), ',.0f')} | {_num(median_field(a, 'rate'), ',.0f')} "
                     f"| {_num(median_or_none(per), '.3f')} | {_rounds(per)} "
                     f"| {_num(median_field(b, 'cpu_us'), '.2f')} / {_num(median_field(a, 'cpu_us'), '.2f')} "
                     f"| {_num(median_or_none(cpu), '.3f')} |")
    return lines


def latency_table(names: list[str], results: dict) -> list[str]:
    """p50 and p99 in µs of each build (medians over rounds), after/before per round (lower is
    better), the rates achieved and CPU per record."""
    lines = ["| measurement | before p50 µs | after p50 µs | p50 after/before (≤ 1: no slower) "
             "| before p99 µs | after p99 µs | p99 after/before (≤ 1: no slower) "
             "| per-round p50 / p99 ratios | achieved rec/s before / after "
             "| CPU µs/record before / after (idle only) |",
             "|---|---:|---:|---:|---:|---:|---:|---|---|---|"]
    for name in names:
        b, a = results[(name, "before")], results[(name, "after")]
        p50, p99 = paired(a, b, "p50"), paired(a, b, "p99")
        per = ", ".join("failed" if x is None or y is None else f"{x:.2f} / {y:.2f}" for x, y in zip(p50, p99))
        # busy: the process's CPU is mostly the application's loop, not the client's
        cpu = (f"{_num(median_field(b, 'cpu_us_per_record'), '.2f')} / "
               f"{_num(median_field(a, 'cpu_us_per_record'), '.2f')}" if parse_latency(name)[0] == "idle" else "–")
        lines.append(
            f"| {name} | {_num(median_field(b, 'p50', 1000), ',.0f')} | {_num(median_field(a, 'p50', 1000), ',.0f')} "
            f"| {_num(median_or_none(p50), '.3f')} "
            f"| {_num(median_field(b, 'p99', 1000), ',.0f')} | {_num(median_field(a, 'p99', 1000), ',.0f')} "
            f"| {_num(median_or_none(p99), '.3f')} | {per} "
            f"| {_num(median_field(b, 'achieved'), ',.0f')} / {_num(median_field(a, 'achieved'), ',.0f')} "
            f"| {cpu} |")
    return lines


def behind(names: list[str], results: dict) -> list[str]:
    """The latency measurements where a build's median achieved rate fell below the paced one
    (its latencies then include records queued behind the application)."""
    out = []
    for name in names:
        _, rate = parse_latency(name)
        for label in ("before", "after"):
            got = median_field(results[(name, label)], "achieved")
            if got is not None and got < KEPT_UP * rate:
                out.append(f"{name} {label}: {got:,.0f} rec/s")
    return out


def failures(names: list[str], results: dict) -> list[str]:
    return [f"- {name} {label} round {i}: {failure_line(r['failed'])}"
            for name in names for label in ("before", "after")
            for i, r in enumerate(results[(name, label)], 1) if "failed" in r]


# ------------------------------------------------------------------------------------ children
def keyed_child(bootstrap: str, topic: str, records: int, partitions: int) -> dict:
    """``produce()`` of keyed records into ``topic`` (``partitions`` partitions, every one written
    once first, untimed), then ``flush()``."""
    from fastkafka import Producer

    keys = [b"key-%d" % i for i in range(KEYS)]
    value = b"x" * SIZE
    with Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS) as p:
        for part in range(partitions):
            p.produce(topic, b"warm-up", partition=part)
        if p.flush(120) != 0:
            raise RuntimeError("warm-up records not delivered")
        base = p.metrics()
        produce = p.produce
        t0 = time.perf_counter()
        for i in range(records):
            produce(topic, value, key=keys[i % KEYS])
        left = p.flush(300)
        elapsed = time.perf_counter() - t0
        m = p.metrics()
    return {"seconds": elapsed, "delivered": m["records_sent"] - base["records_sent"] if not left else -1,
            "errors": m["errors"] - base["errors"],
            "batches_sent": m["batches_sent"] - base["batches_sent"],
            "produce_requests": m["produce_requests"] - base["produce_requests"], "records": records}


def tls_child(bootstrap: str, topic: str, records: int, cafile: str) -> dict:
    """bench/tls_e2e.py's fastkafka ``send()`` loop over TLS (one warm-up record first)."""
    r = tls_measure.child("fk_send_tls", bootstrap, topic, records, SIZE, cafile)
    r["warmup_records"] = 1
    return r


def latency_child(app: str, rate: int, bootstrap: str, topic: str, args) -> dict:
    """bench/latency.py's fastkafka child (``produce()`` with a completion callback per record,
    paced, gil_free_io on as by default)."""
    opts = argparse.Namespace(size=SIZE, tick_us=args.tick_us, warmup=args.latency_warmup,
                              seconds=args.latency_seconds, fk_gil_free_io="on")
    return paced_child("fk", app, float(rate), bootstrap, topic, opts)


# ------------------------------------------------------------------------------------ parent
def run_tree_child(tree: str, cmd: list[str], timeout: float) -> dict:
    """One child with ``PYTHONPATH`` = ``tree``, from ``tree`` (``harness.run_child``): the JSON of its
    ``RESULT`` line with ``child_cpu_s``, the child's whole CPU time (user + system, every thread:
    start-up and set-up included, the same for both builds; less disturbed by other work on the
    machine than its wall time), or ``{"failed": why}``."""
    return run_child(cmd, timeout, cwd=os.path.abspath(tree), env=tree_env(tree, keep_pythonpath=False))


def check_throughput(r: dict, held=None) -> dict:
    """A throughput child's result with its ``rate``, or ``failed`` when it lost a record (and,
    given ``held``, the topic holds fewer than the records plus ``r["warmup_records"]``)."""
    if "failed" in r:
        return r
    if r.get("delivered") != r.get("records") or r.get("errors"):
        r["failed"] = f"delivered {r.get('delivered')} of {r.get('records')}, errors {r.get('errors')}"
    elif held is not None and held < r["records"] + r.get("warmup_records", 0):
        r["failed"] = f"topic holds {held} records, {r['records']} + {r.get('warmup_records', 0)} sent"
    else:
        r["rate"] = r["records"] / r["seconds"]
        r["cpu_us"] = cpu_us_per_record(r["child_cpu_s"], r["records"])
    return r


def check_latency(r: dict, held=None) -> dict:
    """A latency child's result, ``failed`` unless every record's callback ran without error, the
    flush left nothing and (given ``held``) the topic holds every record sent."""
    if "failed" in r:
        return r
    if r["errors"] or r["undelivered"] or r["completed"] != r["sent"]:
        r["failed"] = (f"{r['completed']} of {r['sent']} callbacks, errors {r['errors']}, "
                       f"undelivered {r['undelivered']}")
    elif held is not None and held < r["total_sent"]:
        r["failed"] = f"topic holds {held} records, {r['total_sent']} sent"
    return r


def child_cmd(name: str, tree: str, bootstrap: str, topic: str, args, tls=None) -> list[str]:
    here = [sys.executable, os.path.abspath(__file__)]
    if name.startswith("keyed"):
        return here + ["--_keyed", bootstrap, topic, str(args.records), name[5:]]
    if name == TLS:
        bootstrap, cafile = tls
        return here + ["--_tls", bootstrap, topic, cafile, "--records", str(args.records)]
    if is_latency(name):
        app, rate = parse_latency(name)
        return here + ["--_latency", app, str(rate), bootstrap, topic, "--latency-seconds",
                       str(args.latency_seconds), "--latency-warmup", str(args.latency_warmup),
                       "--tick-us", str(args.tick_us)]
    # the tree's own e2e.py: it puts its tree first on sys.path
    return [sys.executable, os.path.join(os.path.abspath(tree), "bench", "e2e.py"), "--_child", name, bootstrap,
            topic, "--records", str(args.records), "--slow-records", str(args.records), "--partitions",
            str(args.partitions)]


def measure(name: str, tree: str, bootstrap: str, topic: str, args, tls=None) -> dict:
    r = run_tree_child(tree, child_cmd(name, tree, bootstrap, topic, args, tls), args.timeout)
    checked = name == TLS or is_latency(name)   # counted from the topic's offsets as well
    held = None
    if checked and "failed" not in r:
        try:
            held = stored_records(bootstrap, topic, args.partitions)
        except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
            return {**r, "failed": f"could not count the topic's records ({type(e).__name__}: {e})"}
    return check_latency(r, held) if is_latency(name) else check_throughput(r, held)


def progress(r: dict) -> str:
    if "failed" in r:
        return r["failed"]
    if "p50" in r:
        return (f"p50 {r['p50'] * 1000:7,.0f} µs  p99 {r['p99'] * 1000:7,.0f} µs  achieved "
                f"{r['achieved']:>9,.0f}/s  process cpu {r['cpu_us_per_record']:.2f} µs/rec")
    extra = (f"  batches {r.get('batches_sent')}  requests {r.get('produce_requests')}"
             if "batches_sent" in r else "")
    return f"{r['rate']:>12,.0f} rec/s{extra}"


def which_build(tree: str) -> str:
    code = "import fastkafka, os; print(os.path.dirname(os.path.dirname(fastkafka.__file__)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)), check=True)
    return out.stdout.strip()


def csv_ints(text: str) -> list[int]:
    return [int(x) for x in text.split(",") if x.strip()]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=False)
    ap.add_argument("--after", default=ROOT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000, help="records per throughput measurement")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--only", default=None,
                    help="comma-separated measurements (default: the guard set, see above; "
                         "'lat' = every --latency-apps x --latency-rates)")
    ap.add_argument("--keyed", default="", help="partition counts of keyed produce() shapes, e.g. 100,1000")
    ap.add_argument("--latency-rates", default="20000,200000", help="paced records/s of the lat_ measurements")
    ap.add_argument("--latency-apps", default="busy,idle", help="application thread of the lat_ measurements")
    ap.add_argument("--latency-seconds", type=float, default=5.0, help="measured seconds per latency run")
    ap.add_argument("--latency-warmup", type=float, default=1.0, help="paced seconds before, not measured")
    ap.add_argument("--latency-broker-warmup", type=float, default=3.0,
                    help="seconds of unmeasured paced records (after build, idle, highest rate) first")
    ap.add_argument("--tick-us", type=float, default=1000.0, help="µs between the latency runs' bursts")
    ap.add_argument("--tls-warmup-records", type=int, default=200_000,
                    help="records of one untimed TLS run (after build) first: the broker's TLS path")
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--tls-bootstrap-servers", default=None, help="with --bootstrap-servers: the SSL listener")
    ap.add_argument("--tls-cafile", default=None, help="with --bootstrap-servers: the SSL listener's CA (PEM)")
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=None)
    ap.add_argument("--_keyed", nargs=4, help=argparse.SUPPRESS)
    ap.add_argument("--_tls", nargs=3, help=argparse.SUPPRESS)
    ap.add_argument("--_latency", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._keyed or args._tls or args._latency:
        # fastkafka of the tree under test, before anything imports it from this repository
        import_fastkafka_from(os.environ.get("PYTHONPATH", ROOT).split(os.pathsep)[0])
        if args._keyed:
            bootstrap, topic, records, partitions = args._keyed
            r = keyed_child(bootstrap, topic, int(records), int(partitions))
        elif args._tls:
            bootstrap, topic, cafile = args._tls
            r = tls_child(bootstrap, topic, args.records, cafile)
        else:
            app, rate, bootstrap, topic = args._latency
            r = latency_child(app, int(rate), bootstrap, topic, args)
        print(result_line(r), flush=True)
        return 0
    if not args.before:
        ap.error("--before is required")
    rates, apps = csv_ints(args.latency_rates), [a.strip() for a in args.latency_apps.split(",") if a.strip()]
    try:
        for a in apps:
            parse_latency(latency_name(a, 1))
        names = select(args.only, args.keyed, rates, apps)
    except ValueError as e:
        ap.error(str(e))
    if TLS in names and args.bootstrap_servers and not (args.tls_bootstrap_servers and args.tls_cafile):
        ap.error("tls_send with --bootstrap-servers needs --tls-bootstrap-servers and --tls-cafile")
    trees = {"before": args.before, "after": args.after}
    for label, tree in trees.items():
        got = which_build(tree)
        if os.path.realpath(got) != os.path.realpath(tree):
            raise SystemExit(f"--{label} {tree}: a child imports fastkafka from {got}, not from that tree")
    commits = {label: tree_commit(tree) for label, tree in trees.items()}
    builds = {label: build_fingerprint(os.path.abspath(tree)) for label, tree in trees.items()}
    wall0 = time.monotonic()
    load0 = os.getloadavg()[0]
    broker = None
    tmp = tempfile.TemporaryDirectory(prefix="fastkafka-ab-")
    tls = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        tls = (args.tls_bootstrap_servers, args.tls_cafile)
        broker_line = "the broker at --bootstrap-servers"
        from fastkafka.admin import Admin

        def create(topic, n):
            with Admin(bootstrap_servers=bootstrap) as a:
                a.create_topic(topic, n)
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        extra = {}
        if TLS in names:
            from fastkafka_tools.tlsrig import kafka_ssl_listener, make_pki

            pki = make_pki(os.path.join(tmp.name, "pki"))
            extra = {"listeners": {"SSL": "SSL"}, "properties": kafka_ssl_listener("SSL", pki.server, pki.ca)}
        broker = KafkaCluster(nodes=1, jit="full", heap_mb=1536, **extra).start(timeout=180)
        bootstrap = broker.bootstrap
        create = broker.create_topic
        if TLS in names:
            tls = (broker.bootstrap_for("SSL"), pki.ca)
        broker_line = (f"Apache Kafka {broker.version}, one KRaft node (full JIT, heap 1536 MiB, data "
                       f"{broker.data_place})"
                       + (" with a PLAINTEXT and an SSL listener (TLS 1.3, PEM certificates)" if tls else ""))

    def drop(topic):
        if broker is not None:
            try:
                broker.delete_topic(topic)
            except Exception:  # noqa: BLE001 - a topic left over costs disk only
                pass

    results = {(n, b): [] for n in names for b in trees}
    try:
        warmups = []
        if TLS in names and args.tls_warmup_records > 0:
            warmups.append((TLS, argparse.Namespace(**{**vars(args), "records": args.tls_warmup_records})))
        lats = [parse_latency(n) for n in names if is_latency(n)]
        if lats and args.latency_broker_warmup > 0:
            top = max(rate for _, rate in lats)
            warmups.append((latency_name("idle", top), argparse.Namespace(
                **{**vars(args), "latency_seconds": args.latency_broker_warmup, "latency_warmup": 0})))
        for name, wargs in warmups:
            topic = f"ab-warmup-{name}".replace("_", "-")
            create(topic, args.partitions)
            r = measure(name, trees["after"], bootstrap, topic, wargs, tls)
            drop(topic)
            print(f"warm-up {name:<16} after  {progress(r)}", flush=True)
        for rnd in range(1, args.rounds + 1):
            t_round = time.monotonic()
            for name in names:
                for label in round_order(["before", "after"], rnd):
                    topic = f"ab-{name}-{label}-r{rnd}".replace("_", "-")
                    parts = int(name[5:]) if name.startswith("keyed") else args.partitions
                    create(topic, parts)
                    r = measure(name, trees[label], bootstrap, topic, args, tls)
                    results[(name, label)].append(r)
                    drop(topic)
                    print(f"round {rnd} {name:<16} {label:<6} {progress(r)}", flush=True)
            print(f"round {rnd} took {time.monotonic() - t_round:.0f} s", flush=True)
    finally:
        if broker is not None:
            broker.stop()
        tmp.cleanup()
    wall = time.monotonic() - wall0
    rebuilt = [label for label, tree in trees.items() if build_fingerprint(os.path.abspath(tree)) != builds[label]]
    text = "\n".join(report(args, names, results, commits, broker_line, wall, load0, rebuilt)) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


def report(args, names, results, commits, broker_line, wall, load0, rebuilt=()) -> list[str]:
    thr = [n for n in names if not is_latency(n)]
    lat = [n for n in names if is_latency(n)]
    lines = [f"# A/B: {commits['after']} against {commits['before']}", "",
             f"{args.rounds} paired round{'' if args.rounds == 1 else 's'} (before and after back to back, the order alternating), "
             f"{broker_line}, {args.partitions}-partition topics (keyed<N>: N), fresh per measurement; "
             f"whole run {wall:.0f} s, load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} "
             "at the end. Every ratio is after / before in the same round; the median of those is given.", ""]
    if rebuilt:
        lines += [f"**Warning**: the compiled extensions of {' and '.join(rebuilt)} changed during the run.", ""]
    if thr:
        lines += [f"Throughput, {args.records:,} records of {SIZE} B (tls_send: `send()` over TLS): "
                  "higher is better, a ratio ≥ 1 means no slower.", "",
                  *throughput_table(thr, results), ""]
    if lat:
        lines += [f"Delivery latency per record (completion callback − send), `produce()` paced in bursts "
                  f"every {args.tick_us:g} µs, {args.latency_warmup:g} s warm-up then {args.latency_seconds:g} s "
                  f"measured, {SIZE} B values, linger {LINGER_MS} ms: lower is better, a ratio ≤ 1 means "
                  "no slower. busy: a Python loop between bursts; idle: asleep.", "",
                  *latency_table(lat, results), ""]
        late = behind(lat, results)
        if late:
            lines += ["Below the paced rate (latency includes records queued behind the application): "
                      + "; ".join(late) + ".", ""]
    failed = failures(names, results)
    if failed:
        lines += ["Failed rounds:", "", *failed, ""]
    return lines


if __name__ == "__main__":
    sys.exit(main())
