"""Unit tests of bench/latency.py's percentile, pacing and table code (no broker).
Run: python -m pytest bench/test_latency.py -q"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import latency  # noqa: E402
import pacing  # noqa: E402


def test_percentile_nearest_rank():
    s = list(range(1, 101))                      # 1..100
    assert pacing.percentile(s, 50) == 50
    assert pacing.percentile(s, 99) == 99
    assert pacing.percentile(s, 99.9) == 100    # ceil(99.9) = 100th value
    assert pacing.percentile(s, 100) == 100
    s1000 = list(range(1, 1001))
    assert pacing.percentile(s1000, 99.9) == 999
    assert pacing.percentile([7], 50) == 7
    assert pacing.percentile([1, 2], 50) == 1
    with pytest.raises(ValueError):
        pacing.percentile([], 50)
    with pytest.raises(ValueError):
        pacing.percentile([1], 0)


def test_summarize_in_ms_whatever_the_order():
    ns = [i * 1_000_000 for i in range(1000, 0, -1)]   # 1..1000 ms, descending
    s = pacing.summarize(ns)
    assert s == {"p50": 500.0, "p99": 990.0, "p999": 999.0, "max": 1000.0, "count": 1000}


def test_due_never_negative_and_catches_up():
    assert pacing.due(20_000, 1_000_000, 0) == 20        # 1 ms at 20k/s
    assert pacing.due(20_000, 1_000_000, 25) == 0        # ahead: nothing
    assert pacing.due(200_000, 10_000_000, 1000) == 1000  # 10 ms late by 1000 records


class FakeClock:
    """A clock that moves only when the pacing waits (and a little per send)."""

    def __init__(self, per_call_ns=0):
        self.t = 1_000_000_000
        self.per_call = per_call_ns

    def __call__(self):
        self.t += self.per_call
        return self.t

    def wait(self, deadline):
        self.t = max(self.t, deadline)


@pytest.mark.parametrize("rate,tick_ns", [(20_000, 1_000_000), (200_000, 1_000_000), (1_000, 250_000)])
def test_paced_run_sends_the_asked_rate_in_bursts(rate, tick_ns):
    clock = FakeClock()
    times = []
    sent, first, last = pacing.paced_run(lambda i, t: times.append((i, t)), rate, 0.5, tick_ns,
                                          clock.wait, clock=clock)
    assert sent == int(rate * 0.5) == len(times)
    assert [i for i, _ in times] == list(range(sent))
    achieved = (sent - 1) / ((last - first) / 1e9)
    assert achieved == pytest.approx(rate, rel=0.01)
    # no burst larger than what one tick is due (plus rounding)
    per_tick: dict[int, int] = {}
    for _, t in times:
        per_tick[t] = per_tick.get(t, 0) + 1
    assert max(per_tick.values()) <= rate * tick_ns / 1e9 + 1


def test_paced_run_catches_up_after_a_stall():
    clock = FakeClock()
    stalled = []

    past = []

    def wait(deadline):
        if deadline < clock.t:
            past.append(deadline)
        if not stalled and clock.t > 1_000_000_000 + 100_000_000:
            stalled.append(clock.t)
            clock.t += 50_000_000          # the application stalls 50 ms once
        clock.wait(deadline)

    sent, first, last = pacing.paced_run(lambda i, t: None, 10_000, 1.0, 1_000_000, wait, clock=clock)
    assert stalled and sent == 10_000
    # the lost 50 ms are made up by one large burst, so the run still ends on schedule
    assert (last - first) / 1e9 == pytest.approx(1.0, abs=0.002)
    # and the ticks restart from the late burst: no run of waits for deadlines already gone
    assert len(past) <= 1, len(past)


def test_burn_until_stops_at_the_deadline():
    clock = FakeClock(per_call_ns=1000)
    n = pacing.burn_until(clock.t + 10_000, clock=clock)
    assert 8 <= n <= 11


def _rs(**kw):
    base = {"achieved": 1000.0, "p50": 5.0, "p99": 10.0, "p999": 12.0, "max": 20.0, "cpu_us_per_record": 2.0}
    return {**base, **kw}


def test_tables_and_verdicts_use_per_round_ratios():
    rates, apps = [20000], ["busy", "idle"]
    res = {latency.key(c, a, 20000): [] for c, a, _ in latency.names_for(rates, apps)}
    res["fk-busy-20000"] = [_rs(p50=6.0, p99=8.0), _rs(p50=6.4, p99=30.0), _rs(p50=7.0, p99=9.0)]
    res["ck-busy-20000"] = [_rs(p99=10.0), _rs(p99=20.0), _rs(p99=10.0)]
    res["fk-idle-20000"] = [_rs(cpu_us_per_record=1.0), _rs(cpu_us_per_record=3.0), _rs(cpu_us_per_record=2.0)]
    res["ck-idle-20000"] = [_rs(cpu_us_per_record=4.0), _rs(cpu_us_per_record=4.0), _rs(cpu_us_per_record=4.0)]
    # per-round p99 ratios 0.8, 1.5, 0.9 -> median 0.9 (the ratio of medians would be 9/10)
    assert latency.per_round_ratio(res["fk-busy-20000"], res["ck-busy-20000"], "p99") == pytest.approx(0.9)
    table = latency.latency_table(res, rates, apps)
    fk_busy = next(ln for ln in table if "busy" in ln and "fastkafka" in ln)
    cells = [c.strip() for c in fk_busy.strip("|").split("|")]
    assert cells[4:9] == ["6.40", "9.00", "12.00", "20.00", "0.90"]
    cpu = latency.cpu_table(res, rates)
    assert [c.strip() for c in cpu[2].strip("|").split("|")][1:4] == ["2.00", "4.00", "0.50"]
    v = "\n".join(latency.verdicts(res, rates, apps))
    assert "p50 6.40 ms against ≤ 6.5 ms: met" in v
    assert "p99 0.90× confluent-kafka's against ≤ 1: met" in v
    assert "CPU per record: 0.50× confluent-kafka's against ≤ 0.5: met" in v


def test_cpu_above_the_harness_floor_is_a_per_round_ratio():
    rates = [20000]
    res = {latency.key(c, a, 20000): [] for c, a, _ in latency.names_for(rates, ["idle"])}
    assert "floor-idle-20000" in res            # measured whenever the application is idle
    res["fk-idle-20000"] = [_rs(cpu_us_per_record=v) for v in (5.0, 7.0, 6.0)]
    res["ck-idle-20000"] = [_rs(cpu_us_per_record=v) for v in (7.0, 7.0, 9.0)]
    res["floor-idle-20000"] = [_rs(cpu_us_per_record=v) for v in (3.0, 3.0, 3.0)]
    # per round (5-3)/(7-3)=0.5, (7-3)/(7-3)=1.0, (6-3)/(9-3)=0.5 -> median 0.5
    row = [c.strip() for c in latency.cpu_table(res, rates)[2].strip("|").split("|")]
    assert row[4:6] == ["3.00", "0.50"]
    assert "(0.50× above the harness floor both pay)" in "\n".join(latency.verdicts(res, rates, ["idle"]))
    res["floor-idle-20000"][1] = {"failed": "boom"}
    assert latency.above_floor_ratio(res["fk-idle-20000"], res["ck-idle-20000"], res["floor-idle-20000"]) is None


def test_a_failed_round_shows_failed_not_a_median():
    rs = [_rs(), {"failed": "2 of 3 callbacks"}]
    assert latency.med(rs, "p50") is None
    assert latency.per_round_ratio(rs, [_rs(), _rs()], "p99") is None
    res = {latency.key(c, a, 1000): [_rs()] for c, a, _ in latency.names_for([1000], ["busy"])}
    res["fk-busy-1000"] = rs
    assert "FAILED" in "\n".join(latency.latency_table(res, [1000], ["busy"]))
    assert "n/a" in "\n".join(latency.verdicts(res, [1000], ["busy"]))


def test_verdict_says_when_a_client_fell_behind_the_paced_rate():
    res = {latency.key(c, a, 1000): [_rs()] for c, a, _ in latency.names_for([1000], ["busy"])}
    assert "not at the paced rate" not in "\n".join(latency.verdicts(res, [1000], ["busy"]))
    res["ck-busy-1000"] = [_rs(achieved=900.0)]
    v = "\n".join(latency.verdicts(res, [1000], ["busy"]))
    assert "not at the paced rate: confluent-kafka achieved 900 rec/s" in v
