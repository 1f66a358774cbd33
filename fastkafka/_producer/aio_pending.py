"""The parts of fastkafka.aio's AsyncProducer that are not its methods: a call waiting in its
backlog (:class:`Pending`) and what the loop runs once a send_batch or a waiting call ends."""
from __future__ import annotations

import asyncio
import logging

log = logging.getLogger("fastkafka")


def resolve(fut: asyncio.Future) -> None:
    """Resolve ``fut`` with None unless it is done (a wake-up the loop owes to a waiting call)."""
    if not fut.done():
        fut.set_result(None)


class Pending:
    """A call that waits its turn in the backlog (metadata or memory), and its deadline."""

    __slots__ = ("kind", "args", "waiter", "deadline", "batch", "bfuture", "appended", "seen")

    def __init__(self, kind: str, args: tuple, waiter, deadline: float):
        self.kind, self.args, self.waiter, self.deadline = kind, args, waiter, deadline
        self.batch = self.bfuture = None
        self.appended = 0
        self.seen = -1


def batch_done(arg) -> None:
    bf, fut = arg
    if fut.done():
        if bf.first_error is not None:
            log.warning("send_batch: %d record(s) failed and nobody awaits them: %r", bf.failed,
                        bf.first_error)
        return
    if bf.first_error is not None:
        fut.set_exception(bf.first_error)
    else:
        fut.set_result(bf.delivered)


def batch_failed_part(arg) -> None:
    """A send_batch whose first records were queued and the rest could not be: its error, once
    the queued ones are done."""
    bf, fut, exc = arg
    if not fut.done():
        fut.set_exception(exc)
    else:
        log.warning("send_batch failed part-way and nobody awaits it: %r (%d delivered)", exc,
                    bf.delivered)


def records_of(item: Pending) -> int:
    """Records of a waiting call not queued yet (a send_batch not yet checked: its values' length
    when they have one)."""
    if item.kind != "batch":
        return 1
    if item.batch is not None:
        return item.batch.n_records - item.appended
    try:
        return len(item.args[1])
    except TypeError:
        return 0


def size_of(item: Pending) -> int:
    """Bytes a waiting single record needs in a new batch (an upper bound, for the memory
    listener); the batch size for a send_batch."""
    if item.kind == "batch":
        return 0
    _topic, value, key = item.args[:3]
    n = 256
    for x in (value, key):
        try:
            n += len(x) if x is not None else 0
        except TypeError:
            pass
    return n
