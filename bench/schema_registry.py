"""Records with a schema, framed for a Schema Registry: fastkafka's serializers against confluent-kafka's,
on one Apache Kafka node, and the encoders alone (no broker).

    python bench/schema_registry.py [--records 200000] [--json-records 50000] [--rounds 5] [--partitions 6[,100]]
                                    [--registry server|mock] [--only NAME,...] [--encoder-only]
                                    [--encoder-rounds 5] [--encoder-records 50000] [--kafka-heap-mb 1024]
                                    [--out bench/results/schema_registry.md]

The data: ``--records`` records of a 10-field Avro record (``AVRO_SCHEMA``): long, string (some
non-ASCII), int, double, boolean, nullable string (a null in every 4th record), timestamp-millis,
bytes (16), enum (4 symbols) and array<string> (0 to 3 items). The same records three ways, all
made before the clock starts and the same in every child (a fixed seed): a pyarrow Table (what
``send_batch`` takes; the enum a dictionary<int8, string> column, the timestamp
``timestamp[ms, UTC]``), the Table's rows as Python dicts (``Table.to_pylist()``: what ``send()``
and confluent-kafka's serializer take) and, for JSON Schema, the same dicts with the timestamp as
RFC 3339 text and the bytes as base64 text (``JSON_SCHEMA``, JSON's own types, what confluent-kafka's
JSONSerializer takes; fastkafka's ``send_batch`` takes the Arrow Table and writes the same text).

Measurements with the broker (``--only`` takes these names), each in a child process of its own
(``harness.run_child``), against a fresh topic per measurement (``--partitions``, each value a
section of its own), acks=1 on both clients, every other producer setting at its client's default
(linger 5 ms on both: fastkafka's ``linger_ms`` and librdkafka's ``linger.ms`` default to 5):

``fk_avro_batch``
    ``Producer(value_serializer=AvroSerializer(client, schema), acks=1).send_batch(topic, table)``,
    the whole Table in one call, then ``flush()``.
``fk_avro_send``
    the same producer, ``send(topic, record_dict)`` per record, then ``flush()``.
``ck_avro``
    confluent-kafka as its documentation teaches: ``Producer.produce(topic,
    value=AvroSerializer(client, schema)(record_dict, SerializationContext(topic,
    MessageField.VALUE)))`` per record (a ``BufferError`` served by ``poll(0.01)`` and retried,
    ``poll(0)`` every 10,000 records, delivery reports for failures only), then ``flush()``.
``fk_json_batch``, ``fk_json_send``, ``ck_json``
    the same three with ``JSONSerializer`` (JSON Schema) on each side, over ``--json-records``
    records (confluent-kafka's takes about 150 µs per record here, so 200,000
    would take most of a round); confluent-kafka's validates every record against the schema (its
    serializer always does), and so does fastkafka's.

Timing: from the first record to ``flush()`` returning. Before the clock starts each child makes
its producer and serializer and delivers one warm-up record through them (the serializer registers
the schema then and keeps its id: the registry is asked once per child, never per record). CPU per
record is the child's user + system CPU over the timed part (``time.process_time``, every thread of
the process). After each measurement the topic's offsets must hold exactly the records plus the
warm-up record (and the client must report every record delivered), else the round is FAILED.

The registry (``--registry``): ``server`` (default) starts the project's test registry
(``python -m fastkafka_tools.schema_registry_server``) in a process of its own, and both clients
talk HTTP to it; ``mock`` gives each child its own in-process ``mock://`` registry (each client's
own).

``--encoder-only`` (or, after the broker's sections, always) measures the encoders alone, no broker,
nanoseconds per record over the first ``--encoder-records`` of the same records (each in a child
process, ``--encoder-rounds`` rounds; a round's value is the median of its passes over the records
in that child: 5, or fewer when they took a second in all, as the slowest serializers do at once):

``avro_arrow``     ``AvroEncoder(schema).encode_arrow(table)`` (one call, per row in C)
``avro_dict``      ``AvroEncoder(schema).encode(record_dict)`` per record
``fk_avro_ser``    fastkafka's ``AvroSerializer(...)(record_dict, ctx)`` per record (framed)
``fastavro``       ``fastavro.schemaless_writer(BytesIO(), parsed_schema, record_dict)`` per record,
                   then ``getvalue()``
``ck_avro_ser``    confluent-kafka's ``AvroSerializer(...)(record_dict, ctx)`` per record (framed;
                   fastavro inside)
``json_arrow``     ``JsonEncoder().encode_arrow(table)``
``fk_json_ser``    fastkafka's ``JSONSerializer(...)(json_dict, ctx)`` per record
``json_dumps``     ``json.dumps(json_dict, separators=(",", ":")).encode()`` per record (no schema,
                   no validation: a floor, not a serializer)
``ck_json_ser``    confluent-kafka's ``JSONSerializer(...)(json_dict, ctx)`` per record

Each encoder child first checks its output: every Avro payload (the 5-byte header stripped) equals
fastavro's ``schemaless_writer`` bytes for the same record, every JSON payload parses back to the
JSON dict; a mismatch fails the measurement.
"""
from __future__ import annotations

