"""Tests of bench/aio.py and bench/aio_clients.py: pure helpers, pacing, the loop-stall ticker, the
timed loops (with a fake client on a real event loop) and tables, without a broker; then a tiny run
of the service shapes (tasks, fire, arrow, first) for every client against one Apache Kafka node,
under asyncio's loop and uvloop (``test_small_run``). No speed is asserted.
Run: python -m pytest bench/test_aio.py -q"""
from __future__ import annotations

import argparse
import asyncio
import os
import re
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import aio  # noqa: E402
import aio_clients  # noqa: E402


# ------------------------------------------------------------------------------------ selection
def test_select_names_clients_and_kinds():
    assert aio.select("") == aio.MEASUREMENTS
    assert aio.select("fk") == ["fk_gather", "fk_serial", "fk_lat_busy", "fk_lat_idle", "fk_tasks", "fk_fire",
                                "fk_arrow", "fk_first"]   # not fkp
    assert aio.select("tasks,fire,arrow") == ["fk_tasks", "aiok_tasks", "ck_tasks", "fk_fire", "aiok_fire",
                                              "ck_fire", "fk_arrow", "aiok_arrow"]   # ck has no batch call
    assert aio.select("first") == ["fk_first", "aiok_first", "ck_first"]
    assert aio.select("gather") == ["fk_gather", "aiok_gather", "fka_gather", "ck_gather", "ckf_gather"]
    assert aio.select("fka") == ["fka_gather", "fka_serial"]
    assert aio.select("lat") == [n for n in aio.MEASUREMENTS if "_lat_" in n] and len(aio.select("lat")) == 8
    # fixed order whatever the order asked, no duplicates
    assert aio.select("ck_serial, fk_gather,fk_serial,fk_lat_idle") == ["fk_gather", "fk_serial", "ck_serial",
                                                                        "fk_lat_idle"]
    assert aio.select("aiok,ck,ckf") == [n for n in aio.MEASUREMENTS if not n.startswith("fk")]
    assert aio.select("aiok,fka,ck,ckf") == [n for n in aio.MEASUREMENTS if not n.startswith("fk_")
                                             and not n.startswith("fkp_")]
    with pytest.raises(SystemExit):
        aio.select("kafka_python")


def test_every_measurement_has_its_code_or_completion_described():
    for name in aio.MEASUREMENTS:
        client, kind = aio.split_name(name)
        assert client in aio.CLIENTS and kind in aio.KINDS
        if kind not in ("lat_busy", "lat_idle"):
            assert (kind, client) in aio.LOOP_CODE
        assert client in aio_clients.CLIENT_CLASSES


def test_loops_and_their_result_keys():
    assert aio.loops_of("asyncio") == ["asyncio"] and aio.loops_of("uvloop") == ["uvloop"]
    assert aio.loops_of("both") == ["asyncio", "uvloop"]
    assert aio.run_key("fk_tasks", "uvloop", ["uvloop"]) == "fk_tasks"
    assert aio.run_key("fk_tasks", "uvloop", ["asyncio", "uvloop"]) == "fk_tasks@uvloop"
    assert aio.base_name("fk_tasks@uvloop") == ("fk_tasks", "uvloop") and aio.base_name("fk_tasks") == ("fk_tasks", "")
    args = aio.parse_args(["--loop", "both", "--only", "fk_gather", "--out", "-"])
    cmd = aio.child_cmd("fk_gather", "b:1", "t", args, loop="uvloop")
    assert cmd[cmd.index("--loop") + 1] == "uvloop"
    assert aio.child_cmd("fk_gather", "b:1", "t", args)[cmd.index("--loop") + 1] == "asyncio"
    report = {"results": {"fk_gather@asyncio": [_thr(100.0, round=1, order=0)],
                          "fk_gather@uvloop": [_thr(300.0, round=1, order=1)]},
              "warmup": None, "loads": [0.1], "fastkafka_commit": "abc1234", "fastkafka_is_repo": True}
    text = aio.render(report, args, 1.0, "broker: test")
    assert "## Throughput: 1,000 sends awaited together — asyncio's default" in text
    assert "## Throughput: 1,000 sends awaited together — uvloop" in text
    assert "| 1 | fk_gather@uvloop | 1,000 | 300.0 rec/s" in text and "--loop both" in text


