"""asyncio producers on one Apache Kafka broker: fastkafka's ``AsyncProducer`` (``fastkafka.aio``)
against aiokafka's ``AIOKafkaProducer`` and confluent-kafka's ``AIOProducer`` (``confluent_kafka.aio``),
in the same run: throughput with 1,000 sends awaited together, throughput of one task awaiting each
send in turn, and per-record latency on a paced event loop that is busy or idle.

    python bench/aio.py [--rounds 3] [--records 200000] [--slow-records 50000] [--window 1000]
                        [--cap-seconds 10] [--seconds 5] [--warmup 1] [--rate 20000] [--tick-us 1000]
                        [--busy-slice-us 200] [--size 100] [--partitions 6] [--warmup-records 50000]
                        [--only NAME,...] [--loop asyncio|uvloop] [--fastkafka-path DIR]
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

Measurements (``--only`` takes names, clients or kinds: ``fk,ck``, ``gather``, ``lat_busy``, ...):

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

fastkafka's ``metrics()`` gives the event loop's wake-ups (``aio_loop_wakeups``) and the records
handed to it (``aio_records_completed``); their differences over the timed part give loop wake-ups
per record.

Each measurement runs in its own child process (fresh interpreter, ``--loop`` event loop) against a
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
import asyncio
import contextlib
import functools
import json
import os
import platform
import resource
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

import e2e  # noqa: E402
import latency  # noqa: E402
import partitions  # noqa: E402

RESULTS = os.path.join(HERE, "results", "aio.md")
LINGER_MS = 5

#: client key -> (name in tables, how a record completes)
CLIENTS = {
    "fk": ("fastkafka AsyncProducer", "send() future"),
    "fkp": ("fastkafka AsyncProducer produce()", "on_delivery callback on the loop"),
    "aiok": ("aiokafka", "send() future"),
    "fka": ("fastkafka.compat.aiokafka (aiokafka's code, import changed)", "send() future"),
    "ck": ("confluent-kafka AIOProducer", "produce() future"),
    "ckf": ("confluent-kafka AIOProducer + flush()", "produce() future"),
}
FASTKAFKA = ("fk", "fkp")
#: kind -> (title, clients measured, in order)
KINDS = {
    "gather": ("1,000 sends awaited together", ("fk", "aiok", "fka", "ck", "ckf")),
    "serial": ("one task awaiting each send in turn", ("fk", "aiok", "fka", "ck", "ckf")),
    "lat_busy": ("latency, event loop busy", ("fk", "fkp", "aiok", "ck")),
    "lat_idle": ("latency, event loop idle", ("fk", "fkp", "aiok", "ck")),
}
#: the code timed per record / window, per kind and client (for the tables)
LOOP_CODE = {
    ("gather", "fk"): "`await gather(*[p.send(t, v) for v in window])`",
    ("gather", "aiok"): "`futs = [await p.send(t, v) for v in window]; await gather(*futs)`",
    ("gather", "fka"): "`futs = [await p.send(t, v) for v in window]; await gather(*futs)`",
    ("gather", "ck"): "`futs = [await p.produce(t, v) for v in window]; await gather(*futs)`",
    ("gather", "ckf"): "`futs = [await p.produce(t, v) for v in window]; await p.flush(); await gather(*futs)`",
    ("serial", "fk"): "`await p.send(t, v)`",
    ("serial", "aiok"): "`await p.send_and_wait(t, v)`",
    ("serial", "fka"): "`await p.send_and_wait(t, v)`",
    ("serial", "ck"): "`await (await p.produce(t, v))`",
    ("serial", "ckf"): "`f = await p.produce(t, v); await p.flush(); await f`",
}
MEASUREMENTS = [f"{c}_{k}" for k, (_, cs) in KINDS.items() for c in cs]
KEPT_UP = latency.KEPT_UP


# ------------------------------------------------------------------------------------ pure helpers
def split_name(name: str) -> tuple[str, str]:
    """``"fk_lat_busy"`` -> ``("fk", "lat_busy")``."""
    client, _, kind = name.partition("_")
    return client, kind


def select(only: str) -> list[str]:
    """The measurements ``--only`` picks, in the fixed order of MEASUREMENTS. Each comma-separated
    token is a measurement name (``fk_gather``), a client (``fk``, ``aiok``: all its measurements) or
    a kind (``gather``, ``serial``, ``lat_busy``, ``lat_idle``, ``lat``: both latencies). Empty:
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


