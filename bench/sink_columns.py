"""The Spark sink's task on Arrow batches with per-row ``headers`` and ``timestamp`` columns: two
builds side by side on one broker.

    python bench/sink_columns.py --before ../fk-before --after . [--rounds 5] [--rows 1000000]
                                 [--partitions 6] [--batch-rows 10000] [--out FILE]

What one Spark task of ``df.write.format("fastkafka")`` does with its partition, without Spark:
``spark_sink.task.TaskWriter.write_arrow`` on pyarrow RecordBatches of ``--batch-rows`` rows shaped
as Spark hands them to a Python data source writer (``value`` binary of 100 B; ``headers``
list<struct<key: string, value: binary>>; ``timestamp`` timestamp[us, tz=UTC]), then ``finish()``
(flush, every record acknowledged). The rate is rows / (first write_arrow .. finish returned).

Shapes: ``value`` (the value column alone), ``headers_ts`` (value, two headers per row, a
timestamp per row with every 10th null), ``headers_ts_task`` (the same with ``task.headers``: the
task's three headers after each row's own). A build without the Arrow headers path takes the
record-at-a-time path for a headers column (and ignores the timestamp column).

Each measurement runs in a child process whose ``PYTHONPATH`` is the tree (fastkafka and
spark_sink imported from it, checked), on a fresh topic written once before the clock starts;
rounds are paired (before and after back to back, the order alternating) and the report gives
each build's median and the median of the per-round ratios after/before. One Apache Kafka node
(``KafkaCluster``, full JIT) or ``--bootstrap-servers``.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from harness import import_fastkafka_from, result_line, round_order, run_child, tree_commit, tree_env  # noqa: E402
SHAPES = ("value", "headers_ts", "headers_ts_task")


def make_batches(shape: str, rows: int, batch_rows: int):
    """The RecordBatches of a task: ``rows`` rows in batches of ``batch_rows``."""
    import pyarrow as pa

    hdr_t = pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())]))
    out = []
    for start in range(0, rows, batch_rows):
        n = min(batch_rows, rows - start)
        cols = {"value": pa.array([b"%08d" % (start + i) + b"x" * 92 for i in range(n)], pa.binary())}
        if shape != "value":
            cols["headers"] = pa.array(
                [[{"key": "source", "value": b"bench"}, {"key": "seq", "value": b"%d" % (start + i)}]
                 for i in range(n)], hdr_t)
            base = 1_700_000_000_000_000
            cols["timestamp"] = pa.array(
                [None if (start + i) % 10 == 0 else base + (start + i) * 1000 for i in range(n)],
                pa.timestamp("us", tz="UTC"))
        out.append(pa.RecordBatch.from_pydict(cols))
    return out


def child(tree: str, bootstrap: str, topic: str, shape: str, rows: int, batch_rows: int,
          partitions: int) -> dict:
    import_fastkafka_from(tree)
    import spark_sink

    got = os.path.realpath(spark_sink.__file__)
    if os.path.commonpath([got, os.path.realpath(tree)]) != os.path.realpath(tree):
        raise RuntimeError("spark_sink was imported from outside the tree")
    from spark_sink.options import settings_from_kwargs
    from spark_sink.task import TaskWriter, get_producer

    settings = settings_from_kwargs(topic, shape == "headers_ts_task", None, None,
                                    {"bootstrap_servers": bootstrap})
    cols = ["value"] + ([] if shape == "value" else ["headers", "timestamp"])
    settings = settings.with_columns(cols)
    batches = make_batches(shape, rows, batch_rows)
    p = get_producer(settings)
    for part in range(partitions):               # the broker's first write of a partition: untimed
        p.send(topic, b"warm", partition=part)
    p.flush(60)
    t0 = time.perf_counter()
    c0 = time.process_time()
    w = TaskWriter(settings)
    for b in batches:
        w.write_arrow(b)
    report = w.finish()
    wall = time.perf_counter() - t0
    cpu = time.process_time() - c0
    p.close(10)
    if report.rows != rows or report.errors:
        raise RuntimeError(f"{report.rows} rows reported, {report.errors} errors")
    return {"rows_s": rows / wall, "cpu_us_row": cpu / rows * 1e6, "wall": wall}


def measure(tree, bootstrap, topic, shape, args) -> dict:
    """One task in a child process whose ``PYTHONPATH`` is ``tree``; raises ``harness.ChildFailed``
    when it fails."""
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", tree, bootstrap, topic, shape,
           str(args.rows), str(args.batch_rows), str(args.partitions)]
    return run_child(cmd, args.timeout, env=tree_env(os.path.realpath(tree), keep_pythonpath=False), check=True)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before")
    ap.add_argument("--after", default=ROOT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--rows", type=int, default=1_000_000)
    ap.add_argument("--batch-rows", type=int, default=10_000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--only", default=",".join(SHAPES))
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--out", default=None)
    ap.add_argument("--_child", nargs=7, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        tree, bs, topic, shape, rows, batch_rows, parts = args._child
        print(result_line(child(tree, bs, topic, shape, int(rows), int(batch_rows), int(parts))), flush=True)
        return 0
    if not args.before:
        ap.error("--before is required")
    shapes = [s for s in args.only.split(",") if s]
    load0 = os.getloadavg()[0]
    started = time.monotonic()
    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        from fastkafka.admin import Admin

        def create(name, n):
            with Admin(bootstrap_servers=bootstrap) as a:
                a.create_topic(name, n)
        broker_line = f"the broker at --bootstrap-servers"
    else:
        sys.path.insert(0, ROOT)
        from fastkafka_tools.apachekafka import KafkaCluster

        broker = KafkaCluster(nodes=1, jit="full", heap_mb=1536).start(timeout=180)
        bootstrap, create = broker.bootstrap, broker.create_topic
        broker_line = f"Apache Kafka {broker.version}, one KRaft node (full JIT, heap 1536 MiB)"
    trees = {"before": args.before, "after": args.after}
    res = {s: {"before": [], "after": []} for s in shapes}
    seq = 0
    try:
        for r in range(args.rounds):
            for s in shapes:
                # shape by shape the order alternates too: A B, B A, ... in round 1
                for which in round_order(["before", "after"], r + 1 + shapes.index(s)):
                    seq += 1
                    topic = f"sinkcols-{os.getpid()}-{seq}"
                    create(topic, args.partitions)
                    out = measure(trees[which], bootstrap, topic, s, args)
                    res[s][which].append(out)
                    print(f"round {r + 1} {s} {which}: {out['rows_s']:,.0f} rows/s "
                          f"({out['cpu_us_row']:.2f} µs CPU/row)", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    wall = time.monotonic() - started
    lines = [f"# Spark sink task, Arrow batches with headers/timestamp columns: "
             f"{tree_commit(args.before)} against {tree_commit(args.after)}", "",
             f"{args.rounds} paired rounds (before and after back to back, the order alternating), "
             f"{broker_line}, {args.partitions}-partition topics, fresh per measurement; "
             f"{args.rows:,} rows per task in Arrow batches of {args.batch_rows:,} rows (value 100 B; "
             f"headers: 2 per row; timestamp[us, tz=UTC], every 10th null); whole run {wall:.0f} s, "
             f"load average {load0:.2f} at the start, {os.getloadavg()[0]:.2f} at the end.", "",
             "| shape | before rows/s | after rows/s | median ratio after/before | per-round ratios "
             "| before µs CPU/row | after µs CPU/row |", "|---|---:|---:|---:|---|---:|---:|"]
    for s in shapes:
        b, a = res[s]["before"], res[s]["after"]
        ratios = [x["rows_s"] / y["rows_s"] for x, y in zip(a, b)]
        lines.append(
            f"| {s} | {statistics.median(x['rows_s'] for x in b):,.0f} | "
            f"{statistics.median(x['rows_s'] for x in a):,.0f} | {statistics.median(ratios):.2f} | "
            f"{', '.join(f'{x:.2f}' for x in ratios)} | "
            f"{statistics.median(x['cpu_us_row'] for x in b):.2f} | "
            f"{statistics.median(x['cpu_us_row'] for x in a):.2f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
