"""asyncio producers on one Apache Kafka broker: fastkafka's ``AsyncProducer`` (``fastkafka.aio``)
against aiokafka's ``AIOKafkaProducer`` and confluent-kafka's ``AIOProducer`` (``confluent_kafka.aio``),
in the same run, in the shapes async services have: 1,000 tasks each awaiting its own sends,
fire-and-forget sends with callbacks then one flush(), Arrow arrays sent in batches, 1,000 sends
awaited together, one task awaiting each send in turn, per-record latency on a paced event loop that
is busy or idle, and the first send to a topic without metadata; with the event loop's longest
stall measured in every one.

    python bench/aio.py [--rounds 3] [--records 200000] [--slow-records 50000] [--window 1000]
                        [--cap-seconds 10] [--seconds 5] [--warmup 1] [--rate 20000] [--tick-us 1000]
                        [--busy-slice-us 200] [--size 100] [--partitions 6] [--warmup-records 50000]
                        [--tasks 1000] [--batch 10000] [--stall-ticker on|off]
                        [--only NAME,...] [--loop asyncio|uvloop|both] [--fastkafka-path DIR]
                        [--bootstrap-servers HOST:PORT [--broker-pid PID]] [--out bench/results/aio.md]

Clients, all with acks=all, idempotence on, linger ``--linger-ms`` (default 5 ms), ``--size``-byte values (no key) on a fresh
``--partitions``-partition topic per measurement:

- ``fk``: ``fastkafka.aio.AsyncProducer(bootstrap_servers=..., linger_ms=5, acks="all",
  enable_idempotence=True)`` (its other settings fastkafka's defaults). ``send()`` queues the record
  when called and returns an ``asyncio.Future`` of its RecordMetadata. ``fkp``: the same producer's
  non-awaiting ``produce(topic, value, on_delivery=cb)``, whose callback runs on the event loop
  (latency only).
- ``aiok``: ``aiokafka.AIOKafkaProducer(bootstrap_servers=..., linger_ms=5, acks="all",
  enable_idempotence=True)``, its other settings aiokafka's defaults (``max_batch_size`` 16 KiB).
  ``await send()`` queues the record and returns a future of its RecordMetadata.
- ``fka``: the same code as ``aiok`` with only the import changed:
  ``fastkafka.compat.aiokafka.AIOKafkaProducer`` (gather and serial; its records/s against aiok's
  is the layer's speed for aiokafka's users).
- ``ck``: ``confluent_kafka.aio.AIOProducer({"bootstrap.servers": ..., "acks": "all",
  "enable.idempotence": True, "linger.ms": 5})`` with its defaults (4 executor threads, a Python
  buffer of ``batch_size=1000`` records handed to librdkafka with ``produce_batch`` when full or
  after ``buffer_timeout=1.0`` s without activity), used as its README teaches:
  ``delivery_future = await p.produce(topic, value)`` then ``await delivery_future``. Its delivery
  reports are only served by a ``poll(0)`` right after each ``produce_batch`` and by the buffer
  timeout's ``flush(0)``: a window or a record that waits for its own delivery waits for that timer
  (about 1-2 s). ``ckf``: the same client with ``await p.flush()`` (documented) before awaiting the
  futures, which serves them at once (throughput only). Not like for like: librdkafka's flush also
  sends what is queued at once, ignoring linger.ms, so one record awaited at a time pays no linger
  (the others wait up to their 5 ms).

Measurements (``--only`` takes names, clients or kinds: ``fk,ck``, ``gather``, ``lat_busy``, ``tasks``,
...). In the throughput shapes fastkafka sends ``--records`` records, the others ``--slow-records`` (or
fewer: a run stops once ``--cap-seconds`` have passed, after its current window, array or send); the
rate is records / seconds either way, CPU per record is the process's (every thread).

- ``<client>_tasks`` (a web service under load): ``--tasks`` tasks gathered, each sending its share
  of the records one at a time and awaiting each: fk ``await p.send(t, v)``; aiok ``await
  p.send_and_wait(t, v)``; ck ``await (await p.produce(t, v))`` (each send waits for its 1 s buffer
  timer unless the 1,000 tasks fill its buffer: it is capped). Past the cap every task stops after its
  current send. CPU: ``getrusage`` over the timed part.
- ``<client>_fire`` (fire-and-forget): every record sent without awaiting it, a callback counting its
  outcome, ``await asyncio.sleep(0)`` after each ``--window`` records (other tasks run), then one
  ``await p.flush()``; timed from the first call until flush() returned and every callback ran (each
  must have run without error). fk: ``p.produce(t, v, on_delivery=cb)`` (it never waits; a full
  buffer raises BufferExhaustedError at once: the record is offered again after 1 ms, counted in the
  rounds table); aiok (no produce()): ``(await p.send(t, v)).add_done_callback(cb)``; ck: ``(await
  p.produce(t, v)).add_done_callback(cb)``, its delivery future not awaited, as its docs teach.
- ``<client>_arrow``: pyarrow ``binary`` arrays of ``--batch`` values (built before the clock), each
  awaited before the next. fk: ``await p.send_batch(t, arr)``; aiok (no Arrow, no record-list batch):
  its BatchBuilder API as documented, ``b = p.create_batch()``, ``b.append(key=None, value=v,
  timestamp=None)`` until it returns None, ``await p.send_batch(b, t, partition=i)`` (the topic's
  partitions in turn), then every batch's future awaited; the array's values read as Python bytes in
  the timed part. ck: no row measured: AIOProducer has no batch call (``produce_batch`` is the sync
  Producer's; AIOProducer's ``produce()`` buffers records itself); the table says so.
- ``<client>_first``: the library imported, a ticker started, then the producer made and started
  (open), one record sent to the measurement's fresh topic (which the producer has no metadata for)
  and awaited until delivered (first send), the producer closed (close): each part's time and the
  loop's longest stall in it. ck's record is flushed (``await p.flush()``), not left to its 1 s timer.

- ``<client>_gather`` (throughput A, "1,000 sends awaited together"): windows of ``--window``
  records; each window creates its sends and awaits them together (``asyncio.gather``), the next
  window after it. fastkafka: ``--records`` records; the others ``--slow-records`` (or fewer: a run
  stops after the window that passes ``--cap-seconds``); the rate is records / seconds either way.
  fk: ``await gather(*[p.send(t, v) for v in window])``; aiok: ``futs = [await p.send(t, v) for v in
  window]; await gather(*futs)``; ck: ``futs = [await p.produce(t, v) for v in window]; await
  gather(*futs)``; ckf: the same, ``await p.flush()`` before the gather.
- ``<client>_serial`` (throughput B, "one task awaiting each send in turn"): for ``--seconds``
  seconds, one record at a time, the next sent after the previous completed. fk: ``await
  p.send(t, v)``; aiok: ``await p.send_and_wait(t, v)``; ck: ``await (await p.produce(t, v))``;
  ckf: ``f = await p.produce(t, v); await p.flush(); await f``. Records / seconds.
- ``<client>_lat_busy`` / ``<client>_lat_idle``: a sender task paces records at ``--rate`` per
  second in bursts every ``--tick-us`` µs (each burst sends what is due, so a late burst catches up,
  as bench/latency.py's pacing), ``--warmup`` seconds unmeasured then ``--seconds`` measured, then
  the client's ``flush()``. Latency of a record = the time its completion runs on the event loop −
  the time just before its send call, both ``time.perf_counter_ns()``. Completion: a done-callback
  added to the record's future as soon as the send call returns it (fk, aiok, ck; the same method
  for all three: the callback runs in the loop turn in which an ``await`` of that future would
  resume), fastkafka's ``on_delivery`` callback (fkp). Busy: a second task on the same loop runs
  pure-Python arithmetic in slices of ``--busy-slice-us`` µs, ``await asyncio.sleep(0)`` between
  slices, for the whole measured part; its slices per second are reported (the application's
  progress: what the client leaves of the loop). Idle: nothing else runs; the sender sleeps until
  the next tick (``asyncio.sleep``: the selector waits in whole milliseconds). Process CPU per record
  (``getrusage``, every thread) is reported for the idle runs (with the application busy it would
  be the application's). A client so far behind the pace that
  a paced part would take more than twice its time plus 1 s is stopped there, short of the records
  due (its achieved rate shows it, marked behind; the rounds table says how many it sent).

Loop stalls: in every measurement a ticker task on the same loop sleeps 1 ms in turn over the timed
part (``aio_clients.StallTicker``); a stall is the time between two of its turns beyond that 1 ms,
clipped to the part measured: how long the loop ran nothing else. Each run reports its longest
(``max stall ms``) and its p99 gap. It is the loop's, not only the producer's: the busy application's
slices, and in tasks and gather the application's tasks resuming together, count too. The ticker's
wake-ups cost CPU, which the CPU per record includes: each child measures the ticker's CPU per tick on
its idle loop just before the timed part, and the tables give its share (ticks × that cost / records,
an upper bound: a busy loop wakes up anyway). ``--stall-ticker off`` runs without it (no stall figures).

fastkafka's ``metrics()`` gives the event loop's wake-ups (``aio_loop_wakeups``) and the records
handed to it (``aio_records_completed``); their differences over the timed part give loop wake-ups
per record.

Each measurement runs in its own child process (fresh interpreter, ``--loop`` event loop; ``--loop
both``: every measurement under asyncio's loop and under uvloop, in the same rounds, tables per loop,
results named ``NAME@asyncio`` / ``NAME@uvloop``) against a
fresh topic created before it (and deleted after it); the measurements are interleaved round-robin for
``--rounds`` rounds, in reverse order in even rounds; the broker is left to go idle before each child
(when its process is known). Before the rounds, one client's gather (the first of fk, aiok, ck
selected) writes ``--warmup-records`` records untimed (the broker's JIT and page cache). Every client
first delivers one warm-up record (connection, metadata, producer id) before any clock starts.

Checks: every record's future (or callback) completed without error, and the broker holds exactly the
records sent plus the warm-ups (latest − earliest offsets of every partition, confluent-kafka's
AdminClient); a measurement failing either is FAILED. Ratios: fastkafka's number over each peer's,
the median of the per-round ratios (both measured in the same round): for records/s above 1 means
fastkafka is faster; for latency below 1 means fastkafka's is lower.

Broker: one Apache Kafka KRaft node started for the run (``fastkafka_tools.apachekafka.KafkaCluster``,
full JIT, jars cached under ~/.cache/fastkafka), or ``--bootstrap-servers``. fastkafka is imported
from ``--fastkafka-path DIR`` (default: this repository; its extensions built in place), checked in
each fastkafka child; the report names the tree's commit, not its path.
"""

