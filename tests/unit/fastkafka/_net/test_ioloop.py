"""The I/O thread's compiled wait (fastkafka/_net/ioloop.pyx): epoll readiness, the eventfd
wake-up, and the GIL handed over by the application's send()."""

import socket
import threading
import time

import pytest

from fastkafka._net.ioloop import READ, WRITE, Poller, handover_count, yield_to_io


@pytest.fixture
def pair():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    yield a, b
    a.close()
    b.close()


def test_nothing_ready_returns_empty_after_the_timeout():
    p = Poller()
    assert p.poll(0) == []
    assert p.poll(5) == []
    assert p.waits == 1        # only the call with a timeout blocked
    p.close()


def test_readiness_reported_with_the_registered_data(pair):
    a, b = pair
    p = Poller()
    token = object()
    p.register(a.fileno(), READ, token)
    assert p.poll(0) == []
    b.send(b"x")
    assert p.poll(100) == [(token, a.fileno(), READ)]
    p.modify(a.fileno(), READ | WRITE, token)
    assert p.registered_events(a.fileno()) == READ | WRITE
    assert p.poll(100) == [(token, a.fileno(), READ | WRITE)]
    a.recv(10)
    assert p.poll(0) == [(token, a.fileno(), WRITE)]
    p.unregister(a.fileno())
    p.unregister(a.fileno())   # a second time: ignored
    assert p.poll(0) == [] and len(p) == 0
    p.close()


def test_peer_close_reports_read(pair):
    a, b = pair
    p = Poller()
    p.register(a.fileno(), READ, "conn")
    b.close()
    [(data, fd, mask)] = p.poll(100)
    assert data == "conn" and fd == a.fileno() and mask & READ
    p.close()


def test_register_twice_and_modify_unknown_do_not_fail(pair):
    a, _b = pair
    p = Poller()
    p.register(a.fileno(), READ, 1)
    p.register(a.fileno(), WRITE, 2)        # the descriptor number reused: re-armed
    assert p.poll(50) == [(2, a.fileno(), WRITE)]
    p.unregister(a.fileno())
    p.modify(a.fileno(), WRITE, 3)          # not watched: added
    assert p.poll(50) == [(3, a.fileno(), WRITE)]
    p.close()


def test_wakeup_ends_a_wait_and_is_consumed():
    p = Poller()
    p.wakeup()
    p.wakeup()                 # pending already: no second write
    assert p.wakeups_written == 1
    assert p.poll(1000) == []  # returns at once, nothing reported
    assert p.waits == 0        # the wake-up was ready: the GIL was never given up
    t = threading.Timer(0.05, p.wakeup)
    t.start()
    start = time.monotonic()
    p.poll(10_000)
    assert time.monotonic() - start < 5   # woken, not timed out
    assert p.wakeups_written == 2
    t.join()
    p.close()


def test_closed_poller_refuses_work_and_wakeup_is_harmless():
    p = Poller()
    p.close()
    assert p.closed
    p.wakeup()                 # another thread may still call it
    with pytest.raises(ValueError, match="closed"):
        p.poll(0)
    with pytest.raises(ValueError, match="closed"):
        p.register(0, READ, None)


def test_busy_application_hands_the_gil_to_a_waiting_io_thread():
    """A thread blocked in poll() wants the GIL back when its wait ends; the application, busy in
    Python, calls yield_to_io() (as send() does): the hand-over happens through it."""
    p = Poller()
    done = threading.Event()

    def io():
        for _ in range(20):
            p.poll(2)           # each wait ends with a GIL hand-over request
        done.set()

    before = handover_count()
    t = threading.Thread(target=io)
    t.start()
    x = 0
    deadline = time.monotonic() + 60
    while not done.is_set() and time.monotonic() < deadline:
        for j in range(200):    # busy Python code holding the GIL
            x = (x * 31 + j) & 0xFFFF
        yield_to_io()
    t.join(60)
    assert done.is_set()
    assert handover_count() > before
    assert p.waits == 20
    p.close()


def test_give_way_does_nothing_when_no_io_thread_waits():
    before = handover_count()
    for _ in range(1000):
        yield_to_io()
    assert handover_count() == before


def test_a_forked_child_inherits_no_waiting_io_thread():
    """An I/O thread waiting for the GIL at fork time does not exist in the child: the child's
    send() calls must not keep handing the GIL to nobody."""
    import os
    import sys

    from fastkafka._net.ioloop import waiting_io_threads

    p = Poller()
    old = sys.getswitchinterval()
    sys.setswitchinterval(5.0)      # no forced switch: the I/O thread stays waiting for the GIL
    t = threading.Thread(target=p.poll, args=(10_000,))
    try:
        t.start()
        time.sleep(0.2)             # the thread is now blocked in epoll without the GIL
        p.wakeup()
        deadline = time.perf_counter() + 5
        while waiting_io_threads() == 0 and time.perf_counter() < deadline:
            pass                    # busy, GIL held: the woken thread waits for it
        assert waiting_io_threads() == 1
        pid = os.fork()
        if pid == 0:
            before = handover_count()
            for _ in range(100):
                yield_to_io()
            os._exit(0 if waiting_io_threads() == 0 and handover_count() == before else 1)
    finally:
        sys.setswitchinterval(old)
    t.join(10)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    p.close()


