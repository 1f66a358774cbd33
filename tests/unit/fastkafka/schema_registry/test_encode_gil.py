"""encode_arrow releases the GIL while it encodes the rows: another Python thread makes progress
during the call, over most of its length.

The switch interval is raised so that the calling thread is never made to hand the GIL over: the
other thread (a counter that gives the GIL back at every tick) can run only where the call releases
it. pyarrow itself releases the GIL for a moment while it builds the output array, so ticks alone
prove little: the ticks must cover most of the call's duration (the row loop), not one instant
(without the release in the row loop, the median share measured is 0; with it, above 0.9). A
pure-Python loop, measured the same way, shows the measure tells the two apart."""

from __future__ import annotations

import sys
import threading
import time

import pytest

import pyarrow as pa

from fastkafka.schema_registry._encode import AvroEncoder, JsonEncoder  # noqa: E402


def released_share(fn) -> float:
    """The share of ``fn``'s duration over which another thread ran (its first to last tick)."""
    ticks: list[float] = []
    stop = False
    started = threading.Event()

    def counter():
        started.set()
        while not stop:
            ticks.append(time.perf_counter())
            time.sleep(0)            # gives the GIL back at once, so the caller can go on

    old = sys.getswitchinterval()
    t = threading.Thread(target=counter, daemon=True)
    t.start()
    started.wait()
    sys.setswitchinterval(100.0)
    try:
        time.sleep(0.01)             # the counter is now in its loop
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
    finally:
        sys.setswitchinterval(old)
        stop = True
        t.join()
    during = [x for x in ticks if t0 <= x <= t1]
    if len(during) < 2:
        return 0.0
    return (during[-1] - during[0]) / (t1 - t0)


def median_share(fn, runs: int = 3) -> float:
    """The median of a few measures: one run can be skewed by a machine busy elsewhere."""
    return sorted(released_share(fn) for _ in range(runs))[runs // 2]


@pytest.fixture(scope="module")
def big_column():
    small = pa.StructArray.from_arrays(
        [pa.array(range(1000), pa.int64()), pa.array([f"name-{i}" for i in range(1000)]),
         pa.array([i * 0.5 for i in range(1000)])],
        names=["id", "name", "score"])
    return pa.concat_arrays([small] * 1000)


def test_avro_encode_arrow_lets_other_threads_run(big_column):
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "score", "type": "double"}]})
    out = []
    assert median_share(lambda: out.append(enc.encode_arrow(big_column))) > 0.5
    assert len(out[0]) == len(big_column)


def test_json_encode_arrow_lets_other_threads_run(big_column):
    enc = JsonEncoder()
    assert median_share(lambda: enc.encode_arrow(big_column)) > 0.5


def test_the_measure_sees_a_call_that_keeps_the_gil():
    def busy():
        end = time.perf_counter() + 0.1
        while time.perf_counter() < end:
            pass
    assert median_share(busy) < 0.1
