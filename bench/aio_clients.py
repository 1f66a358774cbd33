"""The clients and measurements of ``bench/aio.py``, run in its child processes (``python bench/aio.py
--_child NAME BOOTSTRAP TOPIC ...``): the catalogue (``CLIENTS``, ``KINDS``, ``MEASUREMENTS``), one
``Client`` per library behind the same calls, the timed loops (``run_gather``, ``run_serial``,
``run_latency``, ``run_tasks``, ``run_fire``, ``run_arrow``, ``run_first``) and the loop-stall ticker
(``StallTicker``) that runs on the same loop in every one of them. The method is in ``bench/aio.py``'s
docstring."""
from __future__ import annotations

import asyncio
import contextlib
import functools
import importlib
import math
import resource
import time

from e2e_measure import make_values
from harness import cpu_us_per_record, import_fastkafka_from, per_record
from pacing import burn_until, due, summarize

LINGER_MS = 5
#: the loop-stall ticker runs in every measurement (``--stall-ticker``)
TICKER = True

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
    "tasks": ("1,000 tasks each awaiting its own sends", ("fk", "aiok", "ck")),
    "fire": ("fire-and-forget with callbacks, then one flush()", ("fk", "aiok", "ck")),
    "arrow": ("await send_batch() of Arrow arrays", ("fk", "aiok")),
    "first": ("the first send to a topic without metadata", ("fk", "aiok", "ck")),
}
#: shapes a client has no call for: (kind, client) -> why (a row of the table says so)
NO_SHAPE = {
    ("arrow", "ck"): ("confluent-kafka AIOProducer", "no batch call: AIOProducer has no `produce_batch` (its "
                      "`produce()` buffers records and hands them to librdkafka's `produce_batch` itself) "
                      "and takes no Arrow array"),
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
    ("tasks", "fk"): "1,000 × `for v in mine: await p.send(t, v)`",
    ("tasks", "aiok"): "1,000 × `for v in mine: await p.send_and_wait(t, v)`",
    ("tasks", "ck"): "1,000 × `for v in mine: await (await p.produce(t, v))`",
    ("fire", "fk"): "`p.produce(t, v, on_delivery=cb)` per record; `await p.flush()`",
    ("fire", "aiok"): "`(await p.send(t, v)).add_done_callback(cb)` per record; `await p.flush()`",
    ("fire", "ck"): "`(await p.produce(t, v)).add_done_callback(cb)` per record; `await p.flush()`",
    ("arrow", "fk"): "`await p.send_batch(t, arr)` per array (`pa.binary()`)",
    ("arrow", "aiok"): "per array: `b = p.create_batch(); b.append(key=None, value=v, timestamp=None)` until "
                       "full, `await p.send_batch(b, t, partition=i)` (partitions in turn), await every batch's future",
    ("first", "fk"): "`AsyncProducer(...)`, `await p.send(t, v)`, `await p.close()`",
    ("first", "aiok"): "`AIOKafkaProducer(...)`, `await p.start()`, `await p.send_and_wait(t, v)`, `await p.stop()`",
    ("first", "ck"): "`AIOProducer(...)`, `f = await p.produce(t, v)`, `await p.flush()`, `await f`, "
                     "`await p.close()`",
}
MEASUREMENTS = [f"{c}_{k}" for k, (_, cs) in KINDS.items() for c in cs]


def split_name(name: str) -> tuple[str, str]:
    """``"fk_lat_busy"`` -> ``("fk", "lat_busy")``."""
    client, _, kind = name.partition("_")
    return client, kind


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
    return burn_until(clock() + ns, clock)


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
        n = min(due(rate, now - start, sent), total - sent)
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