from __future__ import annotations

import argparse
import os
import platform
import statistics
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

import aio_clients  # noqa: E402
from aio_clients import (CLIENTS, FASTKAFKA, KINDS, LOOP_CODE, MEASUREMENTS, NO_SHAPE, child,  # noqa: E402
                         split_name)
from brokers import BROKER_PROPERTIES, Topics  # noqa: E402
from harness import (build_fingerprint, emit, fmt, kafka_run_line, process_cpu_s, result_line,  # noqa: E402
                     round_order, run_child, settle, tree_commit, tree_env)
from harness import median_field as med_field  # noqa: E402
from harness import median_or_none as med  # noqa: E402
from harness import paired_ratios as per_round_ratios  # noqa: E402
from pacing import KEPT_UP  # noqa: E402

RESULTS = os.path.join(HERE, "results", "aio.md")


# ------------------------------------------------------------------------------------ pure helpers
def select(only: str) -> list[str]:
    """The measurements ``--only`` picks, in the fixed order of MEASUREMENTS. Each comma-separated
    token is a measurement name (``fk_gather``), a client (``fk``, ``aiok``: all its measurements) or
    a kind (``gather``, ``serial``, ``lat_busy``, ``lat_idle``, ``lat``: both latencies, ``tasks``,
    ``fire``, ``arrow``, ``first``). Empty:
    every measurement."""
    tokens = [t.strip() for t in only.split(",") if t.strip()]
    if not tokens:
        return list(MEASUREMENTS)
    picked = set()
    for t in tokens:
        hits = [n for n in MEASUREMENTS
                if n == t or split_name(n)[0] == t or split_name(n)[1] == t
                or (t == "lat" and split_name(n)[1].startswith("lat_"))]
        if not hits:
            raise SystemExit(f"--only: unknown {t!r}; measurements: {', '.join(MEASUREMENTS)}; clients: "
                             f"{', '.join(CLIENTS)}; kinds: {', '.join(KINDS)}, lat")
        picked.update(hits)
    return [n for n in MEASUREMENTS if n in picked]


