"""The errors a new user meets first, and misuse that must not leave the producer half-open.

* ``close()``/``flush()`` from a delivery callback (the I/O thread) raise ``IllegalStateError`` and
  change nothing; a later ``close()`` from the application thread really stops the I/O thread.
* Bootstrap servers that refuse connections or do not resolve: the metadata-wait timeout names every
  address tried and its last connection error, instead of only "topic not present in metadata".

Timeouts are small (``max_block_ms``) so every test runs in about a second.
"""
from __future__ import annotations

import socket
import threading
import time

import pytest

from fastkafka import Producer
from fastkafka.errors import IllegalStateError, KafkaTimeoutError

pytestmark = pytest.mark.faultbroker

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)


# ------------------------------------------------------------------ close/flush from a callback
def test_close_and_flush_from_a_delivery_callback_raise_and_leave_the_producer_open(fb):
    fb.create_topic("t", 1)
    p = Producer(bootstrap_servers=fb.bootstrap, **FAST)
    try:
        io_thread = p._sender._thread
        raised: dict = {}
        done = threading.Event()

        def on_delivery(err, md):
            for name, call in (("close", p.close), ("flush", p.flush)):
                try:
                    call()
                except Exception as e:  # noqa: BLE001 - the test inspects it
                    raised[name] = e
            done.set()

        p.send("t", b"first", on_delivery=on_delivery).get(timeout=10)
        assert done.wait(10)
        for name in ("close", "flush"):
            assert isinstance(raised.get(name), IllegalStateError), raised
            msg = str(raised[name])
            assert f"{name}() called from a delivery callback" in msg and "I/O thread" in msg
        # Nothing changed: the producer is open, its I/O thread runs, and it still delivers.
        assert repr(p).endswith(" open>")
        assert io_thread.is_alive()
        assert p.send("t", b"second").get(timeout=10).offset == 1
        assert p.flush(5) == 0
    finally:
        # A close() from the application thread really stops the I/O thread.
        p.close(5)
    assert not io_thread.is_alive()
    assert repr(p).endswith(" closed>")
    assert fb.cluster.record_count("t") == 2