class StallTicker:
    """A task on the measured loop that sleeps ``period`` seconds in turn and keeps every gap between
    two of its turns beyond that period (ms), with when it began and ended: how long the loop ran
    nothing else (a producer holding the loop, a batch of completions, a blocking call).
    ``stats(a, b)`` summarizes the stalls within ``perf_counter`` seconds ``a`` .. ``b`` (a stall
    spanning two parts of a run counts in each for the time it lies in it)."""

    def __init__(self, period: float = 0.001, clock=time.perf_counter):
        self.period = period
        self.clock = clock
        self.gaps: list[tuple[float, float, float]] = []   # (began, ended, ms beyond the period)
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        clock, period, gaps = self.clock, self.period, self.gaps
        last = clock()
        while True:
            await asyncio.sleep(period)
            now = clock()
            gaps.append((last, now, max(0.0, (now - last - period) * 1000.0)))
            last = now

    def start(self) -> "StallTicker":
        self._task = asyncio.get_running_loop().create_task(self._run())
        return self

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def stats(self, a: float = float("-inf"), b: float = float("inf")) -> dict:
        """The loop's stalls within ``a`` .. ``b``: each gap's held part (from one period after a
        turn to the next turn) clipped to ``a`` .. ``b``; ``max_stall_ms``, ``p99_stall_ms`` (nearest
        rank) and ``ticks`` (the gaps it saw). 0 when the loop was never held there; None when the
        ticker never ran."""
        if not self.gaps:
            return {"max_stall_ms": None, "p99_stall_ms": None, "ticks": 0}
        p = self.period
        xs = sorted(max(0.0, min(t1, b) - max(t0 + p, a)) * 1000.0 for t0, t1, _ in self.gaps
                    if t0 <= b and t1 >= a)
        if not xs:
            return {"max_stall_ms": 0.0, "p99_stall_ms": 0.0, "ticks": 0}
        return {"max_stall_ms": xs[-1], "p99_stall_ms": xs[max(0, math.ceil(0.99 * len(xs)) - 1)],
                "ticks": len(xs)}


class NoTicker(StallTicker):
    """No ticker (``--stall-ticker off``): nothing runs, no stall figures."""

    def start(self) -> "NoTicker":
        return self


def new_ticker(period: float = 0.001) -> StallTicker:
    """A started ``StallTicker``, or a ``NoTicker`` when ``TICKER`` is off."""
    return (StallTicker(period) if TICKER else NoTicker(period)).start()


@contextlib.asynccontextmanager
async def ticking(period: float = 0.001):
    """A ticker (``new_ticker``) running for the body."""
    t = new_ticker(period)
    await asyncio.sleep(0)
    try:
        yield t
    finally:
        await t.stop()


async def ticker_cost(seconds: float = 0.2) -> float | None:
    """The ticker's own CPU per tick, µs: the process's CPU over ``seconds`` with only a ticker
    running on the (otherwise idle) loop, over its ticks. None when the ticker is off. The loop's
    wake-ups for it cost CPU that the measurements' CPU per record includes; this bounds its share."""
    if not TICKER:
        return None
    c0 = rusage_cpu_s()
    async with ticking() as tk:
        await asyncio.sleep(seconds)
    ticks = tk.stats()["ticks"]
    return (rusage_cpu_s() - c0) * 1e6 / ticks if ticks else None


def ticker_share(tk: StallTicker, a: float, b: float, cost: float | None, records: int) -> dict:
    """The timed part's stall figures and the ticker's CPU per record in it (its ticks × its cost
    per tick on the idle loop: an upper bound, a busy loop wakes up anyway)."""
    st = tk.stats(a, b)
    share = st["ticks"] * cost / records if cost is not None and records else None
    return {**st, "ticker_us_per_tick": cost, "ticker_cpu_us_per_record": share}


def rusage_cpu_s() -> float:
    """The process's CPU seconds (user + system, every thread)."""
    ru = resource.getrusage(resource.RUSAGE_SELF)
    return ru.ru_utime + ru.ru_stime