def check(r: dict, held: int | None) -> dict:
    """The delivery checks of one measurement's result (``failed`` set when one fails): every
    record completed without error, and the broker (``held``: latest - earliest offsets summed, None
    when not counted) holds exactly the records plus the warm-ups."""
    if "failed" in r:
        return r
    n = r["records"]
    if r["errors"] or r["completed"] != n:
        r["failed"] = f"{r['completed']} of {n} completed, errors {r['errors']}" + (
            f" (first: {r['first_error']})" if r.get("first_error") else "")
    elif held is not None and held != r["total_sent"]:
        r["failed"] = f"the topic holds {held} records, {r['total_sent']} sent (warm-ups included)"
    return r


def peers_of(kind: str, names: list[str]) -> list[str]:
    """The non-fastkafka clients of ``kind`` among ``names``."""
    return [c for c in KINDS[kind][1] if c not in FASTKAFKA and f"{c}_{kind}" in names]


def fastkafka_of(kind: str, names: list[str]) -> list[str]:
    return [c for c in KINDS[kind][1] if c in FASTKAFKA and f"{c}_{kind}" in names]


def loops_of(loop: str) -> list[str]:
    """The event loops ``--loop`` asks for: one, or both (asyncio's, then uvloop) in the same rounds."""
    return ["asyncio", "uvloop"] if loop == "both" else [loop]


def run_key(name: str, loop: str, loops: list[str]) -> str:
    """The results key of ``name`` under ``loop``: the name alone with one loop, ``name@loop`` with
    both."""
    return name if len(loops) == 1 else f"{name}@{loop}"


def base_name(key: str) -> tuple[str, str]:
    """``"fk_tasks@uvloop"`` -> ``("fk_tasks", "uvloop")``; ``"fk_tasks"`` -> ``("fk_tasks", "")``."""
    name, _, loop = key.partition("@")
    return name, loop


# ------------------------------------------------------------------------------------ parent
def child_cmd(name: str, bootstrap: str, topic: str, args, records: int | None = None,
              loop: str | None = None) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap, topic,
            "--records", str(records or args.records), "--slow-records", str(records or args.slow_records),
            "--window", str(args.window), "--cap-seconds", str(args.cap_seconds),
            "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--rate", str(args.rate),
            "--tick-us", str(args.tick_us), "--busy-slice-us", str(args.busy_slice_us),
            "--size", str(args.size), "--loop", loop or loops_of(args.loop)[0],
            "--fastkafka-path", args.fastkafka_path,
            "--linger-ms", str(args.linger_ms), "--tasks", str(args.tasks), "--batch", str(args.batch),
            "--stall-ticker", args.stall_ticker]


def measure(topics, name: str, topic: str, args, broker_pid: int | None, records: int | None = None,
            loop: str | None = None) -> dict:
    """A fresh topic, the broker left to go idle, one child process (on ``loop``, default the first
    of ``--loop``), the checks, the topic deleted."""
    try:
        topics.create([topic], args.partitions)
    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
        return {"failed": f"creating the topic: {type(e).__name__}: {e}", "load": os.getloadavg()[0]}
    settle(broker_pid)
    b0 = process_cpu_s(broker_pid)
    r = run_child(child_cmd(name, topics.bootstrap, topic, args, records, loop), args.timeout,
                  env=tree_env(args.fastkafka_path))
    b1 = process_cpu_s(broker_pid)
    if b0 is not None and b1 is not None:
        r["broker_cpu_s"] = b1 - b0
    held = None
    if "failed" not in r:
        try:
            held = sum(topics.counts([topic], args.partitions))
        except Exception as e:  # noqa: BLE001
            r["failed"] = f"counting the records: {type(e).__name__}: {e}"
    r = check(r, held)
    r["held"] = held
    r["load"] = os.getloadavg()[0]
    try:
        topics.delete([topic])
    except Exception as e:  # noqa: BLE001 - a topic left over costs disk only
        print(f"  (could not delete {topic}: {e})", flush=True)
    return r


