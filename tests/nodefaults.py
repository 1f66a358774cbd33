"""Faults on a broker node arranged on a state rather than timed by the clock.

A test that kills a node "while requests are in flight to it" cannot rely on a sleep: on a loaded
machine the kill can fall between two requests. These helpers make the condition true first:

* :func:`frozen` SIGSTOPs a node of an Apache Kafka rig (``fastkafka_tools.apachekafka.KafkaNode``)
  and waits until every thread of its JVM is stopped: the node then accepts connections and takes
  bytes into the kernel's socket buffers, and answers nothing. On leaving the block the node is sent
  SIGCONT, unless it was killed meanwhile (a stopped process dies of SIGKILL as well).
* :func:`produce_in_flight` reads, on the producer's own I/O thread, the correlation ids of the
  Produce requests the producer has in flight to a node.
* :func:`wait_produce_in_flight` waits, with the node frozen, until a Produce request to it is in
  flight that the node can no longer have answered.
"""
from __future__ import annotations

import contextlib
import os
import queue
import signal
import time

__all__ = ["frozen", "produce_in_flight", "wait_produce_in_flight"]


def _threads_stopped(pid: int) -> bool:
    """Every thread of process ``pid`` is stopped (state T or t), or has exited."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                stat = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue                                   # a thread that ended meanwhile
        state = stat[stat.rindex(")") + 2]             # the field after "(comm)", which may hold ")"
        if state not in "TtZX":
            return False
    return True


@contextlib.contextmanager
def frozen(node, timeout: float = 10.0):
    """SIGSTOP ``node``'s process group for the block; SIGCONT after it unless it was killed."""
    pid = node.pid
    assert pid is not None and node.running, f"{node!r} is not running: nothing to freeze"
    os.killpg(pid, signal.SIGSTOP)
    try:
        deadline = time.monotonic() + timeout
        while not _threads_stopped(pid):
            assert time.monotonic() < deadline, f"{node!r}: not every thread stopped {timeout}s after SIGSTOP"
            time.sleep(0.005)
        yield node
    finally:
        if node.running and node.pid == pid:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(pid, signal.SIGCONT)


def produce_in_flight(producer, node_id: int, timeout: float = 10.0) -> list[int]:
    """The correlation ids of the Produce requests ``producer`` has in flight to ``node_id``, oldest
    first. Read on the producer's I/O thread (``Sender.call_soon``): that thread changes the
    connection's in-flight ring, partly without the GIL, so no other thread reads it."""
    box: queue.Queue = queue.Queue()

    def probe():
        try:
            conn = producer._client.connections.get(node_id)
            if conn is None:
                box.put([])
                return
            others = {r.correlation_id for r in conn.requests_in_flight()}
            box.put([c for c in conn.in_flight_ids() if c not in others])
        except BaseException as e:  # noqa: BLE001 - handed to the waiting thread
            box.put(e)

    producer._sender.call_soon(probe)
    try:
        got = box.get(timeout=timeout)
    except queue.Empty:
        raise AssertionError(f"the producer's I/O thread did not run a probe within {timeout}s") from None
    if isinstance(got, BaseException):
        raise got
    return got


def wait_produce_in_flight(producer, node_id: int, timeout: float = 30.0, between=None,
                           looks: int = 3) -> list[int]:
    """With ``node_id`` frozen: until a Produce request to it is in flight in ``looks`` successive
    looks (:func:`produce_in_flight`); returns the ids in flight at the last one.

    An answer the node wrote before it stopped is already in the producer's socket buffer when the
    freeze is complete, and the I/O thread reads it within a turn; each look runs at the start of a
    turn of that thread. A request still in flight after two more of its turns is one the node will
    never answer: sent before the freeze and not answered, or sent after it. ``between()``, if
    given, runs before each look (e.g. to send more records from the calling thread)."""
    streak: dict[int, int] = {}
    deadline = time.monotonic() + timeout
    while True:
        if between is not None:
            between()
        ids = produce_in_flight(producer, node_id)
        streak = {c: streak.get(c, 0) + 1 for c in ids}
        if any(n >= looks for n in streak.values()):
            return ids
        assert time.monotonic() < deadline, (
            f"no Produce request in flight to node {node_id} in {looks} successive looks within "
            f"{timeout}s (last: {ids}); producer metrics {producer.metrics()}")
        time.sleep(0.005)
