"""Paced sends and their latencies, shared by ``bench/latency.py``, ``bench/aio.py`` and ``bench/ab.py``:
nearest-rank percentiles, the schedule of a paced run (``due``, ``paced_run``), the busy and the idle
application (``burn_until``, ``sleep_until``), and ``paced_child``: one latency measurement of
fastkafka, confluent-kafka or the pacing harness alone (``floor``), run in a child process (the method
is in ``bench/latency.py``'s docstring)."""

from __future__ import annotations

import functools
import math
import resource
import time

from e2e_measure import LINGER_MS, make_values
from harness import cpu_us_per_record

CLIENTS = {"fk": "fastkafka", "ck": "confluent-kafka"}
#: The harness floor: the same pacing loop and callbacks with no client (CPU table only).
FLOOR = "floor"
APPS = {"busy": "busy (Python loop between bursts)", "idle": "idle (asleep between bursts)"}
KEPT_UP = 0.98      # a client whose median achieved rate is below this share of the paced rate fell behind


# ------------------------------------------------------------------------------------ pure helpers
def percentile(sorted_values, q: float):
    """Nearest-rank percentile ``q`` (0 < q <= 100) of an ascending sequence: the smallest value
    with at least q % of the values at or below it."""
    n = len(sorted_values)
    if n == 0:
        raise ValueError("no values")
    if not 0 < q <= 100:
        raise ValueError(f"percentile {q} outside (0, 100]")
    k = max(1, math.ceil(q / 100.0 * n - 1e-9))
    return sorted_values[k - 1]


def summarize(latencies_ns) -> dict:
    """p50 / p99 / p99.9 / max of latencies in ns, in ms."""
    s = sorted(latencies_ns)
    return {"p50": percentile(s, 50) / 1e6, "p99": percentile(s, 99) / 1e6,
            "p999": percentile(s, 99.9) / 1e6, "max": s[-1] / 1e6, "count": len(s)}


def due(rate: float, elapsed_ns: int, sent: int) -> int:
    """Records to send now to be on schedule: ``rate`` records/s over ``elapsed_ns`` since the
    start, ``sent`` sent so far (never negative)."""
    return max(0, int(rate * elapsed_ns / 1e9) - sent)


def burn_until(deadline_ns: int, clock=time.perf_counter_ns) -> int:
    """The busy application: a pure-Python loop (arithmetic, holding the GIL) until ``clock()``
    reaches ``deadline_ns``. Returns the loop's iterations."""
    i = x = 0
    while clock() < deadline_ns:
        for j in range(50):  # work between clock reads, as serialising code does
            x = (x * 31 + j) & 0xFFFF
        i += 1
    return i


def paced_run(send, rate: float, seconds: float, tick_ns: int, wait, clock=time.perf_counter_ns):
    """Call ``send(i, now_ns)`` at ``rate`` per second for ``seconds``, in bursts every ``tick_ns``:
    each burst sends what is due (``due``), then ``wait(next_tick_ns)`` until the next one (which
    burns, sleeps or polls). Returns (records sent, first send ns, last send ns)."""
    start = clock()
    end = start + int(seconds * 1e9)
    total = int(rate * seconds)
    sent = 0
    first = last = start
    tick = start
    while sent < total:
        now = clock()
        n = min(due(rate, now - start, sent), total - sent)
        for _ in range(n):
            t = clock()
            if sent == 0:
                first = t
            send(sent, t)
            last = t
            sent += 1
        tick += tick_ns
        if tick < now:  # behind: the next burst at once, catching up through due()
            tick = now
        if sent < total:
            wait(min(tick, end))
    return sent, first, last


def sleep_until(deadline_ns: int, clock=time.perf_counter_ns) -> None:
    left = deadline_ns - clock()
    if left > 0:
        time.sleep(left / 1e9)


# ------------------------------------------------------------------------------------ child
class _NoClient:
    """The harness floor's stand-in producer: nothing is sent; the callback runs at once."""

    def produce(self, topic, value, on_delivery=None):
        on_delivery(None, None)

    def flush(self, timeout=None) -> int:
        return 0


def paced_child(client: str, app: str, rate: float, bootstrap: str, topic: str, args) -> dict:
    values = make_values(1024, args.size)
    nvals = len(values)
    clock = time.perf_counter_ns
    lat: list[int] = []
    errors = [0]
    done = [0]

    def measured(t_send, err, _msg):
        lat.append(clock() - t_send)
        done[0] += 1
        if err is not None:
            errors[0] += 1

    def warm(_t, err, _msg):
        done[0] += 1
        if err is not None:
            errors[0] += 1

    tick_ns = int(args.tick_us * 1000)
    if client == FLOOR:
        # The harness alone: no client, each record's callback runs inside the produce call.
        p = _NoClient()
        produce = p.produce
        poll = None
    elif client == "fk":
        from fastkafka import Producer

        p = Producer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS,
                     gil_free_io=args.fk_gil_free_io == "on")
        p.send(topic, b"warm-up").get(timeout=30)
        produce = p.produce
        poll = None
    else:
        from confluent_kafka import Producer

        p = Producer({"bootstrap.servers": bootstrap, "linger.ms": LINGER_MS, "acks": "all",
                      "enable.idempotence": True, "queue.buffering.max.messages": 1_000_000})
        p.list_topics(topic, timeout=30)
        p.produce(topic, b"warm-up")
        if p.flush(30) != 0:
            raise RuntimeError("warm-up record not delivered")
        produce = p.produce
        poll = p.poll

    if app == "busy":
        if poll is None:
            wait = burn_until
        else:
            def wait(deadline):
                poll(0)
                burn_until(deadline)
    else:
        if poll is None:
            wait = sleep_until
        else:
            def wait(deadline):
                poll(0)
                while True:  # poll() takes whole milliseconds (less is 0: no wait)
                    ms = (deadline - clock()) // 1_000_000
                    if ms <= 0:
                        break
                    poll(ms / 1000)
                sleep_until(deadline)

    def sender(cb):
        def send(i, t):
            produce(topic, values[i % nvals], on_delivery=functools.partial(cb, t))
        return send

    if args.warmup > 0:
        paced_run(sender(warm), rate, args.warmup, tick_ns, wait)
    ru0 = resource.getrusage(resource.RUSAGE_SELF)
    sent, first, last = paced_run(sender(measured), rate, args.seconds, tick_ns, wait)
    remaining = p.flush(120)
    if poll is not None:
        remaining = len(p)
    ru1 = resource.getrusage(resource.RUSAGE_SELF)
    cpu = (ru1.ru_utime - ru0.ru_utime) + (ru1.ru_stime - ru0.ru_stime)
    if client == "fk":
        p.close()
    r = {"sent": sent, "completed": len(lat), "errors": errors[0], "undelivered": remaining,
         "achieved": (sent - 1) / ((last - first) / 1e9) if last > first else 0.0,
         "cpu_s": cpu, "cpu_us_per_record": cpu_us_per_record(cpu, sent),
         "total_sent": sent + int(rate * args.warmup) + 1}
    if lat:
        r.update(summarize(lat))
    return r