def log_line(name: str, r: dict) -> str:
    if "failed" in r:
        return "FAILED: " + r["failed"]
    kind = split_name(name)[1]
    extra = f"  wake-ups/record {r['wakeups_per_record']:.3f}" if r.get("wakeups_per_record") is not None else ""
    if r.get("max_stall_ms") is not None:
        extra += f"  max stall {r['max_stall_ms']:.1f} ms"
    if kind == "first":
        return (f"open {r['open_ms']:.1f} ms (max stall {fmt(r.get('open_max_stall_ms'), '.1f')}), first send "
                f"{r['send_ms']:.1f} ms (max stall {fmt(r.get('send_max_stall_ms'), '.1f')}), close "
                f"{r['close_ms']:.1f} ms (max stall {fmt(r.get('close_max_stall_ms'), '.1f')})")
    if kind.startswith("lat"):
        app = f"  app slices/s {r['app_slices_per_s']:,.0f}" if r.get("app_slices_per_s") is not None else ""
        cpu = f"  cpu {r['cpu_us_per_record']:.1f} us/rec" if r.get("cpu_us_per_record") is not None else ""
        return (f"achieved {r['achieved']:>8,.0f}/s  p50 {r['p50']:8.2f}  p99 {r['p99']:8.2f}  "
                f"max {r['max']:8.2f} ms{cpu}{app}{extra}")
    return (f"{r['rate']:>10,.1f} rec/s  {r['records']:,} records in {r['seconds']:.2f} s"
            f"{' (capped)' if r.get('capped') else ''}  cpu {r['cpu_us_per_record']:.1f} us/rec{extra}")


def run_benchmark(bootstrap: str, args, log=print, broker_pid: int | None = None) -> dict:
    topics = Topics(bootstrap)
    run_id = uuid.uuid4().hex[:6]
    names = args.names
    loops = loops_of(args.loop)
    keys = [run_key(n, lp, loops) for n in names for lp in loops]
    fingerprint = build_fingerprint(args.fastkafka_path)
    out = {"results": {k: [] for k in keys}, "warmup": None, "loads": [os.getloadavg()[0]],
           "fastkafka_commit": tree_commit(args.fastkafka_path),
           "fastkafka_is_repo": os.path.realpath(args.fastkafka_path) == os.path.realpath(ROOT)}
    libs = {split_name(n)[0].replace("fkp", "fk").replace("ckf", "ck") for n in names}
    first = next((c for c in ("fk", "aiok", "ck") if c in libs), None)
    if args.warmup_records and first:
        name = f"{first}_gather"
        r = measure(topics, name, f"aio-{run_id}-warmup", args, broker_pid, args.warmup_records)
        out["warmup"] = (name, r)
        log(f"warm-up  {name:<14} {log_line(name, r)}")
    for rnd in range(1, args.rounds + 1):
        for order, key in enumerate(round_order(keys, rnd)):
            name, loop = base_name(key)
            topic = f"aio-{run_id}-{name}-{loop or loops[0]}-r{rnd}".replace("_", "-")
            r = measure(topics, name, topic, args, broker_pid, loop=loop or loops[0])
            r["round"], r["order"] = rnd, order
            out["results"][key].append(r)
            out["loads"].append(r["load"])
            log(f"round {rnd} {key:<14} {log_line(name, r)}")
    out["rebuilt_during_run"] = build_fingerprint(args.fastkafka_path) != fingerprint
    return out


# ------------------------------------------------------------------------------------ report
def _rounds_cell(rs: list[dict], show) -> str:
    return ", ".join("FAILED" if "failed" in r else show(r) for r in rs)


def _why(rs: list[dict]) -> str:
    why = next((r["failed"] for r in rs if "failed" in r), None)
    return f" ({why.replace('|', '/')})" if why else ""


def _cpu_cell(rs: list[dict], spec: str = ",.1f") -> str:
    """Median over rounds of the CPU per record, in brackets the stall ticker's share of it (its
    ticks × its CPU per tick on the idle loop; an upper bound)."""
    cpu, share = med_field(rs, "cpu_us_per_record"), med_field(rs, "ticker_cpu_us_per_record")
    return fmt(cpu, spec) + (f" (ticker ≤{share:.2f})" if cpu is not None and share is not None else "")


def _stall_cell(rs: list[dict]) -> str:
    """Median over rounds of the loop's longest stall (and of its p99 gap), ms."""
    mx, p99 = med_field(rs, "max_stall_ms"), med_field(rs, "p99_stall_ms")
    return f"{fmt(mx, '.1f')} ({fmt(p99, '.2f')})" if mx is not None else "n/a"


def no_shape_row(kind: str, client: str, cols: int) -> str:
    """The row of a client that has no call for ``kind``: its name, why, and dashes."""
    label, why = NO_SHAPE[(kind, client)]
    return "| " + " | ".join([label, why] + ["—"] * (cols - 2)) + " |"


