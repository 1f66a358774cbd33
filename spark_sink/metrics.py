"""The producer's metrics per Spark task, and their sum over a write on the driver.

A task's report (:class:`~spark_sink.task.TaskReport`) carries ``producer_metrics``: what the
task's producer did during the task, under the Java producer's names
(:meth:`fastkafka.Producer.java_metrics`). The producer of a Python worker is cached across the
tasks that worker runs (one at a time), so the totals are the task's deltas (read when the task
starts and after its flush); the windowed values (averages, maxima) are as the producer has them
after the flush: they cover its last windows (``metrics_num_samples`` × ``metrics_sample_window_ms``,
60 s by default), which may include earlier tasks of the same worker.

On the driver, :func:`aggregate` combines the tasks' snapshots: totals summed, maxima the largest,
averages weighted by what they average over in the task (batches, Produce requests).
"""
from __future__ import annotations

#: totals of java_metrics()["producer-metrics"]: reported as the task's deltas
TOTALS = ("record-send-total", "record-error-total", "record-retry-total",
          "bufferpool-wait-time-ns-total")
#: totals of metrics(): the weights of the averages, as the task's deltas
COUNTS = {"batches": "batches_sent", "produce-requests": "produce_requests"}
#: windowed averages and what each one averages over (the weight on the driver)
AVERAGES = {"batch-size-avg": "batches", "records-per-request-avg": "produce-requests",
            "request-latency-avg": "produce-requests"}
MAXIMA = ("request-latency-max", "produce-throttle-time-max")


def read_totals(producer) -> dict:
    """The totals a task's deltas are taken from, read now."""
    g = producer.java_metrics()["producer-metrics"]
    m = producer.metrics()
    out = {name: g.get(name) or 0 for name in TOTALS}
    out.update({name: m.get(key, 0) for name, key in COUNTS.items()})
    return out


def task_snapshot(producer, start: dict) -> dict:
    """The task's metrics: the deltas of the totals since ``start`` (:func:`read_totals` when
    the task began), and the windowed values as they are now (None: no event in the windows)."""
    now = read_totals(producer)
    snap = {name: now[name] - start.get(name, 0) for name in now}
    g = producer.java_metrics()["producer-metrics"]
    for name in (*AVERAGES, *MAXIMA):
        snap[name] = g.get(name)
    return snap


def aggregate(snapshots) -> dict | None:
    """The job's producer metrics from its tasks' snapshots (None entries are skipped; None when
    there are none): sums of the totals, the largest of the maxima, the averages weighted by the
    batches or Produce requests of each task (tasks that sent none do not count); None where no
    task has a value."""
    snaps = [s for s in snapshots if s]
    if not snaps:
        return None
    out = {name: sum(s.get(name) or 0 for s in snaps) for name in (*TOTALS, *COUNTS)}
    for name in MAXIMA:
        values = [s[name] for s in snaps if s.get(name) is not None]
        out[name] = max(values) if values else None
    for name, weight in AVERAGES.items():
        pairs = [(s[name], s.get(weight) or 0) for s in snaps
                 if s.get(name) is not None and (s.get(weight) or 0) > 0]
        total = sum(w for _, w in pairs)
        out[name] = sum(v * w for v, w in pairs) / total if total else None
    return out