# ------------------------------------------------------------------------------------ clients (child)
class Client:
    """One producer library behind the calls the measurements make. The timed loops call these
    methods the same way for every client; what each does is the library's own documented use."""

    key = "?"
    #: the library's module, imported before any clock (``preload``)
    module = "?"

    @classmethod
    def preload(cls) -> None:
        """Import the library (a first import is not the producer's work on the loop)."""
        importlib.import_module(cls.module)

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

    async def fire(self, topic: str, chunk: list, done) -> int:
        """Fire-and-forget every value of ``chunk``: ``done(err)`` runs on the loop when each
        completes; nothing awaited but the call itself. Returns the retries the call needed (0)."""
        for v in chunk:
            fut = await self._send_future(topic, v)
            fut.add_done_callback(functools.partial(_fired, done))
        return 0

    async def batch(self, topic: str, arr) -> int:
        """Send the pyarrow binary array ``arr``, await its delivery; the records delivered."""
        raise NotImplementedError

    def metrics(self) -> dict | None:
        return None


def _fired(done, fut) -> None:
    done(future_error(fut))


def _future_done(done, t_send: int, fut) -> None:
    done(t_send, future_error(fut))


class FastkafkaClient(Client):
    key = "fk"
    module = "fastkafka.aio"

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

    async def fire(self, topic: str, chunk: list, done) -> int:
        """``produce()`` never waits: when buffer memory is full it raises BufferExhaustedError at
        once; the record is then offered again after 1 ms (counted)."""
        from fastkafka.errors import BufferExhaustedError

        produce = self.p.produce
        cb = functools.partial(_delivered, done)
        retries = 0
        for v in chunk:
            while True:
                try:
                    produce(topic, v, on_delivery=cb)
                    break
                except BufferExhaustedError:
                    retries += 1
                    await asyncio.sleep(0.001)
        return retries

    async def batch(self, topic: str, arr) -> int:
        return await self.p.send_batch(topic, arr)

    def metrics(self) -> dict | None:
        return dict(self.p.metrics())


def _delivered(done, err, _md) -> None:
    done(err)


class FastkafkaProduceClient(FastkafkaClient):
    """fastkafka's non-awaiting produce(); on_delivery runs on the event loop."""

    key = "fkp"

    async def submit(self, topic: str, value, t_send: int, done) -> None:
        self.p.produce(topic, value, on_delivery=functools.partial(_delivery_done, done, t_send))


def _delivery_done(done, t_send: int, err, _md) -> None:
    done(t_send, err)


class AiokafkaClient(Client):
    key = "aiok"
    module = "aiokafka"

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

    async def batch(self, topic: str, arr) -> int:
        """aiokafka's BatchBuilder API as its documentation shows it: fill a batch until append()
        returns None, send_batch() it to a partition (the topic's partitions in turn), then await
        every batch's future. aiokafka takes bytes: the array's values are read as Python bytes."""
        p = self.p
        parts = getattr(self, "_parts", None)
        if parts is None:
            parts = self._parts = sorted(await p.partitions_for(topic))
            self._next = 0
        futs, counts = [], []
        values = arr.to_pylist()
        i, n = 0, len(values)
        while i < n:
            b = p.create_batch()
            while i < n and b.append(key=None, value=values[i], timestamp=None) is not None:
                i += 1
            if not b.record_count():
                raise ValueError(f"a value of {len(values[i])} bytes does not fit an empty batch")
            counts.append(b.record_count())
            futs.append(await p.send_batch(b, topic, partition=parts[self._next % len(parts)]))
            self._next += 1
        await asyncio.gather(*futs)
        return sum(counts)


class LayerAiokafkaClient(AiokafkaClient):
    """aiokafka's code with only the import changed: fastkafka.compat.aiokafka.AIOKafkaProducer."""

    key = "fka"
    module = "fastkafka.compat.aiokafka"

    async def open(self, stack) -> None:
        from fastkafka.compat.aiokafka import AIOKafkaProducer

        self.p = await stack.enter_async_context(AIOKafkaProducer(
            bootstrap_servers=self.bootstrap, linger_ms=LINGER_MS, acks="all", enable_idempotence=True))