def test_round_order_reverses_even_rounds():
    names = ["a", "b", "c"]
    assert aio.round_order(names, 1) == names
    assert aio.round_order(names, 2) == ["c", "b", "a"]
    assert aio.round_order(names, 3) == names


# ------------------------------------------------------------------------------------ small helpers
def test_windows_cover_every_record_once():
    assert aio_clients.windows(2500, 1000) == [(0, 1000), (1000, 2000), (2000, 2500)]
    assert aio_clients.windows(1000, 1000) == [(0, 1000)]
    assert aio_clients.windows(0, 1000) == []
    with pytest.raises(ValueError):
        aio_clients.windows(10, 0)


def test_errors_of_gathered_results_and_done_futures():
    assert aio_clients.count_errors([1, None, ValueError("x"), asyncio.CancelledError()]) == 2

    async def main():
        loop = asyncio.get_running_loop()
        ok, bad, gone = loop.create_future(), loop.create_future(), loop.create_future()
        ok.set_result("md")
        bad.set_exception(KeyError("k"))
        gone.cancel()
        return aio_clients.future_error(ok), aio_clients.future_error(bad), aio_clients.future_error(gone)

    ok, bad, gone = asyncio.run(main())
    assert ok is None and isinstance(bad, KeyError) and isinstance(gone, asyncio.CancelledError)


def test_counters_and_rates():
    m0 = {"aio_loop_wakeups": 10, "aio_records_completed": 100}
    m1 = {"aio_loop_wakeups": 60, "aio_records_completed": 1100}
    assert aio_clients.counter_delta(m0, m1, "aio_loop_wakeups") == 50
    assert aio_clients.counter_delta(m0, {}, "aio_loop_wakeups") is None
    assert aio_clients.counter_delta(None, m1, "aio_loop_wakeups") is None
    got = aio_clients._fk_counters(m0, m1, 1000)
    assert {k: got[k] for k in ("loop_wakeups", "records_completed_on_loop", "wakeups_per_record")} == {
        "loop_wakeups": 50, "records_completed_on_loop": 1000, "wakeups_per_record": 0.05}
    assert set(got["io_thread"]) == set(aio_clients._IO_COUNTERS)   # absent from these snapshots: None
    assert all(v is None for v in got["io_thread"].values())
    assert aio_clients._fk_counters(None, None, 1000)["wakeups_per_record"] is None
    assert aio_clients.per_record(5, 0) is None
    assert aio_clients.achieved_rate(1001, 0, 1_000_000_000) == pytest.approx(1000.0)
    assert aio_clients.achieved_rate(1, 5, 5) == 0.0
    # stopped short: 3,000 sent early, then a send blocked until the stop 5 s after the start
    assert aio_clients.achieved_rate(3000, 0, 10_000_000, due=40_000, begin_ns=0, end_ns=5_000_000_000) == 600.0
    assert aio_clients.achieved_rate(1001, 0, 1_000_000_000, due=1001, begin_ns=0, end_ns=9) == pytest.approx(1000.0)
    assert aio_clients.pace_limit(5) == 11.0


class FakeClock:
    """A clock that moves only when the pacing waits (and ``per_call`` ns per read)."""

    def __init__(self, per_call_ns=0):
        self.t = 1_000_000_000
        self.per_call = per_call_ns

    def __call__(self):
        self.t += self.per_call
        return self.t

    async def wait(self, deadline):
        self.t = max(self.t, deadline)


@pytest.mark.parametrize("rate,tick_ns", [(20_000, 1_000_000), (200_000, 1_000_000), (1_000, 250_000)])
def test_paced_sends_the_asked_rate_in_bursts(rate, tick_ns):
    clock = FakeClock()
    times = []

    async def send(i, t):
        times.append((i, t))

    sent, first, last = asyncio.run(aio_clients.paced(send, rate, 0.5, tick_ns, clock.wait, clock))
    assert sent == int(rate * 0.5) == len(times)
    assert [i for i, _ in times] == list(range(sent))
    assert aio_clients.achieved_rate(sent, first, last) == pytest.approx(rate, rel=0.01)
    per_tick: dict[int, int] = {}
    for _, t in times:
        per_tick[t] = per_tick.get(t, 0) + 1
    assert max(per_tick.values()) <= rate * tick_ns / 1e9 + 1


