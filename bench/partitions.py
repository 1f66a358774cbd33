"""Throughput over many partitions: fastkafka against confluent-kafka with keyed records spread over
6 to 1,000 partitions, and with unkeyed records spread over 100 topics.

    python bench/partitions.py [--records 200000] [--rounds 3] [--shapes 6,100,300,1000,100x6]
                               [--keys 20000] [--size 100] [--only fk_produce,ck_produce,fk_send]
                               [--bootstrap-servers HOST:PORT] [--write | --out FILE]

Shapes (``--shapes``): ``P`` is one topic of P partitions written with keys (``--keys`` distinct
keys, record i has key i mod K, the default partitioner: murmur2 of the key, Java-compatible, for
fastkafka; ``partitioner=murmur2_random``, the same placement, for confluent-kafka); ``TxP`` is T
topics of P partitions written without keys, record i going to topic i mod T in the producer loop.
Values are ``--size`` random bytes (1,024 distinct values cycled).

Broker: one Apache Kafka KRaft node started for the run (``fastkafka_tools.apachekafka.KafkaCluster``,
the rig's default heap, full JIT), or ``--bootstrap-servers``. Every measurement runs in its own
child process against fresh topics created for it (and deleted after it): fastkafka ``produce()``
(``fk_produce``), confluent-kafka ``produce()`` (``ck_produce``) and fastkafka ``send()``
(``fk_send``), interleaved round by round, in reverse order in even rounds (A B C, C B A, ...). Before
the measured rounds every measurement runs once untimed (``--warmup-records`` on a 100-partition
topic: the broker's JIT, the page cache).

Timing: from the first produce() to flush() returning with every record acknowledged. Before the
clock each producer connects, loads every topic's metadata and delivers one warm-up record per topic
(InitProducerId included). Beside each rate: records per batch and Produce requests per second
(fastkafka: ``Producer.metrics()``; confluent-kafka: its statistics JSON; the results file says which
fields).

Delivery is checked after the clock stops: fastkafka's flush() must leave 0 records undelivered and
``metrics()`` must count every record sent and no error; confluent-kafka's flush() must leave 0 and
no delivery report may be an error; and the broker must hold exactly the records sent plus the
warm-ups (latest - earliest offsets over every partition of every topic). A measurement that fails a
check shows FAILED. For keyed shapes the per-partition counts of fastkafka and confluent-kafka in
the same round are compared (both place keys by Java's murmur2).

Results: a markdown table per shape (median rates, the median of the per-round ratios to
confluent-kafka, records per batch, requests per second) and every round's counts; printed, and
written to bench/results/partitions.md with ``--write`` (or to ``--out FILE``).
"""

from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time
import uuid
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

RESULTS = os.path.join(HERE, "results", "partitions.md")

# name -> (client, variant)
MEASUREMENTS = {
    "fk_produce": ("fastkafka", "produce()"),
    "ck_produce": ("confluent-kafka", "produce()"),
    "fk_send": ("fastkafka", "send()"),
}
REFERENCE = "ck_produce"
DEFAULT_SHAPES = "6,100,300,1000,100x6"

LINGER_MS = 5
CK_CHUNK = 10_000            # confluent-kafka: poll(0) after every CK_CHUNK records
CK_STATS_MS = 500            # confluent-kafka: statistics.interval.ms
#: confluent-kafka set like fastkafka's defaults (fastkafka/config.py): acks all, idempotent,
#: linger 5 ms, batch 256 KiB, 5 requests in flight, 64 MiB of buffer, 120 s delivery timeout,
#: 1 MiB requests; and the partitioner that places keys as fastkafka's (Java's murmur2).
CK_CONFIG = {
    "acks": "all",
    "enable.idempotence": True,
    "linger.ms": LINGER_MS,
    "partitioner": "murmur2_random",
    "batch.size": 256 * 1024,
    "max.in.flight.requests.per.connection": 5,
    "queue.buffering.max.kbytes": 64 * 1024,
    "queue.buffering.max.messages": 1_000_000,
    "message.timeout.ms": 120_000,
    "message.max.bytes": 1_048_576,
    "delivery.report.only.error": True,
}
#: Settings of the broker started by the benchmark: a deleted topic's files go at once (not a
#: minute later, in the middle of another measurement).
BROKER_PROPERTIES = {"log.segment.delete.delay.ms": 0}
#: fastkafka's metrics() counters kept (as differences over the timed part) per measurement.
FK_COUNTERS = ("records_sent", "batches_sent", "produce_requests", "errors", "retries", "batches_split",
               "batches_expired", "net_requests", "net_bytes_sent", "net_disconnects", "io_waits",
               "io_wakeups_written", "io_timers_armed", "io_gil_free_turns", "gil_free_requests",
               "gil_free_answers", "io_slow_gil_waits", "io_gil_wait_ms_total")