class ConfluentClient(Client):
    key = "ck"
    module = "confluent_kafka.aio"

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
    cost = await ticker_cost()
    m0 = c.metrics()
    completed = errors = 0
    first_error = None
    n = 0
    async with ticking() as tk:
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
        t1 = time.perf_counter()
        cpu = time.process_time() - c0
    elapsed = t1 - t0
    m1 = c.metrics()
    return {"records": n, "asked": len(values), "capped": n < len(values), "seconds": elapsed,
            "completed": completed, "errors": errors, "first_error": first_error, "total_sent": n + 1,
            "rate": n / elapsed, "cpu_us_per_record": cpu_us_per_record(cpu, n),
            **_fk_counters(m0, m1, n), **ticker_share(tk, t0, t1, cost, n)}


async def run_serial(c: Client, topic: str, values: list, seconds: float) -> dict:
    await c.warm(topic)
    cost = await ticker_cost()
    m0 = c.metrics()
    nvals = len(values)
    n = errors = 0
    first_error = None
    async with ticking() as tk:
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
        t1 = time.perf_counter()
        cpu = time.process_time() - c0
    elapsed = t1 - t0
    m1 = c.metrics()
    return {"records": n, "seconds": elapsed, "completed": n - errors, "errors": errors,
            "first_error": first_error, "total_sent": n + 1, "rate": n / elapsed,
            "cpu_us_per_record": cpu_us_per_record(cpu, n), **_fk_counters(m0, m1, n),
            **ticker_share(tk, t0, t1, cost, n)}


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
    cost = await ticker_cost()
    tk = new_ticker()
    app = asyncio.get_running_loop().create_task(application()) if busy else None
    tick_ns = int(args.tick_us * 1000)
    warm_sent = 0
    if args.warmup > 0:
        warm_sent, _, _ = await paced(sender(warm), args.rate, args.warmup, tick_ns, wait, clock,
                                      pace_limit(args.warmup))
    m0 = c.metrics()
    s0 = slices[0]
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    t0 = time.perf_counter()
    begin = clock()
    sent, first, last = await paced(sender(measured), args.rate, args.seconds, tick_ns, wait, clock,
                                    pace_limit(args.seconds))
    end = clock()
    t1 = time.perf_counter()
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
    await tk.stop()
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    due = int(args.rate * args.seconds)
    r = {"records": sent, "due": due, "completed": st[True], "errors": st["errors"],
         "first_error": st["first_error"], "total_sent": 1 + warm_sent + sent,
         "achieved": achieved_rate(sent, first, last, due, begin, end),
         "cpu_us_per_record": None if busy else cpu_us_per_record(cpu, sent),
         "app_slices_per_s": (s1 - s0) / app_seconds if busy and app_seconds > 0 else None,
         **_fk_counters(m0, m1, sent), **ticker_share(tk, t0, t1, cost, sent)}
    if len(lat) == sent and lat:
        r.update(summarize(lat))
    return r


class _Outcomes:
    """Completions counted on the loop: how many, how many failed, the first error, when the last
    one ran (perf_counter)."""

    def __init__(self):
        self.done = self.errors = 0
        self.first_error = None
        self.last = 0.0

    def __call__(self, err) -> None:
        self.done += 1
        self.last = time.perf_counter()
        if err is not None:
            self.errors += 1
            if self.first_error is None:
                self.first_error = repr(err)[:200]

    def many(self, err, records: int) -> None:
        """``records`` completions with the same outcome (a batch's)."""
        for _ in range(records):
            self(err)


async def _until(cond, seconds: float) -> bool:
    """Wait (1 ms sleeps) up to ``seconds`` for ``cond()``."""
    deadline = time.monotonic() + seconds
    while not cond():
        if time.monotonic() >= deadline:
            return False
        await asyncio.sleep(0.001)
    return True


