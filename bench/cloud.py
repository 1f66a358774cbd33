"""Throughput in the shape of a cloud cluster: SASL_SSL with SCRAM-SHA-512, lz4 and zstd, keyed
records, acks=all with idempotence; fastkafka against confluent-kafka and the Java producer on the
same listener of the same broker.

    python bench/cloud.py [--rounds 3] [--records 100000] [--configs lz4:6:100,zstd:100:1000,...]
                          [--warmup-records 100000] [--kafka-heap-mb 1024] [--quick] [--out FILE]

One Apache Kafka node (``fastkafka_tools.apachekafka.KafkaCluster``, full JIT) for the whole run, with
a SASL_SSL listener (PEM certificates made for the run by ``fastkafka_tools.tlsrig``, SCRAM-SHA-512
only; the SCRAM user is made when the storage is formatted, its password random per run and handed to
the children in their environment) and the PLAINTEXT listener. A configuration (``--configs``, each
``CODEC:PARTITIONS:VALUE_BYTES``; default every one of lz4/zstd x 6/100 x 100/1000) is one topic of
that many partitions, fresh for each round, written by every client of the round in turn:

- ``fk_send`` / ``fk_produce`` / ``fk_batch``: fastkafka ``send()`` loop, ``produce()`` loop (the
  confluent-style call, no future), ``send_batch(values, keys)`` of pyarrow ``binary`` arrays in
  100k-record chunks; keyed, over SASL_SSL;
- ``ck``: confluent-kafka's ``produce(topic, value, key=...)`` loop (``poll(0)`` every 10k records,
  ``poll(0.01)`` and again on ``BufferError``), ``partitioner=murmur2_random`` (the same placement as
  fastkafka's and Java's default), keyed, over SASL_SSL;
- ``java``: Apache Kafka's perf tool (``ProducerPerformance``) in a fresh JVM over SASL_SSL, its
  settings in a ``--command-config`` file (security.protocol, sasl.mechanism, sasl.jaas.config with
  ScramLoginModule, a PEM trust store); ``--payload-file`` holds the same values as the Python
  clients. The tool sends no keys, so its rows are unkeyed; ``--warmup-records`` equal to the timed
  records first, its steady-state summary is the rate;
- ``fk_nokey``: fastkafka's ``send()`` loop without keys over SASL_SSL, beside the Java producer;
- ``fk_plain``: fastkafka's keyed ``send()`` loop over PLAINTEXT: its CPU per record is the
  denominator of what TLS and SASL cost fastkafka.

Every client: compression of the configuration, linger 5 ms, acks=all with idempotence; the Java
producer ``batch.size=262144`` and ``buffer.memory=67108864`` (fastkafka's defaults). Keys: 20,000
distinct (record i has key i mod 20,000). Values: 4,096 distinct ASCII values per size (a JSON-like
head and random base64 text: they compress about as much as real text-like payloads, and no two
records in a batch repeat each other), read by every child from the same file.

Rounds: each round runs every configuration; in a configuration every client once, in reverse order
in even rounds (``harness.round_order``), each in a fresh child process, after a warm-up pass
(every client once, ``--warmup-records``, on the first configuration; the broker's JIT of its TLS
path, untimed). Records/s from the first send to ``flush()`` returning (Java: its steady-state
summary); CPU per record: the child's user + system CPU over the timed part (``getrusage``, every
thread), for Java the whole JVM's (start-up, JIT and warm-up records included, per record sent).

Delivery: every client's own count (fastkafka ``metrics()`` and ``BatchFuture``s; confluent-kafka's
error reports and what ``flush()`` left; Java the records its summary counts and no exception); the
topic's latest offsets before and after each child must differ by exactly the records sent plus the
warm-up records. In round 1 each configuration's topic is read back by confluent-kafka's consumer
over SASL_SSL (CRC checks on): every record, the keyed ones with a key, the values of the right size.

A run of all eight configurations, 3 rounds, with ``--records 200000`` took 24 minutes on the
2-core reference VM while other work kept its load average at 4-13 (the Java producer's 1 KB rows,
at 4-7k records/s there, are the longest part); the default, 100,000, is sized for about 12
minutes on that machine unloaded (an estimate: not timed on a quiet machine).
``--quick`` is a smoke run (one round, 20k records, two configurations, small warm-up).
"""
from __future__ import annotations

import argparse
import base64
import gc
import json
import os
import random
import resource
import secrets
import shlex
import ssl
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (HERE, ROOT):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from brokers import BROKER_PROPERTIES, Topics  # noqa: E402
from harness import (fmt, fmt_rate, kafka_run_line, machine_section, median_field,  # noqa: E402
                     median_or_none, paired_ratios, result_line, round_order, run_child)

DEFAULT_CONFIGS = [f"{c}:{p}:{s}" for c in ("lz4", "zstd") for p in (6, 100) for s in (100, 1000)]
QUICK_CONFIGS = ["lz4:6:100", "zstd:100:1000"]

