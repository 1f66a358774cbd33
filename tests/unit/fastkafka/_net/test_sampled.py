"""Windowed statistics (fastkafka._net.sampled) measured as the Java client's SampledStat and Rate
measure them, with the time passed in: each expected value is worked out from Java's rules
(samples + 1 samples; a sample lasts a window from its first event; samples whose last event is
samples * window old are left out; a rate's time is the span since the oldest sample began, at
least samples - 1 full windows)."""
import json
import time

import pytest

from fastkafka import Producer
from fastkafka._net.sampled import SampledRegistry, SampledStat
from fastkafka.errors import ConfigError


def test_rate_avg_max_over_two_samples():
    s = SampledStat(window_ms=1000, samples=2)
    s.record(5, now=0)
    s.record(5, now=500)
    s.record(10, now=1200)          # the first sample began 1200 ms ago: a new one
    m = s.measure(now=1500)
    assert m["rate"] == pytest.approx(20 / 1.5)        # 20 over 1500 ms (one full window in it)
    assert m["count_rate"] == pytest.approx(3 / 1.5)
    assert m["avg"] == pytest.approx(20 / 3)
    assert m["max"] == 10
    assert (m["total"], m["events"]) == (20, 3)


def test_a_young_statistic_counts_the_missing_windows():
    s = SampledStat(window_ms=1000, samples=3)
    s.record(6, now=0)
    # 500 ms elapsed, fewer than samples - 1 = 2 full windows: 2000 ms are added
    assert s.measure(now=500)["rate"] == pytest.approx(6 / 2.5)
    assert s.measure(now=2000)["rate"] == pytest.approx(6 / 2.0)   # two full windows: as they are


def test_the_ring_recycles_the_oldest_sample_and_drops_obsolete_ones():
    s = SampledStat(window_ms=1000, samples=2)        # three samples kept
    for t in (0, 1000, 2000, 3000):                   # each starts a sample; 3000 reuses the first
        s.record(1, now=t)
    m = s.measure(now=3500)
    # the sample of 1000 is obsolete (its last event 2500 >= 2000 ms ago); those of 2000 and 3000
    # count, over 1500 ms since the oldest began
    assert m["rate"] == pytest.approx(2 / 1.5)
    assert m["avg"] == 1 and m["max"] == 1
    assert (m["total"], m["events"]) == (4, 4)        # the totals keep everything


def test_nothing_in_the_windows():
    s = SampledStat(window_ms=1000, samples=2)
    m = s.measure(now=10)
    assert (m["rate"], m["avg"], m["max"], m["total"]) == (0.0, None, None, 0)
    s.record(7, now=0)
    m = s.measure(now=10_000)                          # long idle: every sample obsolete
    assert (m["rate"], m["avg"], m["max"], m["total"]) == (0.0, None, None, 7)


def test_max_is_the_largest_value_even_when_negative():
    s = SampledStat(window_ms=1000, samples=2)
    s.record(-3, now=0)
    s.record(-1, now=1)
    assert s.measure(now=2)["max"] == -1


@pytest.mark.parametrize("window, samples", [(1000, 0), (1000, 33), (0, 2)])
def test_bad_settings_are_refused(window, samples):
    with pytest.raises(ConfigError, match="metrics_"):
        SampledStat(window_ms=window, samples=samples)


def test_registry_keeps_topics_and_nodes_apart():
    r = SampledRegistry(window_ms=1000, samples=2)
    r.record_topic("a", "errors", 3, now=0)
    r.record_topic("b", "errors", 1, now=0)
    r.record("errors", 4, now=0)
    r.record_node(7, "latency", 12, now=0)
    snap = r.snapshot(now=1000)
    assert snap["topics"]["a"]["errors"]["total"] == 3
    assert snap["topics"]["b"]["errors"]["total"] == 1
    assert snap["global"]["errors"]["rate"] == pytest.approx(4.0)   # 4 over one window
    assert snap["nodes"][7]["latency"]["max"] == 12
    with pytest.raises(KeyError):
        r.record("no-such-statistic", 1, now=0)


def test_metrics_settings_are_accepted_in_both_spellings():
    with Producer({"bootstrap.servers": "127.0.0.1:1", "metrics.sample.window.ms": 5000,
                   "metrics.num.samples": 3}) as p:
        assert (p._client.sampled.window_ms, p._client.sampled.samples) == (5000, 3)
        doc = p.java_metrics()
        json.dumps(doc, allow_nan=False)
        assert set(doc) == {"producer-metrics", "producer-node-metrics", "producer-topic-metrics"}
        assert doc["producer-metrics"]["buffer-total-bytes"] == p.config.buffer_memory


def test_stats_cb_needs_an_interval():
    with pytest.raises(ConfigError, match="statistics_interval_ms"):
        Producer(bootstrap_servers="127.0.0.1:1", stats_cb=print)


def test_stats_cb_runs_every_interval_and_survives_a_raise(caplog):
    got = []

    def cb(doc):
        got.append(doc)
        if len(got) == 1:
            raise RuntimeError("first call fails")

    with Producer({"bootstrap.servers": "127.0.0.1:1", "statistics.interval.ms": 50,
                   "stats_cb": cb}) as p:
        deadline = time.monotonic() + 10
        while len(got) < 4 and time.monotonic() < deadline:
            time.sleep(0.02)
        p.close(timeout=0)
    assert len(got) >= 4, got
    assert "stats_cb raised" in caplog.text
    for doc in got:
        json.dumps(doc, allow_nan=False)
        assert "record-send-rate" in doc["producer-metrics"]
        assert "records_sent" in doc["fastkafka-metrics"]