async def run_tasks(c: Client, topic: str, values: list, tasks: int, cap_s: float) -> dict:
    """``tasks`` concurrent tasks, each sending its share of ``values`` one at a time and awaiting
    each (``c.one``), gathered. After ``cap_s`` seconds every task stops after its current send."""
    await c.warm(topic)
    cost = await ticker_cost()
    m0 = c.metrics()
    nv = len(values)
    per = max(1, nv // tasks)
    out = _Outcomes()
    stop = [False]
    clock = time.perf_counter

    async def worker(k: int) -> None:
        one = c.one
        base = k * per
        for j in range(per):
            try:
                await one(topic, values[(base + j) % nv])
                out(None)
            except Exception as e:  # noqa: BLE001 - counted and reported as the measurement's failure
                out(e)
            if stop[0] or clock() >= cap_end:
                stop[0] = True
                return

    async with ticking() as tk:
        c0, t0 = rusage_cpu_s(), clock()
        cap_end = t0 + cap_s
        await asyncio.gather(*[worker(k) for k in range(tasks)])
        t1 = clock()
        cpu = rusage_cpu_s() - c0
    m1 = c.metrics()
    n = out.done
    return {"records": n, "asked": per * tasks, "capped": n < per * tasks, "tasks": tasks,
            "seconds": t1 - t0, "completed": n - out.errors, "errors": out.errors,
            "first_error": out.first_error, "total_sent": n + 1, "rate": n / (t1 - t0),
            "cpu_us_per_record": cpu_us_per_record(cpu, n), **_fk_counters(m0, m1, n),
            **ticker_share(tk, t0, t1, cost, n)}


async def run_fire(c: Client, topic: str, values: list, window: int, cap_s: float) -> dict:
    """Fire-and-forget: ``c.fire`` over windows of ``window`` values (``await asyncio.sleep(0)``
    between windows, so the loop's other tasks run), then one ``c.flush()``. Timed from the first
    call until flush() returned and every completion callback ran; no window starts after
    ``cap_s`` seconds."""
    await c.warm(topic)
    cost = await ticker_cost()
    m0 = c.metrics()
    out = _Outcomes()
    n = retries = 0
    clock = time.perf_counter
    async with ticking() as tk:
        c0, t0 = rusage_cpu_s(), clock()
        for a, b in windows(len(values), window):
            retries += await c.fire(topic, values[a:b], out)
            n = b
            await asyncio.sleep(0)
            if clock() - t0 >= cap_s:
                break
        await c.flush()
        t_flushed = clock()
        all_ran = await _until(lambda: out.done >= n, 30.0)
        t1 = max(t_flushed, out.last)
        cpu = rusage_cpu_s() - c0
    m1 = c.metrics()
    return {"records": n, "asked": len(values), "capped": n < len(values), "seconds": t1 - t0,
            "flush_to_last_callback_ms": max(0.0, (out.last - t_flushed) * 1000.0),
            "callbacks_after_30s": None if all_ran else out.done,
            "completed": out.done - out.errors, "errors": out.errors, "first_error": out.first_error,
            "buffer_retries": retries, "total_sent": n + 1, "rate": n / (t1 - t0),
            "cpu_us_per_record": cpu_us_per_record(cpu, n), **_fk_counters(m0, m1, n),
            **ticker_share(tk, t0, t1, cost, n)}


def arrow_arrays(values: list, chunk: int) -> list:
    """``values`` as pyarrow binary arrays of ``chunk`` values (the last may be short)."""
    import pyarrow as pa

    return [pa.array(values[a:b], pa.binary()) for a, b in windows(len(values), chunk)]


async def run_arrow(c: Client, topic: str, values: list, chunk: int, cap_s: float) -> dict:
    """``await c.batch(topic, arr)`` for each array of ``chunk`` values (built before the clock),
    one after the other; no array starts after ``cap_s`` seconds."""
    arrays = arrow_arrays(values, chunk)
    await c.warm(topic)
    cost = await ticker_cost()
    m0 = c.metrics()
    out = _Outcomes()
    n = 0
    clock = time.perf_counter
    async with ticking() as tk:
        c0, t0 = rusage_cpu_s(), clock()
        for arr in arrays:
            try:
                got = await c.batch(topic, arr)
                out.many(None, got)
                if got != len(arr):
                    out.many(RuntimeError(f"{got} of {len(arr)} delivered"), len(arr) - got)
            except Exception as e:  # noqa: BLE001 - every record of the array counted as failed
                out.many(e, len(arr))
            n += len(arr)
            if clock() - t0 >= cap_s:
                break
        t1 = clock()
        cpu = rusage_cpu_s() - c0
    m1 = c.metrics()
    return {"records": n, "asked": len(values), "capped": n < len(values), "chunk": chunk,
            "seconds": t1 - t0, "completed": out.done - out.errors, "errors": out.errors,
            "first_error": out.first_error, "total_sent": n + 1, "rate": n / (t1 - t0),
            "cpu_us_per_record": cpu_us_per_record(cpu, n), **_fk_counters(m0, m1, n),
            **ticker_share(tk, t0, t1, cost, n)}


async def run_first(cls, bootstrap: str, topic: str) -> dict:
    """From the producer's construction (its library imported before) through its first record
    (to ``topic``, which it has no metadata for) until that record's delivery, then its close: how
    long each part took and the loop's longest stall in each (a ticker running from before the
    construction)."""
    cls.preload()
    clock = time.perf_counter
    async with ticking() as tk:
        t0 = clock()
        async with contextlib.AsyncExitStack() as stack:
            c = cls(bootstrap)
            await c.open(stack)
            t_open = clock()
            await c.warm(topic)
            t_done = clock()
        t_closed = clock()
        await asyncio.sleep(0.005)      # the ticker's turn after the close
    return {"records": 1, "completed": 1, "errors": 0, "total_sent": 1,
            "open_ms": (t_open - t0) * 1000.0, "send_ms": (t_done - t_open) * 1000.0,
            "first_ms": (t_done - t0) * 1000.0, "close_ms": (t_closed - t_done) * 1000.0,
            **tk.stats(t0, t_done),
            "open_max_stall_ms": tk.stats(t0, t_open)["max_stall_ms"],
            "send_max_stall_ms": tk.stats(t_open, t_done)["max_stall_ms"],
            "close_max_stall_ms": tk.stats(t_done, t_closed)["max_stall_ms"]}


async def child_main(name: str, bootstrap: str, topic: str, args) -> dict:
    client, kind = split_name(name)
    if kind == "first":
        return await run_first(CLIENT_CLASSES[client], bootstrap, topic)
    c = CLIENT_CLASSES[client](bootstrap)
    n = args.records if client in FASTKAFKA else args.slow_records
    async with contextlib.AsyncExitStack() as stack:
        await c.open(stack)
        if kind == "gather":
            r = await run_gather(c, topic, make_values(n, args.size), args.window, args.cap_seconds)
        elif kind == "tasks":
            r = await run_tasks(c, topic, make_values(n, args.size), args.tasks, args.cap_seconds)
        elif kind == "fire":
            r = await run_fire(c, topic, make_values(n, args.size), args.window, args.cap_seconds)
        elif kind == "arrow":
            r = await run_arrow(c, topic, make_values(n, args.size), args.batch, args.cap_seconds)
        elif kind == "serial":
            r = await run_serial(c, topic, make_values(1024, args.size), args.seconds)
        else:
            r = await run_latency(c, topic, make_values(1024, args.size), args, kind == "lat_busy")
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
        import_fastkafka_from(args.fastkafka_path)
    return run_loop(lambda: child_main(name, bootstrap, topic, args), args.loop)
