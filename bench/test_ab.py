"""bench/ab.py's pure parts: which measurements a run has, the direction of its ratios and its
tables (no broker, no child process).

    python -m pytest bench/test_ab.py -q
"""
from __future__ import annotations

import os
import sys

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import ab  # noqa: E402

RATES, APPS = [20000, 200000], ["busy", "idle"]


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def test_default_is_the_guard_set():
    assert ab.select(None, "", RATES, APPS) == [
        "fk_send_all", "fk_produce_all", "fk_batch_list", "fk_batch_arrow", "tls_send",
        "lat_busy_20000", "lat_idle_20000", "lat_busy_200000", "lat_idle_200000"]


def test_only_names_lat_shorthand_and_keyed():
    assert ab.select("tls_send,lat_busy_20000", "", RATES, APPS) == ["tls_send", "lat_busy_20000"]
    assert ab.select("fk_send_all,lat,lat_idle_20000", "100", [5000], ["idle"]) == [
        "fk_send_all", "lat_idle_5000", "lat_idle_20000", "keyed100"]
    for bad in ("nope", "lat_sleepy_20000", "lat_busy_fast", "lat_busy_0"):
        with pytest.raises(ValueError):
            ab.select(bad, "", RATES, APPS)


def test_parse_latency():
    assert ab.parse_latency("lat_busy_200000") == ("busy", 200000)
    assert ab.parse_latency(ab.latency_name("idle", 20000)) == ("idle", 20000)
    assert ab.parse_latency("fk_send_all") is None


def test_ratios_are_after_over_before_per_round():
    before = [{"rate": 100.0}, {"rate": 200.0}, {"rate": 100.0}]
    after = [{"rate": 110.0}, {"rate": 100.0}, {"rate": 120.0}]
    assert ab.paired(after, before, "rate") == pytest.approx([1.1, 0.5, 1.2])
    # the median of the per-round ratios, not the ratio of the medians (110/100)
    assert ab.median_or_none(ab.paired(after, before, "rate")) == pytest.approx(1.1)
    after[1] = {"failed": "boom"}
    assert ab.paired(after, before, "rate")[1] is None
    assert ab.median_or_none(ab.paired(after, before, "rate")) is None


def _lat(p50, p99, achieved=20000.0, cpu=2.0):
    return {"p50": p50, "p99": p99, "achieved": achieved, "cpu_us_per_record": cpu}


def test_latency_table_in_microseconds_lower_is_better():
    res = {("lat_busy_20000", "before"): [_lat(4.0, 8.0), _lat(5.0, 10.0), _lat(4.0, 12.0)],
           ("lat_busy_20000", "after"): [_lat(2.0, 8.0), _lat(5.0, 20.0), _lat(3.0, 6.0)]}
    table = ab.latency_table(["lat_busy_20000"], res)
    assert "lower" in " ".join(ab.report(_Args(), ["lat_busy_20000"], res, {"before": "a", "after": "b"},
                                         "broker", 1.0, 0.0))
    assert "after/before (≤ 1: no slower)" in table[0]
    row = _cells(table[2])
    # medians in µs: before p50 4000, after 3000; per-round p50 ratios 0.5, 1.0, 0.75 -> 0.75
    assert row[:4] == ["lat_busy_20000", "4,000", "3,000", "0.750"]
    # p99: before 10000, after 8000; per round 1.0, 2.0, 0.5 -> 1.0
    assert row[4:7] == ["10,000", "8,000", "1.000"]
    assert row[7] == "0.50 / 1.00, 1.00 / 2.00, 0.75 / 0.50"
    assert row[8] == "20,000 / 20,000"
    assert row[9] == "–"                    # busy: the CPU is the application loop's
    res[("lat_idle_20000", "before")] = [_lat(4.0, 8.0, cpu=2.0)]
    res[("lat_idle_20000", "after")] = [_lat(4.0, 8.0, cpu=1.5)]
    assert _cells(ab.latency_table(["lat_idle_20000"], res)[2])[9] == "2.00 / 1.50"
    assert ab.behind(["lat_busy_20000"], res) == []
    res[("lat_busy_20000", "after")] = [_lat(1, 1, achieved=15000.0)] * 3
    assert ab.behind(["lat_busy_20000"], res) == ["lat_busy_20000 after: 15,000 rec/s"]


def test_throughput_table_higher_is_better_and_failed_rounds():
    res = {("tls_send", "before"): [{"rate": 1e6, "cpu_us": 2.0}, {"rate": 1e6, "cpu_us": 2.0}],
           ("tls_send", "after"): [{"rate": 1.2e6, "cpu_us": 1.5}, {"failed": "delivered 3 of 4"}]}
    table = ab.throughput_table(["tls_send"], res)
    assert "≥ 1: no slower" in table[0] and "≤ 1: no more work" in table[0]
    assert _cells(table[2]) == ["tls_send", "1,000,000", "failed", "failed", "1.20, failed",
                                "2.00 / failed", "failed"]
    assert ab.failures(["tls_send"], res) == ["- tls_send after round 2: delivered 3 of 4"]
    res[("tls_send", "after")][1] = {"rate": 1e6, "cpu_us": 2.5}
    assert _cells(ab.throughput_table(["tls_send"], res)[2])[5:] == ["2.00 / 2.00", "1.000"]


def test_checks():
    ok = {"seconds": 2.0, "delivered": 10, "records": 10, "errors": 0, "warmup_records": 1,
          "child_cpu_s": 0.5}
    assert ab.check_throughput(dict(ok), held=11)["rate"] == 5.0
    assert ab.check_throughput(dict(ok), held=11)["cpu_us"] == 50_000.0
    assert "failed" in ab.check_throughput(dict(ok), held=10)
    assert "failed" in ab.check_throughput({**ok, "delivered": 9})
    lat = {"sent": 5, "completed": 5, "errors": 0, "undelivered": 0, "total_sent": 7}
    assert "failed" not in ab.check_latency(dict(lat), held=7)
    assert "failed" in ab.check_latency(dict(lat), held=6)
    assert "failed" in ab.check_latency({**lat, "completed": 4})


class _Args:
    rounds, records, partitions, tick_us, latency_warmup, latency_seconds = 3, 1000, 6, 1000.0, 1.0, 5.0