def throughput_table(kind: str, results: dict[str, list[dict]], names: list[str]) -> list[str]:
    """One row per client of ``kind`` (gather, serial, tasks, fire, arrow): median records/s,
    fastkafka's median per-round ratio to it, records per run, CPU per record, fastkafka's loop
    wake-ups per record, the loop's longest stall; a row saying why for a peer without the shape."""
    fks = fastkafka_of(kind, names)
    fk = fks[0] if fks else None
    lines = ["| client | loop | median records/s | fastkafka ÷ this (median of per-round) | per-round ratios "
             "| records per run | CPU µs/record | loop wake-ups/record | max stall ms (p99 gap) "
             "| rounds (records/s) |",
             "|---|---|---:|---:|---|---:|---:|---:|---:|---|"]
    for c in KINDS[kind][1]:
        name = f"{c}_{kind}"
        if name not in names:
            continue
        rs = results[name]
        if c in FASTKAFKA or fk is None:
            ratio, per = "—", ""
        else:
            ratios = per_round_ratios(results[f"{fk}_{kind}"], rs, "rate")
            ratio = fmt(med(ratios))
            per = ", ".join(fmt(x) for x in ratios)
        recs = med_field(rs, "records")
        capped = any(r.get("capped") for r in rs if "failed" not in r)
        label = f"**{CLIENTS[c][0]}**" if c in FASTKAFKA else CLIENTS[c][0]
        rate = fmt(med_field(rs, "rate"), ",.1f" if kind == "serial" else ",.0f", "FAILED")
        lines.append(
            f"| {label} | {LOOP_CODE[(kind, c)]} | {rate} | {ratio} | {per} "
            f"| {fmt(recs, ',.0f')}{' (capped)' if capped else ''} "
            f"| {_cpu_cell(rs)} | {fmt(med_field(rs, 'wakeups_per_record'), '.3f')} "
            f"| {_stall_cell(rs)} "
            f"| {_rounds_cell(rs, lambda r: format(r['rate'], ',.1f'))}{_why(rs)} |")
    if any(f"{c}_{kind}" in names for c in KINDS[kind][1]):
        lines += [no_shape_row(kind, c, 10) for (k, c) in NO_SHAPE if k == kind]
    return lines


def first_table(results: dict[str, list[dict]], names: list[str]) -> list[str]:
    """One row per client of the first-send measurement: medians over rounds of the time and the
    loop's longest stall in each part: the producer made and started, its first record sent until
    delivered, its close."""
    lines = ["| client | code | open ms | max stall ms in open | first send -> delivery ms "
             "| max stall ms in it | close ms | max stall ms in close | rounds (max stall ms, open to delivery) |",
             "|---|---|---:|---:|---:|---:|---:|---:|---|"]
    for c in KINDS["first"][1]:
        name = f"{c}_first"
        if name not in names:
            continue
        rs = results[name]
        label = f"**{CLIENTS[c][0]}**" if c in FASTKAFKA else CLIENTS[c][0]
        cells = [fmt(med_field(rs, f), ".1f") for f in ("open_ms", "open_max_stall_ms", "send_ms",
                                                         "send_max_stall_ms", "close_ms", "close_max_stall_ms")]
        if all(x == "n/a" for x in cells):
            cells[0] = "FAILED"
        lines.append(f"| {label} | {LOOP_CODE[('first', c)]} | {' | '.join(cells)} "
                     f"| {_rounds_cell(rs, lambda r: fmt(r.get('max_stall_ms'), '.1f'))}{_why(rs)} |")
    return lines


