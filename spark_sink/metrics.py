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

from typing import TYPE_CHECKING, Any, Iterable

if TYPE_CHECKING:
    from pyspark import SparkContext
    from pyspark.accumulators import Accumulator, AccumulatorParam

    from fastkafka import Producer

    from .task import TaskReport

#: totals of java_metrics()["producer-metrics"]: reported as the task's deltas
TOTALS = ("record-send-total", "record-error-total", "record-retry-total",
          "bufferpool-wait-time-ns-total")
#: totals of metrics(): the weights of the averages, as the task's deltas
COUNTS = {"batches": "batches_sent", "produce-requests": "produce_requests"}
#: windowed averages and what each one averages over (the weight on the driver)
AVERAGES = {"batch-size-avg": "batches", "records-per-request-avg": "produce-requests",
            "request-latency-avg": "produce-requests"}
MAXIMA = ("request-latency-max", "produce-throttle-time-max")


def read_totals(producer: Producer) -> dict[str, Any]:
    """The totals a task's deltas are taken from, read now."""
    g = producer.java_metrics()["producer-metrics"]
    m = producer.metrics()
    out = {name: g.get(name) or 0 for name in TOTALS}
    out.update({name: m.get(key, 0) for name, key in COUNTS.items()})
    return out


def task_snapshot(producer: Producer, start: dict[str, Any]) -> dict[str, Any]:
    """The task's metrics: the deltas of the totals since ``start`` (:func:`read_totals` when
    the task began), and the windowed values as they are now (None: no event in the windows)."""
    now = read_totals(producer)
    snap = {name: now[name] - start.get(name, 0) for name in now}
    g = producer.java_metrics()["producer-metrics"]
    for name in (*AVERAGES, *MAXIMA):
        snap[name] = g.get(name)
    return snap


def aggregate(snapshots: Iterable[dict[str, Any] | None]) -> dict[str, Any] | None:
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


#: what the tasks add to the driver's accumulators (SinkAccumulators): sums, and maxima
ACC_SUMS = ("rows", "bytes", *TOTALS, *COUNTS)
ACC_MAXIMA = MAXIMA


def _max_param() -> AccumulatorParam[float]:
    from pyspark.accumulators import AccumulatorParam

    class MaxParam(AccumulatorParam[float]):
        """An accumulator keeping the largest value added (-inf: none yet)."""

        def zero(self, value: float) -> float:
            return float("-inf")

        def addInPlace(self, value1: float, value2: float) -> float:
            return max(value1, value2)

    return MaxParam()


class SinkAccumulators:
    """Spark accumulators of the data source ``fastkafka`` (made by :func:`spark_sink.register`
    in the driver's process): every task that succeeds adds its rows, bytes and producer metrics
    (:data:`ACC_SUMS` summed, :data:`ACC_MAXIMA` the largest), and Spark merges them into this
    process when the task ends. Totals since ``register()`` (or :meth:`reset`) over every write
    and micro-batch of the session; read with :meth:`value` on the driver."""

    def __init__(self, spark_context: SparkContext) -> None:
        param = _max_param()
        self._sums: dict[str, Accumulator[int]] = {name: spark_context.accumulator(0) for name in ACC_SUMS}
        self._maxima: dict[str, Accumulator[float]] = {name: spark_context.accumulator(float("-inf"), param)
                        for name in ACC_MAXIMA}

    def add(self, report: TaskReport) -> None:
        """On an executor: add a task's report (a :class:`~spark_sink.task.TaskReport`)."""
        snap = report.producer_metrics or {}
        self._sums["rows"].add(report.rows)
        self._sums["bytes"].add(report.bytes)
        for name in ACC_SUMS[2:]:
            self._sums[name].add(snap.get(name) or 0)
        for name in ACC_MAXIMA:
            if snap.get(name) is not None:
                self._maxima[name].add(float(snap[name]))

    def value(self) -> dict[str, Any]:
        """On the driver: ``{name: value}``; a maximum no task reported is None."""
        out: dict[str, Any] = {name: acc.value for name, acc in self._sums.items()}
        for name, m in self._maxima.items():
            out[name] = None if m.value == float("-inf") else m.value
        return out

    def reset(self) -> None:
        """On the driver: start again from zero."""
        for acc in self._sums.values():
            acc.value = 0
        for m in self._maxima.values():
            m.value = float("-inf")