def test_wake_at_ends_a_wait_at_the_deadline_without_waking_now():
    from fastkafka._net.cells import monotonic_ms

    p = Poller()
    now = monotonic_ms()
    p.wake_at(now + 80)
    p.wake_at(now + 500)                  # later than the armed one: nothing to do
    assert p.timers_armed == 1
    assert p.poll(0) == []                # not woken now
    start = monotonic_ms()
    assert p.poll(10_000) == []           # returns at the timer, not after 10 s
    assert 60 <= monotonic_ms() - start < 5_000
    assert p.poll(0) == []                # the expiry was consumed
    p.wake_at(monotonic_ms() + 10_000)
    p.wake_at(monotonic_ms() + 30)        # earlier: re-armed
    assert p.timers_armed == 3
    start = monotonic_ms()
    p.poll(20_000)
    assert monotonic_ms() - start < 5_000
    assert p.wakeups_written == 0
    p.close()


# -- the GIL-free turn inside the wait (Poller.set_gil_free) ----------------------------------------

def test_gil_free_turn_runs_on_the_deadline_and_keeps_waiting_until_it_asks_for_the_gil():
    from fastkafka._producer.testing import GilFreeProbe
    p = Poller()
    probe = GilFreeProbe(p, 4, 10)   # each turn: wait 10 ms more; the 4th takes the GIL
    t0 = time.monotonic()
    assert p.poll(10) == []
    elapsed = time.monotonic() - t0
    assert probe.calls == 4
    assert p.gil_free_turns == 4
    assert p.waits == 1                  # one blocking wait: the GIL was given up once
    assert probe.span_ms >= 25           # the turns were 10 ms apart (3 gaps)
    assert probe.calls_holding_gil == 0
    assert elapsed >= 0.035
    probe.remove()
    p.close()


def test_gil_free_wake_runs_the_turn_and_a_socket_it_leaves_goes_to_the_gil_turn(pair):
    from fastkafka._producer.testing import GilFreeProbe
    a, b = pair
    p = Poller()
    p.register(a.fileno(), READ, "conn")
    probe = GilFreeProbe(p, 100, 10_000)   # leaves every socket to the GIL turn
    p.wake_gil_free()
    p.wake_gil_free()                     # one pending wake-up: written once
    threading.Timer(0.05, b.send, (b"x",)).start()
    assert p.poll(10_000) == [("conn", a.fileno(), READ)]
    assert probe.calls == 2              # the wake-up, then the socket (handed back)
    assert probe.sockets_seen == 1
    # The wake-up was already there when poll() began: that turn too ran without the GIL.
    assert probe.calls_holding_gil == 0
    assert p.wakeups_written == 1
    probe.remove()
    p.close()


def test_a_turn_already_due_when_poll_begins_runs_without_the_gil():
    # The turn takes the accumulator's lock. An application thread may hold that lock while it
    # waits for the GIL (send() takes the lock without the GIL, then takes the GIL back); a turn
    # run with the GIL held would then wait for that lock forever, and the application for the
    # GIL.
    from fastkafka._producer.testing import GilFreeProbe
    p = Poller()
    probe = GilFreeProbe(p, 100, 0)      # asks for no wait: poll() returns after the turn
    p.wake_gil_free()                     # due before poll() begins: the turn runs at once
    assert p.poll(10_000) == []
    assert probe.calls == 1
    assert p.waits == 0                  # no blocking wait was entered
    assert probe.calls_holding_gil == 0
    probe.remove()
    p.close()


def test_without_a_turn_an_gil_free_wake_ends_the_wait_like_a_wakeup():
    p = Poller()
    threading.Timer(0.02, p.wake_gil_free).start()
    t0 = time.monotonic()
    assert p.poll(10_000) == []
    assert time.monotonic() - t0 < 5
    assert p.gil_free_turns == 0
    p.close()


def test_a_general_wakeup_ends_the_wait_without_the_turn():
    from fastkafka._producer.testing import GilFreeProbe
    p = Poller()
    probe = GilFreeProbe(p, 100, 10_000)
    threading.Timer(0.02, p.wakeup).start()
    t0 = time.monotonic()
    assert p.poll(10_000) == []
    assert time.monotonic() - t0 < 5
    assert probe.calls == 0
    probe.remove()
    p.close()


def test_a_poke_racing_the_loops_read_is_never_lost_for_good():
    """The I/O thread pokes the event loop only when the pending flag turns from 0 to 1. The
    loop's reader must read the descriptor before clearing the flag: cleared first, a poke
    written between the two is read with the flag left at 1, and every later poke is skipped
    (the loop then never hands the GIL over again). Pokes race the reader for a second; after
    that one more poke must still reach the descriptor."""
    import select

    from fastkafka._producer import testing

    p = Poller()
    fd = p.gil_poke_fd()
    written = []
    storm = threading.Thread(target=lambda: written.append(testing.poke_storm(p, 1.0)))
    storm.start()
    reads = 0
    while storm.is_alive():
        if select.select([fd], [], [], 0.01)[0]:
            p.gil_poked()
            reads += 1
    storm.join()
    if select.select([fd], [], [], 0)[0]:
        p.gil_poked()              # what the storm's last poke left
    assert written[0] > 0 and reads > 0
    testing.poke_storm(p, 0.001)
    assert select.select([fd], [], [], 1.0)[0], (
        f"a poke after {reads} reads and {written[0]} pokes did not reach the descriptor: "
        "the pending flag was left set")
