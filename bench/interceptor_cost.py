"""The cost of producer interceptors against one Apache Kafka node:

    python bench/interceptor_cost.py [--records 500000] [--rounds 5] [--partitions 6] [--keyed 100]
                                     [--bootstrap-servers HOST:PORT]

Per round, back to back (the order alternating): ``produce()`` of ``--records`` 100-byte records
then ``flush()`` with no interceptor, with one no-op interceptor (``on_send`` returning the record,
``on_acknowledgement`` doing nothing), and with ``fastkafka.otel.TracingInterceptor`` when the
OpenTelemetry SDK is installed (spans to a no-op processor); on a ``--partitions`` topic without
keys, and keyed (20,000 distinct keys) on a ``--keyed`` topic. Prints the median records/s of
each and the ratio to no interceptor. The cost of the check itself when no interceptor is set is
measured with bench/ab.py against the build before the change.

Each measurement runs in a child process of its own (this script with ``--child``), so no
measurement inherits another's heap, threads or interpreter state.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
import uuid

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.join(ROOT, "bench"))

from harness import kafka_line, result_line, round_order, run_child  # noqa: E402

KEYS = 20_000
SIZE = 100


class NoOp:
    def on_send(self, record):
        return record

    def on_acknowledgement(self, metadata, error):
        pass


def tracing():
    try:
        from opentelemetry.sdk.trace import TracerProvider
    except ImportError:
        return None
    from fastkafka.otel import TracingInterceptor

    return TracingInterceptor(TracerProvider())      # spans made and ended, exported nowhere


def run(bootstrap, topic, partitions, records, interceptors, keyed) -> float:
    from fastkafka import Producer

    keys = [b"key-%d" % i for i in range(KEYS)]
    value = b"x" * SIZE
    with Producer(bootstrap_servers=bootstrap, linger_ms=5, interceptors=interceptors) as p:
        for part in range(partitions):
            p.produce(topic, b"warm-up", partition=part)
        assert p.flush(120) == 0
        base = p.metrics()["records_sent"]
        produce = p.produce
        t0 = time.perf_counter()
        if keyed:
            for i in range(records):
                produce(topic, value, key=keys[i % KEYS])
        else:
            for _ in range(records):
                produce(topic, value)
        assert p.flush(300) == 0
        elapsed = time.perf_counter() - t0
        assert p.metrics()["records_sent"] - base == records
    return records / elapsed


KINDS = {"none": lambda: None, "noop": lambda: [NoOp()], "otel": lambda: [tracing()]}


def in_child(bootstrap, topic, partitions, records, kind, keyed) -> float:
    """``run`` in a child process of its own; its records/s."""
    cmd = [sys.executable, os.path.abspath(__file__), "--child", kind, "--bootstrap-servers", bootstrap,
           "--topic", topic, "--partitions", str(partitions), "--records", str(records)]
    if keyed:
        cmd.append("--child-keyed")
    return run_child(cmd, 900, check=True)["rate"]


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=500_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--keyed", type=int, default=100)
    ap.add_argument("--bootstrap-servers", default=None)
    ap.add_argument("--child", choices=sorted(KINDS), help=argparse.SUPPRESS)
    ap.add_argument("--child-keyed", action="store_true", help=argparse.SUPPRESS)
    ap.add_argument("--topic", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.child:
        rate = run(args.bootstrap_servers, args.topic, args.partitions, args.records,
                   KINDS[args.child](), args.child_keyed)
        print(result_line({"rate": rate}), flush=True)
        return 0
    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        from fastkafka.admin import Admin

        def create(name, n):
            with Admin(bootstrap_servers=bootstrap) as a:
                a.create_topic(name, n)
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        broker = KafkaCluster(nodes=1, jit="full", heap_mb=1536).start(timeout=180)
        bootstrap = broker.bootstrap
        create = broker.create_topic
        print(kafka_line(broker.version, 1536, broker.data_place), flush=True)
    kinds = ["none", "noop"] + (["otel"] if tracing() is not None else [])
    shapes = [("unkeyed", args.partitions, False), ("keyed", args.keyed, True)]
    results = {(s, k): [] for s, _, _ in shapes for k in kinds}
    try:
        for r in range(args.rounds):
            for shape, parts, keyed in shapes:
                for kind in round_order(kinds, r + 1):
                    topic = f"icost-{uuid.uuid4().hex[:8]}"
                    create(topic, parts)
                    rate = in_child(bootstrap, topic, parts, args.records, kind, keyed)
                    results[(shape, kind)].append(rate)
                    print(f"round {r + 1} {shape:8s} {kind:5s} {rate:12,.0f} rec/s", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    print(f"\nmedians of {args.rounds} rounds, {args.records:,} records of {SIZE} B "
          f"(unkeyed: {args.partitions} partitions, keyed: {args.keyed}):")
    for shape, _, _ in shapes:
        base = statistics.median(results[(shape, "none")])
        for kind in kinds:
            med = statistics.median(results[(shape, kind)])
            print(f"  {shape:8s} {kind:5s} {med:12,.0f} rec/s  x{med / base:.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
