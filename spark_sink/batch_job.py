"""``batch_writer`` without the data source: for Spark 3.x, which has no Python Data Source API
(``pyspark.sql.datasource`` is Spark 4's).

Each micro-batch runs one Spark job whose tasks do what the data source's tasks do (a
:class:`~spark_sink.task.TaskWriter` each: send, flush, raise on a failed record; exactly_once:
prepare the task's transaction) and return their :class:`~spark_sink.task.TaskReport` as their
only output row. The driver collects the reports and, for exactly_once, commits the prepared
transactions with the same :class:`~spark_sink.exactly_once.TransactionCommitter` as the data
source: after every task succeeded, with the log of committed micro-batches that recognises a
replay, and aborting (taking over every attempt's transactional id) when the job fails.

The tasks read Arrow batches (``mapInArrow``, the producer's Arrow path) when pandas is installed
on the driver (pyspark checks for it before it runs any Arrow UDF), else Rows (``rdd.mapPartitions``,
the path of ``partition_writer``).
"""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

from fastkafka import PreparedTransaction

from .options import SinkSettings
from .task import TaskReport, check_schema, run_task

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql import DataFrame, Row


def has_data_source_api() -> bool:
    """True on Spark 4 (``pyspark.sql.datasource``), where the data source ``fastkafka`` exists."""
    try:
        import pyspark.sql.datasource  # noqa: F401
    except ImportError:
        return False
    return True


def arrow_tasks_available() -> bool:
    """``mapInArrow`` runs here: pyspark's Arrow UDFs need pandas and pyarrow on the driver."""
    try:
        import pandas  # noqa: F401
        import pyarrow  # noqa: F401
    except ImportError:
        return False
    return True


def _arrow_task(settings: SinkSettings
                ) -> Callable[[Iterable[pyarrow.RecordBatch]], Iterator[pyarrow.RecordBatch]]:
    """``mapInArrow``'s function: the task (:func:`spark_sink.task.run_task`), its report as the
    only output row."""
    def task(batches: Iterable[pyarrow.RecordBatch]) -> Iterator[pyarrow.RecordBatch]:
        import pyarrow as pa

        report = run_task(settings, batches, arrow=True)
        yield pa.RecordBatch.from_pydict({"report": [json.dumps(asdict(report))]})
    return task


def _row_task(settings: SinkSettings) -> Callable[[Iterable[Row]], list[str]]:
    """``rdd.mapPartitions``' function: the task on Rows, its report as the only output."""
    def task(rows: Iterable[Row]) -> list[str]:
        return [json.dumps(asdict(run_task(settings, rows, arrow=False)))]
    return task


def _reports(df: DataFrame, settings: SinkSettings, arrow: bool) -> list[TaskReport]:
    if arrow:
        texts = [r[0] for r in df.mapInArrow(_arrow_task(settings), "report string").collect()]
    else:
        texts = df.rdd.mapPartitions(_row_task(settings)).collect()
    return [TaskReport(**json.loads(t)) for t in texts]


def write_batch(df: DataFrame, settings: SinkSettings, batch_id: int,
                arrow: bool | None = None) -> list[TaskReport]:
    """Write one DataFrame (a micro-batch ``batch_id``, or -1) as one Spark job; returns the task
    reports. ``arrow``: read Arrow batches (default: when :func:`arrow_tasks_available`)."""
    from .exactly_once import TransactionCommitter

    settings = check_schema(df.schema, dataclasses.replace(settings, batch_id=batch_id))
    df = df.select(*[df[c] for c in settings.columns])      # only what the tasks read
    if arrow is None:
        arrow = arrow_tasks_available()
    committer = TransactionCommitter(settings) if settings.exactly_once else None
    if committer is not None:
        committer.recover()     # what a failed driver left half committed, before any task
    try:
        reports = _reports(df, settings, arrow)
    except BaseException:
        if committer is not None:
            # The reports of tasks that succeeded are lost with the job: abort by taking over the
            # transactional ids of every attempt of every partition.
            committer.abort([], df.rdd.getNumPartitions(), batch_id)
        _log(settings, reports=None, batch_id=batch_id)
        raise
    outcome = None
    if committer is not None:
        prepared = [PreparedTransaction(*r.transaction) for r in reports if r.transaction is not None]
        failed = [(r.partition_id, a) for r in reports for a in range(r.attempt)]
        outcome = committer.commit(prepared, batch_id, failed)
    _log(settings, reports, batch_id, replay=outcome == "replay")
    return reports


def _log(settings: SinkSettings, reports: list[TaskReport] | None, batch_id: int,
         replay: bool = False) -> None:
    if not settings.progress:
        return
    where = "" if batch_id < 0 else f" (batch {batch_id})"
    if reports is None:
        print(f"fastkafka sink aborted{where}", file=sys.stderr)
        return
    print(f"fastkafka sink committed: {sum(r.rows for r in reports)} rows, "
          f"{sum(r.bytes for r in reports)} bytes from {len(reports)} tasks{where}"
          + (" (a replay: its rows were aborted)" if replay else ""), file=sys.stderr)