# ------------------------------------------------------------------------------------ shapes
@dataclass(frozen=True)
class Shape:
    topics: int
    partitions: int
    keyed: bool

    @property
    def spec(self) -> str:
        return str(self.partitions) if self.topics == 1 else f"{self.topics}x{self.partitions}"

    @property
    def label(self) -> str:
        if self.topics == 1:
            return f"{self.partitions} partitions, keyed"
        return f"{self.topics} topics x {self.partitions} partitions, unkeyed"

    def topic_names(self, prefix: str) -> list[str]:
        return [prefix] if self.topics == 1 else [f"{prefix}-{i}" for i in range(self.topics)]


def parse_shape(spec: str) -> Shape:
    """``"300"``: one topic of 300 partitions, keyed; ``"100x6"``: 100 topics of 6, unkeyed."""
    spec = spec.strip().lower()
    try:
        if "x" in spec:
            t, p = spec.split("x", 1)
            shape = Shape(int(t), int(p), False)
        else:
            shape = Shape(1, int(spec), True)
    except ValueError:
        raise SystemExit(f"bad shape {spec!r}: P (one keyed topic of P partitions) or TxP "
                         "(T unkeyed topics of P partitions)") from None
    if shape.topics < 1 or shape.partitions < 1:
        raise SystemExit(f"bad shape {spec!r}: counts must be >= 1")
    return shape


def workload(shape: Shape, topics: list[str], records: int, size: int, keys: int):
    """Three lists of ``records`` items, the same for every client: the topic, key and value of
    each record. Keyed: one topic, key i mod ``keys``; unkeyed: topic i mod T, no key."""
    distinct = [os.urandom(size) for _ in range(1024)]
    values = [distinct[i % 1024] for i in range(records)]
    if shape.keyed:
        names = [b"key-%08d" % i for i in range(keys)]
        return [topics[0]] * records, [names[i % keys] for i in range(records)], values
    return [topics[i % len(topics)] for i in range(records)], [None] * records, values


# ------------------------------------------------------------------------------------ children
def run_fastkafka(bootstrap: str, shape: Shape, topics: list[str], tops: list, keys: list,
                  values: list, mode: str) -> dict:
    """``produce()`` or ``send()`` of every record, then flush(); fastkafka's defaults except
    linger_ms=5 (its default too, given explicitly)."""
    from fastkafka import Producer

    p = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS)
    try:
        warm = [p.send(t, b"warm-up", b"warm-up" if shape.keyed else None) for t in topics]
        for f in warm:
            f.get(timeout=60)
        m0 = p.metrics()
        one = p.produce if mode == "produce" else p.send
        c0, t0 = time.process_time(), time.perf_counter()
        for t, k, v in zip(tops, keys, values):
            one(t, v, k)
        undelivered = p.flush()
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - c0
        m1 = p.metrics()
    finally:
        p.close()
    counters = {k: m1[k] - m0[k] for k in FK_COUNTERS}
    return {"seconds": elapsed, "undelivered": undelivered, "delivered": counters["records_sent"],
            "errors": counters["errors"], "batches": counters["batches_sent"],
            "requests": counters["produce_requests"], "batch_records": counters["records_sent"],
            "metrics": counters, "warmup_records": len(topics), "client_cpu_s": cpu}


