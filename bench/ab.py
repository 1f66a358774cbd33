"""Two builds of fastkafka side by side on one broker: the guard for a change to a hot path.

    python bench/ab.py --before ../fk-before --after . [--rounds 5] [--records 1000000]
                       [--only fk_send_all,fk_produce_all] [--keyed 100,1000] [--out FILE]

``--before`` and ``--after`` are source trees with their extensions built in place (a checkout
of the commit before the change: ``git worktree add DIR COMMIT`` then ``python setup.py build_ext
--inplace`` there). Each measurement runs in a child process whose ``PYTHONPATH`` is that tree,
so the same script, broker and values time both builds; rounds are paired (before and after run
back to back, the order alternating from round to round) and the report gives the median of the
per-round ratios after/before.

Measurements: those of ``bench/e2e.py`` (``fk_send_all``, ``fk_produce_all``, ``fk_batch_list``,
``fk_batch_arrow``, ... on a ``--partitions`` topic, default 6), plus ``keyed<N>``: ``produce()``
of 100-byte values with 20,000 distinct keys into an N-partition topic (``--keyed``). Every
topic is fresh and written once before the clock starts in each child (the broker's first write
into a new partition is slow for every client). One Apache Kafka node (``KafkaCluster``), or
``--bootstrap-servers``.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
KEYS = 20_000
LINGER_MS = 5


def keyed_child(bootstrap: str, topic: str, records: int, partitions: int) -> dict:
    """``produce()`` of keyed records into ``topic`` (``partitions`` partitions, every one written
    once first, untimed), then ``flush()``."""
    from fastkafka import Producer

    keys = [b"key-%d" % i for i in range(KEYS)]
    value = b"x" * 100
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


def run_child(tree: str, cmd: list[str], timeout: float) -> dict:
    env = dict(os.environ, PYTHONPATH=os.path.abspath(tree))
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=os.path.abspath(tree),
                            env=env)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f}s"}
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        return {"failed": f"exit {cp.returncode}: {(cp.stderr or cp.stdout).strip()[-400:]}"}
    r = json.loads(line[7:])
    if r.get("delivered") != r.get("records") or r.get("errors"):
        r["failed"] = f"delivered {r.get('delivered')} of {r.get('records')}, errors {r.get('errors')}"
    else:
        r["rate"] = r["records"] / r["seconds"]
    return r


def measure(name: str, tree: str, bootstrap: str, topic: str, args) -> dict:
    if name.startswith("keyed"):
        cmd = [sys.executable, os.path.abspath(__file__), "--_keyed", bootstrap, topic, str(args.records),
               name[5:]]
    else:
        # the tree's own e2e.py: it puts its tree first on sys.path
        cmd = [sys.executable, os.path.join(os.path.abspath(tree), "bench", "e2e.py"), "--_child", name, bootstrap, topic, "--records", str(args.records),
               "--slow-records", str(args.records), "--partitions", str(args.partitions)]
    return run_child(tree, cmd, args.timeout)


def which_build(tree: str) -> str:
    code = "import fastkafka, os; print(os.path.dirname(os.path.dirname(fastkafka.__file__)))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd="/",
                         env=dict(os.environ, PYTHONPATH=os.path.abspath(tree)), check=True)
    return out.stdout.strip()


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before", required=False)
    ap.add_argument("--after", default=ROOT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--only", default="fk_send_all,fk_produce_all,fk_batch_list,fk_batch_arrow")
    ap.add_argument("--keyed", default="", help="partition counts of keyed produce() shapes, e.g. 100,1000")
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--timeout", type=float, default=600)
    ap.add_argument("--out", default=None)
    ap.add_argument("--_keyed", nargs=4, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._keyed:
        bootstrap, topic, records, partitions = args._keyed
        print("RESULT " + json.dumps(keyed_child(bootstrap, topic, int(records), int(partitions))), flush=True)
        return 0
    if not args.before:
        ap.error("--before is required")
    trees = {"before": args.before, "after": args.after}
    for label, tree in trees.items():
        got = which_build(tree)
        if os.path.realpath(got) != os.path.realpath(tree):
            raise SystemExit(f"--{label} {tree}: a child imports fastkafka from {got}, not from that tree")
    names = [n for n in args.only.split(",") if n] + [f"keyed{int(k)}" for k in args.keyed.split(",") if k]
    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        from fastkafka.admin import Admin

        def create(topic, n):
            with Admin(bootstrap_servers=bootstrap) as a:
                a.create_topics([(topic, n, 1)])
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        broker = KafkaCluster(nodes=1, jit="full", heap_mb=1536).start(timeout=180)
        bootstrap = broker.bootstrap
        create = broker.create_topic
    results = {(n, b): [] for n in names for b in trees}
    try:
        for rnd in range(1, args.rounds + 1):
            for name in names:
                order = ["before", "after"] if rnd % 2 else ["after", "before"]
                for label in order:
                    topic = f"ab-{name}-{label}-r{rnd}".replace("_", "-")
                    parts = int(name[5:]) if name.startswith("keyed") else args.partitions
                    create(topic, parts)
                    r = measure(name, trees[label], bootstrap, topic, args)
                    results[(name, label)].append(r)
                    if broker is not None:
                        try:
                            broker.delete_topic(topic)
                        except Exception:  # noqa: BLE001 - a topic left over costs disk only
                            pass
                    msg = r.get("failed") or (f"{r['rate']:>12,.0f} rec/s  batches {r.get('batches_sent')}  "
                                              f"requests {r.get('produce_requests')}")
                    print(f"round {rnd} {name:<16} {label:<6} {msg}", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    lines = [f"# A/B: {args.after} against {args.before}", "",
             f"{args.rounds} paired rounds, {args.records:,} records of 100 B, Apache Kafka one node; "
             f"ratio = after / before per round, median.", "",
             "| measurement | before rec/s | after rec/s | median ratio | per-round ratios |",
             "|---|---|---|---|---|"]
    worst = None
    for name in names:
        b, a = results[(name, "before")], results[(name, "after")]
        ratios = [ra["rate"] / rb["rate"] for ra, rb in zip(a, b) if "rate" in ra and "rate" in rb]
        med = statistics.median(ratios) if len(ratios) == len(a) and ratios else None
        worst = med if worst is None or (med is not None and med < worst) else worst
        rate = lambda rs: (f"{statistics.median([r['rate'] for r in rs if 'rate' in r]):,.0f}"  # noqa: E731
                           if any("rate" in r for r in rs) else "failed")
        lines.append(f"| {name} | {rate(b)} | {rate(a)} | {med:.3f} |" if med is not None else
                     f"| {name} | {rate(b)} | {rate(a)} | failed |")
        lines[-1] += " " + ", ".join(f"{x:.2f}" for x in ratios) + " |"
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
