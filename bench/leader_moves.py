"""How long records wait while partition leaders move: fastkafka with and without leader hints
(KIP-951), and the Java producer, on a 3-node Apache Kafka cluster.

A paced stream (``--rate`` records a second, 100-byte values, spread over ``--partitions``
partitions of a topic with replication factor 3; acks=all with idempotence, linger 5 ms) runs while
every partition's leader is moved ``--moves`` times: the replica order is rotated
(AlterPartitionReassignments; that alone moves nothing) and a preferred leader election
(ElectLeaders) makes the new first replica the leader, both through kafka-python's admin client.
The instant of each move is when a poll of the cluster (every 50 ms) first sees the new leaders
(the midpoint of that poll and the one before). Each record's wait is its
completion time minus its send time (both CLOCK_MONOTONIC: Python's ``time.monotonic_ns`` and
Java's ``System.nanoTime``); the table gives, for the records sent within +-2 s of a move, the
median, p99 and maximum, and for the other records the p99.

Clients, one after the other, each on a fresh topic:

* ``fastkafka (hints)``: this build;
* ``fastkafka (no hints)``: the same build with the hints ignored (``Metadata.apply_leader_hints``
  replaced by one that only asks for a refresh): as before the producer took hints, a refused
  batch's partition keeps its old leader until a Metadata answer moves it, and the retry waits
  the retry backoff unless that answer came first);
* ``Java producer``: kafka-clients (the tools' release) through a small probe compiled here with
  ``javac`` (it sends at the same pace and records the same two times per record).

    python bench/leader_moves.py --out bench/results/leader_moves.md
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

from harness import emit, machine_section, median_or_none, round_order  # noqa: E402

WINDOW_S = 2.0
VALUE = b"v" * 100

JAVA_PROBE = r"""
import java.util.Properties;
import org.apache.kafka.clients.producer.KafkaProducer;
import org.apache.kafka.clients.producer.ProducerRecord;

/** Paced sends until the stop file exists (or the most seconds passed); then prints
 *  "index sent_ns done_ns" per record (done_ns -1: failed). */