def windows(n: int, size: int) -> list[tuple[int, int]]:
    """``[(start, end), ...]`` covering ``range(n)`` in windows of ``size`` (the last may be short)."""
    if size < 1:
        raise ValueError("window size must be >= 1")
    return [(i, min(i + size, n)) for i in range(0, n, size)]


def count_errors(results) -> int:
    """Exceptions among ``asyncio.gather(..., return_exceptions=True)`` results."""
    return sum(1 for r in results if isinstance(r, BaseException))


def future_error(fut):
    """A done future's error: its exception, a CancelledError when cancelled, None on success."""
    if fut.cancelled():
        return asyncio.CancelledError()
    return fut.exception()


def burn_for(ns: int, clock=time.perf_counter_ns) -> int:
    """One slice of the busy application: pure-Python arithmetic (holding the GIL) for ``ns``
    nanoseconds of ``clock``. Returns the inner loop's iterations."""
    return latency.burn_until(clock() + ns, clock)


async def paced(send, rate: float, seconds: float, tick_ns: int, wait, clock=time.perf_counter_ns,
                limit_s: float | None = None):
    """``await send(i, t_ns)`` at ``rate`` per second for ``seconds``, in bursts every ``tick_ns``:
    each burst sends what is due (``latency.due``: a late burst catches up), then ``await
    wait(next_tick_ns)``. The asyncio form of bench/latency.py's ``paced_run``. A client that cannot
    keep the pace is stopped once ``limit_s`` seconds have passed (default: no limit), short of the
    records due. Returns (records sent, first send ns, last send ns)."""
    start = clock()
    end = start + int(seconds * 1e9)
    stop = start + int(limit_s * 1e9) if limit_s is not None else None
    total = int(rate * seconds)
    sent = 0
    first = last = start
    tick = start
    while sent < total:
        now = clock()
        if stop is not None and now >= stop:
            break
        n = min(latency.due(rate, now - start, sent), total - sent)
        for _ in range(n):
            t = clock()
            if stop is not None and t >= stop:   # a catch-up burst too
                return sent, first, last
            if sent == 0:
                first = t
            await send(sent, t)
            last = t
            sent += 1
        tick += tick_ns
        if tick < now:  # behind: the next burst at once, catching up through due()
            tick = now
        if sent < total:
            await wait(min(tick, end))
    return sent, first, last


def pace_limit(seconds: float) -> float:
    """When a paced run that should take ``seconds`` is stopped (a client far behind the pace):
    twice its time plus 1 s."""
    return 2 * seconds + 1.0


def achieved_rate(sent: int, first_ns: int, last_ns: int, due: int | None = None, begin_ns: int = 0,
                  end_ns: int = 0) -> float:
    """Records per second between the first and the last send (0 with fewer than two); for a run
    stopped short of the ``due`` records, records / (its start ``begin_ns`` -> its stop ``end_ns``),
    since its last send may have come long before the stop (a send that blocked)."""
    if due is not None and sent < due and end_ns > begin_ns:
        return sent / ((end_ns - begin_ns) / 1e9)
    return (sent - 1) / ((last_ns - first_ns) / 1e9) if sent > 1 and last_ns > first_ns else 0.0


def counter_delta(m0: dict | None, m1: dict | None, key: str):
    """``m1[key] - m0[key]`` of two metrics() snapshots; None when either lacks it."""
    if not m0 or not m1 or key not in m0 or key not in m1:
        return None
    return m1[key] - m0[key]


def per_record(x, records: int):
    return x / records if x is not None and records else None


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


def per_round_ratios(a: list[dict], b: list[dict], field: str) -> list[float | None]:
    """Round by round, a's ``field`` over b's (None where either failed or b's is 0/None)."""
    return [ra[field] / rb[field] if "failed" not in ra and "failed" not in rb and ra.get(field) is not None
            and rb.get(field) else None for ra, rb in zip(a, b)]


def med(values):
    """Median of ``values``; None when empty or any is None (a failed round)."""
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return statistics.median(vals)


