"""``logger=`` of :class:`fastkafka.compat.confluent.Producer`: the ``fastkafka`` logger's records
of one producer go to the logger the application gave, and only there (as confluent-kafka sends
librdkafka's logs to it instead of stderr).

A record belongs to a producer when it was emitted on one of that producer's threads (its I/O
thread ``fastkafka-sender-<name>``, or the thread closing it ``fastkafka-close-<name>``) or when
its arguments name the producer. A filter on the ``fastkafka`` logger hands such a record to the
producer's logger and stops it there, so it is not also passed on to the ``fastkafka`` logger's
handlers and its ancestors' (no duplicate at the root). Records that belong to no producer with a
logger (another producer's, a record of an application thread that does not name the producer)
are left to the ``fastkafka`` logger as before. The filter exists only while a producer with a
logger is open. Records are made at the ``fastkafka`` logger's level: to see INFO or DEBUG
records, set ``logging.getLogger("fastkafka").setLevel(...)`` (this also lets other producers'
records of that level through to the ``fastkafka`` logger's own handlers).
"""
from __future__ import annotations

import logging
import threading
import weakref

_LOGGER_NAME = "fastkafka"
_lock = threading.Lock()
_routes: dict[str, "weakref.ref[logging.Logger]"] = {}   # producer name -> its logger


class _RouteFilter(logging.Filter):
    """Installed on the ``fastkafka`` logger while a route exists."""

    def filter(self, record: logging.LogRecord) -> bool:
        name = _owner(record)
        if name is None:
            return True
        ref = _routes.get(name)
        target = ref() if ref is not None else None
        if target is None:
            return True
        if target.isEnabledFor(record.levelno):
            target.handle(record)
        return False


_FILTER = _RouteFilter()
_THREAD_PREFIXES = ("fastkafka-sender-", "fastkafka-close-")


def _owner(record: logging.LogRecord) -> str | None:
    """The name of the routed producer ``record`` belongs to, or None."""
    routes = _routes
    if not routes:
        return None
    thread = record.threadName or ""
    for prefix in _THREAD_PREFIXES:
        if thread.startswith(prefix):
            name = thread[len(prefix):]
            return name if name in routes else None
    args = record.args
    if isinstance(args, tuple):
        for a in args:
            if type(a) is str and a in routes:
                return a
    return None


class LogRoute:
    """The route of one producer's records to ``logger`` until :meth:`close`."""

    def __init__(self, producer_name: str, logger: logging.Logger):
        self.name = producer_name
        with _lock:
            first = not _routes
            _routes[producer_name] = weakref.ref(logger)
            if first:
                logging.getLogger(_LOGGER_NAME).addFilter(_FILTER)
        self._closed = False

    def close(self) -> None:
        with _lock:
            if self._closed:
                return
            self._closed = True
            _routes.pop(self.name, None)
            if not _routes:
                logging.getLogger(_LOGGER_NAME).removeFilter(_FILTER)