def test_paced_catches_up_and_a_hopeless_client_is_stopped():
    clock = FakeClock()

    async def slow_send(i, t):   # every send takes 1 ms: at most 1,000 records/s of 10,000 asked
        clock.t += 1_000_000

    sent, first, last = asyncio.run(aio_clients.paced(slow_send, 10_000, 1.0, 1_000_000, clock.wait, clock,
                                                      limit_s=3.0))
    assert 2_900 <= sent <= 3_001          # stopped at the limit, far short of the 10,000 due
    assert (clock.t - 1_000_000_000) / 1e9 == pytest.approx(3.0, abs=0.01)

    clock = FakeClock()
    stalled = []

    async def wait(deadline):
        if not stalled and clock.t > 1_000_000_000 + 100_000_000:
            stalled.append(clock.t)
            clock.t += 50_000_000          # the loop stalls 50 ms once
        await clock.wait(deadline)

    async def send(i, t):
        pass

    sent, first, last = asyncio.run(aio_clients.paced(send, 10_000, 1.0, 1_000_000, wait, clock, limit_s=3.0))
    assert stalled and sent == 10_000
    assert (last - first) / 1e9 == pytest.approx(1.0, abs=0.002)


def test_burn_for_stops_after_its_slice():
    clock = FakeClock(per_call_ns=1000)
    n = aio_clients.burn_for(10_000, clock)
    assert 8 <= n <= 11


# ------------------------------------------------------------------------------------ checks
def _ok(**kw):
    return {"records": 1000, "completed": 1000, "errors": 0, "total_sent": 1001, **kw}


def test_check_delivery_and_the_broker_count():
    assert "failed" not in aio.check(_ok(), 1001)
    assert "failed" not in aio.check(_ok(), None)               # not counted (no broker count)
    assert "holds 1000 records, 1001 sent" in aio.check(_ok(), 1000)["failed"]
    assert "holds 1002" in aio.check(_ok(), 1002)["failed"]    # more than sent is a failure too
    r = aio.check(_ok(completed=999, errors=1, first_error="KafkaError()"), 1001)
    assert r["failed"] == "999 of 1000 completed, errors 1 (first: KafkaError())"
    assert aio.check(_ok(completed=998), 1001)["failed"].startswith("998 of 1000")
    assert aio.check({"failed": "exit 1: boom"}, None) == {"failed": "exit 1: boom"}


def test_per_round_ratios_and_medians_with_a_failed_round():
    a = [{"rate": 10.0}, {"rate": 30.0}, {"rate": 9.0}]
    b = [{"rate": 5.0}, {"rate": 10.0}, {"rate": 10.0}]
    assert aio.per_round_ratios(a, b, "rate") == [2.0, 3.0, 0.9]
    assert aio.med(aio.per_round_ratios(a, b, "rate")) == 2.0        # not 16/10 = ratio of medians
    b[1] = {"failed": "x"}
    assert aio.per_round_ratios(a, b, "rate") == [2.0, None, 0.9]
    assert aio.med(aio.per_round_ratios(a, b, "rate")) is None
    assert aio.med_field(b, "rate") is None and aio.med_field(a, "rate") == 10.0
    assert aio.med_field([], "rate") is None
    assert aio.per_round_ratios([{"rate": 1.0}], [{"rate": 0.0}], "rate") == [None]


# ------------------------------------------------------------------------------------ timed loops
class FakeProducer:
    """Resolves each record's future ``delay`` seconds after it is sent (the last of ``fail_every``
    with an error), counts the loop wake-ups it would cost as fastkafka's metrics do."""

    def __init__(self, delay=0.001, fail_every=0):
        self.delay, self.fail_every = delay, fail_every
        self.sent = 0
        self.pending = set()
        self.m = {"aio_loop_wakeups": 0, "aio_records_completed": 0}

    def send(self, topic, value):
        loop = asyncio.get_running_loop()
        fut = loop.create_future()
        self.sent += 1
        bad = self.fail_every and self.sent % self.fail_every == 0
        self.pending.add(fut)
        loop.call_later(self.delay, self._complete, fut, bad)
        return fut

    def _complete(self, fut, bad):
        self.pending.discard(fut)
        self.m["aio_loop_wakeups"] += 1
        self.m["aio_records_completed"] += 1
        if bad:
            fut.set_exception(RuntimeError("broker said no"))
        else:
            fut.set_result("md")

    async def flush(self):
        while self.pending:
            await asyncio.sleep(0.001)