def latency_table(kind: str, results: dict[str, list[dict]], names: list[str], rate: float) -> list[str]:
    """One row per client of ``kind`` (lat_busy or lat_idle): medians over rounds of the achieved
    rate, p50/p99/p99.9/max, fastkafka's (send() future) p50 and p99 over this client's (median of
    per-round ratios), the application's slices per second (busy), CPU per record (idle) and
    fastkafka's loop wake-ups per record."""
    fks = fastkafka_of(kind, names)
    fk = fks[0] if fks else None
    lines = ["| client | completion | achieved rec/s | p50 ms | p99 ms | p99.9 ms | max ms "
             "| fastkafka p50 ÷ this | fastkafka p99 ÷ this | app slices/s | CPU µs/record "
             "| loop wake-ups/record | max stall ms (p99 gap) | rounds p50 / p99 ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
    for c in KINDS[kind][1]:
        name = f"{c}_{kind}"
        if name not in names:
            continue
        rs = results[name]
        if fk is None or c in FASTKAFKA:
            r50 = r99 = "—"
        else:
            r50 = fmt(med(per_round_ratios(results[f"{fk}_{kind}"], rs, "p50")))
            r99 = fmt(med(per_round_ratios(results[f"{fk}_{kind}"], rs, "p99")))
        achieved = med_field(rs, "achieved")
        behind = " (behind)" if achieved is not None and achieved < KEPT_UP * rate else ""
        label = f"**{CLIENTS[c][0]}**" if c in FASTKAFKA else CLIENTS[c][0]
        lines.append(
            f"| {label} | {CLIENTS[c][1]} | {fmt(achieved, ',.0f', 'FAILED')}{behind} | {fmt(med_field(rs, 'p50'))} "
            f"| {fmt(med_field(rs, 'p99'))} | {fmt(med_field(rs, 'p999'))} | {fmt(med_field(rs, 'max'))} "
            f"| {r50} | {r99} | {fmt(med_field(rs, 'app_slices_per_s'), ',.0f')} "
            f"| {_cpu_cell(rs, '.1f')} "
            f"| {fmt(med_field(rs, 'wakeups_per_record'), '.3f')} | {_stall_cell(rs)} "
            f"| {_rounds_cell(rs, lambda r: format(r['p50'], '.2f') + ' / ' + format(r['p99'], '.2f'))}{_why(rs)} |")
    return lines


def rounds_table(results: dict[str, list[dict]], names: list[str]) -> list[str]:
    """Every run in its round's order; ``names`` are results keys (``name`` or ``name@loop``)."""
    lines = ["| round | measurement | records | result | CPU µs/record | loop wake-ups (records on loop) "
             "| max stall ms | broker CPU s | held by topic | load |",
             "|---:|---|---:|---|---:|---|---:|---:|---:|---:|"]
    rows = sorted(((r.get("round", i + 1), r.get("order", 0), n, r) for n in names
                   for i, r in enumerate(results[n])), key=lambda x: (x[0], x[1]))
    for rnd, _, n, r in rows:
        if "failed" in r:
            res = "FAILED: " + r["failed"].replace("|", "/")
        elif split_name(base_name(n)[0])[1] == "first":
            res = (f"open {r['open_ms']:.1f} ms (max stall {fmt(r.get('open_max_stall_ms'), '.1f')}), first send "
                   f"{r['send_ms']:.1f} ms (max stall {fmt(r.get('send_max_stall_ms'), '.1f')}), close "
                   f"{r['close_ms']:.1f} ms (max stall {fmt(r.get('close_max_stall_ms'), '.1f')})")
        elif split_name(base_name(n)[0])[1].startswith("lat"):
            res = f"{r['achieved']:,.0f} rec/s, p50 {r['p50']:.2f} / p99 {r['p99']:.2f} / max {r['max']:.2f} ms"
            if r.get("due") and r["records"] < r["due"]:
                res += f" (stopped after {r['records']:,} of {r['due']:,} due)"
        else:
            res = f"{r['rate']:,.1f} rec/s in {r['seconds']:.2f} s" + (" (capped)" if r.get("capped") else "")
            if r.get("buffer_retries"):
                res += f", {r['buffer_retries']:,} produce() retries on a full buffer"
        wake = (f"{r['loop_wakeups']:,} ({r['records_completed_on_loop']:,})"
                if r.get("loop_wakeups") is not None and r.get("records_completed_on_loop") is not None else "")
        lines.append(f"| {rnd} | {n} | {fmt(r.get('records'), ',', '')} | {res} "
                     f"| {fmt(r.get('cpu_us_per_record'), '.1f', '')} | {wake} "
                     f"| {fmt(r.get('max_stall_ms'), '.1f', '')} "
                     f"| {fmt(r.get('broker_cpu_s'), '.2f', '')} | {fmt(r.get('held'), ',', '')} "
                     f"| {fmt(r.get('load'), '.2f', '')} |")
    return lines


def loop_name(kind: str) -> str:
    """The event loop of the children, for the report."""
    if kind == "uvloop":
        import importlib.metadata as md

        return f"uvloop {md.version('uvloop')}"
    return "asyncio's default (selector) event loop"


def machine_lines(broker_line: str, report: dict, args) -> list[str]:
    import importlib.metadata as md

    vers = []
    for pkg in ("aiokafka", "confluent-kafka"):
        try:
            vers.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            vers.append(f"{pkg} (not installed)")
    try:
        import confluent_kafka
        vers.append(f"librdkafka {confluent_kafka.libversion()[0]}")
    except ImportError:
        pass
    loop = " and ".join(loop_name(lp) for lp in loops_of(args.loop))
    where = ("built in place in this repository" if report.get("fastkafka_is_repo", True)
             else "imported from `--fastkafka-path` (a separate source tree built in place)")
    if report.get("rebuilt_during_run"):
        where += "; WARNING: its compiled extensions changed during the run (a rebuild)"
    cpu = "?"
    try:
        with open("/proc/cpuinfo") as f:
            cpu = next((ln.split(":", 1)[1].strip() for ln in f if ln.startswith("model name")), "?")
    except OSError:
        pass
    loads = report["loads"]
    return ["Machine:",
            f"- nproc: {os.cpu_count()} ({cpu})",
            f"- Python {platform.python_version()}, {platform.platform()}; event loop: {loop}",
            f"- fastkafka at git {report.get('fastkafka_commit', '?')}, {where}; {', '.join(vers)}",
            f"- {broker_line}",
            f"- load average (1 min), at the start / after each measurement: min {min(loads):.2f}, "
            f"median {statistics.median(loads):.2f}, max {max(loads):.2f} (start {loads[0]:.2f}, "
            f"end {loads[-1]:.2f})",
            ""]


def command_line(args) -> str:
    cmd = (f"python bench/aio.py --rounds {args.rounds} --records {args.records} --slow-records "
           f"{args.slow_records} --window {args.window} --cap-seconds {args.cap_seconds:g} --seconds "
           f"{args.seconds:g} --warmup {args.warmup:g} --rate {args.rate:g} --tick-us {args.tick_us:g} "
           f"--busy-slice-us {args.busy_slice_us:g} --size {args.size} --partitions {args.partitions} "
           f"--warmup-records {args.warmup_records} --loop {args.loop} --linger-ms {args.linger_ms} "
           f"--tasks {args.tasks} --batch {args.batch}"
           + (" --stall-ticker off" if args.stall_ticker == "off" else ""))
    if args.names != MEASUREMENTS:
        cmd += f" --only {','.join(args.names)}"
    return cmd


def shape_sections(results: dict[str, list[dict]], names: list[str], args, loop: str = "") -> list[str]:
    """The tables of every shape measured, from ``results`` keyed by measurement name; ``loop``
    (with ``--loop both``) names the event loop in each heading."""
    at = f" — {loop_name(loop)}" if loop else ""
    lines: list[str] = []
    per_client = (f"fastkafka {args.records:,} records, the others {args.slow_records:,} or what fits in "
                  f"{args.cap_seconds:g} s")
    for kind in ("tasks", "fire", "arrow", "gather", "serial"):
        if not any(f"{c}_{kind}" in names for c in KINDS[kind][1]):
            continue
        if kind == "tasks":
            head = (f"## Throughput: {KINDS[kind][0]}{at}\n\n{args.tasks:,} tasks gathered, each sending its share "
                    f"of the records one at a time, awaiting each (a web service under load); {per_client} "
                    "(every task stops after its current send; marked capped). Rate = records / (tasks "
                    "started -> all done). CPU: the process (every thread, getrusage) over that time.")
        elif kind == "fire":
            head = (f"## Throughput: {KINDS[kind][0]}{at}\n\nEvery record sent without awaiting it, a callback "
                    f"counting its outcome; `await asyncio.sleep(0)` after each {args.window:,} records (the "
                    f"loop's other tasks run), then one `await p.flush()`; {per_client} (whole windows). Rate "
                    "= records / (first call -> flush() returned and every callback ran). CPU: the process "
                    "(every thread, getrusage) over that time.")
        elif kind == "arrow":
            head = (f"## Throughput: {KINDS[kind][0]}{at}\n\npyarrow `binary` arrays of {args.batch:,} values "
                    f"(built before the clock), each awaited before the next; {per_client} (whole arrays). "
                    "Rate = records / (first call -> last array delivered). CPU: the process (every thread, "
                    "getrusage) over that time.")
        elif kind == "gather":
            head = (f"## Throughput: {KINDS[kind][0]}{at}\n\nWindows of {args.window:,} sends awaited together; "
                    f"fastkafka {args.records:,} records, the others {args.slow_records:,} or what fits in "
                    f"{args.cap_seconds:g} s (whole windows; marked capped). Rate = records / (first send -> "
                    "last window's futures all done).")
        else:
            head = (f"## Throughput: {KINDS[kind][0]}{at}\n\nOne coroutine, the next record sent once the previous "
                    f"one completed, for {args.seconds:g} s. Rate = records / seconds.")
        lines += [head, "", *throughput_table(kind, results, names), ""]
    for kind in ("lat_busy", "lat_idle"):
        if not any(f"{c}_{kind}" in names for c in KINDS[kind][1]):
            continue
        app = (f"a second task on the loop runs pure-Python arithmetic in {args.busy_slice_us:g} µs slices, "
               "`await asyncio.sleep(0)` between them (app slices/s: the application's progress)"
               if kind == "lat_busy" else "nothing else on the loop; the sender sleeps until the next burst")
        lines += [f"## Latency at {args.rate:,.0f} records/s, event loop {kind[4:]}{at}", "",
                  f"Paced in bursts every {args.tick_us:g} µs, {args.warmup:g} s unmeasured then {args.seconds:g} s "
                  f"measured; {app}. Latency = completion on the loop − send call (perf_counter_ns); medians "
                  "over rounds. fastkafka ÷ this: fastkafka's send() future against this client."
                  + (" CPU per record: the process (every thread) over the measured records." if kind == "lat_idle"
                     else ""), "",
                  *latency_table(kind, results, names, args.rate), ""]
    if any(f"{c}_first" in names for c in KINDS["first"][1]):
        lines += [f"## {KINDS['first'][0][0].upper()}{KINDS['first'][0][1:]}{at}", "",
                  "The library imported first; a ticker on the loop from before the producer is made; "
                  "the producer made and started (open), one record sent to a topic it has no metadata "
                  "for and awaited until delivered (first send), the producer closed (close). Max stall: "
                  "the loop's longest gap beyond the ticker's 1 ms in each part (a stall spanning two parts "
                  "counts in each for its time in it). confluent-kafka's record is flushed (its buffer "
                  "timer would add about 1 s).", "", *first_table(results, names), ""]
    return lines


def render(report: dict, args, wall: float, broker_line: str) -> str:
    names, results = args.names, report["results"]
    lines = [
        "# asyncio producers: fastkafka AsyncProducer, aiokafka, confluent-kafka AIOProducer",
        "",
        f"`{command_line(args)}` — {time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s.",
        "",
        f"fastkafka at git {report.get('fastkafka_commit', '?')}. {args.size}-byte values, no key, a fresh "
        f"{args.partitions}-partition topic per measurement, acks=all, idempotence on, linger {args.linger_ms} ms for "
        "every client; each measurement in its own process, interleaved over "
        f"{args.rounds} rounds (order reversed in even rounds). Ratios: fastkafka's number over the "
        "client's, the median of the per-round ratios (records/s: above 1 means fastkafka is faster; "
        "latency: below 1 means fastkafka's is lower). The method is in the docstring of bench/aio.py.",
        "",
        "Noise: a 2-core machine shared with the broker and whatever else runs on it; compare the "
        "clients by the ratios, measured in the same rounds.",
        "",
        f"Event loop: {' and '.join(loop_name(lp) for lp in loops_of(args.loop))}"
        + (" (each measurement under both, in the same rounds). " if args.loop == "both" else ". ")
        + ("Max stall: a ticker task on the same loop sleeps 1 ms in turn over the timed part; a stall is "
           "the time between two of its turns beyond that 1 ms (how long the loop ran nothing else); the "
           "median over rounds of each run's longest, in brackets of each run's p99 gap. It is the loop's, "
           "not the producer's alone: with the application busy (lat_busy) it includes the application's "
           "slices, in tasks and gather the application's own tasks resuming together in a turn. The ticker "
           "costs CPU (the loop wakes up for it): CPU µs/record includes it; in brackets its share, at most "
           "(its ticks in the timed part × its CPU per tick measured on the idle loop in the same process "
           "just before)."
           if args.stall_ticker == "on" else
           "No stall ticker (`--stall-ticker off`): no stall figures; CPU per record without its cost."),
        "",
    ]
    loops = loops_of(args.loop)
    if len(loops) == 1:
        lines += shape_sections(results, names, args)
    else:
        for lp in loops:
            lines += shape_sections({n: results[run_key(n, lp, loops)] for n in names}, names, args, lp)
    lines += ["## Every round", ""]
    if report.get("warmup"):
        wname, wr = report["warmup"]
        lines += [f"Before the rounds, untimed: {wname} with {args.warmup_records:,} records: "
                  + ("FAILED: " + wr["failed"].replace("|", "/") if "failed" in wr else
                     f"{wr['rate']:,.0f} rec/s") + ".", ""]
    lines += [*rounds_table(results, list(results)), "",
              "Loop wake-ups: fastkafka's `metrics()` `aio_loop_wakeups` over the timed part (in brackets "
              "`aio_records_completed`, the records handed to the loop). Held by topic: latest − earliest "
              "offsets summed (confluent-kafka AdminClient), which must equal the records sent plus the "
              "warm-ups. Broker CPU: the broker process's CPU while the child ran (start and warm-up "
              "included), when its process is known.", "",
              *machine_lines(report.get("broker_line", "broker: ?"), report, args)]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--records", type=int, default=200_000, help="fastkafka's records per gather measurement")
    ap.add_argument("--slow-records", type=int, default=50_000,
                    help="the other clients' records per gather measurement")
    ap.add_argument("--window", type=int, default=1000,
                    help="sends awaited together (gather); records between the loop's turns (fire)")
    ap.add_argument("--tasks", type=int, default=1000, help="concurrent tasks (tasks)")
    ap.add_argument("--stall-ticker", choices=("on", "off"), default="on",
                    help="the 1 ms loop-stall ticker in every measurement (off: no stall figures, no "
                         "ticker CPU in the CPU per record)")
    ap.add_argument("--batch", type=int, default=10_000, help="values per Arrow array (arrow)")
    ap.add_argument("--cap-seconds", type=float, default=10.0,
                    help="a gather run stops after the window that passes this many seconds")
    ap.add_argument("--seconds", type=float, default=5.0,
                    help="the serial measurements' time budget and the latency measurements' measured part")
    ap.add_argument("--warmup", type=float, default=1.0, help="paced seconds before the measured latency part")
    ap.add_argument("--rate", type=float, default=20_000, help="paced records/s of the latency measurements")
    ap.add_argument("--tick-us", type=float, default=1000.0, help="µs between bursts (latency)")
    ap.add_argument("--busy-slice-us", type=float, default=200.0,
                    help="µs of pure-Python work per slice of the busy application task")
    ap.add_argument("--size", type=int, default=100, help="value bytes")
    ap.add_argument("--linger-ms", type=int, default=5,
                    help="linger.ms of every client (5: fastkafka's and confluent-kafka's default; "
                         "0: aiokafka's)")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--warmup-records", type=int, default=50_000,
                    help="records of the untimed broker warm-up before the rounds (0: none)")
    ap.add_argument("--only", default="", help="comma-separated measurements, clients or kinds: "
                    + ", ".join(MEASUREMENTS))
    ap.add_argument("--loop", choices=("asyncio", "uvloop", "both"), default="asyncio",
                    help="event loop of the children (both: every measurement under each, in the same rounds)")
    ap.add_argument("--fastkafka-path", default=ROOT, metavar="DIR",
                    help="import fastkafka in the children from this source tree (extensions built in place)")
    ap.add_argument("--bootstrap-servers", default=None, help="use this broker instead of starting one")
    ap.add_argument("--broker-pid", type=int, default=None,
                    help="with --bootstrap-servers: the broker's process id (CPU report, idle wait)")
    ap.add_argument("--kafka-heap-mb", type=int, default=None, help="heap of the started broker (default: the rig's)")
    ap.add_argument("--timeout", type=float, default=180.0, help="per-measurement limit, seconds")
    ap.add_argument("--out", default=RESULTS, help="results file (default %(default)s); '-' prints only")
    ap.add_argument("--_child", nargs=3, metavar=("NAME", "BOOTSTRAP", "TOPIC"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    aio_clients.LINGER_MS = args.linger_ms       # the clients read it from their module
    aio_clients.TICKER = args.stall_ticker == "on"
    args.fastkafka_path = os.path.abspath(args.fastkafka_path)
    args.names = select(args.only)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._child:
        name, bootstrap, topic = args._child
        r = child(name, bootstrap, topic, args)
        print(result_line(r), flush=True)
        return 0
    if not os.path.isdir(os.path.join(args.fastkafka_path, "fastkafka")):
        raise SystemExit("--fastkafka-path: no fastkafka/ package in that directory")
    if any(split_name(n)[0] in FASTKAFKA for n in args.names) and not os.path.exists(
            os.path.join(args.fastkafka_path, "fastkafka", "aio.py")):
        raise SystemExit("fastkafka/aio.py (AsyncProducer) is not in the fastkafka tree; "
                         "measure the others with --only aiok,ck,ckf")
    if "uvloop" in loops_of(args.loop):
        try:
            import uvloop  # noqa: F401
        except ImportError:
            raise SystemExit("--loop uvloop: uvloop is not installed") from None

    wall0 = time.monotonic()
    broker = None
    if args.bootstrap_servers:
        bootstrap, broker_pid = args.bootstrap_servers, args.broker_pid
        broker_line = f"broker: {bootstrap} (given with --bootstrap-servers)"
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        kw = {"heap_mb": args.kafka_heap_mb} if args.kafka_heap_mb else {}
        broker = KafkaCluster(nodes=1, jit="full", properties=BROKER_PROPERTIES, **kw).start(timeout=180)
        bootstrap, broker_pid = broker.bootstrap, broker.pid
        broker_line = kafka_run_line(broker.version, broker.heap_mb, "full", broker.data_place)
    try:
        report = run_benchmark(bootstrap, args, log=lambda s: print(s, flush=True), broker_pid=broker_pid)
    finally:
        if broker is not None:
            broker.stop()
    report["broker_line"] = broker_line
    text = render(report, args, time.monotonic() - wall0, broker_line)
    emit(text, None if args.out == "-" else args.out)
    return 0 if all("failed" not in r for rs in report["results"].values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