def _ck_stats_after(p, stats: list, t_mono: float, timeout: float = 30.0) -> dict:
    """Serve ``p``'s callbacks until a statistics emit generated after ``t_mono`` (time.monotonic();
    the JSON's ``ts`` is librdkafka's monotonic clock in microseconds) has arrived; returns it."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        p.poll(0.05)
        if stats:
            last = json.loads(stats[-1])
            if last["ts"] > t_mono * 1e6:
                return last
    raise RuntimeError(f"no confluent-kafka statistics within {timeout:.0f}s "
                       f"(statistics.interval.ms={CK_STATS_MS})")


def _ck_produce_requests(st: dict) -> tuple[int, int]:
    """(Produce requests, all requests) sent so far, summed over the statistics' brokers."""
    produce = sum(b.get("req", {}).get("Produce", 0) for b in st["brokers"].values())
    return produce, sum(b.get("tx", 0) for b in st["brokers"].values())


def run_confluent(bootstrap: str, shape: Shape, topics: list[str], tops: list, keys: list,
                  values: list) -> dict:
    """confluent-kafka's produce() loop set like fastkafka's defaults (CK_CONFIG), ``poll(0)``
    every CK_CHUNK records, ``poll(0.01)`` and retry on BufferError, then flush(). Batches and
    requests come from its statistics (``statistics.interval.ms``; raw JSON strings kept while
    the clock runs, parsed after it stopped)."""
    from confluent_kafka import Producer

    failed = [0]
    stats: list[str] = []

    def on_error_report(err, msg):  # delivery.report.only.error: failures only
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, **CK_CONFIG, "on_delivery": on_error_report,
                  "statistics.interval.ms": CK_STATS_MS, "stats_cb": stats.append})
    for t in topics:
        p.list_topics(t, timeout=30)
        p.produce(t, b"warm-up", b"warm-up" if shape.keyed else None)
    if p.flush(60) != 0 or failed[0]:
        raise RuntimeError("warm-up records not delivered")
    # A statistics emit after the warm-up: its windows (batch counts) are rolled over, so the
    # emits that follow count only the timed records; its request counters are the baseline.
    base = _ck_stats_after(p, stats, time.monotonic())
    stats.clear()
    n = len(values)
    chunks = [(tops[i:i + CK_CHUNK], keys[i:i + CK_CHUNK], values[i:i + CK_CHUNK])
              for i in range(0, n, CK_CHUNK)]
    produce, poll = p.produce, p.poll
    c0, t0 = time.process_time(), time.perf_counter()
    for ct, ck, cv in chunks:
        for t, k, v in zip(ct, ck, cv):
            try:
                produce(t, v, k)
            except BufferError:
                while True:
                    poll(0.01)
                    try:
                        produce(t, v, k)
                        break
                    except BufferError:
                        pass
        poll(0)
    remaining = p.flush(120)
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    last = _ck_stats_after(p, stats, time.monotonic())
    emits = [json.loads(s) for s in stats]
    batches = sum(e["topics"][t]["batchcnt"]["cnt"] for e in emits for t in topics if t in e["topics"])
    batch_records = sum(e["topics"][t]["batchcnt"]["sum"] for e in emits for t in topics
                        if t in e["topics"])
    (req0, all0), (req1, all1) = _ck_produce_requests(base), _ck_produce_requests(last)
    return {"seconds": elapsed, "undelivered": remaining, "delivered": n - remaining - failed[0],
            "errors": failed[0], "batches": batches, "requests": req1 - req0,
            "batch_records": batch_records,
            "metrics": {"requests_all": all1 - all0, "stats_emits": len(emits)},
            "warmup_records": len(topics), "client_cpu_s": cpu}


def child(name: str, bootstrap: str, shape: Shape, prefix: str, records: int, size: int,
          keys: int) -> dict:
    topics = shape.topic_names(prefix)
    tops, ks, vs = workload(shape, topics, records, size, keys)
    if name == "fk_produce":
        r = run_fastkafka(bootstrap, shape, topics, tops, ks, vs, "produce")
    elif name == "fk_send":
        r = run_fastkafka(bootstrap, shape, topics, tops, ks, vs, "send")
    elif name == "ck_produce":
        r = run_confluent(bootstrap, shape, topics, tops, ks, vs)
    else:
        raise SystemExit(f"unknown measurement {name!r}")
    r["records"] = records
    return r