public class LeaderMoveProbe {
    public static void main(String[] args) throws Exception {
        String bootstrap = args[0], topic = args[1];
        int partitions = Integer.parseInt(args[2]), rate = Integer.parseInt(args[3]);
        double seconds = Double.parseDouble(args[4]);
        java.io.File stop = new java.io.File(args[5]);
        Properties p = new Properties();
        p.put("bootstrap.servers", bootstrap);
        p.put("acks", "all");
        p.put("enable.idempotence", "true");
        p.put("linger.ms", "5");
        p.put("key.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        p.put("value.serializer", "org.apache.kafka.common.serialization.ByteArraySerializer");
        int n = (int) (rate * seconds);
        final long[] sent = new long[n];
        final long[] done = new long[n];
        byte[] value = new byte[100];
        java.util.Arrays.fill(value, (byte) 'v');
        KafkaProducer<byte[], byte[]> producer = new KafkaProducer<>(p);
        producer.partitionsFor(topic);
        System.out.println("READY " + System.nanoTime());
        System.out.flush();
        int perTick = Math.max(1, rate / 100);
        long start = System.nanoTime();
        int i = 0;
        while (i < n && !(i % (perTick * 10) == 0 && stop.exists())) {
            for (int k = 0; k < perTick && i < n; k++, i++) {
                final int idx = i;
                sent[idx] = System.nanoTime();
                producer.send(new ProducerRecord<>(topic, idx % partitions, null, value),
                              (md, e) -> done[idx] = e == null ? System.nanoTime() : -1L);
            }
            long next = start + (long) (i / perTick) * 10_000_000L;
            long wait = next - System.nanoTime();
            if (wait > 0) Thread.sleep(wait / 1_000_000L, (int) (wait % 1_000_000L));
        }
        producer.close();
        StringBuilder out = new StringBuilder();
        for (int j = 0; j < i; j++) out.append(j).append(' ').append(sent[j]).append(' ').append(done[j]).append('\n');
        System.out.print(out);
        System.out.flush();
    }
}
"""


# ------------------------------------------------------------------------------------ the moves
# The moves go through kafka-python's admin client (AlterPartitionReassignments, ElectLeaders): a
# request each, where Kafka's command-line tools start a JVM per step (10-20 s on this machine).
def _leaders(kc, topic) -> dict:
    return {p.partition: p.leader for p in kc.partitions(topic)}


def move_leaders(kc, admin, topic: str, replicas: dict, k: int) -> float:
    """Rotate each partition's replica order by ``k`` and elect the preferred leaders; returns the
    monotonic instant the new leaders were first seen (midpoint of the poll that saw them)."""
    from kafka import TopicPartition

    target = {p: r[k % len(r):] + r[:k % len(r)] for p, r in replicas.items()}
    admin.alter_partition_reassignments({TopicPartition(topic, p): r for p, r in target.items()})
    deadline = time.monotonic() + 60
    while any(list(p.replicas) != target[p.partition] for p in kc.partitions(topic)):
        if time.monotonic() > deadline:
            raise RuntimeError("reassignment not applied")
        time.sleep(0.1)
    want = {p: r[0] for p, r in target.items()}
    last = time.monotonic()
    admin.elect_leaders(0, {topic: sorted(target)})
    while True:
        now = _leaders(kc, topic)
        t = time.monotonic()
        if all(now[p] == want[p] for p in want):
            return (last + t) / 2
        if t > deadline:
            raise RuntimeError(f"leaders did not move to {want}: {now}")
        last = t
        time.sleep(0.05)


# --------------------------------------------------------------------------------- the clients
class FastkafkaStream:
    def __init__(self, bootstrap, topic, partitions, rate, hints: bool):
        from fastkafka import Producer

        self.p = Producer(bootstrap_servers=bootstrap, linger_ms=5, acks="all", enable_idempotence=True)
        if not hints:
            md = self.p._metadata

            def ignore(hints, endpoints=()):
                md.request_update()
                return []
            md.apply_leader_hints = ignore
        self.p.partitions_for(topic)
        self.topic, self.partitions, self.rate = topic, partitions, rate
        self.sent: list[int] = []
        self.done: dict[int, int] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _cb(self, i):
        def cb(err, md):
            self.done[i] = time.monotonic_ns() if err is None else -1
        return cb

    def _run(self):
        per_tick = max(1, self.rate // 100)
        start = time.monotonic()
        i = 0
        while not self._stop.is_set():
            for _ in range(per_tick):
                self.sent.append(time.monotonic_ns())
                self.p.send(self.topic, VALUE, partition=i % self.partitions, on_delivery=self._cb(i))
                i += 1
            time.sleep(max(0.0, start + (i // per_tick) * 0.01 - time.monotonic()))

    def start(self):
        self._thread.start()

    def finish(self) -> tuple[list, dict]:
        self._stop.set()
        self._thread.join(30)
        self.p.close(30)
        m = self.p.metrics()
        rows = [(s, self.done.get(i, -1)) for i, s in enumerate(self.sent)]
        return rows, {"leader_hints_applied": m["leader_hints_applied"], "retries": m["retries"],
                      "errors": m["errors"]}


class JavaStream:
    def __init__(self, bootstrap, topic, partitions, rate, seconds, probe_dir):
        from fastkafka_tools.apachekafka import java_command

        self.stop_file = os.path.join(probe_dir, f"stop-{topic}")

        cmd = java_command("tools", jit="full", heap_mb=256)
        cp = cmd.index("-cp")
        cmd[cp + 1] = cmd[cp + 1] + os.pathsep + probe_dir
        self.proc = subprocess.Popen(cmd + ["LeaderMoveProbe", bootstrap, topic, str(partitions),
                                            str(rate), str(seconds), self.stop_file],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        if not line.startswith("READY"):
            raise RuntimeError(f"the Java probe did not start: {line}{self.proc.stderr.read()[-2000:]}")

    def start(self):
        pass

    def finish(self) -> tuple[list, dict]:
        with open(self.stop_file, "w"):
            pass
        out, err = self.proc.communicate(timeout=180)
        if self.proc.returncode != 0:
            raise RuntimeError(f"the Java probe exited {self.proc.returncode}: {err[-2000:]}")
        rows = []
        for line in out.splitlines():
            _, s, d = line.split()
            rows.append((int(s), int(d)))
        return rows, {}


def compile_probe(workdir: str) -> str:
    from fastkafka_tools.apachekafka import ensure_jars

    src = os.path.join(workdir, "LeaderMoveProbe.java")
    with open(src, "w") as f:
        f.write(JAVA_PROBE)
    libs = ensure_jars("tools", None)
    subprocess.run(["javac", "-cp", os.path.join(libs, "*"), "-d", workdir, src], check=True,
                   stdin=subprocess.DEVNULL)
    return workdir


# --------------------------------------------------------------------------------- the numbers
def _pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(q * len(xs)))]


def summarise(rows, moves_ns: list[int]) -> dict:
    window = int(WINDOW_S * 1e9)
    near, far = [], []
    failed = sum(1 for _, d in rows if d < 0)
    for s, d in rows:
        if d < 0:
            continue
        ms = (d - s) / 1e6
        (near if any(abs(s - m) <= window for m in moves_ns) else far).append(ms)
    return {"records": len(rows), "failed": failed, "near": len(near),
            "p50": _pct(near, 0.5), "p99": _pct(near, 0.99), "max": max(near),
            "far_p99": _pct(far, 0.99) if far else float("nan")}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--moves", type=int, default=3)
    ap.add_argument("--rate", type=int, default=1000)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--gap", type=float, default=5.0, help="seconds of steady stream after each move")
    ap.add_argument("--warmup", type=float, default=3.0)
    ap.add_argument("--clients", default="fk_hints,fk_no_hints,java")
    ap.add_argument("--rounds", type=int, default=1,
                    help="rounds of all clients (in reverse order in even rounds); medians reported")
    ap.add_argument("--out", default=None)
    args = ap.parse_args(argv)

    from fastkafka_tools.apachekafka import KafkaCluster

    names = {"fk_hints": "fastkafka (hints)", "fk_no_hints": "fastkafka (no hints)",
             "java": "Java producer (kafka-clients, tools' release)"}
    results: dict[str, list] = {}
    started = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    load_at_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory() as workdir:
        probe_dir = compile_probe(workdir)
        kc = KafkaCluster(nodes=3, heap_mb=384).start()
        kafka_version = kc.version
        from kafka.admin import KafkaAdminClient
        admin = KafkaAdminClient(bootstrap_servers=kc.bootstrap)
        try:
            for client in [c for rnd in range(args.rounds)
                           for c in round_order(args.clients.split(","), rnd)]:
                topic = f"moves-{client}-{int(time.time())}"
                kc.create_topic(topic, args.partitions)
                replicas = {p.partition: list(p.replicas) for p in kc.partitions(topic)}
                seconds = 120.0 + args.moves * (args.gap + 20.0)   # the most; stopped after the moves
                if client == "java":
                    s = JavaStream(kc.bootstrap, topic, args.partitions, args.rate, seconds, probe_dir)
                else:
                    s = FastkafkaStream(kc.bootstrap, topic, args.partitions, args.rate,
                                        client == "fk_hints")
                t0 = time.monotonic()
                s.start()
                time.sleep(args.warmup)
                moves = []
                for k in range(1, args.moves + 1):
                    moves.append(int(move_leaders(kc, admin, topic, replicas, k) * 1e9))
                    print(f"  {client}: move {k} at {moves[-1] / 1e9 - t0:.2f} s", flush=True)
                    time.sleep(args.gap)
                rows, extra = s.finish()
                r = summarise(rows, moves)
                with kc.admin() as fk_admin:
                    stored = sum(fk_admin.list_offsets(topic, p, "latest", timeout_ms=15000)
                                 for p in range(args.partitions))
                r.update(extra, stored=stored, moves=len(moves))
                results.setdefault(client, []).append(r)
                print(f"  {client}: {json.dumps(r)}", flush=True)
                kc.delete_topic(topic)
        finally:
            admin.close()
            kc.stop()
    lines = [
        "# Leader moves: how long records wait (KIP-951 leader hints)",
        "",
        f"`python bench/leader_moves.py --moves {args.moves} --rate {args.rate} --partitions "
        f"{args.partitions} --rounds {args.rounds}` ({started}). A 3-node Apache Kafka cluster (replication factor 3), a "
        f"paced stream of {args.rate} records/s (100 B, acks=all, idempotence, linger 5 ms); every "
        f"partition's leader moved {args.moves} times by a replica-order reassignment and a preferred "
        f"election (kafka-python's admin client). Wait = completion time - send time. \"Near\": records sent within "
        f"+-{WINDOW_S:.0f} s of a move.",
        "",
        f"Medians of {args.rounds} round(s) (each client once per round, in reverse order in even "
        f"rounds); records, failures and hints are totals.",
        "",
        "| client | records (near a move) | failed | stored | near p50 ms | near p99 ms | near max ms "
        "| p99 ms elsewhere | leader hints applied |",
        "|---|---|---|---|---|---|---|---|---|",
    ]

    def med(rs, k):
        return median_or_none([r[k] for r in rs])

    for client, rs in results.items():
        hints = sum(r.get("leader_hints_applied", 0) for r in rs) if client != "java" else "n/a"
        lines.append(f"| {names[client]} | {sum(r['records'] for r in rs)} ({sum(r['near'] for r in rs)}) "
                     f"| {sum(r['failed'] for r in rs)} | {sum(r['stored'] for r in rs)} "
                     f"| {med(rs, 'p50'):.1f} | {med(rs, 'p99'):.1f} | {med(rs, 'max'):.1f} "
                     f"| {med(rs, 'far_p99'):.1f} | {hints} |")
    lines += ["", "Per round (near p99 / near max ms):", ""]
    for client, rs in results.items():
        lines.append(f"- {names[client]}: " + ", ".join(f"{r['p99']:.0f} / {r['max']:.0f}" for r in rs))
    lines += ["", *machine_section([f"- Apache Kafka {kafka_version}, 3 KRaft nodes, 384 MB heap each"],
                                   load_at_start)]
    emit("\n".join(lines) + "\n", args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