import argparse
import base64
import json
import os
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
for _p in (ROOT, HERE):
    if _p not in sys.path:
        sys.path.insert(0, _p)

from brokers import BROKER_PROPERTIES  # noqa: E402
from harness import (emit, fmt, kafka_run_line, machine_section, median_field, median_or_none,  # noqa: E402
                     paired_ratios, ratio_table, result_line, round_order, run_child, tree_commit)

SCRIPT = os.path.abspath(__file__)

KIND_SYMBOLS = ["NEW", "PAID", "SHIPPED", "RETURNED"]
AVRO_SCHEMA = {
    "type": "record", "name": "Order", "namespace": "bench.fastkafka",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "name", "type": "string"},
        {"name": "age", "type": "int"},
        {"name": "score", "type": "double"},
        {"name": "active", "type": "boolean"},
        {"name": "email", "type": ["null", "string"], "default": None},
        {"name": "created", "type": {"type": "long", "logicalType": "timestamp-millis"}},
        {"name": "payload", "type": "bytes"},
        {"name": "kind", "type": {"type": "enum", "name": "Kind", "symbols": KIND_SYMBOLS}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
    ],
}
JSON_SCHEMA = {
    "$schema": "http://json-schema.org/draft-07/schema#",
    "title": "Order",
    "type": "object",
    "properties": {
        "id": {"type": "integer"},
        "name": {"type": "string"},
        "age": {"type": "integer"},
        "score": {"type": "number"},
        "active": {"type": "boolean"},
        "email": {"type": ["string", "null"]},
        "created": {"type": "string", "format": "date-time"},
        "payload": {"type": "string", "contentEncoding": "base64"},
        "kind": {"type": "string", "enum": KIND_SYMBOLS},
        "tags": {"type": "array", "items": {"type": "string"}},
    },
    "required": ["id", "name", "age", "score", "active", "email", "created", "payload", "kind", "tags"],
    "additionalProperties": False,
}
AVRO_SCHEMA_STR = json.dumps(AVRO_SCHEMA)
JSON_SCHEMA_STR = json.dumps(JSON_SCHEMA)

NAMES = ["ada", "grace", "edsger", "barbara", "zoë", "jürgen", "ólafur", "łukasz"]
TAGS = ["red", "green", "blue"]
SEED = 40
BASE_MS = 1_767_225_600_000          # 2026-01-01T00:00:00Z
POLL_EVERY = 10_000

# name -> (client, what)
MEASUREMENTS = {
    "fk_avro_batch": ("fastkafka", "AvroSerializer, send_batch(Table)"),
    "fk_avro_send":  ("fastkafka", "AvroSerializer, send(dict) per record"),
    "ck_avro":       ("confluent-kafka", "AvroSerializer(dict, ctx) + produce() per record"),
    "fk_json_batch": ("fastkafka", "JSONSerializer, send_batch(Table)"),
    "fk_json_send":  ("fastkafka", "JSONSerializer, send(dict) per record"),
    "ck_json":       ("confluent-kafka", "JSONSerializer(dict, ctx) + produce() per record"),
}
#: (measured, against, target): the ratios read round by round
PAIRS = [("fk_avro_batch", "ck_avro", 10.0), ("fk_avro_send", "ck_avro", 3.0),
         ("fk_json_batch", "ck_json", None), ("fk_json_send", "ck_json", None)]