class FakeClient(aio_clients.Client):
    key = "fk"

    def __init__(self, producer):
        super().__init__("fake:9092")
        self.p = producer
        self.warmed = 0

    async def warm(self, topic):
        self.warmed += 1
        await self.p.send(topic, b"warm-up")

    async def window(self, topic, chunk):
        return await asyncio.gather(*[self.p.send(topic, v) for v in chunk], return_exceptions=True)

    async def one(self, topic, value):
        await self.p.send(topic, value)

    async def _send_future(self, topic, value):
        return self.p.send(topic, value)

    def metrics(self):
        return dict(self.p.m)


def test_gather_counts_windows_errors_and_wakeups():
    c = FakeClient(FakeProducer(fail_every=1000))
    r = asyncio.run(aio_clients.run_gather(c, "t", [b"v"] * 2500, 1000, cap_s=60))
    assert c.warmed == 1 and r["records"] == 2500 and not r["capped"] and r["total_sent"] == 2501
    assert r["errors"] == 2 and r["completed"] == 2498 and "broker said no" in r["first_error"]
    assert r["wakeups_per_record"] == pytest.approx(1.0)        # the fake wakes the loop per record
    assert r["rate"] == pytest.approx(2500 / r["seconds"])
    assert aio.check(r, 2501)["failed"].startswith("2498 of 2500")


def test_gather_stops_after_the_window_past_the_cap():
    c = FakeClient(FakeProducer(delay=0.02))
    r = asyncio.run(aio_clients.run_gather(c, "t", [b"v"] * 10_000, 100, cap_s=0.05))
    assert r["capped"] and r["records"] % 100 == 0 and 100 <= r["records"] < 10_000
    assert r["completed"] == r["records"] and r["asked"] == 10_000


def test_serial_sends_one_at_a_time_for_its_budget():
    p = FakeProducer(delay=0.002)
    c = FakeClient(p)
    r = asyncio.run(aio_clients.run_serial(c, "t", [b"v"] * 4, 0.1))
    assert 5 <= r["records"] <= 60 and r["completed"] == r["records"] and r["errors"] == 0
    assert p.sent == r["records"] + 1 == r["total_sent"]


def _lat_args(**kw):
    base = dict(rate=2000.0, seconds=0.3, warmup=0.1, tick_us=1000.0, busy_slice_us=200.0)
    return argparse.Namespace(**{**base, **kw})


@pytest.mark.parametrize("busy", [False, True])
def test_latency_measures_every_paced_record_from_its_done_callback(busy):
    p = FakeProducer(delay=0.005)
    c = FakeClient(p)
    r = asyncio.run(aio_clients.run_latency(c, "t", [b"v"] * 16, _lat_args(), busy))
    assert r["records"] == 600 == r["completed"] and r["errors"] == 0
    assert r["total_sent"] == 1 + 200 + 600 == p.sent
    assert r["achieved"] == pytest.approx(2000, rel=0.05)
    assert 5.0 <= r["p50"] <= r["p99"] <= r["max"]      # at least the fake's 5 ms
    assert r["p50"] < 50 and r["max"] < 1000             # (a loaded machine stretches the tail)
    assert r["count"] == 600 and r["wakeups_per_record"] is not None
    assert "failed" not in aio.check(r, p.sent)
    if busy:
        assert r["app_slices_per_s"] > 100    # the application task ran between bursts
        assert r["cpu_us_per_record"] is None  # the application's burn, not the client's
    else:
        assert r["app_slices_per_s"] is None and r["cpu_us_per_record"] > 0


def test_latency_of_the_on_delivery_path_and_its_errors():
    class ProduceClient(FakeClient):
        key = "fkp"

        async def submit(self, topic, value, t_send, done):   # as FastkafkaProduceClient, on a fake
            fut = self.p.send(topic, value)
            fut.add_done_callback(lambda f: aio_clients._delivery_done(done, t_send, aio_clients.future_error(f), None))

    p = FakeProducer(delay=0.002, fail_every=100)
    r = asyncio.run(aio_clients.run_latency(ProduceClient(p), "t", [b"v"], _lat_args(seconds=0.2, warmup=0), False))
    assert r["records"] == 400 and r["completed"] == 400 and r["errors"] == 4
    assert aio.check(r, None)["failed"].startswith("400 of 400 completed, errors 4")


# ------------------------------------------------------------------------------------ tables
def _thr(rate, **kw):
    return {"rate": rate, "records": 1000, "seconds": 1000 / rate, "cpu_us_per_record": 5.0,
            "wakeups_per_record": None, **kw}


