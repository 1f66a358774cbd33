"""The confluent-kafka compatibility layer's cost: ``fastkafka.compat.confluent.Producer``
against ``confluent_kafka.Producer`` and ``fastkafka.Producer.produce`` on the same broker.

    python bench/compat.py [--records 200000] [--size 100] [--partitions 6] [--rounds 3]
                           [--modes callback,no-callback,flush-end] [--bootstrap HOST:PORT]

Without ``--bootstrap`` one Apache Kafka KRaft node is started
(``fastkafka_tools.apachekafka.KafkaCluster(nodes=1)``) and stopped at the end. Each client runs
once per round and loop, round-robin, in a fresh child process against a fresh topic; the table
shows the median records/s over the rounds (the clients in reverse order in even rounds). Timed:
from the first ``produce`` to ``flush()`` returning, after one warm-up record (connection, metadata,
InitProducerId). Loops, for confluent-kafka and the compat layer
(``queue.buffering.max.messages=1000000``):

- ``callback``: ``p.produce(topic, v, callback=cb); p.poll(0)`` per record with ``poll(1)`` and a
  retry on ``BufferError``, the callback counting errors;
- ``no-callback``: the same without a callback (``flush()`` must leave nothing);
- ``flush-end``: ``p.produce(topic, v, callback=cb)`` per record, no poll, ``flush()`` at the end.

``fastkafka.Producer`` runs ``p.produce(topic, v, on_delivery=cb)`` (its callback runs on the I/O
thread; ``no-callback``: without it). linger.ms=5, acks=all, idempotence as each client's default;
values are ``--size`` random bytes, no key. A run whose callbacks saw fewer successes than records
is reported FAILED. Ratios: the median over the rounds of the client's rate over confluent-kafka's
in the same round and loop.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import uuid

from harness import RESULT_PREFIX, round_order, run_child

CHILD = r'''
import json, os, sys, time
kind, mode, bootstrap, topic = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
n, size = int(sys.argv[5]), int(sys.argv[6])
values = [os.urandom(size) for _ in range(1024)]
ok = [0]; bad = [0]
def cb(err, msg):
    if err is None: ok[0] += 1
    else: bad[0] += 1
conf = {"bootstrap.servers": bootstrap, "linger.ms": 5, "queue.buffering.max.messages": 1000000}
if kind == "confluent":
    from confluent_kafka import Producer
elif kind == "compat":
    from fastkafka.compat.confluent import Producer
else:
    from fastkafka import Producer
    conf.pop("queue.buffering.max.messages")
p = Producer(conf)
if kind == "fastkafka":
    p.produce(topic, b"warm-up", on_delivery=cb); p.flush(30)
    t0 = time.perf_counter()
    produce = p.produce
    if mode == "no-callback":
        for i in range(n):
            produce(topic, values[i & 1023])
    else:
        for i in range(n):
            produce(topic, values[i & 1023], on_delivery=cb)
    left = p.flush()
else:
    p.produce(topic, b"warm-up", callback=cb); p.flush(30)
    t0 = time.perf_counter()
    produce, poll = p.produce, p.poll
    if mode == "callback":
        for i in range(n):
            while True:
                try:
                    produce(topic, values[i & 1023], callback=cb)
                    break
                except BufferError:
                    poll(1)
            poll(0)
    elif mode == "no-callback":
        for i in range(n):
            while True:
                try:
                    produce(topic, values[i & 1023])
                    break
                except BufferError:
                    poll(1)
            poll(0)
    else:
        for i in range(n):
            produce(topic, values[i & 1023], callback=cb)
    left = p.flush()
dt = time.perf_counter() - t0
if mode == "no-callback":   # no callback to count: what flush() left, and the errors seen
    ok[0] = n + 1 if not left else 0
print(RESULT_PREFIX + json.dumps({"rate": n / dt, "ok": ok[0] - 1, "bad": bad[0]}))
'''.replace("RESULT_PREFIX", repr(RESULT_PREFIX))

KINDS = ("confluent", "compat", "fastkafka")
MODES = ("callback", "no-callback", "flush-end")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap")
    ap.add_argument("--modes", default=",".join(MODES),
                    help=f"comma-separated, of {', '.join(MODES)} (default: all)")
    args = ap.parse_args()
    modes = [m for m in args.modes.split(",") if m]
    for m in modes:
        if m not in MODES:
            ap.error(f"--modes: unknown mode {m!r}; use {', '.join(MODES)}")
    cluster = None
    if args.bootstrap is None:
        from fastkafka_tools.apachekafka import KafkaCluster
        cluster = KafkaCluster(nodes=1).start()
        bootstrap = cluster.bootstrap
    else:
        bootstrap = args.bootstrap
    from fastkafka.admin import Admin
    rates: dict[tuple, list] = {(m, k): [] for m in modes for k in KINDS}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            for r in range(args.rounds):
                for mode in modes:
                    for kind in round_order(KINDS, r + 1):
                        topic = f"bench-compat-{kind}-{uuid.uuid4().hex[:8]}"
                        admin.create_topic(topic, partitions=args.partitions)
                        res = run_child([sys.executable, "-c", CHILD, kind, mode, bootstrap, topic,
                                         str(args.records), str(args.size)], 900, cwd=os.getcwd(), env=env,
                                        check=True)
                        good = res["ok"] == args.records and res["bad"] == 0
                        rates[mode, kind].append(res["rate"] if good else float("nan"))
                        print(f"round {r + 1} {mode:11s} {kind:10s} {res['rate']:>12,.0f} rec/s"
                              f"{'' if good else '  FAILED ' + str(res)}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"\n{args.records} records of {args.size} B, {args.partitions} partitions, "
          f"median of {args.rounds} rounds")
    print("| loop | client | records/s (median) | vs confluent-kafka (median of per-round ratios) "
          "| rounds (records/s) |")
    print("| --- | --- | ---: | ---: | --- |")
    for mode in modes:
        base = rates[mode, "confluent"]
        for kind in KINDS:
            rs = rates[mode, kind]
            ratio = statistics.median(x / b for x, b in zip(rs, base))
            print(f"| {mode} | {kind} | {statistics.median(rs):,.0f} | {ratio:.2f}x | "
                  f"{' / '.join(f'{x / 1000:,.0f}k' for x in rs)} |")


if __name__ == "__main__":
    main()