def med_field(rs: list[dict], field: str):
    """Median of ``field`` over the rounds; None when a round failed or lacks it."""
    return med([None if "failed" in r else r.get(field) for r in rs]) if rs else None


def fmt(x, spec: str = ".2f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


def round_order(names: list[str], rnd: int) -> list[str]:
    return partitions.round_order(names, rnd)


def peers_of(kind: str, names: list[str]) -> list[str]:
    """The non-fastkafka clients of ``kind`` among ``names``."""
    return [c for c in KINDS[kind][1] if c not in FASTKAFKA and f"{c}_{kind}" in names]


def fastkafka_of(kind: str, names: list[str]) -> list[str]:
    return [c for c in KINDS[kind][1] if c in FASTKAFKA and f"{c}_{kind}" in names]


# ------------------------------------------------------------------------------------ clients (child)
class Client:
    """One producer library behind the calls the measurements make. The timed loops call these
    methods the same way for every client; what each does is the library's own documented use."""

    key = "?"

    def __init__(self, bootstrap: str):
        self.bootstrap = bootstrap
        self.p = None

    async def open(self, stack) -> None:
        raise NotImplementedError

    async def warm(self, topic: str) -> None:
        """One record delivered (connection, metadata, producer id), before any clock."""
        raise NotImplementedError

    async def window(self, topic: str, chunk: list) -> list:
        """Send every value of ``chunk``, await them together; gather's results (exceptions kept)."""
        raise NotImplementedError

    async def one(self, topic: str, value) -> None:
        """Send one record and await its delivery."""
        raise NotImplementedError

    async def submit(self, topic: str, value, t_send: int, done) -> None:
        """Send one record; ``done(t_send, err)`` runs on the loop when it completes."""
        fut = await self._send_future(topic, value)
        fut.add_done_callback(functools.partial(_future_done, done, t_send))

    async def _send_future(self, topic: str, value):
        raise NotImplementedError

    async def flush(self) -> None:
        await self.p.flush()

    def metrics(self) -> dict | None:
        return None


def _future_done(done, t_send: int, fut) -> None:
    done(t_send, future_error(fut))


class FastkafkaClient(Client):
    key = "fk"

    async def open(self, stack) -> None:
        from fastkafka.aio import AsyncProducer

        self.p = await stack.enter_async_context(AsyncProducer(
            bootstrap_servers=self.bootstrap, linger_ms=LINGER_MS, acks="all", enable_idempotence=True))

    async def warm(self, topic: str) -> None:
        await self.p.send(topic, b"warm-up")

    async def window(self, topic: str, chunk: list) -> list:
        send = self.p.send
        return await asyncio.gather(*[send(topic, v) for v in chunk], return_exceptions=True)

    async def one(self, topic: str, value) -> None:
        await self.p.send(topic, value)

    async def _send_future(self, topic: str, value):
        return self.p.send(topic, value)

    def metrics(self) -> dict | None:
        return dict(self.p.metrics())


class FastkafkaProduceClient(FastkafkaClient):
    """fastkafka's non-awaiting produce(); on_delivery runs on the event loop."""

    key = "fkp"

    async def submit(self, topic: str, value, t_send: int, done) -> None:
        self.p.produce(topic, value, on_delivery=functools.partial(_delivery_done, done, t_send))


def _delivery_done(done, t_send: int, err, _md) -> None:
    done(t_send, err)


class AiokafkaClient(Client):
    key = "aiok"

    async def open(self, stack) -> None:
        from aiokafka import AIOKafkaProducer

        self.p = await stack.enter_async_context(AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=LINGER_MS, acks="all", enable_idempotence=True))

    async def warm(self, topic: str) -> None:
        await self.p.send_and_wait(topic, b"warm-up")

    async def window(self, topic: str, chunk: list) -> list:
        send = self.p.send
        futs = [await send(topic, v) for v in chunk]
        return await asyncio.gather(*futs, return_exceptions=True)

    async def one(self, topic: str, value) -> None:
        await self.p.send_and_wait(topic, value)

    async def _send_future(self, topic: str, value):
        return await self.p.send(topic, value)