def _lat(p50, p99, **kw):
    return {"achieved": 20_000.0, "p50": p50, "p99": p99, "p999": p99 + 1, "max": p99 + 2,
            "cpu_us_per_record": 10.0, "app_slices_per_s": None, "wakeups_per_record": None, **kw}


def _cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_throughput_table_ratios_are_fastkafka_over_each_peer_per_round():
    names = ["fk_gather", "aiok_gather", "ck_gather"]
    res = {"fk_gather": [_thr(100_000.0, wakeups_per_record=0.01), _thr(300_000.0), _thr(90_000.0)],
           "aiok_gather": [_thr(50_000.0), _thr(100_000.0), _thr(100_000.0)],
           "ck_gather": [_thr(1000.0, capped=True), _thr(1000.0), {"failed": "exit 1: boom"}]}
    t = aio.throughput_table("gather", res, names)
    fk, aiok, ck = (_cells(ln) for ln in t[2:])
    assert fk[0] == "**fastkafka AsyncProducer**" and fk[3] == "—"
    assert aiok[2] == "100,000" and aiok[3] == "2.00" and aiok[4] == "2.00, 3.00, 0.90"
    assert ck[2] == "FAILED" and ck[3] == "n/a" and "(exit 1: boom)" in ck[-1] and "(capped)" in ck[5]
    assert len(t) == 5                       # ckf not measured: no row


def test_latency_table_ratios_and_behind_marks():
    names = ["fk_lat_busy", "fkp_lat_busy", "aiok_lat_busy", "ck_lat_busy"]
    res = {"fk_lat_busy": [_lat(6.0, 8.0, app_slices_per_s=4000.0), _lat(6.2, 30.0, app_slices_per_s=3000.0),
                           _lat(6.1, 9.0, app_slices_per_s=5000.0)],
           "fkp_lat_busy": [_lat(5.5, 7.0)] * 3,
           "aiok_lat_busy": [_lat(12.0, 10.0), _lat(6.2, 20.0), _lat(6.1, 10.0)],
           "ck_lat_busy": [_lat(60.0, 100.0, achieved=600.0)] * 3}
    t = aio.latency_table("lat_busy", res, names, 20_000)
    fk, fkp, aiok, ck = (_cells(ln) for ln in t[2:])
    assert fk[7] == fk[8] == fkp[7] == "—"
    # p50 per round 0.5, 1.0, 1.0 -> 1.00; p99 per round 0.8, 1.5, 0.9 -> 0.90
    assert aiok[7] == "1.00" and aiok[8] == "0.90"
    assert ck[2] == "600 (behind)" and ck[7] == "0.10"
    assert fk[9] == "4,000" and fkp[9] == "n/a"   # the application's median slices/s; none given: n/a
    assert fk[10] == "10.0"                       # (the busy runs' children report None for it)
    idle = aio.latency_table("lat_idle", {n.replace("busy", "idle"): v for n, v in res.items()},
                             [n.replace("busy", "idle") for n in names], 20_000)
    assert _cells(idle[2])[10] == "10.0"


def test_render_has_every_section_and_the_machine():
    args = aio.parse_args(["--rounds", "1", "--only", "fk_gather,aiok_serial,ck_lat_idle", "--out", "-"])
    report = {"results": {"fk_gather": [_thr(1e5, round=1, order=0, held=1001, load=0.5)],
                          "aiok_serial": [_thr(100.0, round=1, order=1)],
                          "ck_lat_idle": [_lat(80.0, 100.0, round=1, order=2, records=100_000)]},
              "warmup": ("fk_gather", _thr(9e4)), "loads": [0.1, 0.5, 0.7], "fastkafka_commit": "abc1234",
              "fastkafka_is_repo": True, "broker_line": "broker: test"}
    text = aio.render(report, args, 12.0, "broker: test")
    for head in ("## Throughput: 1,000 sends awaited together", "## Throughput: one task awaiting each send",
                 "## Latency at 20,000 records/s, event loop idle", "## Every round", "Machine:",
                 "fastkafka at git abc1234", "--only fk_gather,aiok_serial,ck_lat_idle"):
        assert head in text, head
    assert "event loop busy" not in text
    assert "| 1 | ck_lat_idle | 100,000 | 20,000 rec/s, p50 80.00 / p99 100.00" in text


