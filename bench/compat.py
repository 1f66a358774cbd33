"""The confluent-kafka compatibility layer's cost: the ``produce()`` + ``poll(0)`` loop of
``fastkafka.compat.confluent.Producer`` against ``confluent_kafka.Producer`` and
``fastkafka.Producer.produce`` on the same broker.

    python bench/compat.py [--records 200000] [--size 100] [--partitions 6] [--rounds 3]
                           [--bootstrap HOST:PORT]

Without ``--bootstrap`` one Apache Kafka KRaft node is started
(``fastkafka_tools.apachekafka.KafkaCluster(nodes=1)``) and stopped at the end. Each client runs
once per round, round-robin, in a fresh child process against a fresh topic; the table shows the
median records/s over the rounds. Timed: from the first ``produce`` to ``flush()`` returning, after
one warm-up record (connection, metadata, InitProducerId). Loops: confluent-kafka and the compat
layer ``p.produce(topic, v, callback=cb); p.poll(0)`` per record with ``poll(1)`` and a retry on
``BufferError`` (``queue.buffering.max.messages=1000000``), the callback counting errors;
``fastkafka.Producer`` ``p.produce(topic, v, on_delivery=cb)`` (its callback runs on the I/O
thread). linger.ms=5, acks=all, idempotence as each client's default; values are ``--size``
random bytes, no key. A run whose callbacks saw fewer successes than records is reported FAILED.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import uuid

CHILD = r'''
import json, os, sys, time
kind, bootstrap, topic, n, size = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4]), int(sys.argv[5])
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
    for i in range(n):
        produce(topic, values[i & 1023], on_delivery=cb)
    p.flush()
else:
    p.produce(topic, b"warm-up", callback=cb); p.flush(30)
    t0 = time.perf_counter()
    produce, poll = p.produce, p.poll
    for i in range(n):
        while True:
            try:
                produce(topic, values[i & 1023], callback=cb)
                break
            except BufferError:
                poll(1)
        poll(0)
    p.flush()
dt = time.perf_counter() - t0
print(json.dumps({"rate": n / dt, "ok": ok[0] - 1, "bad": bad[0]}))
'''

KINDS = ("confluent", "compat", "fastkafka")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--bootstrap")
    args = ap.parse_args()
    cluster = None
    if args.bootstrap is None:
        from fastkafka_tools.apachekafka import KafkaCluster
        cluster = KafkaCluster(nodes=1).start()
        bootstrap = cluster.bootstrap
    else:
        bootstrap = args.bootstrap
    from fastkafka.admin import Admin
    rates: dict[str, list] = {k: [] for k in KINDS}
    env = dict(os.environ, PYTHONPATH=os.pathsep.join([os.getcwd(), os.environ.get("PYTHONPATH", "")]))
    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            for r in range(args.rounds):
                for kind in KINDS:
                    topic = f"bench-compat-{kind}-{uuid.uuid4().hex[:8]}"
                    admin.create_topic(topic, partitions=args.partitions)
                    out = subprocess.run([sys.executable, "-c", CHILD, kind, bootstrap, topic,
                                          str(args.records), str(args.size)], env=env,
                                         capture_output=True, text=True, check=True)
                    res = json.loads(out.stdout.strip().splitlines()[-1])
                    good = res["ok"] == args.records and res["bad"] == 0
                    rates[kind].append(res["rate"] if good else float("nan"))
                    print(f"round {r + 1} {kind:10s} {res['rate']:>12,.0f} rec/s"
                          f"{'' if good else '  FAILED ' + str(res)}", flush=True)
    finally:
        if cluster is not None:
            cluster.stop()
    print(f"\n{args.records} records of {args.size} B, {args.partitions} partitions, "
          f"median of {args.rounds} rounds")
    base = statistics.median(rates["confluent"])
    for kind in KINDS:
        med = statistics.median(rates[kind])
        print(f"| {kind:10s} | {med:>12,.0f} rec/s | {med / base:5.2f}x confluent-kafka |")


if __name__ == "__main__":
    main()