# ------------------------------------------------------------------------------------ topics
class Topics:
    """Creates, counts and deletes topics over one bootstrap address (confluent-kafka's AdminClient:
    all of a measurement's topics in one request)."""

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap

    def _admin(self):
        """A new AdminClient per operation: a long-lived one kept answering list_offsets on a topic
        created after its first requests with "No leaders found" (its metadata cache)."""
        from confluent_kafka.admin import AdminClient

        return AdminClient({"bootstrap.servers": self.bootstrap, "log_level": 3})

    def _tps(self, names: list[str], partitions: int):
        from confluent_kafka import TopicPartition

        return [TopicPartition(t, p) for t in names for p in range(partitions)]

    def create(self, names: list[str], partitions: int, timeout: float = 180.0) -> None:
        """Create ``names`` with ``partitions`` each (the broker's replication factor), then wait
        until every partition answers ListOffsets (its leader has taken it on: writable)."""
        from confluent_kafka.admin import NewTopic

        admin = self._admin()  # referenced until its futures are done
        futs = admin.create_topics([NewTopic(t, partitions, -1) for t in names],
                                        request_timeout=timeout, operation_timeout=timeout)
        for f in futs.values():
            f.result()
        self._offsets(names, partitions, "latest", timeout)

    def _offsets(self, names: list[str], partitions: int, spec: str, timeout: float) -> dict:
        from confluent_kafka import KafkaException
        from confluent_kafka.admin import OffsetSpec

        want = OffsetSpec.latest() if spec == "latest" else OffsetSpec.earliest()
        deadline = time.monotonic() + timeout
        while True:
            admin = self._admin()
            futs = admin.list_offsets({tp: want for tp in self._tps(names, partitions)},
                                           request_timeout=30)
            try:
                return {(tp.topic, tp.partition): f.result().offset for tp, f in futs.items()}
            except KafkaException as e:  # not leader yet, leader unknown: the topic is coming up
                if time.monotonic() > deadline:
                    raise RuntimeError(f"{len(names)} topic(s) of {partitions} partitions not "
                                       f"writable after {timeout:.0f}s: {e}") from e
                time.sleep(0.1)

    def counts(self, names: list[str], partitions: int) -> list[int]:
        """Records held per partition (latest - earliest offset), topic by topic."""
        latest = self._offsets(names, partitions, "latest", 60)
        earliest = self._offsets(names, partitions, "earliest", 60)
        return [latest[(t, p)] - earliest[(t, p)] for t in names for p in range(partitions)]

    def delete(self, names: list[str]) -> None:
        admin = self._admin()
        for f in admin.delete_topics(names, operation_timeout=60).values():
            f.result()


# ------------------------------------------------------------------------------------ parent
def run_child(cmd: list[str], timeout: float) -> dict:
    """One measurement's child process: the JSON of its ``RESULT `` line, or ``{"failed": why}``."""
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
    except subprocess.TimeoutExpired:
        return {"failed": f"timed out after {timeout:.0f}s"}
    line = next((ln for ln in cp.stdout.splitlines() if ln.startswith("RESULT ")), None)
    if line is None:
        lines = [x.strip() for x in (cp.stderr or cp.stdout).strip().splitlines() if x.strip()]
        named = [x for x in lines if "Error" in x or "Exception" in x]
        return {"failed": f"exit {cp.returncode}: " + ((named or lines or ["no output"])[-1])}
    return json.loads(line[7:])


def round_order(names: list[str], rnd: int) -> list[str]:
    """Round ``rnd`` (from 1) runs ``names`` in order, even rounds in reverse: A B C, C B A, ..."""
    return list(names) if rnd % 2 else list(reversed(names))


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


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), None when unknown."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def settle(pid: int | None, below: float = 0.15, window: float = 0.25, limit: float = 20.0) -> float:
    """Wait until the broker process ``pid`` used less than ``below`` of a core in two successive
    ``window``-second windows (its work on topics just created or deleted is done), at most
    ``limit`` seconds; returns the seconds waited (0 without a pid)."""
    prev = process_cpu_s(pid)
    if prev is None:
        return 0.0
    t0 = time.monotonic()
    quiet = 0
    while quiet < 2 and time.monotonic() - t0 < limit:
        time.sleep(window)
        cur = process_cpu_s(pid)
        if cur is None:
            break
        quiet = quiet + 1 if (cur - prev) / window < below else 0
        prev = cur
    return time.monotonic() - t0