# name -> (client, variant, listener, keyed)
CLIENTS = {
    "fk_send":    ("fastkafka", "`send()` loop", "SASL_SSL", True),
    "fk_produce": ("fastkafka", "`produce()` loop", "SASL_SSL", True),
    "fk_batch":   ("fastkafka", "`send_batch(Arrow)`", "SASL_SSL", True),
    "ck":         ("confluent-kafka", "`produce()` loop", "SASL_SSL", True),
    "java":       ("Java producer", "ProducerPerformance, **unkeyed**", "SASL_SSL", False),
    "fk_nokey":   ("fastkafka", "`send()` loop, **unkeyed**", "SASL_SSL", False),
    "fk_plain":   ("fastkafka", "`send()` loop", "PLAINTEXT", True),
}
FASTKAFKA_KEYED = ["fk_send", "fk_produce", "fk_batch"]

LISTENER = "SASL_SSL"
MECHANISM = "SCRAM-SHA-512"
USER = "bench"
PASSWORD_ENV = "FASTKAFKA_BENCH_SCRAM_PASSWORD"
KEYS = 20_000
DISTINCT_VALUES = 4096
LINGER_MS = 5
CHUNK = 100_000
JAVA_HEAP_MB = 1024
PERF_MAIN = "org.apache.kafka.tools.ProducerPerformance"
JAVA_PROPS = {"acks": "all", "enable.idempotence": "true", "linger.ms": str(LINGER_MS),
              "batch.size": "262144", "buffer.memory": "67108864"}
TARGET_VS_CK = 2.0
TARGET_VS_JAVA = 1.0
TARGET_TLS_CPU = 1.3


# ------------------------------------------------------------------------------------ pure helpers
def parse_configs(text: str) -> list[tuple[str, int, int]]:
    """``CODEC:PARTITIONS:VALUE_BYTES,...`` as tuples; ValueError for a malformed or unknown one."""
    out = []
    for item in (x.strip() for x in text.split(",")):
        if not item:
            continue
        parts = item.split(":")
        if len(parts) != 3 or parts[0] not in ("lz4", "zstd", "snappy", "gzip", "none") \
                or not parts[1].isdigit() or not parts[2].isdigit() or int(parts[1]) < 1 or int(parts[2]) < 40:
            raise ValueError(f"{item!r}: a configuration is CODEC:PARTITIONS:VALUE_BYTES "
                             "(codec lz4/zstd/snappy/gzip/none, at least 1 partition and 40 bytes)")
        out.append((parts[0], int(parts[1]), int(parts[2])))
    if not out:
        raise ValueError("no configuration given")
    return out


def config_label(cfg: tuple[str, int, int]) -> str:
    codec, parts, size = cfg
    return f"{codec}, {parts} partitions, {'1 KB' if size == 1000 else f'{size} B'} values"


