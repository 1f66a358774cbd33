"""Fixtures shared by the fault-path tests: a thread-leak check and the in-process fault broker."""
from __future__ import annotations

import threading
import time

import pytest

from faultbroker import FaultBroker


@pytest.fixture
def no_leaks():
    """Fails the test if a thread it started is still running 3 s after it ended."""
    before = set(threading.enumerate())
    yield
    deadline = time.monotonic() + 3
    while [t for t in threading.enumerate() if t not in before] and time.monotonic() < deadline:
        time.sleep(0.02)
    assert [t.name for t in threading.enumerate() if t not in before] == [], \
        "threads left running after the test"


@pytest.fixture
def fb(no_leaks):
    """A fresh FaultBroker; the test fails if one of its threads crashed or a handler raised."""
    b = FaultBroker()
    try:
        yield b
    finally:
        b.close()
    assert b.crashed == [] and b.handler_errors == []


@pytest.fixture
def make_producer(no_leaks, request):
    """Factory: ``make_producer(broker_or_bootstrap, **settings)``; the test module's ``FAST``
    settings are the defaults. Every producer made is closed when the test ends."""
    from fastkafka import Producer

    defaults = getattr(request.module, "FAST", {})
    made = []

    def make(broker_or_bootstrap, **kw):
        bootstrap = getattr(broker_or_bootstrap, "bootstrap", broker_or_bootstrap)
        p = Producer(bootstrap_servers=bootstrap, **{**defaults, **kw})
        made.append(p)
        return p

    yield make
    for p in made:
        p.close(10)