def measure(topics: Topics, name: str, shape: Shape, prefix: str, args, broker_pid: int | None = None) -> dict:
    """Fresh topics, one child process of ``name`` against them, the checks, the topics deleted.
    With ``broker_pid``, the broker's CPU seconds while the child ran (connection, warm-up and the
    child's start included) are kept as ``broker_cpu_s``."""
    names = shape.topic_names(prefix)
    t0 = time.monotonic()
    try:
        topics.create(names, shape.partitions)
    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
        return {"failed": f"creating the topics: {type(e).__name__}: {e}", "load": os.getloadavg()[0]}
    setup = time.monotonic() - t0
    r_settle = settle(broker_pid)
    cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, topics.bootstrap, shape.spec,
           prefix, "--records", str(args.records), "--size", str(args.size), "--keys", str(args.keys)]
    b0 = process_cpu_s(broker_pid)
    r = run_child(cmd, args.timeout)
    b1 = process_cpu_s(broker_pid)
    if b0 is not None and b1 is not None:
        r["broker_cpu_s"] = b1 - b0
    held = None
    if "failed" not in r:
        try:
            held = topics.counts(names, shape.partitions)
        except Exception as e:  # noqa: BLE001
            r["failed"] = f"counting the records: {type(e).__name__}: {e}"
    r = check(r, held)
    if held is not None and shape.keyed:
        r["partition_counts"] = held
    r["topic_setup_s"] = setup
    r["settle_s"] = r_settle
    r["load"] = os.getloadavg()[0]
    try:
        topics.delete(names)
    except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
        print(f"  (could not delete {prefix}: {e})", flush=True)
    return r


def run_benchmark(bootstrap: str, args, log=print, broker_pid: int | None = None) -> dict:
    """Every shape's rounds (after the untimed warm-up pass). Returns ``{"shapes": {spec:
    {name: [round result, ...]}}, "warmup": [...], "loads": [...]}``."""
    topics = Topics(bootstrap)
    run_id = uuid.uuid4().hex[:6]
    names = args.names
    out = {"shapes": {}, "warmup": [], "loads": [os.getloadavg()[0]]}
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
        for rnd in range(1, args.rounds + 1):
            for order, name in enumerate(round_order(names, rnd)):
                prefix = f"pw-{run_id}-{shape.spec}-{name}-r{rnd}".replace("_", "-")
                r = measure(topics, name, shape, prefix, args, broker_pid)
                r["round"], r["order"] = rnd, order
                res[name].append(r)
                out["loads"].append(r["load"])
                if "failed" in r:
                    msg = "FAILED: " + r["failed"]
                else:
                    msg = (f"{r['rate']:>10,.0f} rec/s  {r['seconds']:6.2f} s  batches {r['batches']:,}  "
                           f"requests {r['requests']:,}  records/batch {r['records_per_batch']:.2f}")
                log(f"{shape.spec:<6} round {rnd} {name:<11} {msg}")
        out["shapes"][shape.spec] = res
    return out


# ------------------------------------------------------------------------------------ report
def fmt_rate(x) -> str:
    return f"{x:,.0f}" if x is not None else "FAILED"


def _med(values):
    vals = [v for v in values if v is not None]
    return statistics.median(vals) if vals and len(vals) == len(values) else None


def per_round_ratios(a: list[dict], b: list[dict]) -> list[float | None]:
    """Round by round, ``a``'s rate over ``b``'s (None where either failed)."""
    return [ra["rate"] / rb["rate"] if "failed" not in ra and "failed" not in rb else None
            for ra, rb in zip(a, b)]


def summarize(res: dict[str, list[dict]]) -> dict[str, dict]:
    """Per measurement: medians over the rounds (None when a round failed) and the per-round
    ratios to confluent-kafka."""
    out = {}
    for name, rounds in res.items():
        ok = all("failed" not in r for r in rounds) and rounds
        get = (lambda key: _med([r.get(key) for r in rounds])) if ok else (lambda key: None)
        ratios = per_round_ratios(rounds, res[REFERENCE]) if REFERENCE in res else []
        out[name] = {"rate": get("rate"), "records_per_batch": get("records_per_batch"),
                     "requests_per_s": get("requests_per_s"),
                     "batches_per_request": get("batches_per_request"),
                     "ratios": ratios, "ratio": _med(ratios) if ratios else None}
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