ENCODERS = {
    "avro_arrow":  "fastkafka `AvroEncoder.encode_arrow(table)` (per row, in C)",
    "avro_dict":   "fastkafka `AvroEncoder.encode(dict)` per record",
    "fk_avro_ser": "fastkafka `AvroSerializer(dict, ctx)` per record (framed)",
    "fastavro":    "`fastavro.schemaless_writer` per record into a BytesIO",
    "ck_avro_ser": "confluent-kafka `AvroSerializer(dict, ctx)` per record (framed)",
    "json_arrow":  "fastkafka `JsonEncoder.encode_arrow(table)` (per row, in C)",
    "fk_json_ser": "fastkafka `JSONSerializer(dict, ctx)` per record (framed, validated)",
    "json_dumps":  "`json.dumps(dict)` per record (no schema, no validation: a floor)",
    "ck_json_ser": "confluent-kafka `JSONSerializer(dict, ctx)` per record (framed, validated)",
}
#: (measured, against): encoder ratios (against's ns / measured's ns: how many times faster)
ENCODER_PAIRS = [("avro_arrow", "fastavro"), ("avro_dict", "fastavro"), ("avro_arrow", "ck_avro_ser"),
                 ("avro_dict", "ck_avro_ser"), ("fk_avro_ser", "ck_avro_ser"),
                 ("json_arrow", "ck_json_ser"), ("fk_json_ser", "ck_json_ser"), ("json_arrow", "json_dumps")]
CHECKED = 2_000          # records whose encoding each encoder child compares with the reference
PASSES = 5               # passes over the records in one encoder child (its value: their median),
PASSES_SECONDS = 1.0     # fewer when they took this long already


# ------------------------------------------------------------------------------------ data
def make_table(n: int):
    """The ``n`` records as a pyarrow Table, the same for a given ``n`` in every process."""
    import random

    import pyarrow as pa

    rng = random.Random(SEED)
    kinds = pa.DictionaryArray.from_arrays(pa.array([i % len(KIND_SYMBOLS) for i in range(n)], pa.int8()),
                                           pa.array(KIND_SYMBOLS))
    cols = {
        "id": pa.array(range(n), pa.int64()),
        "name": pa.array([f"{NAMES[i % len(NAMES)]}-{i:07d}" for i in range(n)], pa.string()),
        "age": pa.array([18 + i % 70 for i in range(n)], pa.int32()),
        "score": pa.array([rng.random() * 1000 for _ in range(n)], pa.float64()),
        "active": pa.array([i % 3 != 0 for i in range(n)], pa.bool_()),
        "email": pa.array([None if i % 4 == 0 else f"user{i}@example.com" for i in range(n)], pa.string()),
        "created": pa.array([BASE_MS + 37 * i for i in range(n)], pa.timestamp("ms", tz="UTC")),
        "payload": pa.array([rng.randbytes(16) for _ in range(n)], pa.binary()),
        "kind": kinds,
        "tags": pa.array([TAGS[:i % 4] for i in range(n)], pa.list_(pa.field("item", pa.string(), nullable=False))),
    }
    fields = [pa.field(k, v.type, nullable=(k == "email")) for k, v in cols.items()]
    return pa.Table.from_arrays(list(cols.values()), schema=pa.schema(fields))


def json_record(d: dict) -> dict:
    """A record dict in JSON's own types: the timestamp as RFC 3339 text (milliseconds, "Z"), the
    bytes as standard base64; what the Arrow path writes for the same row."""
    j = dict(d)
    j["created"] = d["created"].strftime("%Y-%m-%dT%H:%M:%S.") + f"{d['created'].microsecond // 1000:03d}Z"
    j["payload"] = base64.b64encode(d["payload"]).decode("ascii")
    return j


def make_data(n: int, fmt_: str):
    """(table, dicts) for the format ``fmt_`` ("avro" or "json")."""
    table = make_table(n)
    dicts = table.to_pylist()
    if fmt_ == "json":
        dicts = [json_record(d) for d in dicts]
    return table, dicts


# ------------------------------------------------------------------------------------ children
def _fk_serializer(fmt_: str, registry: str):
    from fastkafka.schema_registry import AvroSerializer, JSONSerializer, SchemaRegistryClient

    client = SchemaRegistryClient({"url": registry})
    if fmt_ == "avro":
        return AvroSerializer(client, AVRO_SCHEMA_STR)
    return JSONSerializer(JSON_SCHEMA_STR, client)


