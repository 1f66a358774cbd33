"""encode_arrow releases the GIL while it encodes the rows: another Python thread makes progress
during one long call. The switch interval is raised so that the calling thread is never made to
hand the GIL over: the other thread can run only where the call releases it. A pure-Python loop
as long as the call, measured the same way, shows that the method tells the two apart."""

from __future__ import annotations

import sys
import threading
import time

import pytest

pa = pytest.importorskip("pyarrow")

from fastkafka.schema_registry._encode import AvroEncoder, JsonEncoder  # noqa: E402


def ticks_during(fn) -> int:
    ticks = 0
    stop = False
    started = threading.Event()

    def counter():
        nonlocal ticks
        started.set()
        while not stop:
            ticks += 1
            time.sleep(0)            # gives the GIL back at once, so the caller can go on

    old = sys.getswitchinterval()
    t = threading.Thread(target=counter, daemon=True)
    t.start()
    started.wait()
    sys.setswitchinterval(100.0)
    try:
        time.sleep(0.01)             # the counter is now in its loop
        before = ticks
        fn()
        during = ticks - before
    finally:
        sys.setswitchinterval(old)
        stop = True
        t.join()
    return during


@pytest.fixture(scope="module")
def big_column():
    small = pa.StructArray.from_arrays(
        [pa.array(range(1000), pa.int64()), pa.array([f"name-{i}" for i in range(1000)]),
         pa.array([i * 0.5 for i in range(1000)])],
        names=["id", "name", "score"])
    return pa.concat_arrays([small] * 1500)


def test_avro_encode_arrow_lets_other_threads_run(big_column):
    enc = AvroEncoder({"type": "record", "name": "R", "fields": [
        {"name": "id", "type": "long"}, {"name": "name", "type": "string"}, {"name": "score", "type": "double"}]})
    out = []
    assert ticks_during(lambda: out.append(enc.encode_arrow(big_column))) > 0
    assert len(out[0]) == len(big_column)


def test_json_encode_arrow_lets_other_threads_run(big_column):
    enc = JsonEncoder()
    assert ticks_during(lambda: enc.encode_arrow(big_column)) > 0


def test_the_measure_sees_a_call_that_keeps_the_gil():
    def busy():
        end = time.perf_counter() + 0.05
        while time.perf_counter() < end:
            pass
    assert ticks_during(busy) == 0