# ------------------------------------------------------------------------------------ the service shapes
class BatchFakeClient(FakeClient):
    """The fake with a batch call: every value of the array sent, awaited together."""

    async def batch(self, topic, arr):
        res = await asyncio.gather(*[self.p.send(topic, v) for v in arr.to_pylist()])
        return len(res)


def test_stall_ticker_sees_a_blocked_loop_and_only_in_its_window():
    import time

    async def main():
        async with aio_clients.ticking() as tk:
            await asyncio.sleep(0.02)
            a = time.perf_counter()
            time.sleep(0.15)                       # the loop held 150 ms
            b = time.perf_counter()
            await asyncio.sleep(0.03)
            c = time.perf_counter()
            await asyncio.sleep(0.02)
        return tk, a, b, c

    tk, a, b, c = asyncio.run(main())
    whole = tk.stats()
    assert 145 <= whole["max_stall_ms"] < 1000 and whole["ticks"] >= 10
    assert whole["p99_stall_ms"] <= whole["max_stall_ms"]
    assert tk.stats(a, b)["max_stall_ms"] >= 145            # the stall lies in the blocked part
    after = tk.stats(b + 0.005, c)                           # ticks after it: not that stall
    assert after["ticks"] >= 3 and after["max_stall_ms"] < 100
    assert tk.stats(c + 10, c + 20) == {"max_stall_ms": 0.0, "p99_stall_ms": 0.0, "ticks": 0}
    assert aio_clients.StallTicker().stats()["max_stall_ms"] is None     # never ran


def test_the_options_reach_the_clients_module(monkeypatch):
    monkeypatch.setattr(aio_clients, "LINGER_MS", aio_clients.LINGER_MS)   # restored after the test
    monkeypatch.setattr(aio_clients, "TICKER", aio_clients.TICKER)
    args = aio.parse_args(["--linger-ms", "0", "--stall-ticker", "off", "--out", "-"])
    assert aio_clients.LINGER_MS == 0 and aio_clients.TICKER is False
    cmd = aio.child_cmd("fk_tasks", "b:1", "t", args)
    assert cmd[cmd.index("--linger-ms") + 1] == "0" and cmd[cmd.index("--stall-ticker") + 1] == "off"
    assert "--linger-ms 0" in aio.command_line(args) and "--stall-ticker off" in aio.command_line(args)
    aio.parse_args(["--out", "-"])
    assert aio_clients.LINGER_MS == 5 and aio_clients.TICKER is True


def test_ticker_off_and_its_cost(monkeypatch):
    c = FakeClient(FakeProducer(delay=0.002))
    r = asyncio.run(aio_clients.run_tasks(c, "t", [b"v"] * 200, 20, cap_s=60))
    assert r["ticker_us_per_tick"] > 0 and r["ticker_cpu_us_per_record"] is not None
    assert r["ticker_cpu_us_per_record"] == pytest.approx(r["ticks"] * r["ticker_us_per_tick"] / 200)
    monkeypatch.setattr(aio_clients, "TICKER", False)
    assert asyncio.run(aio_clients.ticker_cost()) is None
    r = asyncio.run(aio_clients.run_tasks(FakeClient(FakeProducer(delay=0.002)), "t", [b"v"] * 200, 20, cap_s=60))
    assert r["records"] == 200 and r["max_stall_ms"] is None and r["ticks"] == 0
    assert r["ticker_us_per_tick"] is None and r["ticker_cpu_us_per_record"] is None
    rs = [_thr(1000.0, cpu_us_per_record=5.0, ticker_cpu_us_per_record=0.25)]
    assert aio._cpu_cell(rs) == "5.0 (ticker ≤0.25)" and aio._cpu_cell([_thr(1000.0)]) == "5.0"


def test_tasks_each_await_their_own_sends():
    p = FakeProducer(delay=0.002, fail_every=250)
    c = FakeClient(p)
    r = asyncio.run(aio_clients.run_tasks(c, "t", [b"v"] * 1000, 100, cap_s=60))
    assert r["records"] == 1000 == r["asked"] and r["tasks"] == 100 and not r["capped"]
    assert r["errors"] == 4 and r["completed"] == 996 and "broker said no" in r["first_error"]
    assert p.sent == 1001 == r["total_sent"]
    # 100 tasks at once, each awaiting its 10 sends in turn: about 10 x 2 ms, not 1,000 x 2 ms
    assert r["seconds"] < 1.0 and r["max_stall_ms"] is not None and r["cpu_us_per_record"] > 0
    assert r["wakeups_per_record"] == pytest.approx(1.0)


