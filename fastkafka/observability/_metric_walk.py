"""``producer.metrics()`` as numeric samples, for the exporters (``prometheus.py``, ``otel.py``):
one ``(name, labels, value, is_counter)`` per number.

The walk is generic, so the exporters follow what ``metrics()`` returns:

- a number (``bool`` as 0/1) is a sample named by its key (characters outside ``[A-Za-z0-9_]``,
  e.g. the dashes of Java metric names, become ``_``); strings and None are skipped;
- a dict whose values are all dicts is one group per entry, its key the value of a label named
  after the dict's key (``node`` for ``"nodes"``, ``"node"`` or ``"producer-node-metrics"``;
  ``topic`` likewise), e.g. ``{"nodes": {"1": {"request_latency_avg": 3.0}}}`` gives
  ``request_latency_avg{node="1"}``;
- any other dict adds nothing to the names of what it holds (a Java metric group such as
  ``"producer-metrics"``: its entries are walked as if they stood at the top).

A sample is a counter (cumulative, never decreasing) when its name is one of today's counters of
``metrics()`` or ends in ``total``; anything else is a gauge.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

# the cumulative counters of today's flat metrics() (fastkafka/producer.py, fastkafka/aio.py)
_COUNTERS = frozenset((
    "batches_sent", "records_sent", "retries", "errors", "batches_split", "batches_expired",
    "produce_requests", "init_producer_id_failures", "broker_data_loss", "errors_reported",
    "leader_hints_applied", "leader_hints_ignored",
    "epoch_bumps", "io_waits", "io_gil_wait_ms_total", "io_slow_gil_waits", "io_wakeups_written",
    "io_timers_armed", "io_gil_free_turns", "gil_free_requests", "gil_free_answers",
    "gil_handovers", "txn_commits", "txn_aborts", "txn_add_partitions", "txn_retries",
    "txn_coordinator_lookups", "aio_loop_wakeups", "aio_records_completed",
    "aio_unawaited_failures", "aio_gil_pokes", "aio_turn_handovers",
))
_BAD = re.compile(r"[^A-Za-z0-9_]")


def sanitize(name: str) -> str:
    """``name`` with every character outside ``[A-Za-z0-9_]`` as ``_`` (never starting with a
    digit)."""
    out = _BAD.sub("_", str(name))
    return "_" + out if out[:1].isdigit() else out


def is_counter(name: str) -> bool:
    return (name in _COUNTERS or name.startswith("net_") or name.endswith("total"))


def label_name(key: str) -> str:
    """The label of a dict of groups: ``"nodes"`` -> ``node``, ``"producer-topic-metrics"`` ->
    ``topic``, ``"partitions"`` -> ``partition``."""
    k = sanitize(key).lower()
    for prefix in ("producer_",):
        if k.startswith(prefix) and len(k) > len(prefix):
            k = k[len(prefix):]
    for suffix in ("_metrics",):
        if k.endswith(suffix) and len(k) > len(suffix):
            k = k[:-len(suffix)]
    if k.endswith("s") and len(k) > 3 and not k.endswith("ss"):
        k = k[:-1]
    return k or "group"


def walk(metrics: Mapping, labels: tuple = ()):
    """Each numeric entry of ``metrics`` as ``(name, labels, value, is_counter)``; ``labels`` a
    tuple of ``(label, value)`` pairs."""
    for key, value in metrics.items():
        if isinstance(value, bool):
            value = int(value)
        if isinstance(value, (int, float)):
            name = sanitize(key)
            yield name, labels, value, is_counter(name)
        elif isinstance(value, Mapping):
            if value and all(isinstance(v, Mapping) for v in value.values()):
                label = label_name(key)
                for group, sub in value.items():
                    yield from walk(sub, labels + ((label, str(group)),))
            else:
                yield from walk(value, labels)
