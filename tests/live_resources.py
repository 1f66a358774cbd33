"""pytest plugin: every test leaves the compiled core's live resources as it found them.

Registered from ``tests/conftest.py`` (``pytest_plugins``). The counters are those of
:func:`fastkafka._producer.accumulator.live_resources` (open accumulators, producer I/O threads, live
ProducerBatch objects, buffer pools and the bytes they hold, batch buffers, free pool buffers beyond
buffer_memory), the uvloop habit of counting live resources and asserting them back at teardown.

How the check reads them:

* the baseline is taken by an autouse function-scoped fixture, so after every module- and
  session-scoped fixture exists (a producer shared by a module's tests is in the baseline), and
  before the test's own function-scoped fixtures;
* the check runs at the end of the test's teardown, once its function-scoped fixtures closed what
  they made (``make_producer`` closes its producers); a wider-scoped fixture torn down there only
  lowers the counters;
* only for a test that passed: a failed test's traceback keeps its objects alive, and its failure
  is the one to read;
* it collects garbage and compares each counter with the baseline; a counter above it is given up
  to :data:`SETTLE_S` seconds to come back (a shared producer still delivering what the test sent,
  an I/O thread finishing), then the test errors at teardown naming every counter still above;
* a test that keeps something alive on purpose says so with
  ``@pytest.mark.keeps_live_resources("counter", ..., reason="why")``: those counters alone are
  not checked for it.

:func:`check_released` is the check itself, for tests of the check and for code that wants it.
"""
from __future__ import annotations

import gc
import time

import pytest

from fastkafka._producer.accumulator import LIVE_COUNTERS, live_resources

#: Seconds a raised counter is given to come back before the test is failed.
SETTLE_S = 5.0

_CALL_REPORT = pytest.StashKey()
_BASELINE = pytest.StashKey()

HINTS = {
    "accumulators_open": "a Producer (or RecordAccumulator) not closed",
    "io_threads": "a Producer's I/O thread still running (the producer was not closed)",
    "producer_batches": "ProducerBatch objects still referenced (a batch not completed and "
                        "deallocated, or kept in a list, a future, a closure)",
    "buffer_pools": "a BufferPool still referenced",
    "buffer_pool_bytes": "buffer-pool memory taken and not given back (a batch never deallocated)",
    "batch_buffers": "batch buffers still owned by a BatchBuilder (a batch or builder kept alive)",
    "batch_buffer_bytes": "batch buffer bytes still owned by a BatchBuilder",
    "buffer_pool_overflow": "a buffer pool kept free batch buffers beyond its buffer_memory",
}


class LiveResourceLeak(AssertionError):
    """Live resources were not back to their baseline; ``counters`` maps each counter still above
    it to (baseline, now)."""

    def __init__(self, counters: dict, what: str = "this test"):
        self.counters = counters
        lines = [f"{what} left live resources behind (counter: at start -> at end, "
                 f"after gc and {SETTLE_S:g} s to settle):"]
        for name, (before, after) in counters.items():
            lines.append(f"  {name}: {before} -> {after}  ({HINTS.get(name, '')})")
        super().__init__("\n".join(lines))


def raised(before: dict, now: dict, allowed=()) -> dict:
    """The counters of ``now`` above ``before`` (not counting ``allowed``): name -> (before, now)."""
    return {k: (before[k], now[k]) for k in LIVE_COUNTERS if k not in allowed and now[k] > before[k]}


def check_released(before: dict, settle_s: float = SETTLE_S, allowed=(), what: str = "this test"):
    """Collect garbage until every counter of :func:`live_resources` is back at or below
    ``before`` (waiting up to ``settle_s`` seconds); raise :class:`LiveResourceLeak` naming the
    counters that are not. Returns the last reading."""
    now = live_resources()
    if not raised(before, now, allowed):      # the common case: no collection needed
        return now
    deadline = time.monotonic() + settle_s
    while True:
        gc.collect()
        now = live_resources()
        left = raised(before, now, allowed)
        if not left:
            return now
        if time.monotonic() >= deadline:
            raise LiveResourceLeak(left, what)
        time.sleep(0.05)


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "keeps_live_resources(*counters, reason): the test keeps these live-resource "
                   "counters raised on purpose; they are not checked at its teardown")


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item, call):
    report = yield
    if report.when == "call":
        item.stash[_CALL_REPORT] = report
    return report


@pytest.fixture(autouse=True)
def _live_resources_baseline(request):
    """The baseline: taken after every wider-scoped fixture of the test exists (this one is
    function-scoped), before the test's own function-scoped fixtures (autouse from a plugin: the
    first of those set up)."""
    request.node.stash[_BASELINE] = live_resources()
    yield


@pytest.hookimpl(wrapper=True, tryfirst=True)
def pytest_runtest_teardown(item, nextitem):
    """The check: after the whole teardown (the test's fixtures closed what they made; the logging
    plugin has dropped the records it kept, whose tracebacks hold the test's frame)."""
    result = yield
    before = item.stash.get(_BASELINE, None)
    report = item.stash.get(_CALL_REPORT, None)
    if before is None or report is None or not report.passed:
        return result
    marker = item.get_closest_marker("keeps_live_resources")
    allowed = tuple(marker.args) if marker is not None else ()
    unknown = [a for a in allowed if a not in LIVE_COUNTERS]
    if unknown:
        raise ValueError(f"keeps_live_resources names unknown counters {unknown}; "
                         f"known: {LIVE_COUNTERS}")
    if marker is not None and not marker.kwargs.get("reason"):
        raise ValueError("keeps_live_resources needs reason=... (why the test keeps them)")
    _drop_function_fixture_values(item)
    check_released(before, allowed=allowed, what=item.nodeid)
    return result


def _drop_function_fixture_values(item):
    """The test's function-scoped fixtures are torn down by now, but pytest keeps their values in
    ``item.funcargs`` until the end of the item: drop those references so what they made can be
    collected. Values of wider-scoped fixtures stay (they are in the baseline)."""
    funcargs = getattr(item, "funcargs", None)
    info = getattr(item, "_fixtureinfo", None)
    if not funcargs or info is None:
        return
    for name in list(funcargs):
        defs = info.name2fixturedefs.get(name)
        if defs and defs[-1].scope == "function" and name != "request":
            funcargs[name] = None