class LayerAiokafkaClient(AiokafkaClient):
    """aiokafka's code with only the import changed: fastkafka.compat.aiokafka.AIOKafkaProducer."""

    key = "fka"

    async def open(self, stack) -> None:
        from fastkafka.compat.aiokafka import AIOKafkaProducer

        self.p = await stack.enter_async_context(AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=LINGER_MS, acks="all", enable_idempotence=True))


class ConfluentClient(Client):
    key = "ck"

    async def open(self, stack) -> None:
        from confluent_kafka.aio import AIOProducer

        self.p = await stack.enter_async_context(AIOProducer(
            {"bootstrap.servers": self.bootstrap, "acks": "all", "enable.idempotence": True,
             "linger.ms": LINGER_MS}))

    async def warm(self, topic: str) -> None:
        fut = await self.p.produce(topic, b"warm-up")
        await self.p.flush()   # untimed: not the ~1 s buffer timeout
        await fut

    async def window(self, topic: str, chunk: list) -> list:
        produce = self.p.produce
        futs = [await produce(topic, v) for v in chunk]
        return await asyncio.gather(*futs, return_exceptions=True)

    async def one(self, topic: str, value) -> None:
        await (await self.p.produce(topic, value))

    async def _send_future(self, topic: str, value):
        return await self.p.produce(topic, value)


class ConfluentFlushClient(ConfluentClient):
    """confluent-kafka's AIOProducer with ``await flush()`` before its futures are awaited."""

    key = "ckf"

    async def window(self, topic: str, chunk: list) -> list:
        produce = self.p.produce
        futs = [await produce(topic, v) for v in chunk]
        await self.p.flush()
        return await asyncio.gather(*futs, return_exceptions=True)

    async def one(self, topic: str, value) -> None:
        fut = await self.p.produce(topic, value)
        await self.p.flush()
        await fut


CLIENT_CLASSES = {c.key: c for c in (FastkafkaClient, FastkafkaProduceClient, AiokafkaClient,
                                     LayerAiokafkaClient, ConfluentClient, ConfluentFlushClient)}


#: The I/O thread's counters (fastkafka's metrics()) kept per run in the RESULT line.
_IO_COUNTERS = ("io_waits", "io_gil_free_turns", "io_slow_gil_waits", "io_gil_wait_ms_total",
                "gil_handovers", "aio_gil_pokes", "aio_turn_handovers")


def _fk_counters(m0, m1, records: int) -> dict:
    """fastkafka's loop counters over the timed part (None for the other clients)."""
    wake = counter_delta(m0, m1, "aio_loop_wakeups")
    done = counter_delta(m0, m1, "aio_records_completed")
    io = {k: counter_delta(m0, m1, k) for k in _IO_COUNTERS}
    return {"loop_wakeups": wake, "records_completed_on_loop": done,
            "wakeups_per_record": per_record(wake, records), "io_thread": io}


async def run_gather(c: Client, topic: str, values: list, window: int, cap_s: float) -> dict:
    await c.warm(topic)
    m0 = c.metrics()
    completed = errors = 0
    first_error = None
    n = 0
    c0, t0 = time.process_time(), time.perf_counter()
    for a, b in windows(len(values), window):
        res = await c.window(topic, values[a:b])
        bad = count_errors(res)
        if bad and first_error is None:
            first_error = repr(next(r for r in res if isinstance(r, BaseException)))[:200]
        errors += bad
        completed += len(res) - bad
        n = b
        if time.perf_counter() - t0 >= cap_s:
            break
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    m1 = c.metrics()
    return {"records": n, "asked": len(values), "capped": n < len(values), "seconds": elapsed,
            "completed": completed, "errors": errors, "first_error": first_error, "total_sent": n + 1,
            "rate": n / elapsed, "cpu_us_per_record": cpu / n * 1e6 if n else None,
            **_fk_counters(m0, m1, n)}


