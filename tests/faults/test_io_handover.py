"""The I/O thread's compiled wait and the GIL hand-over, end to end on the fault broker: an
application thread busy in Python between its sends hands the GIL to the I/O thread through
send(), and the producer's metrics show the waits."""

import time

from fastkafka._net.ioloop import handover_count


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
    # At least 40 bursts, and on until a send() met the I/O thread waiting for the GIL (a machine
    # busy with other processes may not schedule the I/O thread in a given burst's gap); 400 at
    # most, which no working hand-over needs.
    for burst in range(400):
        futs += [p.send("t", b"v-%d-%d" % (burst, i)) for i in range(10)]
        busy(0.003)          # the GIL held in Python between bursts, as a serialising app does
        if burst >= 39 and handover_count() > before:
            break
    offsets = {(m.partition, m.offset) for m in (f.get(10) for f in futs)}
    assert len(offsets) == len(futs)                  # every record acknowledged, none twice
    assert fb.cluster.record_count("t") == len(futs) + 1
    m = p.metrics()
    assert m["io_waits"] > 0
    assert m["io_gil_wait_max_ms"] * m["io_waits"] >= m["io_gil_wait_ms_total"] > 0
    assert m["gil_handovers"] == handover_count() > before   # send() gave the GIL away


def test_a_new_batch_arms_the_linger_timer_instead_of_waking_the_io_thread(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, linger_ms=300)
    p.send("t", b"warm").get(10)
    before = p.metrics()
    t0 = time.monotonic()
    fut = p.send("t", b"one")                       # starts a batch
    after = p.metrics()
    assert after["io_timers_armed"] == before["io_timers_armed"] + 1
    assert after["io_wakeups_written"] == before["io_wakeups_written"]
    md = fut.get(10)
    assert time.monotonic() - t0 >= 0.25            # sent at its linger deadline, not before
    assert md.offset == 1
    # a full batch still wakes the I/O thread at once
    p2 = make_producer(fb, linger_ms=60_000, batch_size=1024)
    p2.send("t", b"warm")
    p2.flush(10)                                     # a flush sends at once
    w0 = p2.metrics()["io_wakeups_written"]
    futs = [p2.send("t", b"x" * 200) for _ in range(20)]
    # the filled batches go at once, 60 s before their linger deadline
    assert [f.get(10).offset for f in futs[:4]] == [3, 4, 5, 6]
    assert p2.metrics()["io_wakeups_written"] > w0
    p2.flush(10)
    assert [f.get(0).offset for f in futs] == list(range(3, 23))
