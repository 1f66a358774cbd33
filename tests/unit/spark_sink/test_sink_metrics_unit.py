"""spark_sink.metrics: a task's snapshot (deltas of totals, windows as they are) from a producer's
java_metrics()/metrics(), and the driver's aggregate over tasks."""
from __future__ import annotations

import pytest

from spark_sink.metrics import aggregate, read_totals, task_snapshot


class FakeProducer:
    def __init__(self):
        self.g = {"record-send-total": 100, "record-error-total": 1, "record-retry-total": 2,
                  "bufferpool-wait-time-ns-total": 500, "batch-size-avg": None,
                  "records-per-request-avg": None, "request-latency-avg": None,
                  "request-latency-max": None, "produce-throttle-time-max": None}
        self.m = {"batches_sent": 10, "produce_requests": 4}

    def java_metrics(self):
        return {"producer-metrics": dict(self.g)}

    def metrics(self):
        return dict(self.m)


def test_a_task_reports_deltas_of_totals_and_windows_as_they_are():
    p = FakeProducer()
    start = read_totals(p)
    p.g.update({"record-send-total": 130, "record-retry-total": 5,
                "bufferpool-wait-time-ns-total": 900, "batch-size-avg": 2000.0,
                "records-per-request-avg": 15.0, "request-latency-avg": 3.5,
                "request-latency-max": 9.0, "produce-throttle-time-max": 0.0})
    p.m.update({"batches_sent": 13, "produce_requests": 6})
    assert task_snapshot(p, start) == {
        "record-send-total": 30, "record-error-total": 0, "record-retry-total": 3,
        "bufferpool-wait-time-ns-total": 400, "batches": 3, "produce-requests": 2,
        "batch-size-avg": 2000.0, "records-per-request-avg": 15.0, "request-latency-avg": 3.5,
        "request-latency-max": 9.0, "produce-throttle-time-max": 0.0}


def snap(sent, batches, requests, size, per_request, latency, latency_max, throttle_max):
    return {"record-send-total": sent, "record-error-total": 0, "record-retry-total": 1,
            "bufferpool-wait-time-ns-total": 10, "batches": batches, "produce-requests": requests,
            "batch-size-avg": size, "records-per-request-avg": per_request,
            "request-latency-avg": latency, "request-latency-max": latency_max,
            "produce-throttle-time-max": throttle_max}


def test_the_job_aggregate_sums_totals_takes_maxima_and_weights_averages():
    tasks = [snap(30, 3, 2, 1000.0, 15.0, 2.0, 5.0, 0.0),
             snap(10, 1, 2, 3000.0, 5.0, 4.0, 11.0, None),
             snap(0, 0, 0, 9999.0, 99.0, 99.0, None, None),     # sent nothing: no weight
             None]                                                # a report without metrics
    agg = aggregate(tasks)
    assert agg["record-send-total"] == 40 and agg["record-retry-total"] == 3
    assert agg["batches"] == 4 and agg["produce-requests"] == 4
    assert agg["bufferpool-wait-time-ns-total"] == 30
    assert agg["batch-size-avg"] == pytest.approx((3 * 1000 + 1 * 3000) / 4)
    assert agg["records-per-request-avg"] == pytest.approx((2 * 15 + 2 * 5) / 4)
    assert agg["request-latency-avg"] == pytest.approx(3.0)
    assert agg["request-latency-max"] == 11.0 and agg["produce-throttle-time-max"] == 0.0
    assert aggregate([None, None]) is None
    none = aggregate([snap(0, 0, 0, None, None, None, None, None)])
    assert none["batch-size-avg"] is None and none["request-latency-max"] is None