def _ck_serializer(fmt_: str, registry: str):
    from confluent_kafka.schema_registry import SchemaRegistryClient

    client = SchemaRegistryClient.new_client({"url": registry}) if registry.startswith("mock://") \
        else SchemaRegistryClient({"url": registry})
    if fmt_ == "avro":
        from confluent_kafka.schema_registry.avro import AvroSerializer

        return AvroSerializer(client, AVRO_SCHEMA_STR)
    from confluent_kafka.schema_registry.json_schema import JSONSerializer

    return JSONSerializer(JSON_SCHEMA_STR, client)


def run_fastkafka(bootstrap: str, topic: str, fmt_: str, mode: str, records: int, registry: str) -> dict:
    from fastkafka import Producer

    table, dicts = make_data(records, fmt_)
    p = Producer(bootstrap_servers=bootstrap, acks=1, value_serializer=_fk_serializer(fmt_, registry))
    p.send(topic, dicts[0]).get(timeout=30)   # registers the schema (its id cached), connects
    base = p.metrics()["records_sent"]
    batch_count = None
    if mode == "batch":
        c0, t0 = time.process_time(), time.perf_counter()
        fut = p.send_batch(topic, table)
        p.flush()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
        batch_count = fut.get(timeout=30)
    else:
        send = p.send
        c0, t0 = time.process_time(), time.perf_counter()
        for d in dicts:
            send(topic, d)
        p.flush()
        elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    m = p.metrics()
    p.close()
    delivered = m["records_sent"] - base
    if batch_count is not None:
        delivered = min(delivered, batch_count)
    return {"seconds": elapsed, "cpu_s": cpu, "records": records, "delivered": delivered,
            "errors": m["errors"], "warmup_records": 1}


def run_confluent(bootstrap: str, topic: str, fmt_: str, records: int, registry: str) -> dict:
    from confluent_kafka import Producer
    from confluent_kafka.serialization import MessageField, SerializationContext

    _, dicts = make_data(records, fmt_)
    serializer = _ck_serializer(fmt_, registry)
    failed = [0]

    def on_error_report(err, msg):  # only failed deliveries reach here (delivery.report.only.error)
        if err is not None:
            failed[0] += 1

    p = Producer({"bootstrap.servers": bootstrap, "acks": 1, "queue.buffering.max.messages": 1_000_000,
                  "delivery.report.only.error": True, "on_delivery": on_error_report})
    p.produce(topic, value=serializer(dicts[0], SerializationContext(topic, MessageField.VALUE)))
    if p.flush(30) != 0:
        raise RuntimeError("warm-up record not delivered")
    produce, poll = p.produce, p.poll
    value = MessageField.VALUE
    c0, t0 = time.process_time(), time.perf_counter()
    for i, d in enumerate(dicts, 1):
        v = serializer(d, SerializationContext(topic, value))
        try:
            produce(topic, value=v)
        except BufferError:
            while True:
                poll(0.01)
                try:
                    produce(topic, value=v)
                    break
                except BufferError:
                    pass
        if i % POLL_EVERY == 0:
            poll(0)
    remaining = p.flush(120)
    elapsed, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"seconds": elapsed, "cpu_s": cpu, "records": records,
            "delivered": records - remaining - failed[0], "errors": failed[0], "warmup_records": 1}


def child(name: str, bootstrap: str, topic: str, records: int, registry: str) -> dict:
    fmt_ = "avro" if "avro" in name else "json"
    if name.startswith("fk_"):
        return run_fastkafka(bootstrap, topic, fmt_, name.rsplit("_", 1)[1], records, registry)
    return run_confluent(bootstrap, topic, fmt_, records, registry)


# ------------------------------------------------------------------------------------ encoder children
def _fastavro_bytes(parsed, d) -> bytes:
    import io

    import fastavro

    buf = io.BytesIO()
    fastavro.schemaless_writer(buf, parsed, d)
    return buf.getvalue()


def _check(name: str, outputs: list, reference: list, framed: bool, as_json: bool) -> None:
    """Raise naming the first record whose output differs from the reference."""
    for i, (got, want) in enumerate(zip(outputs, reference)):
        got = bytes(got)
        if framed:
            if got[:1] != b"\x00":
                raise AssertionError(f"{name}: record {i} has no registry header (first byte {got[:1]!r})")
            got = got[5:]
        same = json.loads(got) == want if as_json else got == want
        if not same:
            raise AssertionError(f"{name}: record {i} differs from the reference: {got[:80]!r}")
    if len(outputs) < len(reference):
        raise AssertionError(f"{name}: {len(outputs)} outputs for {len(reference)} records")


