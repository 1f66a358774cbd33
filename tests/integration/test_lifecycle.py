"""A producer nobody closes: at interpreter exit (atexit hook) and when it is dropped (its
finalizer), it delivers what is queued for up to exit_flush_timeout_ms, then stops its I/O thread
and closes its sockets. Checked against Apache Kafka, every record read back by confluent-kafka."""
from __future__ import annotations

import asyncio
import gc
import logging
import os
import subprocess
import sys
import threading
import time
import weakref

import pytest

from brokers import read_back, unique_name
from fastkafka import Producer
from fastkafka.aio import AsyncProducer

pytestmark = pytest.mark.broker

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_script(code: str, *args: str, timeout: float = 60) -> subprocess.CompletedProcess:
    """``code`` in a new interpreter that imports fastkafka from this tree."""
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-c", code, *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


EXIT_WITHOUT_CLOSE = r"""
import sys, time
from fastkafka import Producer
bootstrap, topic = sys.argv[1], sys.argv[2]
p = Producer(bootstrap_servers=bootstrap, linger_ms=2000)
p.partitions_for(topic)
for i in range(1000):
    p.send(topic, value=b"v%d" % i)
print("queued", p.metrics()["records_queued"], "at", time.monotonic(), flush=True)
"""


def test_exit_without_close_delivers_what_is_queued(kafka_broker):
    """1000 records held by linger_ms=2000 when the script ends: the exit hook delivers them
    (without it the daemon I/O thread is stopped where it stands and they are lost)."""
    topic = unique_name("exit")
    kafka_broker.create_topic(topic, 1)
    r = run_script(EXIT_WITHOUT_CLOSE, kafka_broker.bootstrap, topic)
    ended = time.monotonic()
    assert r.returncode == 0, r.stderr
    words = r.stdout.split()
    assert words[0] == "queued" and int(words[1]) > 0, r.stdout   # still queued at the end
    # the exit took the flush, not exit_flush_timeout_ms (5 s) plus the close grace: no hang
    assert ended - float(words[3]) < 7, r.stderr
    assert "not delivered" not in r.stderr, r.stderr
    got = read_back(kafka_broker.bootstrap, topic, 1, 1000)
    assert sorted(m.value for m in got[0]) == sorted(b"v%d" % i for i in range(1000))


def _fd_count() -> int:
    return len(os.listdir("/proc/self/fd"))


def _settle(threads0: int, fds0: int, slack_fds: int = 4, timeout: float = 30) -> tuple[int, int]:
    deadline = time.monotonic() + timeout
    while True:
        gc.collect()
        t, f = threading.active_count(), _fd_count()
        if (t <= threads0 and f <= fds0 + slack_fds) or time.monotonic() > deadline:
            return t, f
        time.sleep(0.05)


def test_dropped_producers_release_threads_and_sockets(kafka_broker, caplog):
    """50 producers made and dropped inside a function without close(): each is collected, its
    I/O thread stops, its sockets close, and the records it held are delivered."""
    caplog.set_level(logging.WARNING, logger="fastkafka")
    topic = unique_name("dropped")
    kafka_broker.create_topic(topic, 3)
    with Producer(bootstrap_servers=kafka_broker.bootstrap) as warm:   # imports, lazy module state
        warm.send(topic, b"warm").get(30)
    gc.collect()
    threads0, fds0 = threading.active_count(), _fd_count()
    refs = []

    def use_and_drop(i: int) -> None:
        p = Producer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=20)
        for j in range(3):
            p.send(topic, value=b"%d-%d" % (i, j))
        refs.append(weakref.ref(p))

    for i in range(50):
        use_and_drop(i)
    threads, fds = _settle(threads0, fds0)
    assert [r for r in refs if r() is not None] == []
    assert threads <= threads0, [t.name for t in threading.enumerate()]
    assert fds <= fds0 + 4, (fds0, fds)
    got = read_back(kafka_broker.bootstrap, topic, 3, 151)
    values = sorted(m.value for ms in got.values() for m in ms)
    assert values == sorted([b"warm"] + [b"%d-%d" % (i, j) for i in range(50) for j in range(3)])
    assert not [r for r in caplog.records if "not delivered" in r.getMessage()]


def test_dropped_async_producer_releases_its_loop_reader(kafka_broker):
    """An AsyncProducer dropped without close() on its running loop: its poke reader is taken
    off the loop, its I/O thread stops, and what it held is delivered."""
    topic = unique_name("adrop")
    kafka_broker.create_topic(topic, 1)

    async def main():
        loop = asyncio.get_running_loop()
        gc.collect()
        threads0 = threading.active_count()
        ap = AsyncProducer(bootstrap_servers=kafka_broker.bootstrap, linger_ms=20)
        await ap.send(topic, b"first")
        for i in range(5):
            ap.send(topic, b"later-%d" % i)     # not awaited: still queued when dropped
        fd, ref, ap_ref = ap._poke_fd, weakref.ref(ap._p), weakref.ref(ap)
        del ap
        # freed at once: its queued records hold its sink, which holds it only weakly
        assert ap_ref() is None
        deadline = time.monotonic() + 30
        while (ref() is not None or threading.active_count() > threads0) \
                and time.monotonic() < deadline:
            gc.collect()
            await asyncio.sleep(0.05)
        assert ref() is None
        assert threading.active_count() <= threads0, [t.name for t in threading.enumerate()]
        assert not loop.remove_reader(fd), "the dropped producer's reader is still on the loop"

    asyncio.run(main())
    got = read_back(kafka_broker.bootstrap, topic, 1, 6)
    assert sorted(m.value for m in got[0]) == sorted([b"first"] + [b"later-%d" % i for i in range(5)])