def test_tasks_stop_after_the_cap():
    c = FakeClient(FakeProducer(delay=0.01))
    r = asyncio.run(aio_clients.run_tasks(c, "t", [b"v"] * 10_000, 10, cap_s=0.1))
    assert r["capped"] and 10 <= r["records"] < 10_000 and r["completed"] == r["records"]
    assert r["seconds"] < 1.0


def test_fire_counts_every_callback_and_times_until_the_last():
    p = FakeProducer(delay=0.005, fail_every=500)
    c = FakeClient(p)
    r = asyncio.run(aio_clients.run_fire(c, "t", [b"v"] * 1500, 400, cap_s=60))
    assert r["records"] == 1500 and r["completed"] + r["errors"] == 1500 and r["errors"] == 3
    assert r["total_sent"] == 1501 == p.sent and r["callbacks_after_30s"] is None
    assert r["seconds"] >= 0.005 and r["rate"] == pytest.approx(1500 / r["seconds"])
    assert r["buffer_retries"] == 0 and r["max_stall_ms"] is not None


def test_arrow_sends_arrays_and_counts_their_records():
    p = FakeProducer(delay=0.001)
    c = BatchFakeClient(p)
    r = asyncio.run(aio_clients.run_arrow(c, "t", [b"v"] * 2500, 1000, cap_s=60))
    assert r["records"] == 2500 == r["completed"] and r["errors"] == 0 and r["chunk"] == 1000
    assert p.sent == 2501 == r["total_sent"]
    assert [len(a) for a in aio_clients.arrow_arrays([b"x"] * 2500, 1000)] == [1000, 1000, 500]

    class Failing(BatchFakeClient):
        async def batch(self, topic, arr):
            raise RuntimeError("no batch today")

    r = asyncio.run(aio_clients.run_arrow(Failing(FakeProducer()), "t", [b"v"] * 300, 100, cap_s=60))
    assert r["errors"] == 300 and r["completed"] == 0 and "no batch today" in r["first_error"]
    assert aio.check(r, 301)["failed"].startswith("0 of 300 completed, errors 300")


def test_first_times_open_send_and_close_with_their_stalls():
    import time

    class Slow(FakeClient):
        module = "asyncio"

        def __init__(self, bootstrap):
            super().__init__(FakeProducer(delay=0.02))

        async def open(self, stack):
            time.sleep(0.15)                       # a constructor that holds the loop 150 ms

        async def warm(self, topic):
            await self.p.send(topic, b"first")

    r = asyncio.run(aio_clients.run_first(Slow, "fake:9092", "t"))
    assert r["records"] == r["completed"] == r["total_sent"] == 1 and r["errors"] == 0
    assert r["open_ms"] >= 150 and r["open_max_stall_ms"] >= 140
    assert r["send_ms"] >= 20 and r["send_max_stall_ms"] < 100      # the open's stall is not the send's
    assert r["max_stall_ms"] >= 140 and 0 <= r["close_max_stall_ms"] < 100
    assert r["first_ms"] == pytest.approx(r["open_ms"] + r["send_ms"])


def test_the_new_tables_and_the_peer_without_a_batch_call():
    names = ["fk_arrow", "aiok_arrow", "fk_first", "ck_first"]
    res = {"fk_arrow": [_thr(200_000.0, max_stall_ms=2.0, p99_stall_ms=0.3)],
           "aiok_arrow": [_thr(20_000.0, max_stall_ms=9.0, p99_stall_ms=1.0)],
           "fk_first": [{"records": 1, "open_ms": 1.0, "open_max_stall_ms": 0.5, "send_ms": 30.0,
                         "send_max_stall_ms": 0.4,
                         "close_ms": 5.0, "close_max_stall_ms": 0.2, "max_stall_ms": 0.5}],
           "ck_first": [{"failed": "exit 1: boom"}]}
    t = aio.throughput_table("arrow", res, names)
    fk, aiok, ck = (_cells(ln) for ln in t[2:])
    assert aiok[3] == "10.00" and aiok[8] == "9.0 (1.00)" and fk[8] == "2.0 (0.30)"
    assert ck[0] == "confluent-kafka AIOProducer" and "no batch call" in ck[1] and ck[2:] == ["—"] * 8
    assert len(ck) == len(fk)
    f = aio.first_table(res, names)
    fkf, ckf = (_cells(ln) for ln in f[2:])
    assert fkf[2:8] == ["1.0", "0.5", "30.0", "0.4", "5.0", "0.2"] and fkf[8] == "0.5"
    assert ckf[2] == "FAILED" and "(exit 1: boom)" in ckf[-1]
    args = aio.parse_args(["--rounds", "1", "--only", ",".join(names), "--out", "-", "--loop", "uvloop"])
    report = {"results": {n: [dict(r, round=1, order=i) for r in res[n]] for i, n in enumerate(names)},
              "warmup": None, "loads": [0.1, 0.2], "fastkafka_commit": "abc1234", "fastkafka_is_repo": True}
    text = aio.render(report, args, 3.0, "broker: test")
    for head in ("## Throughput: await send_batch() of Arrow arrays", "## The first send to a topic without",
                 "Event loop: uvloop", "--tasks 1000 --batch 10000", "max stall ms in close"):
        assert head in text, head
    assert "| 1 | fk_first | 1 | open 1.0 ms (max stall 0.5), first send 30.0 ms" in text


