"""The perf tool (``python -m fastkafka_tools.perf``), run as a subprocess the way a user runs it."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys

import pytest

from brokers import read_back, unique_name

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FINAL = re.compile(
    r"^(?P<records>\d+) records sent, (?P<rps>[\d.]+) records/sec \((?P<mbs>[\d.]+) MB/sec\), "
    r"(?P<avg>[\d.]+) ms avg latency, (?P<max>[\d.]+) ms max latency, (?P<p50>\d+) ms 50th, "
    r"(?P<p95>\d+) ms 95th, (?P<p99>\d+) ms 99th, (?P<p999>\d+) ms 99\.9th\.$")
PROGRESS = re.compile(
    r"^\d+ records sent, [\d.]+ records/sec \([\d.]+ MB/sec\), [\d.]+ ms avg latency, "
    r"[\d.]+ ms max latency\.$")
STARTED = re.compile(r"^started a local (tansu|noida) broker on 127\.0\.0\.1:(\d+)$")


def run_perf(*args, timeout=120):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "fastkafka_tools.perf", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def check_output(r, num_records, record_size=100, local_kind="tansu"):
    assert r.returncode == 0, f"rc={r.returncode}\nstdout:\n{r.stdout}\nstderr:\n{r.stderr}"
    lines = r.stdout.strip().splitlines()
    port = None
    if local_kind:
        m = STARTED.match(lines[0])
        assert m and m.group(1) == local_kind, lines[0]
        port = int(m.group(2))
        lines = lines[1:]
    *progress, final = lines
    for line in progress:
        assert PROGRESS.match(line), line
    m = FINAL.match(final)
    assert m, final
    v = {k: float(x) for k, x in m.groupdict().items()}
    assert v["records"] == num_records                       # every record acknowledged
    assert v["rps"] > 0 and v["mbs"] > 0
    # MB/sec is records/sec times the record size (both printed rounded).
    assert v["mbs"] == pytest.approx(v["rps"] * record_size / 1024 / 1024, rel=0.01, abs=0.01)
    assert 0 <= v["avg"] <= v["max"]
    assert v["p50"] <= v["p95"] <= v["p99"] <= v["p999"] <= round(v["max"]) + 1
    if port is not None:                                     # the tool stopped its broker
        with pytest.raises(ConnectionRefusedError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
    return v


def test_perf_send_mode_own_broker():
    r = run_perf("--num-records", "20000", "--reporting-interval", "200")
    check_output(r, 20000)


def test_perf_batch_mode_own_broker():
    r = run_perf("--num-records", "20000", "--reporting-interval", "200", "--mode", "batch",
                 "--batch-records", "3000")
    check_output(r, 20000)


def test_perf_producer_props():
    r = run_perf("--num-records", "20000", "--reporting-interval", "200", "--record-size", "64",
                 "--producer-props", "compression.type=lz4", "linger.ms=2")
    check_output(r, 20000, record_size=64)


@pytest.mark.parametrize("props,needle", [
    (["bogus.key=1"], "bogus.key"),
    (["linger.ms=abc"], "linger_ms"),
    (["acks=1", "enable.idempotence=true"], "enable_idempotence"),
])
def test_perf_bad_producer_props(props, needle):
    r = run_perf("--num-records", "100", "--producer-props", *props)
    assert r.returncode != 0
    assert "ConfigError" in r.stderr and needle in r.stderr, r.stderr
    assert "started a local" not in r.stdout          # rejected before starting a broker
    assert "Traceback" not in r.stderr


@pytest.mark.broker
@pytest.mark.parametrize("mode", ["send", "batch"])
def test_perf_against_given_broker_writes_the_records(broker, mode):
    """With --bootstrap-servers it uses that broker: the records are really there afterwards."""
    topic = unique_name("perf")
    r = run_perf("--bootstrap-servers", broker.bootstrap, "--topic", topic, "--num-records", "3000",
                 "--record-size", "50", "--partitions", "3", "--mode", mode, "--batch-records", "700",
                 "--producer-props", "compression.type=zstd")
    check_output(r, 3000, record_size=50, local_kind=None)
    got = read_back(broker.bootstrap, topic, 3, 3000)
    values = [m.value for msgs in got.values() for m in msgs]
    assert len(values) == 3000 and all(len(v) == 50 for v in values)
    assert len(set(values)) == 1                      # one random payload, reused