async def run_serial(c: Client, topic: str, values: list, seconds: float) -> dict:
    await c.warm(topic)
    m0 = c.metrics()
    nvals = len(values)
    n = errors = 0
    first_error = None
    c0, t0 = time.process_time(), time.perf_counter()
    end = t0 + seconds
    while True:
        try:
            await c.one(topic, values[n % nvals])
        except Exception as e:  # noqa: BLE001 - counted and reported as the measurement's failure
            errors += 1
            first_error = first_error or repr(e)[:200]
        n += 1
        if time.perf_counter() >= end:
            break
    elapsed = time.perf_counter() - t0
    cpu = time.process_time() - c0
    m1 = c.metrics()
    return {"records": n, "seconds": elapsed, "completed": n - errors, "errors": errors,
            "first_error": first_error, "total_sent": n + 1, "rate": n / elapsed,
            "cpu_us_per_record": cpu / n * 1e6, **_fk_counters(m0, m1, n)}


async def run_latency(c: Client, topic: str, values: list, args, busy: bool) -> dict:
    clock = time.perf_counter_ns
    nvals = len(values)
    lat: list[int] = []
    st = {True: 0, False: 0, "errors": 0, "first_error": None}   # completions: measured, warm-up

    def record(keep: bool, t_send: int, err) -> None:
        if keep:
            lat.append(clock() - t_send)
        st[keep] += 1
        if err is not None:
            st["errors"] += 1
            if st["first_error"] is None:
                st["first_error"] = repr(err)[:200]

    measured = functools.partial(record, True)
    warm = functools.partial(record, False)

    def sender(done):
        async def send(i, t):
            await c.submit(topic, values[i % nvals], t, done)
        return send

    async def wait(deadline):
        left = deadline - clock()
        await asyncio.sleep(left / 1e9 if left > 0 else 0)

    stop = [False]
    slices = [0]
    slice_ns = int(args.busy_slice_us * 1000)

    async def application():
        while not stop[0]:
            burn_for(slice_ns, clock)
            slices[0] += 1
            await asyncio.sleep(0)

    await c.warm(topic)
    app = asyncio.get_running_loop().create_task(application()) if busy else None
    tick_ns = int(args.tick_us * 1000)
    warm_sent = 0
    if args.warmup > 0:
        warm_sent, _, _ = await paced(sender(warm), args.rate, args.warmup, tick_ns, wait, clock,
                                      pace_limit(args.warmup))
    m0 = c.metrics()
    s0 = slices[0]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    begin = clock()
    sent, first, last = await paced(sender(measured), args.rate, args.seconds, tick_ns, wait, clock,
                                    pace_limit(args.seconds))
    end = clock()
    s1 = slices[0]
    app_seconds = (clock() - first) / 1e9
    await c.flush()
    deadline = time.monotonic() + 60
    while (st[True] < sent or st[False] < warm_sent) and time.monotonic() < deadline:
        await asyncio.sleep(0.001)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    m1 = c.metrics()
    stop[0] = True
    if app is not None:
        await app
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    due = int(args.rate * args.seconds)
    r = {"records": sent, "due": due, "completed": st[True], "errors": st["errors"],
         "first_error": st["first_error"], "total_sent": 1 + warm_sent + sent,
         "achieved": achieved_rate(sent, first, last, due, begin, end),
         "cpu_us_per_record": cpu / sent * 1e6 if sent and not busy else None,
         "app_slices_per_s": (s1 - s0) / app_seconds if busy and app_seconds > 0 else None,
         **_fk_counters(m0, m1, sent)}
    if len(lat) == sent and lat:
        r.update(latency.summarize(lat))
    return r


async def child_main(name: str, bootstrap: str, topic: str, args) -> dict:
    client, kind = split_name(name)
    c = CLIENT_CLASSES[client](bootstrap)
    async with contextlib.AsyncExitStack() as stack:
        await c.open(stack)
        if kind == "gather":
            n = args.records if client in FASTKAFKA else args.slow_records
            r = await run_gather(c, topic, e2e.make_values(n, args.size), args.window, args.cap_seconds)
        elif kind == "serial":
            r = await run_serial(c, topic, e2e.make_values(1024, args.size), args.seconds)
        else:
            r = await run_latency(c, topic, e2e.make_values(1024, args.size), args, kind == "lat_busy")
    return r


def run_loop(coro_factory, loop_kind: str):
    """Run ``coro_factory()`` on a fresh event loop of ``loop_kind`` (asyncio's default or uvloop)."""
    if loop_kind == "uvloop":
        import uvloop

        with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
            return runner.run(coro_factory())
    return asyncio.run(coro_factory())