def records_for(size: int, records: int) -> int:
    """Records per measurement: ``records`` of 100-byte values; larger values get fewer (the same
    bytes as ``records`` x 250 B at most), so that a 1 KB row takes about as long as a 100 B one."""
    return records if size <= 250 else max(1000, records * 250 // size)


def make_values(size: int, n: int = DISTINCT_VALUES, seed: int = 0) -> list[bytes]:
    """``n`` distinct ASCII values of exactly ``size`` bytes without newlines: a JSON-like head
    (id, timestamp, user) and random base64 text (compressible about 1.3-2x by lz4/zstd, like
    text-like payloads; repeats of the head compress more)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        head = b'{"id":%d,"ts":%d,"user":"user-%05d","body":"' % (i, 1_700_000_000_000 + rnd.randrange(10**9),
                                                                  rnd.randrange(100_000))
        body_len = max(0, size - len(head) - 2)
        body = base64.b64encode(rnd.randbytes(body_len))[:body_len]
        out.append((head + body + b'"}')[:size].ljust(size, b" "))
    return out


def keys_for(n: int) -> list[bytes]:
    """Record i's key: ``user-%08d`` of i mod ``KEYS``."""
    distinct = [b"user-%08d" % i for i in range(KEYS)]
    return (distinct * (n // KEYS + 1))[:n]


def java_config(bootstrap: str, cafile: str, codec: str, password: str) -> str:
    """The perf tool's ``--command-config`` text: the SASL_SSL login and fastkafka's settings."""
    jaas = ("org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{USER}" password="{password}";')
    props = {"bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "sasl.mechanism": MECHANISM,
             "sasl.jaas.config": jaas, "ssl.truststore.type": "PEM", "ssl.truststore.location": cafile,
             "compression.type": codec, **JAVA_PROPS}
    # properties syntax: backslashes and the file's own escapes are not used by these values
    return "".join(f"{k}={v}\n" for k, v in props.items())


# ------------------------------------------------------------------------------------ children
def _cpu_s() -> float:
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


def _load_values(path: str, n: int) -> list[bytes]:
    with open(path, "rb") as f:
        distinct = f.read().split(b"\n")[:-1]
    return (distinct * (n // len(distinct) + 1))[:n]


def _fk_config(listener: str, bootstrap: str, cafile: str, codec: str) -> dict:
    cfg = {"bootstrap_servers": bootstrap, "linger_ms": LINGER_MS, "compression_type": codec}
    if listener == LISTENER:
        cfg.update(security_protocol="SASL_SSL", ssl_cafile=cafile, sasl_mechanism=MECHANISM,
                   sasl_plain_username=USER, sasl_plain_password=os.environ[PASSWORD_ENV])
    return cfg


def run_fastkafka(name: str, bootstrap: str, topic: str, cafile: str, codec: str, values: list,
                  keys: list | None) -> dict:
    """One fastkafka measurement: a warm-up record into every partition (connections, the SASL login,
    InitProducerId), then ``values`` (with ``keys``) timed until ``flush()`` returns."""
    from fastkafka import Producer

    p = Producer(**_fk_config(CLIENTS[name][2], bootstrap, cafile, codec))
    try:
        partitions = len(p.partitions_for(topic))
        futs = [p.send(topic, b"warm-up", key=b"warm-up", partition=i) for i in range(partitions)]
        for f in futs:
            f.get(timeout=60)
        base = p.metrics()
        n = len(values)
        delivered_batch = None
        if name == "fk_batch":
            import pyarrow as pa

            varr, karr = pa.array(values, pa.binary()), pa.array(keys, pa.binary())
            chunks = [(varr.slice(i, CHUNK), karr.slice(i, CHUNK)) for i in range(0, n, CHUNK)]
            c0, t0 = _cpu_s(), time.perf_counter()
            bfuts = [p.send_batch(topic, v, keys=k) for v, k in chunks]
            left = p.flush(300)
            elapsed, cpu = time.perf_counter() - t0, _cpu_s() - c0
            delivered_batch = sum(f.get(timeout=30) for f in bfuts)
        else:
            one = p.produce if name == "fk_produce" else p.send
            c0, t0 = _cpu_s(), time.perf_counter()
            if keys is None:
                for v in values:
                    one(topic, v)
            else:
                for v, k in zip(values, keys):
                    one(topic, v, key=k)
            left = p.flush(300)
            elapsed, cpu = time.perf_counter() - t0, _cpu_s() - c0
        m = p.metrics()
    finally:
        p.close()
    delivered = m["records_sent"] - base["records_sent"] if not left else n - left
    if delivered_batch is not None:
        delivered = min(delivered, delivered_batch)
    out = {"seconds": elapsed, "cpu_s": cpu, "delivered": delivered, "errors": m["errors"] - base["errors"],
           "warmup_records": partitions, "tls_data_path": m.get("tls_data_path")}
    for k in ("batches_sent", "produce_requests", "gil_free_requests"):   # over the timed part
        if isinstance(m.get(k), int):
            out[k] = m[k] - base[k]
    return out


def run_confluent(bootstrap: str, topic: str, cafile: str, codec: str, values: list, keys: list) -> dict:
    """confluent-kafka's keyed produce() loop over SASL_SSL (SCRAM-SHA-512), the same warm-up."""
    from confluent_kafka import Producer

    failed = [0]

    def on_error_report(err, msg):  # delivery.report.only.error: only failures arrive here
        if err is not None:
            failed[0] += 1

    p = Producer({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": cafile,
        "sasl.mechanisms": MECHANISM, "sasl.username": USER, "sasl.password": os.environ[PASSWORD_ENV],
        "compression.type": codec, "linger.ms": LINGER_MS, "acks": "all", "enable.idempotence": True,
        "partitioner": "murmur2_random", "queue.buffering.max.messages": 1_000_000,
        "delivery.report.only.error": True, "on_delivery": on_error_report, "log_level": 3})
    partitions = len(p.list_topics(topic, timeout=30).topics[topic].partitions)
    for i in range(partitions):
        p.produce(topic, b"warm-up", key=b"warm-up", partition=i)
    if p.flush(60) != 0:
        raise RuntimeError("warm-up records not delivered")
    produce, poll = p.produce, p.poll
    n = len(values)
    c0, t0 = _cpu_s(), time.perf_counter()
    for start in range(0, n, 10_000):
        for v, k in zip(values[start:start + 10_000], keys[start:start + 10_000]):
            try:
                produce(topic, v, key=k)
            except BufferError:
                while True:
                    poll(0.01)
                    try:
                        produce(topic, v, key=k)
                        break
                    except BufferError:
                        pass
        poll(0)
    remaining = p.flush(300)
    elapsed, cpu = time.perf_counter() - t0, _cpu_s() - c0
    return {"seconds": elapsed, "cpu_s": cpu, "delivered": n - remaining - failed[0], "errors": failed[0],
            "warmup_records": partitions}


def run_java(bootstrap: str, topic: str, cafile: str, codec: str, payload_file: str, records: int,
             warmup: int, workdir: str) -> dict:
    """Apache Kafka's perf tool over SASL_SSL: ``records`` + ``warmup`` unkeyed records drawn from
    ``payload_file``; the rate of its steady-state summary (after ``warmup``)."""
    from fastkafka_tools.apachekafka import java_command

    from e2e_measure import _SUMMARY

    conf = os.path.join(workdir, f"java-{topic}.properties")
    fd = os.open(conf, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        f.write(java_config(bootstrap, cafile, codec, os.environ[PASSWORD_ENV]))
    cmd = java_command("tools", jit="full", heap_mb=JAVA_HEAP_MB) + [
        PERF_MAIN, "--topic", topic, "--num-records", str(records + warmup), "--payload-file", payload_file,
        "--throughput", "-1", "--command-config", conf, "--reporting-interval", "60000"]
    if warmup:
        cmd += ["--warmup-records", str(warmup)]
    try:
        cp = subprocess.run(cmd, stdin=subprocess.DEVNULL, capture_output=True, text=True, timeout=600)
    finally:
        os.unlink(conf)
    summaries = {}
    for line in cp.stdout.splitlines():
        m = _SUMMARY.match(line.strip())
        if m:
            summaries["steady" if m.group(2) else "total"] = (int(m.group(1)), float(m.group(3)))
    want = "steady" if warmup else "total"
    if cp.returncode != 0 or want not in summaries or "total" not in summaries:
        tail = (cp.stderr or cp.stdout).strip()[-400:].replace(os.environ[PASSWORD_ENV], "***")
        raise RuntimeError(f"{PERF_MAIN} exit {cp.returncode}: {tail}")
    count, rate = summaries[want]
    errors = sum(1 for ln in cp.stderr.splitlines() if ln[:1].strip() and ("Exception" in ln or "Error" in ln))
    return {"seconds": count / rate if rate > 0 else 1e9, "delivered": count, "errors": errors,
            "warmup_records": warmup, "tool_total": summaries["total"][0]}


def child(name: str, bootstrap: str, topic: str, cafile: str, codec: str, payload_file: str,
          records: int, warmup: int, workdir: str) -> dict:
    if name == "java":
        r = run_java(bootstrap, topic, cafile, codec, payload_file, records, warmup, workdir)
    else:
        values = _load_values(payload_file, records)
        keys = keys_for(records) if CLIENTS[name][3] else None
        if name == "ck":
            r = run_confluent(bootstrap, topic, cafile, codec, values, keys)
        else:
            r = run_fastkafka(name, bootstrap, topic, cafile, codec, values, keys)
    r["records"] = records
    return r


# ------------------------------------------------------------------------------------ checks
def check(r: dict, stored: int | None) -> dict:
    """A child's result with its ``rate`` and ``cpu_us`` (µs per record), or ``failed`` when it
    lost or added a record: its own count, or ``stored`` (what the topic's offsets grew by) against
    the records plus its warm-up records (the Java tool: every record it sent)."""
    if "failed" in r:
        return r
    if r.get("delivered") != r.get("records") or r.get("errors"):
        r["failed"] = f"delivered {r.get('delivered')} of {r.get('records')}, errors {r.get('errors')}"
        return r
    want = r["tool_total"] if "tool_total" in r else r["records"] + r.get("warmup_records", 0)
    if stored is not None and stored != want:
        r["failed"] = f"topic grew by {stored} records, {want} sent"
        return r
    r["rate"] = r["records"] / r["seconds"]
    if "cpu_s" in r:
        r["cpu_us"] = r["cpu_s"] / r["records"] * 1e6
    else:  # the whole child (the JVM: start-up, JIT, warm-up records), per record it sent
        r["cpu_us"] = r["child_cpu_s"] / want * 1e6
    return r


def read_back(bootstrap: str, topic: str, partitions: int, cafile: str, size: int, timeout: float = 180.0) -> dict:
    """Read ``topic`` from the beginning to its end over SASL_SSL with confluent-kafka's consumer
    (CRC checks on): records, those with a key, values of ``size`` bytes."""
    from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition

    c = Consumer({
        "bootstrap.servers": bootstrap, "security.protocol": "SASL_SSL", "ssl.ca.location": cafile,
        "sasl.mechanisms": MECHANISM, "sasl.username": USER, "sasl.password": os.environ[PASSWORD_ENV],
        "group.id": f"cloud-check-{topic}", "enable.auto.commit": False, "enable.partition.eof": True,
        "check.crcs": True, "fetch.wait.max.ms": 50, "log_level": 3})
    got = {"records": 0, "keyed": 0, "sized": 0}
    at_end: set[int] = set()
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(partitions)])
        deadline = time.monotonic() + timeout
        while len(at_end) < partitions:
            if time.monotonic() > deadline:
                raise TimeoutError(f"{topic} not read to its end in {timeout:.0f}s")
            for m in c.consume(num_messages=10_000, timeout=0.5):
                err = m.error()
                if err is None:
                    got["records"] += 1
                    got["keyed"] += m.key() not in (None, b"warm-up")
                    got["sized"] += len(m.value()) == size
                    at_end.discard(m.partition())
                elif err.code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
                else:
                    raise RuntimeError(f"consumer error on {topic}: {err}")
    finally:
        c.close()
    return got


def expected_read_back(results: list[tuple[str, dict]]) -> dict:
    """What the topic should hold after the children ``[(name, result)]`` of one configuration and
    round: every record sent (with the warm-ups), the keyed clients' records with a key, and every
    timed or Java warm-up record of the value size (the Python clients' warm-up values are short)."""
    want = {"records": 0, "keyed": 0, "sized": 0}
    for name, r in results:
        if "failed" in r:
            continue
        if name == "java":
            want["records"] += r["tool_total"]
            want["sized"] += r["tool_total"]
        else:
            want["records"] += r["records"] + r["warmup_records"]
            want["sized"] += r["records"]
            want["keyed"] += r["records"] if CLIENTS[name][3] else 0
    return want


# ------------------------------------------------------------------------------------ report
def _rounds(rs: list[dict]) -> str:
    return ", ".join(f"{r['rate']:,.0f}" if "failed" not in r else "FAILED" for r in rs)


def config_table(cfg, res: dict[str, list[dict]], names: list[str]) -> list[str]:
    """One configuration: every client's median records/s, CPU µs per record, the medians of its
    per-round ratios to confluent-kafka and to the Java producer, and every round's rate."""
    lines = [f"### {config_label(cfg)}", "",
             "| client | variant | listener | keys | median records/s | CPU µs/record | vs confluent-kafka "
             "| vs Java (unkeyed) | rounds (records/s) |",
             "|---|---|---|---|---:|---:|---:|---:|---|"]
    for n in names:
        client, variant, listener, keyed = CLIENTS[n]
        vs_ck = median_or_none(paired_ratios(res[n], res["ck"])) if "ck" in res and n != "ck" else None
        vs_java = median_or_none(paired_ratios(res[n], res["java"])) if "java" in res and n != "java" else None
        cpu = median_field(res[n], "cpu_us")
        cpu_cell = fmt(cpu) + ("†" if n == "java" and cpu is not None else "")
        lines.append(f"| {'**fastkafka**' if client == 'fastkafka' else client} | {variant} | {listener} | "
                     f"{'yes' if keyed else 'no'} | {fmt_rate(median_field(res[n], 'rate'))} | {cpu_cell} | "
                     f"{'1.00' if n == 'ck' else fmt(vs_ck)} | {'1.00' if n == 'java' else fmt(vs_java)} | "
                     f"{_rounds(res[n])} |")
    return lines


SHORT = {"fk_send": "fastkafka `send()`", "fk_produce": "fastkafka `produce()`",
         "fk_batch": "fastkafka `send_batch`", "ck": "confluent-kafka", "java": "Java (unkeyed)",
         "fk_nokey": "fastkafka `send()` unkeyed", "fk_plain": "fastkafka `send()` PLAINTEXT"}


def glance_table(configs, results: dict, names: list[str]) -> list[str]:
    """Every configuration in one row: each client's median records/s and, in parentheses, its
    median CPU µs per record (the Java one: the whole JVM's)."""
    lines = ["| configuration | " + " | ".join(SHORT[n] for n in names) + " |",
             "|---|" + "---:|" * len(names)]
    for cfg in configs:
        cells = []
        for n in names:
            rate, cpu = median_field(results[cfg][n], "rate"), median_field(results[cfg][n], "cpu_us")
            cells.append("FAILED" if rate is None else f"{rate:,.0f} ({fmt(cpu, '.1f' if n == 'java' else '.2f')})")
        lines.append(f"| {config_label(cfg)} | " + " | ".join(cells) + " |")
    return lines


def _verdict(x: float | None, target: float, above: bool = True) -> str:
    if x is None:
        return "n/a"
    ok = x >= target if above else x <= target
    return f"{x:.2f} {'✓' if ok else '✗'}"


def summary_table(configs, results: dict, names: list[str]) -> tuple[list[str], dict]:
    """The targets per configuration (medians of per-round ratios): fastkafka's three keyed calls
    against confluent-kafka (≥ 2x), fastkafka unkeyed ``send()`` and its keyed calls against the
    (unkeyed) Java producer (> 1x), and fastkafka's CPU per record over SASL_SSL against PLAINTEXT
    (≤ 1.3x). Returns the lines and {target: [met per configuration]}."""
    lines = ["| configuration | send / ck | produce / ck | send_batch / ck | unkeyed send / Java "
             "| keyed send, produce, send_batch / Java | CPU/record SASL_SSL / PLAINTEXT (send) |",
             "|---|---:|---:|---:|---:|---:|---:|"]
    met: dict[str, list[bool | None]] = {"ck": [], "java": [], "tls": []}
    for cfg in configs:
        res = results[cfg]

        def r(a, b, field="rate"):
            if a not in names or b not in names:
                return None
            return median_or_none(paired_ratios(res[a], res[b], field))

        vs_ck = [r(n, "ck") for n in FASTKAFKA_KEYED]
        nokey = r("fk_nokey", "java")
        keyed_java = [r(n, "java") for n in FASTKAFKA_KEYED]
        tls = r("fk_send", "fk_plain", "cpu_us")
        met["ck"].append(None if any(x is None for x in vs_ck) else all(x >= TARGET_VS_CK for x in vs_ck))
        met["java"].append(None if nokey is None else nokey > TARGET_VS_JAVA)
        met["tls"].append(None if tls is None else tls <= TARGET_TLS_CPU)
        lines.append(f"| {config_label(cfg)} | " + " | ".join(_verdict(x, TARGET_VS_CK) for x in vs_ck)
                     + f" | {_verdict(nokey, TARGET_VS_JAVA)} | "
                     + ", ".join(fmt(x) for x in keyed_java)
                     + f" | {_verdict(tls, TARGET_TLS_CPU, above=False)} |")
    return lines, met


def gil_line(configs, results: dict, names: list[str]) -> str:
    """fastkafka's TLS data path and the share of its Produce requests sent on the GIL-free turn
    (``metrics()``: ``tls_data_path``, ``gil_free_requests`` / ``produce_requests``), over SASL_SSL
    and PLAINTEXT (``send()`` loops, every round of every configuration)."""
    def share(name):
        rs = [r for cfg in configs for r in results[cfg].get(name, []) if "failed" not in r]
        req = sum(r.get("produce_requests", 0) for r in rs)
        free = sum(r.get("gil_free_requests", 0) for r in rs)
        return f"{free / req:.0%} of {req:,}" if req and any("gil_free_requests" in r for r in rs) else "n/a"

    paths = sorted({str(r.get("tls_data_path")) for cfg in configs for n in names if CLIENTS[n][0] == "fastkafka"
                    and CLIENTS[n][2] == LISTENER for r in results[cfg][n] if "failed" not in r})
    return (f"fastkafka's TLS data path (`metrics()[\"tls_data_path\"]`): {', '.join(paths) or 'n/a'}; "
            f"Produce requests sent on the GIL-free turn, `send()` loop: SASL_SSL {share('fk_send')}, "
            f"PLAINTEXT {share('fk_plain')}.")


def met_line(what: str, flags: list) -> str:
    if any(f is None for f in flags):
        return f"- {what}: not measured in every configuration (a client failed or was left out)"
    n = sum(flags)
    return f"- {what}: met in {n} of {len(flags)} configurations" + (" ✓" if n == len(flags) else "")


# ------------------------------------------------------------------------------------ parent
def sasl_ssl_broker_properties(server_pem: str, ca_pem: str) -> dict:
    """The SASL_SSL listener: PEM key store, SCRAM-SHA-512 only."""
    from fastkafka_tools.tlsrig import kafka_ssl_listener

    p = f"listener.name.{LISTENER.lower()}."
    return {**kafka_ssl_listener(LISTENER, server_pem, ca_pem), **BROKER_PROPERTIES,
            p + "sasl.enabled.mechanisms": MECHANISM,
            p + MECHANISM.lower() + ".sasl.jaas.config":
                "org.apache.kafka.common.security.scram.ScramLoginModule required;"}


def java_line() -> str:
    from e2e_measure import java_line as line

    return line().replace("heap 1024 MiB", f"heap {JAVA_HEAP_MB} MiB")


def command_line(args) -> str:
    """The run's settings as the command that repeats it (the defaults spelled out, so that a
    results file still says what ran after a default changes)."""
    cmd = (f"python bench/cloud.py --rounds {args.rounds} --records {args.records} "
           f"--warmup-records {args.warmup_records}")
    if args.configs != ",".join(DEFAULT_CONFIGS):
        cmd += f" --configs {shlex.quote(args.configs)}"
    if args.only != ",".join(CLIENTS):
        cmd += f" --only {shlex.quote(args.only)}"
    if args.kafka_heap_mb != 1024:
        cmd += f" --kafka-heap-mb {args.kafka_heap_mb}"
    root = os.environ.get("FASTKAFKA_KAFKA_DATA_ROOT")
    return f"FASTKAFKA_KAFKA_DATA_ROOT={root} {cmd}" if root else cmd


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=100_000,
                    help="records of 100-byte values per measurement (1 KB values: a quarter)")
    ap.add_argument("--configs", default=",".join(DEFAULT_CONFIGS), help="CODEC:PARTITIONS:VALUE_BYTES,...")
    ap.add_argument("--only", default=",".join(CLIENTS), help="comma-separated clients")
    ap.add_argument("--warmup-records", type=int, default=100_000,
                    help="records each client writes once before the rounds (untimed; 0: none)")
    ap.add_argument("--kafka-heap-mb", type=int, default=1024)
    ap.add_argument("--timeout", type=float, default=300)
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: --rounds 1 --records 20000 --warmup-records 5000, two configurations")
    ap.add_argument("--out", default=os.path.join(HERE, "results", "cloud.md"),
                    help="the markdown results (also printed); '-' prints only")
    ap.add_argument("--_child", nargs=8, help=argparse.SUPPRESS,
                    metavar=("NAME", "BOOTSTRAP", "TOPIC", "CAFILE", "CODEC", "PAYLOAD", "WARMUP", "WORKDIR"))
    args = ap.parse_args(argv)
    if args._child:
        name, bootstrap, topic, cafile, codec, payload, warmup, workdir = args._child
        print(result_line(child(name, bootstrap, topic, cafile, codec, payload, args.records, int(warmup),
                                workdir)), flush=True)
        return 0
    if args.quick:
        args.rounds, args.records, args.warmup_records = 1, 20_000, 5_000
        if args.configs == ",".join(DEFAULT_CONFIGS):
            args.configs = ",".join(QUICK_CONFIGS)
    command = command_line(args)
    configs = parse_configs(args.configs)
    names = [n for n in args.only.split(",") if n]
    for n in names:
        if n not in CLIENTS:
            raise SystemExit(f"unknown client {n!r} (known: {', '.join(CLIENTS)})")
    text = run(args, configs, names, command)
    from harness import emit

    emit(text, None if args.out == "-" else args.out)
    return 0


def run(args, configs, names, command: str) -> str:
    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import make_pki

    load0 = os.getloadavg()
    wall0 = time.monotonic()
    date = time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())
    env = dict(os.environ, **{PASSWORD_ENV: secrets.token_urlsafe(18)})
    os.environ[PASSWORD_ENV] = env[PASSWORD_ENV]   # the read-back check logs in too
    results = {cfg: {n: [] for n in names} for cfg in configs}
    read_backs: list[str] = []
    with tempfile.TemporaryDirectory(prefix="fastkafka-cloud-bench-") as tmp:
        pki = make_pki(os.path.join(tmp, "pki"))
        payloads = {}
        for size in sorted({s for _, _, s in configs}):
            payloads[size] = os.path.join(tmp, f"values-{size}.txt")
            with open(payloads[size], "wb") as f:
                f.write(b"".join(v + b"\n" for v in make_values(size)))
        kc = KafkaCluster(nodes=1, jit="full", heap_mb=args.kafka_heap_mb, listeners={LISTENER: LISTENER},
                          properties=sasl_ssl_broker_properties(pki.server, pki.ca),
                          scram_users=[(MECHANISM, USER, env[PASSWORD_ENV])])
        if kc.cluster_id.startswith("-"):
            kc.cluster_id = "A" + kc.cluster_id[1:]
        kc.start(timeout=180)
        topics = Topics(kc.bootstrap)
        place, version = kc.data_place, kc.version
        try:
            def measure(cfg, name, topic, records, warmup_java):
                codec, parts, size = cfg
                bootstrap = kc.bootstrap_for(CLIENTS[name][2])
                before = sum(topics.latest([topic], parts))
                cmd = [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap, topic, pki.ca,
                       codec, payloads[size], str(warmup_java), tmp, "--records", str(records)]
                r = run_child(cmd, args.timeout, env=env)
                stored = None
                if "failed" not in r:
                    stored = sum(topics.latest([topic], parts)) - before
                return check(r, stored)

            if args.warmup_records:
                cfg = configs[0]
                topic = "cloud-warmup"
                topics.create([topic], cfg[1])
                for name in names:
                    r = measure(cfg, name, topic, args.warmup_records, 0)
                    done = r["failed"] if "failed" in r else f"{r['rate']:,.0f} rec/s"
                    print(f"warm-up {name:<11} {done}", flush=True)
                topics.delete([topic])
            for rnd in range(1, args.rounds + 1):
                for cfg in configs:
                    codec, parts, size = cfg
                    records = records_for(size, args.records)
                    topic = f"cloud-{codec}-{parts}-{size}-r{rnd}"
                    topics.create([topic], parts)
                    done = []
                    for name in round_order(names, rnd):
                        r = measure(cfg, name, topic, records, records if name == "java" else 0)
                        results[cfg][name].append(r)
                        done.append((name, r))
                        msg = r["failed"] if "failed" in r else (f"{r['rate']:>10,.0f} rec/s  "
                                                                 f"{r['cpu_us']:6.2f} µs/rec cpu")
                        print(f"round {rnd} {codec:<4} {parts:>3}p {size:>4}B {name:<11} {msg}", flush=True)
                    if rnd == 1:
                        want = expected_read_back(done)
                        try:
                            got = read_back(kc.bootstrap_for(LISTENER), topic, parts, pki.ca, size)
                        except Exception as e:  # noqa: BLE001 - reported as a failed check
                            got = {"error": f"{type(e).__name__}: {e}"}
                        ok = got == want
                        read_backs.append(f"- {config_label(cfg)}: read {json.dumps(got)}, expected "
                                          f"{json.dumps(want)}: {'ok' if ok else 'MISMATCH'}")
                        print(read_backs[-1], flush=True)
                        if not ok:   # every measurement of this topic is in doubt
                            for name, r in done:
                                r.setdefault("failed", "read-back mismatch")
                    topics.delete([topic])
        finally:
            gc.collect()   # the admin clients of the offset checks go before their broker does
            kc.stop()
    wall = time.monotonic() - wall0
    return report(args, configs, names, results, read_backs, command, date, load0, wall, version, place)


def report(args, configs, names, results, read_backs, command, date, load0, wall, version, place) -> str:
    import confluent_kafka

    load1 = os.getloadavg()
    kb = records_for(1000, args.records)
    lines = [
        "# In the cloud's shape: SASL_SSL (SCRAM-SHA-512), lz4/zstd, keyed, acks=all + idempotence",
        "",
        f"`{command}`",
        "",
        f"- date: {date}; {args.rounds} round(s); {wall / 60:.1f} minutes",
        f"- load average (1/5/15 min) before: {load0[0]:.2f} / {load0[1]:.2f} / {load0[2]:.2f}; after: "
        f"{load1[0]:.2f} / {load1[1]:.2f} / {load1[2]:.2f} (2 cores: above ~2 something else wanted the CPU)",
        f"- Apache Kafka {version}, one node, a SASL_SSL listener (SCRAM-SHA-512 only, PEM certificates, "
        f"{ssl.OPENSSL_VERSION} on the clients' side) and PLAINTEXT; data {place}",
        f"- {args.records:,} records of 100-byte values, {kb:,} of 1 KB values per measurement; keys: "
        f"{KEYS:,} distinct, murmur2 placement for every keyed client; {DISTINCT_VALUES:,} distinct "
        "text-like values per size, the same file for every client (the Java tool picks one at random "
        "per record)",
        f"- every client: linger {LINGER_MS} ms, acks=all, idempotence, the configuration's compression; "
        f"confluent-kafka {confluent_kafka.__version__} (librdkafka {confluent_kafka.libversion()[0]}); "
        f"the Java producer: steady state after as many warm-up records as timed ones",
        "- the Java perf tool sends **no keys**: its rows are unkeyed (`fk_nokey` is fastkafka's unkeyed "
        "`send()` beside it); unkeyed records go to one partition per batch (sticky), keyed ones to all",
        "- CPU µs/record: the client process's user + system CPU over the timed part; † the Java row: "
        "the whole JVM (start-up, JIT, warm-up records) per record it sent",
        "",
        "## Targets (medians of per-round ratios)",
        "",
    ]
    summary, met = summary_table(configs, results, names)
    lines += summary + [""]
    lines += [met_line(f"fastkafka ≥ {TARGET_VS_CK:.0f}x confluent-kafka (send, produce and send_batch)", met["ck"]),
              met_line("fastkafka above the Java producer (unkeyed send against the unkeyed tool)", met["java"]),
              met_line(f"fastkafka's CPU per record over SASL_SSL ≤ {TARGET_TLS_CPU}x its PLAINTEXT one",
                       met["tls"]), ""]
    lines += [gil_line(configs, results, names), "",
              "Records/s (CPU µs per record), medians over the rounds:", ""]
    lines += glance_table(configs, results, names) + [""]
    lines += ["## Per configuration", ""]
    for cfg in configs:
        lines += config_table(cfg, results[cfg], names) + [""]
    lines += ["## Delivery", "",
              "Every measurement: the client's own count and the topic's offsets grew by exactly the "
              "records sent (with warm-ups). Round 1 read back by confluent-kafka over SASL_SSL:", ""]
    lines += read_backs or ["- (no read-back: no round ran)"]
    fails = [f"- {config_label(cfg)} {n} round {i}: {r['failed']}" for cfg in configs for n in names
             for i, r in enumerate(results[cfg][n], 1) if "failed" in r]
    if fails:
        lines += ["", "Failed measurements:", "", *fails]
    lines += [""]
    lines += machine_section(["- " + kafka_run_line(version, args.kafka_heap_mb, "full", place)], load0[0],
                             [java_line()] if "java" in names else [])
    return "\n".join(lines)


if __name__ == "__main__":
    raise SystemExit(main())