# ------------------------------------------------------------------------------------ a tiny real run
@pytest.fixture(scope="module")
def kafka():
    """One Apache Kafka node for the module's real run, as tests/conftest.py's ``kafka_broker``
    (bench/ has no conftest of its own): the rig's default small heap."""
    from fastkafka_tools.apachekafka import KafkaCluster

    kc = KafkaCluster(nodes=1).start()
    yield kc
    kc.stop()


@pytest.mark.timeout(300)
@pytest.mark.parametrize("loop,only", [("asyncio", "tasks,fire,arrow,first"), ("both", "fk_tasks,fk_fire")])
def test_small_run(kafka, tmp_path, loop, only):
    out = tmp_path / "aio.md"
    args = aio.parse_args(["--bootstrap-servers", kafka.bootstrap, "--rounds", "1", "--records", "400",
                           "--slow-records", "200", "--tasks", "50", "--batch", "150", "--window", "100",
                           "--cap-seconds", "2", "--warmup-records", "0", "--loop", loop, "--only", only,
                           "--out", str(out)])
    report = aio.run_benchmark(kafka.bootstrap, args, log=lambda s: None, broker_pid=kafka.pid)
    loops = aio.loops_of(loop)
    assert list(report["results"]) == [aio.run_key(n, lp, loops) for n in args.names for lp in loops]
    for key, rs in report["results"].items():
        name, _ = aio.base_name(key)
        client, kind = aio.split_name(name)
        (r,) = rs
        assert "failed" not in r, (name, r["failed"])
        assert r["errors"] == 0 and r["completed"] == r["records"], name
        assert r["held"] == r["total_sent"], name          # the broker holds exactly what was sent
        assert r["max_stall_ms"] is not None and r["max_stall_ms"] >= 0, name
        if kind == "first":
            assert r["records"] == 1 and r["held"] == 1
            assert r["send_ms"] > 0 and r["open_max_stall_ms"] is not None and r["close_max_stall_ms"] is not None
            continue
        asked = 400 if client in aio.FASTKAFKA else 200
        assert r["records"] == asked or (r["capped"] and r["records"] > 0), name
        assert r["rate"] > 0 and r["cpu_us_per_record"] > 0, name
        if client in aio.FASTKAFKA:
            assert r["wakeups_per_record"] is not None, name
        if kind == "tasks":
            assert r["tasks"] == 50
        if kind == "arrow":
            assert r["chunk"] == 150
    text = aio.render(report, args, 1.0, "broker: test")
    aio.emit(text, str(out))
    written = out.read_text()
    assert "asyncio's default (selector) event loop" in written
    if loop == "both":
        assert "## Throughput: 1,000 tasks each awaiting its own sends — uvloop " in written
        assert "## Throughput: 1,000 tasks each awaiting its own sends — asyncio's default" in written
        assert "| fk_fire@uvloop |" in written and "| fk_tasks@asyncio |" in written
    else:
        assert "## Throughput: 1,000 tasks each awaiting its own sends\n" in written
    if loop == "asyncio":
        for head in ("## Throughput: fire-and-forget", "## Throughput: await send_batch() of Arrow arrays",
                     "## The first send to a topic without metadata"):
            assert head in written, head
        assert re.search(r"\| confluent-kafka AIOProducer \| no batch call", written)