def child(name: str, bootstrap: str, topic: str, args) -> dict:
    if split_name(name)[0] in FASTKAFKA + ("fka",):
        partitions.import_fastkafka_from(args.fastkafka_path)
    return run_loop(lambda: child_main(name, bootstrap, topic, args), args.loop)


# ------------------------------------------------------------------------------------ parent
def child_cmd(name: str, bootstrap: str, topic: str, args, records: int | None = None) -> list[str]:
    return [sys.executable, os.path.abspath(__file__), "--_child", name, bootstrap, topic,
            "--records", str(records or args.records), "--slow-records", str(records or args.slow_records),
            "--window", str(args.window), "--cap-seconds", str(args.cap_seconds),
            "--seconds", str(args.seconds), "--warmup", str(args.warmup), "--rate", str(args.rate),
            "--tick-us", str(args.tick_us), "--busy-slice-us", str(args.busy_slice_us),
            "--size", str(args.size), "--loop", args.loop, "--fastkafka-path", args.fastkafka_path,
            "--linger-ms", str(args.linger_ms)]


def measure(topics, name: str, topic: str, args, broker_pid: int | None, records: int | None = None) -> dict:
    """A fresh topic, the broker left to go idle, one child process, the checks, the topic deleted."""
    try:
        topics.create([topic], args.partitions)
    except Exception as e:  # noqa: BLE001 - reported as the measurement's failure
        return {"failed": f"creating the topic: {type(e).__name__}: {e}", "load": os.getloadavg()[0]}
    partitions.settle(broker_pid)
    b0 = partitions.process_cpu_s(broker_pid)
    r = partitions.run_child(child_cmd(name, topics.bootstrap, topic, args, records), args.timeout,
                             partitions.child_env(args.fastkafka_path))
    b1 = partitions.process_cpu_s(broker_pid)
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
    if kind.startswith("lat"):
        app = f"  app slices/s {r['app_slices_per_s']:,.0f}" if r.get("app_slices_per_s") is not None else ""
        cpu = f"  cpu {r['cpu_us_per_record']:.1f} us/rec" if r.get("cpu_us_per_record") is not None else ""
        return (f"achieved {r['achieved']:>8,.0f}/s  p50 {r['p50']:8.2f}  p99 {r['p99']:8.2f}  "
                f"max {r['max']:8.2f} ms{cpu}{app}{extra}")
    return (f"{r['rate']:>10,.1f} rec/s  {r['records']:,} records in {r['seconds']:.2f} s"
            f"{' (capped)' if r.get('capped') else ''}  cpu {r['cpu_us_per_record']:.1f} us/rec{extra}")


def run_benchmark(bootstrap: str, args, log=print, broker_pid: int | None = None) -> dict:
    topics = partitions.Topics(bootstrap)
    run_id = uuid.uuid4().hex[:6]
    names = args.names
    fingerprint = partitions.build_fingerprint(args.fastkafka_path)
    out = {"results": {n: [] for n in names}, "warmup": None, "loads": [os.getloadavg()[0]],
           "fastkafka_commit": partitions.tree_commit(args.fastkafka_path),
           "fastkafka_is_repo": os.path.realpath(args.fastkafka_path) == os.path.realpath(ROOT)}
    libs = {split_name(n)[0].replace("fkp", "fk").replace("ckf", "ck") for n in names}
    first = next((c for c in ("fk", "aiok", "ck") if c in libs), None)
    if args.warmup_records and first:
        name = f"{first}_gather"
        r = measure(topics, name, f"aio-{run_id}-warmup", args, broker_pid, args.warmup_records)
        out["warmup"] = (name, r)
        log(f"warm-up  {name:<14} {log_line(name, r)}")
    for rnd in range(1, args.rounds + 1):
        for order, name in enumerate(round_order(names, rnd)):
            r = measure(topics, name, f"aio-{run_id}-{name}-r{rnd}".replace("_", "-"), args, broker_pid)
            r["round"], r["order"] = rnd, order
            out["results"][name].append(r)
            out["loads"].append(r["load"])
            log(f"round {rnd} {name:<14} {log_line(name, r)}")
    out["rebuilt_during_run"] = partitions.build_fingerprint(args.fastkafka_path) != fingerprint
    return out


