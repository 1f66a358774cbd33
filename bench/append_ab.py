"""The CPU cost per record of ``RecordAccumulator.append_batch`` (send_batch's append loop, no
broker, no I/O thread) in two builds side by side.

    python bench/append_ab.py --before ../fk-before --after . [--rounds 5] [--reps 60] [--out FILE]

Shapes (10,000 records of 100 B each, into a fresh accumulator per call unless said):

- ``arrow_p1`` / ``list_p1``: a pyarrow binary array / a list of bytes, one partition;
- ``arrow_p120``: a pyarrow binary array over 120 partitions (an int32 partitions array), a fresh
  accumulator each call (every partition's first batch made in the call);
- ``arrow_p120_warm``: the same into an accumulator whose 120 partitions already have batches,
  60,000 records (several new batches per partition);
- ``columns_p6`` (the after build only, when the before build has no per-record columns): with a
  ``timestamps`` (timestamp[us]) and a ``record_headers`` column (two headers per record).

The children keep freed memory in glibc's heap (``MALLOC_TRIM_THRESHOLD_``,
``MALLOC_MMAP_THRESHOLD_``): otherwise a call's batch buffers are fresh pages whose faults cost more
than the loop itself. Each build runs in a child process with the tree first on ``sys.path`` (checked); a round runs
both builds back to back, the order alternating; a child reports, per shape, the fastest of
``--reps`` calls in ns per record. The report gives the medians over rounds and the median of the
per-round ratios after/before (≤ 1: no slower).
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from harness import import_fastkafka_from, result_line, round_order, run_child, tree_commit  # noqa: E402
SHAPES = ("arrow_p1", "list_p1", "arrow_p120", "arrow_p120_warm", "columns_p6")


def child(tree: str, reps: int) -> dict:
    import time

    import_fastkafka_from(tree)
    import pyarrow as pa
    from fastkafka._producer.accumulator import RecordAccumulator
    from fastkafka._producer.batch import BatchFuture
    from fastkafka._producer.bufferpool import BufferPool

    def acc():
        return RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 30, 16384), False)

    n = 10_000
    va = pa.array([b"v" * 100] * n, pa.binary())
    vl = [b"v" * 100] * n
    p120 = pa.array([i % 120 for i in range(n)], pa.int32())
    w = 60_000
    vw = pa.array([b"v" * 100] * w, pa.binary())
    pw = pa.array([i % 120 for i in range(w)], pa.int32())
    p6 = pa.array([i % 6 for i in range(n)], pa.int32())
    ts = pa.array([1_700_000_000_000_000 + i for i in range(n)], pa.timestamp("us", tz="UTC"))
    hdr = pa.array([[{"key": "source", "value": b"bench"}, {"key": "seq", "value": b"%d" % i}]
                    for i in range(n)], pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))

    def once(make, call):
        a = make()
        t = time.perf_counter()
        call(a)
        return time.perf_counter() - t      # ``a`` freed on return, before the next call's

    def timed(make, call, count):
        return min(once(make, call) for _ in range(reps)) / count * 1e9

    def warm():
        a = acc()
        a.append_batch("t", pw[:120], vw[:120], None, None, 0, BatchFuture(), 0, 1000)
        return a

    out = {
        "arrow_p1": timed(acc, lambda a: a.append_batch("t", 0, va, None, None, 0, BatchFuture(), 0, 1000), n),
        "list_p1": timed(acc, lambda a: a.append_batch("t", 0, vl, None, None, 0, BatchFuture(), 0, 1000), n),
        "arrow_p120": timed(acc, lambda a: a.append_batch("t", p120, va, None, None, 0, BatchFuture(), 0,
                                                          1000), n),
        "arrow_p120_warm": timed(warm, lambda a: a.append_batch("t", pw, vw, None, None, 0, BatchFuture(),
                                                                0, 1000), w),
    }
    try:
        out["columns_p6"] = timed(acc, lambda a: a.append_batch(
            "t", p6, va, None, None, 0, BatchFuture(), 0, 1000, timestamps=ts, record_headers=hdr), n)
    except TypeError:               # a build without per-record columns
        pass
    return out


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--before")
    ap.add_argument("--after", default=ROOT)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--reps", type=int, default=60)
    ap.add_argument("--out", default=None)
    ap.add_argument("--_child", nargs=2, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args._child:
        print(result_line(child(args._child[0], int(args._child[1]))), flush=True)
        return 0
    if not args.before:
        ap.error("--before is required")
    trees = {"before": args.before, "after": args.after}
    res = {"before": [], "after": []}
    load0 = os.getloadavg()[0]
    for r in range(args.rounds):
        for which in round_order(["before", "after"], r + 1):
            # glibc keeps freed memory (no trim, no mmap'ed blocks): each call reuses the last
            # call's pages instead of faulting fresh ones in, which would dominate the loop's cost
            env = dict(os.environ, PYTHONPATH=os.path.realpath(trees[which]),
                       MALLOC_TRIM_THRESHOLD_=str(1 << 30), MALLOC_MMAP_THRESHOLD_=str(1 << 30))
            got = run_child([sys.executable, os.path.abspath(__file__), "--_child", trees[which], str(args.reps)],
                            600, env=env, check=True)
            got.pop("child_cpu_s")
            res[which].append(got)
            print(f"round {r + 1} {which}: {res[which][-1]}", flush=True)
    lines = [f"# append_batch CPU per record: {tree_commit(args.after)} against {tree_commit(args.before)}",
             "", f"{args.rounds} paired rounds (order alternating), fastest of {args.reps} calls per "
             f"shape and round, ns per record of 100 B; load average {load0:.2f} at the start, "
             f"{os.getloadavg()[0]:.2f} at the end.", "",
             "| shape | before ns/record | after ns/record | median ratio after/before (≤ 1: no slower) "
             "| per-round ratios |", "|---|---:|---:|---:|---|"]
    for s in SHAPES:
        a = [x[s] for x in res["after"] if s in x]
        b = [x[s] for x in res["before"] if s in x]
        if not a:
            continue
        if not b:
            lines.append(f"| {s} | (no such input) | {statistics.median(a):.1f} | | |")
            continue
        ratios = [x / y for x, y in zip(a, b)]
        lines.append(f"| {s} | {statistics.median(b):.1f} | {statistics.median(a):.1f} | "
                     f"{statistics.median(ratios):.3f} | {', '.join(f'{x:.2f}' for x in ratios)} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        with open(args.out, "w") as f:
            f.write(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