def encoder_child(name: str, records: int) -> dict:
    """ns per record of encoder ``name`` over ``records`` records: the median of PASSES passes,
    after its output was checked against the reference."""
    import statistics

    import fastavro

    fmt_ = "json" if "json" in name else "avro"
    table, dicts = make_data(records, fmt_)
    if fmt_ == "avro":
        parsed = fastavro.parse_schema(json.loads(AVRO_SCHEMA_STR))
        reference = [_fastavro_bytes(parsed, d) for d in dicts[:CHECKED]]
    else:
        reference = dicts[:CHECKED]
    framed = name.endswith("_ser")
    as_json = fmt_ == "json"

    if name in ("avro_arrow", "json_arrow"):
        from fastkafka.schema_registry._encode import AvroEncoder, JsonEncoder

        enc = AvroEncoder(AVRO_SCHEMA_STR) if fmt_ == "avro" else JsonEncoder(table.schema)
        head = table.slice(0, CHECKED)
        _check(name, enc.encode_arrow(head).to_pylist(), reference, False, as_json)

        def one_pass():
            out = enc.encode_arrow(table)
            assert len(out) == records
    else:
        if name == "avro_dict":
            from fastkafka.schema_registry._encode import AvroEncoder

            fn = AvroEncoder(AVRO_SCHEMA_STR).encode
        elif name == "fastavro":
            def fn(d, _p=parsed):
                return _fastavro_bytes(_p, d)
        elif name == "json_dumps":
            def fn(d, _dumps=json.dumps):
                return _dumps(d, separators=(",", ":"), ensure_ascii=False).encode()
        else:   # a serializer: fastkafka's or confluent-kafka's, with its own mock:// registry
            if name.startswith("fk_"):
                from fastkafka.schema_registry import MessageField, SerializationContext

                ser = _fk_serializer(fmt_, "mock://bench-encoders")
            else:
                from confluent_kafka.serialization import MessageField, SerializationContext

                ser = _ck_serializer(fmt_, "mock://bench-encoders")
            ctx = SerializationContext("bench-encoders", MessageField.VALUE)

            def fn(d, _ser=ser, _ctx=ctx):
                return _ser(d, _ctx)
        _check(name, [fn(d) for d in dicts[:CHECKED]], reference, framed, as_json)

        def one_pass(_fn=fn):
            for d in dicts:
                _fn(d)

    times: list[float] = []
    while len(times) < PASSES and sum(times) < PASSES_SECONDS:
        t0 = time.perf_counter()
        one_pass()
        times.append(time.perf_counter() - t0)
    ns = statistics.median(times) / records * 1e9
    return {"ns_per_record": ns, "rate": 1e9 / ns, "records": records, "passes": len(times)}


# ------------------------------------------------------------------------------------ registry
def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class RegistryServer:
    """The project's test registry (``python -m fastkafka_tools.schema_registry_server``) in a
    process of its own, for the whole run."""

    def __init__(self):
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.proc = None

    def start(self, timeout: float = 30.0) -> "RegistryServer":
        import urllib.request

        self.proc = subprocess.Popen([sys.executable, "-m", "fastkafka_tools.schema_registry_server",
                                      "--port", str(self.port)], cwd=ROOT,
                                     stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + timeout
        while True:
            try:
                with urllib.request.urlopen(self.url + "/subjects", timeout=2) as r:
                    if r.status == 200:
                        return self
            except OSError:
                pass
            if self.proc.poll() is not None:
                err = self.proc.stderr.read().decode(errors="replace").strip().splitlines()
                raise RuntimeError(f"the registry server exited {self.proc.returncode}: "
                                   f"{err[-1] if err else 'no output'}")
            if time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"the registry server did not answer on port {self.port} in {timeout:.0f}s")
            time.sleep(0.1)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


