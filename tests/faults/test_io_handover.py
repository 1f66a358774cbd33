"""The I/O thread's compiled wait and the GIL hand-over, end to end on the fault broker: an
application thread busy in Python between its sends hands the GIL to the I/O thread through
send(), and the producer's metrics show the waits."""

import time

from fastkafka._core.ioloop import handover_count


def busy(seconds: float) -> int:
    x = 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        for j in range(50):
            x = (x * 31 + j) & 0xFFFF
    return x


def test_busy_sender_hands_the_gil_over_and_every_record_arrives(fb, make_producer):
    fb.create_topic("t", 2)
    p = make_producer(fb, linger_ms=2)
    p.send("t", b"warm").get(10)
    before = handover_count()
    futs = []
    for burst in range(40):
        futs += [p.send("t", b"v-%d-%d" % (burst, i)) for i in range(10)]
        busy(0.003)          # the GIL held in Python between bursts, as a serialising app does
    offsets = {(m.partition, m.offset) for m in (f.get(10) for f in futs)}
    assert len(offsets) == 400                        # every record acknowledged, none twice
    assert fb.cluster.record_count("t") == 401
    m = p.metrics()
    assert m["io_waits"] > 0
    assert m["io_gil_wait_max_ms"] * m["io_waits"] >= m["io_gil_wait_ms_total"] > 0
    assert m["gil_handovers"] == handover_count() > before   # send() gave the GIL away