def shape_section(spec: str, res: dict[str, list[dict]], names: list[str]) -> list[str]:
    shape = parse_shape(spec)
    s = summarize(res)
    lines = [f"## {shape.label}", "",
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
        lines += ["", "Per-partition record counts of fastkafka produce() and confluent-kafka in the same "
                  "round identical (same key placement): " + ", ".join("yes" if x else "no" for x in same) + "."]
    lines.append("")
    return lines


def machine_lines(broker_line: str, loads: list[float], note: str | None) -> list[str]:
    import importlib.metadata as md

    try:
        import confluent_kafka
        ck = f"confluent-kafka {md.version('confluent-kafka')}, librdkafka {confluent_kafka.libversion()[0]}"
    except Exception:  # noqa: BLE001
        ck = "confluent-kafka (not installed)"
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=ROOT,
                               capture_output=True, text=True).stdout.strip()
        if dirty:
            commit += " (with uncommitted changes in the tree)"
    except OSError:
        commit = "?"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    lines = ["Machine:",
             f"- nproc: {os.cpu_count()} ({cpu})",
             f"- Python {platform.python_version()}, {platform.platform()}",
             f"- fastkafka at git {commit}; {ck}",
             f"- {broker_line}",
             f"- load average (1 min), at the start / after each measurement: min {min(loads):.2f}, "
             f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (start {loads[0]:.2f}, "
             f"end {loads[-1]:.2f})"]
    if note:
        lines.append(f"- {note}")
    return lines + [""]


def render(report: dict, args, wall: float, broker_line: str) -> str:
    names = args.names
    cmd = (f"python bench/partitions.py --records {args.records} --rounds {args.rounds} "
           f"--shapes {','.join(args.shapes)} --keys {args.keys} --size {args.size}")
    if names != list(MEASUREMENTS):
        cmd += f" --only {','.join(names)}"
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
        "`sticky.partitioning.linger.ms=10`). Fresh topics per measurement. Rate = records / (first "
        "produce() -> flush() returned, every record acknowledged); medians over "
        f"{args.rounds} interleaved rounds (order reversed in even rounds); the ratio to confluent-kafka "
        "is the median of the per-round ratios (the two ran one after the other in that round).",
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
        lines += shape_section(spec, res, names)
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
        "error; confluent-kafka: `flush()` left 0 and no error report; both: latest - earliest offsets "
        "over every partition of the measurement's topics (confluent-kafka's `AdminClient.list_offsets`) "
        "equal to the records plus one warm-up record per topic.",
        "- Detail column: client CPU = the child process's CPU time (all its threads) over the timed part; "
        "broker CPU = the broker process's user + system CPU time while the child ran (its start, "
        "connection and warm-up included), when the broker's process is known.",
        "- Topics are created (one CreateTopics for all of a measurement's topics, then waiting until "
        "every partition answers ListOffsets) before the child process starts and deleted after the "
        "count; neither is timed. After creating them and before starting the child, the benchmark waits "
        "until the broker process is idle (below 0.15 of a core in two successive 0.25 s windows, at most "
        "20 s; only when it knows the broker's process). Each measurement runs in a fresh child process. "
        + (f"Before the rounds, every measurement ran once untimed with {args.warmup_records:,} records "
           "on a 100-partition topic (broker JIT, page cache)." if args.warmup_records else
           "No untimed warm-up pass (`--warmup-records 0`)."),
        "",
        *machine_lines(broker_line, report["loads"], args.note),
    ]
    return "\n".join(lines)


def kafka_line(version: str, heap_mb: int, jit: str) -> str:
    return (f"Apache Kafka {version}, one KRaft node (broker + controller) on 127.0.0.1 "
            f"(`fastkafka_tools.apachekafka.KafkaCluster(nodes=1, heap_mb={heap_mb}, jit=\"{jit}\")`: "
            "SerialGC, 2 network and 2 I/O threads), `log.segment.delete.delay.ms=0` (a deleted topic's "
            "files are removed at once), data on local disk in a temporary directory, replication factor 1; "
            "started once for the run")


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
    args = ap.parse_args(argv)
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
        r = child(name, bootstrap, parse_shape(spec), prefix, args.records, args.size, args.keys)
        print("RESULT " + json.dumps(r), flush=True)
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
        broker_line = kafka_line(broker.version, broker.heap_mb, args.kafka_jit)
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