# ------------------------------------------------------------------------------------ report
def _rounds_cell(rs: list[dict], show) -> str:
    return ", ".join("FAILED" if "failed" in r else show(r) for r in rs)


def _why(rs: list[dict]) -> str:
    why = next((r["failed"] for r in rs if "failed" in r), None)
    return f" ({why.replace('|', '/')})" if why else ""


def throughput_table(kind: str, results: dict[str, list[dict]], names: list[str]) -> list[str]:
    """One row per client of ``kind`` (gather or serial): median records/s, fastkafka's median
    per-round ratio to it, records per run, CPU per record, fastkafka's loop wake-ups per record."""
    fks = fastkafka_of(kind, names)
    fk = fks[0] if fks else None
    lines = ["| client | loop | median records/s | fastkafka ÷ this (median of per-round) | per-round ratios "
             "| records per run | CPU µs/record | loop wake-ups/record | rounds (records/s) |",
             "|---|---|---:|---:|---|---:|---:|---:|---|"]
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
        rate = fmt(med_field(rs, "rate"), ",.0f" if kind == "gather" else ",.1f", "FAILED")
        lines.append(
            f"| {label} | {LOOP_CODE[(kind, c)]} | {rate} | {ratio} | {per} "
            f"| {fmt(recs, ',.0f')}{' (capped)' if capped else ''} "
            f"| {fmt(med_field(rs, 'cpu_us_per_record'), ',.1f')} | {fmt(med_field(rs, 'wakeups_per_record'), '.3f')} "
            f"| {_rounds_cell(rs, lambda r: format(r['rate'], ',.1f'))}{_why(rs)} |")
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
             "| loop wake-ups/record | rounds p50 / p99 ms |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|"]
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
            f"| {fmt(med_field(rs, 'cpu_us_per_record'), '.1f')} "
            f"| {fmt(med_field(rs, 'wakeups_per_record'), '.3f')} "
            f"| {_rounds_cell(rs, lambda r: format(r['p50'], '.2f') + ' / ' + format(r['p99'], '.2f'))}{_why(rs)} |")
    return lines