# ------------------------------------------------------------------------------------ rounds
def run_rounds(broker, args, names: list[str], partitions: int, registry: str) -> dict[str, list[dict]]:
    """Every measurement once per round (reversed order in even rounds), each in a child process,
    on a fresh ``partitions``-partition topic whose offsets must then hold exactly the records."""
    from brokers import stored_records
    from harness import process_cpu_s

    results: dict[str, list[dict]] = {n: [] for n in names}
    for rnd in range(1, args.rounds + 1):
        for name in round_order(names, rnd):
            topic = f"sr-{name}-p{partitions}-r{rnd}".replace("_", "-")
            broker.create_topic(topic, partitions)
            cmd = [sys.executable, SCRIPT, "--_child", name, broker.bootstrap, topic,
                   "--records", str(records_of(name, args)), "--registry-url", registry]
            b0 = process_cpu_s(broker.pid)
            r = run_child(cmd, args.timeout)
            b1 = process_cpu_s(broker.pid)
            if "failed" not in r:
                r["rate"] = r["records"] / r["seconds"]
                r["broker_cpu_s"] = b1 - b0 if b0 is not None and b1 is not None else None
                if r["delivered"] != r["records"] or r.get("errors"):
                    r["failed"] = f"delivered {r['delivered']} of {r['records']}, errors {r.get('errors')}"
                else:
                    want = r["records"] + r["warmup_records"]
                    try:
                        held = stored_records(broker.bootstrap, topic, partitions)
                    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
                        held = f"unknown ({type(e).__name__}: {e})"
                    r["held"] = held
                    if held != want:
                        r["failed"] = f"topic holds {held} records, {want} sent"
            try:
                broker.delete_topic(topic)
            except Exception as e:  # noqa: BLE001 - a topic left over costs memory or disk only
                print(f"  (could not delete {topic}: {e})", flush=True)
            results[name].append(r)
            msg = r["failed"] if "failed" in r else \
                f"{r['rate']:>12,.0f} rec/s  {r['cpu_s'] / r['records'] * 1e6:6.2f} us CPU/rec  {r['seconds']:.2f}s"
            print(f"p{partitions} round {rnd} {name:<14} {msg}", flush=True)
    return results


def records_of(name: str, args) -> int:
    """The records a broker measurement sends: ``--json-records`` for the JSON ones."""
    return args.json_records if "json" in name else args.records


def run_encoder_rounds(args, names: list[str]) -> dict[str, list[dict]]:
    results: dict[str, list[dict]] = {n: [] for n in names}
    for rnd in range(1, args.encoder_rounds + 1):
        for name in round_order(names, rnd):
            r = run_child([sys.executable, SCRIPT, "--_encoder", name, "--records", str(args.encoder_records)],
                          args.timeout)
            results[name].append(r)
            msg = r["failed"] if "failed" in r else f"{r['ns_per_record']:>10,.0f} ns/record"
            print(f"encoders round {rnd} {name:<12} {msg}", flush=True)
    return results


# ------------------------------------------------------------------------------------ report
def _rounds_text(rs: list[dict], field: str, spec: str) -> str:
    return ", ".join(format(r[field], spec) if "failed" not in r else "FAILED" for r in rs)


def broker_section(partitions: int, names: list[str], results: dict[str, list[dict]], args,
                   wall: float) -> list[str]:
    lines = [f"## {partitions} partitions", "", f"{args.rounds} rounds, {wall:.0f} s.", "",
             "| client | what | median records/s | median CPU µs/record (client) | median broker CPU µs/record "
             "| rounds (records/s) |",
             "|---|---|---:|---:|---:|---|"]
    for name in names:
        client, what = MEASUREMENTS[name]
        rs = results[name]
        rate = median_field(rs, "rate")
        cpu = median_or_none([None if "failed" in r else r["cpu_s"] / r["records"] * 1e6 for r in rs])
        bcpu = median_or_none([None if "failed" in r or r.get("broker_cpu_s") is None
                               else r["broker_cpu_s"] / r["records"] * 1e6 for r in rs])
        why = next((r["failed"] for r in rs if "failed" in r), "")
        lines.append(f"| {client} | {what} | {fmt(rate, ',.0f', 'FAILED')} | {fmt(cpu)} | {fmt(bcpu)} "
                     f"| {_rounds_text(rs, 'rate', ',.0f')}{f' ({why})' if why else ''} |")
    pairs = [(a, b) for a, b, _ in PAIRS if a in names and b in names]
    if pairs:
        lines += ["", "Paired round by round (the two ran one after the other in each round):", "",
                  *ratio_table(pairs, results, lambda n: f"{MEASUREMENTS[n][0]} {MEASUREMENTS[n][1]} ({n})",
                               "records/s")]
    targets = [(a, b, t) for a, b, t in PAIRS if t and a in names and b in names]
    if targets:
        lines += ["", "Targets (median of the per-round ratios):"]
        for a, b, t in targets:
            m = median_or_none(paired_ratios(results[a], results[b]))
            verdict = "n/a (a round failed)" if m is None else f"{m:.2f}, " + ("met" if m >= t else "not met")
            lines.append(f"- `{a}` / `{b}` >= {t:g}: {verdict}")
    lines.append("")
    return lines


