"""Running fastkafka.aio's tests under each event loop: asyncio's own and uvloop's.

``run(kind, coro_fn)`` makes a fresh loop of ``kind`` ("asyncio" or "uvloop"), runs ``coro_fn()``
on it to completion, then shuts down its async generators and closes it (what ``asyncio.run``
does, for either loop and on Python 3.10). ``Ticker`` is a task that measures how long the loop
went without running it: a producer that blocked the loop shows up as a long gap.
"""
from __future__ import annotations

import asyncio
import time

LOOPS = ("asyncio", "uvloop")


def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    assert kind == "asyncio", kind
    return asyncio.new_event_loop()


def run(kind: str, coro_fn, timeout: float = 60.0):
    """Run ``coro_fn()`` on a new loop of ``kind``, bounded by ``timeout`` seconds."""
    loop = new_loop(kind)
    try:
        return loop.run_until_complete(asyncio.wait_for(coro_fn(), timeout))
    finally:
        try:
            loop.run_until_complete(loop.shutdown_asyncgens())
        finally:
            loop.close()


class Ticker:
    """A task on the running loop that sleeps ``period`` seconds in turn and records the longest
    time between two of its turns beyond that period (``max_gap_ms``)."""

    def __init__(self, period: float = 0.001):
        self.period = period
        self.max_gap_ms = 0.0
        self.ticks = 0
        self._task: asyncio.Task | None = None

    async def _run(self) -> None:
        last = time.perf_counter()
        while True:
            await asyncio.sleep(self.period)
            now = time.perf_counter()
            gap = (now - last - self.period) * 1000.0
            if gap > self.max_gap_ms:
                self.max_gap_ms = gap
            self.ticks += 1
            last = now

    async def __aenter__(self) -> "Ticker":
        self._task = asyncio.get_running_loop().create_task(self._run())
        await asyncio.sleep(0)
        return self

    async def __aexit__(self, *exc) -> None:
        self._task.cancel()
        try:
            await self._task
        except asyncio.CancelledError:
            pass
