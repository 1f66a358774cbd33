"""The reports of errors that belong to no single record, on their way to the ``on_error`` hook.

The network client (fastkafka/_net/network_setup.pxi: every broker down and back, a failed
authentication, a broker without an API the producer needs), the sender (InitProducerId refused
for good, broker data loss) and the transaction manager (fenced, an abortable transaction) hand
their typed errors to :class:`ErrorReporter`, on the I/O thread, with the time. It rate-limits
them: per kind and broker (the error's ``code`` and ``node``, plus ``topic`` and ``partition``
where the error has them) at most one report per ``interval_ms``; the reports held back are
counted in ``stats["errors_suppressed"]`` and the next report of that key carries their number as
``error.suppressed``. A :class:`~fastkafka.errors.BrokersRecovered` notice is delivered exactly
when the :class:`~fastkafka.errors.AllBrokersDownError` of the same outage was, whatever the time:
the application sees outages as pairs. A hook that raises is logged and changes nothing else.

Pure Python, no clock of its own (``now`` is passed in): tested with time passed in
(tests/unit/fastkafka/_producer/test_error_reports.py).
"""

from __future__ import annotations

import logging

from fastkafka.errors import AllBrokersDownError, BrokersRecovered

log = logging.getLogger("fastkafka")

__all__ = ["ErrorReporter", "report_key"]


def report_key(error) -> tuple:
    """The rate limit's key of ``error``: its kind and the broker (and partition) it is about."""
    return (type(error).__name__, getattr(error, "code", None), getattr(error, "node", None),
            getattr(error, "topic", None), getattr(error, "partition", None))


class ErrorReporter:
    """Rate-limits and delivers errors to ``hook(error)`` (None: they are only counted).

    ``stats`` is the dict the counters go into (the sender's: ``errors_reported``,
    ``errors_suppressed``, both part of ``Producer.metrics()``)."""

    __slots__ = ("hook", "interval_ms", "stats", "_last", "_outage_reported")

    def __init__(self, hook, interval_ms: int, stats: dict):
        self.hook = hook
        self.interval_ms = interval_ms
        self.stats = stats
        stats.setdefault("errors_reported", 0)
        stats.setdefault("errors_suppressed", 0)
        self._last: dict = {}              # key -> [ms of the last delivered report, held back since]
        self._outage_reported = False      # the current outage's AllBrokersDownError was delivered

    def report(self, error, now: int) -> bool:
        """Deliver ``error`` unless the rate limit holds it back; True when it was delivered."""
        if isinstance(error, BrokersRecovered):
            if not self._outage_reported:
                self.stats["errors_suppressed"] += 1
                return False
            self._outage_reported = False
            return self._deliver(error)
        key = report_key(error)
        last = self._last.get(key)
        if last is not None and now - last[0] < self.interval_ms:
            last[1] += 1
            self.stats["errors_suppressed"] += 1
            if isinstance(error, AllBrokersDownError):
                self._outage_reported = False
            return False
        if last is not None and last[1]:
            error.suppressed = last[1]
        self._last[key] = [now, 0]
        if isinstance(error, AllBrokersDownError):
            self._outage_reported = True
        return self._deliver(error)

    def _deliver(self, error) -> bool:
        self.stats["errors_reported"] += 1
        hook = self.hook
        if hook is not None:
            try:
                hook(error)
            except Exception:
                log.exception("on_error hook raised (on %s)", getattr(error, "name", type(error).__name__))
        return True