def encoder_section(names: list[str], results: dict[str, list[dict]], args) -> list[str]:
    lines = ["## The encoders alone (no broker)", "",
             f"The first {args.encoder_records:,} of the records, {args.encoder_rounds} rounds (a child process per "
             f"encoder and round, reversed order in even rounds; a round's value is the median of its passes over "
             f"the records: {PASSES}, or fewer when they took {PASSES_SECONDS:g} s in all).", "",
             "| name | what | median ns/record | passes per round | rounds (ns/record) |", "|---|---|---:|---:|---|"]
    for name in names:
        rs = results[name]
        ns = median_field(rs, "ns_per_record")
        why = next((r["failed"] for r in rs if "failed" in r), "")
        passes = "/".join(str(r["passes"]) for r in rs if "failed" not in r) or "-"
        lines.append(f"| {name} | {ENCODERS[name]} | {fmt(ns, ',.0f', 'FAILED')} | {passes} "
                     f"| {_rounds_text(rs, 'ns_per_record', ',.0f')}{f' ({why})' if why else ''} |")
    pairs = [(a, b) for a, b in ENCODER_PAIRS if a in names and b in names]
    if pairs:
        lines += ["", "How many times faster (the other's ns per record over this one's, per round; median):",
                  "", "| encoder | against | median of per-round ratios | per-round ratios |", "|---|---|---:|---|"]
        for a, b in pairs:
            per = paired_ratios(results[a], results[b])       # rate = 1e9 / ns: a's rate over b's
            lines.append(f"| {a} | {b} | {fmt(median_or_none(per))} | "
                         + ", ".join(fmt(x, '.2f', 'FAILED') for x in per) + " |")
    lines.append("")
    return lines


def command_line(args) -> str:
    parts = ["python bench/schema_registry.py", f"--records {args.records}"]
    if args.encoder_only:
        parts.append("--encoder-only")
    else:
        parts += [f"--json-records {args.json_records}", f"--rounds {args.rounds}",
                  f"--partitions {args.partitions}", f"--registry {args.registry}"]
    parts.append(f"--encoder-rounds {args.encoder_rounds} --encoder-records {args.encoder_records}")
    if args.only:
        parts.append(f"--only {args.only}")
    return " ".join(parts)