def rounds_table(results: dict[str, list[dict]], names: list[str]) -> list[str]:
    lines = ["| round | measurement | records | result | CPU µs/record | loop wake-ups (records on loop) "
             "| broker CPU s | held by topic | load |",
             "|---:|---|---:|---|---:|---|---:|---:|---:|"]
    rows = sorted(((r.get("round", i + 1), r.get("order", 0), n, r) for n in names
                   for i, r in enumerate(results[n])), key=lambda x: (x[0], x[1]))
    for rnd, _, n, r in rows:
        if "failed" in r:
            res = "FAILED: " + r["failed"].replace("|", "/")
        elif split_name(n)[1].startswith("lat"):
            res = f"{r['achieved']:,.0f} rec/s, p50 {r['p50']:.2f} / p99 {r['p99']:.2f} / max {r['max']:.2f} ms"
            if r.get("due") and r["records"] < r["due"]:
                res += f" (stopped after {r['records']:,} of {r['due']:,} due)"
        else:
            res = f"{r['rate']:,.1f} rec/s in {r['seconds']:.2f} s" + (" (capped)" if r.get("capped") else "")
        wake = (f"{r['loop_wakeups']:,} ({r['records_completed_on_loop']:,})"
                if r.get("loop_wakeups") is not None and r.get("records_completed_on_loop") is not None else "")
        lines.append(f"| {rnd} | {n} | {fmt(r.get('records'), ',', '')} | {res} "
                     f"| {fmt(r.get('cpu_us_per_record'), '.1f', '')} | {wake} "
                     f"| {fmt(r.get('broker_cpu_s'), '.2f', '')} | {fmt(r.get('held'), ',', '')} "
                     f"| {fmt(r.get('load'), '.2f', '')} |")
    return lines


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
    if args.loop == "uvloop":
        loop = f"uvloop {md.version('uvloop')}"
    else:
        loop = "asyncio's default (selector) event loop"
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
           f"--warmup-records {args.warmup_records} --loop {args.loop} --linger-ms {args.linger_ms}")
    if args.names != MEASUREMENTS:
        cmd += f" --only {','.join(args.names)}"
    return cmd


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
    ]
    for kind in ("gather", "serial"):
        if not any(f"{c}_{kind}" in names for c in KINDS[kind][1]):
            continue
        if kind == "gather":
            head = (f"## Throughput: {KINDS[kind][0]}\n\nWindows of {args.window:,} sends awaited together; "
                    f"fastkafka {args.records:,} records, the others {args.slow_records:,} or what fits in "
                    f"{args.cap_seconds:g} s (whole windows; marked capped). Rate = records / (first send -> "
                    "last window's futures all done).")
        else:
            head = (f"## Throughput: {KINDS[kind][0]}\n\nOne coroutine, the next record sent once the previous "
                    f"one completed, for {args.seconds:g} s. Rate = records / seconds.")
        lines += [head, "", *throughput_table(kind, results, names), ""]
    for kind in ("lat_busy", "lat_idle"):
        if not any(f"{c}_{kind}" in names for c in KINDS[kind][1]):
            continue
        app = (f"a second task on the loop runs pure-Python arithmetic in {args.busy_slice_us:g} µs slices, "
               "`await asyncio.sleep(0)` between them (app slices/s: the application's progress)"
               if kind == "lat_busy" else "nothing else on the loop; the sender sleeps until the next burst")
        lines += [f"## Latency at {args.rate:,.0f} records/s, event loop {kind[4:]}", "",
                  f"Paced in bursts every {args.tick_us:g} µs, {args.warmup:g} s unmeasured then {args.seconds:g} s "
                  f"measured; {app}. Latency = completion on the loop − send call (perf_counter_ns); medians "
                  "over rounds. fastkafka ÷ this: fastkafka's send() future against this client."
                  + (" CPU per record: the process (every thread) over the measured records." if kind == "lat_idle"
                     else ""), "",
                  *latency_table(kind, results, names, args.rate), ""]
    lines += ["## Every round", ""]
    if report.get("warmup"):
        wname, wr = report["warmup"]
        lines += [f"Before the rounds, untimed: {wname} with {args.warmup_records:,} records: "
                  + ("FAILED: " + wr["failed"].replace("|", "/") if "failed" in wr else
                     f"{wr['rate']:,.0f} rec/s") + ".", ""]
    lines += [*rounds_table(results, names), "",
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
    ap.add_argument("--window", type=int, default=1000, help="sends awaited together (gather)")
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
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio", help="event loop of the children")
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
    global LINGER_MS
    LINGER_MS = args.linger_ms
    args.fastkafka_path = os.path.abspath(args.fastkafka_path)
    args.names = select(args.only)
    return args


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._child:
        name, bootstrap, topic = args._child
        r = child(name, bootstrap, topic, args)
        print("RESULT " + json.dumps(r), flush=True)
        return 0
    if not os.path.isdir(os.path.join(args.fastkafka_path, "fastkafka")):
        raise SystemExit("--fastkafka-path: no fastkafka/ package in that directory")
    if any(split_name(n)[0] in FASTKAFKA for n in args.names) and not os.path.exists(
            os.path.join(args.fastkafka_path, "fastkafka", "aio.py")):
        raise SystemExit("fastkafka/aio.py (AsyncProducer) is not in the fastkafka tree; "
                         "measure the others with --only aiok,ck,ckf")
    if args.loop == "uvloop":
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
        broker = KafkaCluster(nodes=1, jit="full", properties=partitions.BROKER_PROPERTIES, **kw).start(timeout=180)
        bootstrap, broker_pid = broker.bootstrap, broker.pid
        broker_line = partitions.kafka_line(broker.version, broker.heap_mb, "full", broker.data_place)
    try:
        report = run_benchmark(bootstrap, args, log=lambda s: print(s, flush=True), broker_pid=broker_pid)
    finally:
        if broker is not None:
            broker.stop()
    report["broker_line"] = broker_line
    text = render(report, args, time.monotonic() - wall0, broker_line)
    e2e.emit(text, None if args.out == "-" else args.out)
    return 0 if all("failed" not in r for rs in report["results"].values() for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