# ------------------------------------------------------------------------------------ main
def tree_line(commit0: str) -> str:
    """The tree the children imported: its commit at the run's start and, when it moved (a shared
    checkout), at its end."""
    commit1 = tree_commit(ROOT)
    if commit1 == commit0:
        return f"- the tree measured: {commit0} for the whole run"
    return f"- the tree measured: {commit0} at the run's start, {commit1} at its end (it changed during the run)"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--partitions", default="6", help="partitions of the topics; a comma-separated list "
                                                      "gives a section per value (e.g. 6,100)")
    ap.add_argument("--registry", choices=("server", "mock"), default="server")
    ap.add_argument("--only", default="", help="comma-separated names (broker measurements and encoders): "
                                               + ",".join([*MEASUREMENTS, *ENCODERS]))
    ap.add_argument("--encoder-only", action="store_true", help="the encoders alone, no broker")
    ap.add_argument("--json-records", type=int, default=50_000,
                    help="records of the JSON Schema measurements (confluent-kafka's takes ~150 µs a record)")
    ap.add_argument("--encoder-rounds", type=int, default=5, help="rounds of the encoders (0: none)")
    ap.add_argument("--encoder-records", type=int, default=50_000, help="records of the encoders' passes")
    ap.add_argument("--kafka-heap-mb", type=int, default=1024, help="Apache Kafka broker's JVM heap")
    ap.add_argument("--timeout", type=float, default=600.0, help="per-measurement limit, seconds")
    ap.add_argument("--out", default=None, help="the report (default bench/results/schema_registry.md, "
                                                "with --encoder-only bench/results/schema_registry_encoders.md)")
    ap.add_argument("--_child", nargs=3, metavar=("NAME", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    ap.add_argument("--_encoder", metavar="NAME", help=argparse.SUPPRESS)
    ap.add_argument("--registry-url", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)

    if args._child:
        name, bootstrap, topic = args._child
        print(result_line(child(name, bootstrap, topic, args.records, args.registry_url)), flush=True)
        return 0
    if args._encoder:
        print(result_line(encoder_child(args._encoder, args.records)), flush=True)
        return 0

    only = [n.strip() for n in args.only.split(",") if n.strip()]
    for n in only:
        if n not in MEASUREMENTS and n not in ENCODERS:
            raise SystemExit(f"unknown name {n!r}; choose from {', '.join([*MEASUREMENTS, *ENCODERS])}")
    names = [] if args.encoder_only else [n for n in MEASUREMENTS if not only or n in only]
    enc_names = [n for n in ENCODERS if not only or n in only] if args.encoder_rounds > 0 else []
    try:
        partition_counts = [int(x) for x in args.partitions.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"--partitions takes comma-separated integers, not {args.partitions!r}") from None
    counts = [args.records, args.json_records, args.rounds, args.encoder_records, *partition_counts]
    if not partition_counts or min(counts) <= 0:
        raise SystemExit("--records, --rounds, --encoder-records and --partitions must be > 0")

    wall0, load0 = time.monotonic(), os.getloadavg()[0]
    commit0 = tree_commit(ROOT)
    sections: list[str] = []
    broker_lines: list[str] = []
    registry_line = ""
    if names:
        from fastkafka_tools.apachekafka import KafkaCluster

        registry = server = None
        if args.registry == "server":
            server = RegistryServer().start()
            registry = server.url
            registry_line = ("- registry: the project's test registry (`python -m "
                             "fastkafka_tools.schema_registry_server`) in a process of its own on "
                             "127.0.0.1, HTTP; each client registers the schema once (warm-up) and keeps its id")
        else:
            registry = "mock://bench"
            registry_line = "- registry: `mock://` in each child process (each client's own in-process registry)"
        broker = KafkaCluster(nodes=1, jit="full", heap_mb=args.kafka_heap_mb,
                              properties=BROKER_PROPERTIES).start(timeout=180)
        try:
            broker_lines.append("- " + kafka_run_line(broker.version, args.kafka_heap_mb, "full", broker.data_place))
            for parts in partition_counts:
                t0 = time.monotonic()
                results = run_rounds(broker, args, names, parts, registry)
                sections += broker_section(parts, names, results, args, time.monotonic() - t0)
        finally:
            broker.stop()
            if server is not None:
                server.stop()
    if enc_names:
        sections += encoder_section(enc_names, run_encoder_rounds(args, enc_names), args)

    if args.encoder_only:
        intro = ["The encoders alone (no broker, no producer): the 10-field record (long, string, int, double, "
                 "boolean, nullable string, timestamp-millis, bytes(16), enum of 4, array<string> of 0-3 items) "
                 "as Avro or JSON text, from an Arrow Table or from dicts."]
    else:
        intro = [
            f"{args.records:,} records ({args.json_records:,} for JSON Schema) of a 10-field record (long, "
            "string, int, double, boolean, nullable string, timestamp-millis, bytes(16), enum of 4, array<string> "
            "of 0-3 items); Avro or JSON Schema in Confluent's wire format (0x00, 4-byte schema id, payload). "
            "Each measurement in a child process of its own, a fresh topic each, acks=1, each client's default "
            "linger (5 ms on both); timed from the first record to flush() returning; CPU per record is the "
            "client process's user + system CPU over that time. The offsets of each topic must hold exactly the "
            "records plus one warm-up record."]
    text = "\n".join([
        "# Schema Registry formats: fastkafka against confluent-kafka's serializers",
        "",
        f"`{command_line(args)}` — {time.strftime('%Y-%m-%d %H:%M')}, whole run {time.monotonic() - wall0:.0f} s.",
        "",
        *intro,
        "",
        *sections,
        *machine_section(broker_lines, load0, [tree_line(commit0)] + ([registry_line] if registry_line else [])),
    ])
    default = "schema_registry_encoders.md" if args.encoder_only else "schema_registry.md"
    emit(text, args.out or os.path.join(HERE, "results", default))
    return 0


if __name__ == "__main__":
    sys.exit(main())
