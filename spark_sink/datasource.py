"""The Spark Python data source ``fastkafka`` (Spark 4's Python Data Source API, Arrow writers).

``writer()`` / ``streamWriter()`` run on the driver: the options and the DataFrame's schema are
checked there, before any task starts. ``write()`` runs once per task on an executor's Python worker
and gets the partition's rows as pyarrow RecordBatches, which go to the producer's Arrow path.
"""

from __future__ import annotations

import json
import logging
import sys
from dataclasses import asdict
from typing import TYPE_CHECKING, Any, Iterable, Sequence

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from fastkafka.errors import ConfigError
from fastkafka import PreparedTransaction

from .exactly_once import TransactionCommitter
from .metrics import aggregate as aggregate_metrics
from .options import SinkSettings, ignored_warning, settings_from_options
from .task import TaskReport, check_schema, run_task

if TYPE_CHECKING:
    import pyarrow
    from pyspark.sql.types import StructType

    from .metrics import SinkAccumulators

log = logging.getLogger("spark_sink")

#: writer(overwrite=True): what Spark's own Kafka sink says (Save mode Overwrite not allowed for
#: Kafka), with the reason and what to do.
OVERWRITE_REFUSED = (
    "save mode Overwrite is not supported by the fastkafka sink, as Spark's Kafka sink refuses it "
    "(\"Save mode Overwrite not allowed for Kafka\"): a Kafka topic cannot be truncated or "
    "overwritten, records are only appended. Use .mode(\"append\") to add the rows to the topic; "
    "to replace its content, delete and re-create the topic (fastkafka.admin.Admin) first")


class TaskCommit(WriterCommitMessage):
    """One task's report, carried to the driver."""

    def __init__(self, report: TaskReport) -> None:
        self.report = report


def write_task(settings: SinkSettings, batches: Iterable[pyarrow.RecordBatch],
               accumulators: SinkAccumulators | None = None) -> TaskCommit:
    """One task of the data source: its Arrow batches to Kafka (:func:`spark_sink.task.run_task`),
    its report added to the accumulators and carried to the driver."""
    report = run_task(settings, batches, arrow=True)
    if accumulators is not None:
        accumulators.add(report)    # sent to the driver with the task's result
    return TaskCommit(report)


def _prepared(messages: Sequence[WriterCommitMessage | None]) -> list[PreparedTransaction]:
    return [PreparedTransaction(*m.report.transaction) for m in messages
            if isinstance(m, TaskCommit) and m.report.transaction is not None]


def finish_write(settings: SinkSettings, messages: Sequence[WriterCommitMessage | None],
                 batch_id: int, aborted: bool) -> None:
    """The driver's end of a write or micro-batch: exactly_once commits (or aborts) the tasks'
    transactions; then the summary."""
    outcome = None
    if settings.exactly_once:
        committer = TransactionCommitter(settings)
        if aborted:
            committer.abort(_prepared(messages), len(messages), batch_id)
        else:
            failed = [(m.report.partition_id, a) for m in messages if isinstance(m, TaskCommit)
                      for a in range(m.report.attempt)]
            outcome = committer.commit(_prepared(messages), batch_id, failed)
    summarize(settings, messages, None if batch_id < 0 else batch_id, aborted,
              replay=outcome == "replay")


def summarize(settings: SinkSettings, messages: Sequence[WriterCommitMessage | None],
              batch_id: int | None = None, aborted: bool = False,
              replay: bool = False) -> dict[str, Any]:
    """The driver-side summary of one write or micro-batch: one line to stderr (Spark's driver log)
    unless the option ``progress`` is false, and, with the option ``summary.path``, appended to that file as one JSON line. (Spark runs
    commit() in a Python worker of the driver, not in the user's process.)"""
    reports = [m.report for m in messages if isinstance(m, TaskCommit)]
    summary = {
        "tasks": len(reports),
        "rows": sum(r.rows for r in reports),
        "bytes": sum(r.bytes for r in reports),
        "task_seconds": round(sum(r.seconds for r in reports), 3),
        "errors": sum(r.errors for r in reports),
        "batch_id": batch_id,
        "aborted": aborted,
        "delivery_guarantee": settings.delivery_guarantee,
        "replay": replay,    # exactly_once: a micro-batch committed before; this run's rows aborted
        "ignored_options": list(settings.ignored),   # Spark Kafka source / consumer options
        # the tasks' producer metrics together (spark_sink/metrics.py): Java names
        "producer_metrics": aggregate_metrics([r.producer_metrics for r in reports]),
        "reports": [asdict(r) for r in reports],
    }
    line = (f"fastkafka sink {'aborted' if aborted else 'committed'}: {summary['rows']} rows, "
            f"{summary['bytes']} bytes from {summary['tasks']} tasks"
            + ("" if batch_id is None else f" (batch {batch_id})"))
    if settings.progress:
        print(line, file=sys.stderr)  # the driver's Python worker: stderr ends up in Spark's log
    if settings.summary_path:
        with open(settings.summary_path, "a") as f:
            f.write(json.dumps(summary) + "\n")
    return summary


class FastKafkaWriter(DataSourceArrowWriter):
    def __init__(self, settings: SinkSettings, accumulators: SinkAccumulators | None = None) -> None:
        self.settings = settings
        self.accumulators = accumulators

    def write(self, iterator: Iterable[pyarrow.RecordBatch]) -> TaskCommit:
        return write_task(self.settings, iterator, self.accumulators)

    def commit(self, messages: list[WriterCommitMessage | None]) -> None:
        finish_write(self.settings, messages, self.settings.batch_id, False)

    def abort(self, messages: list[WriterCommitMessage | None]) -> None:
        finish_write(self.settings, messages, self.settings.batch_id, True)


class FastKafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings: SinkSettings, accumulators: SinkAccumulators | None = None) -> None:
        self.settings = settings
        self.accumulators = accumulators

    def write(self, iterator: Iterable[pyarrow.RecordBatch]) -> TaskCommit:
        return write_task(self.settings, iterator, self.accumulators)

    def commit(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        finish_write(self.settings, messages, batchId, False)

    def abort(self, messages: list[WriterCommitMessage | None], batchId: int) -> None:
        finish_write(self.settings, messages, batchId, True)


class FastKafkaDataSource(DataSource):
    """``df.write.format("fastkafka")``: see :mod:`spark_sink.options` for the options."""

    #: the driver's SinkAccumulators (spark_sink/metrics.py), set on the class register() makes
    _accumulators: SinkAccumulators | None = None

    @classmethod
    def name(cls) -> str:
        return "fastkafka"

    def _settings(self, schema: StructType) -> SinkSettings:
        settings = check_schema(schema, settings_from_options(self.options))
        if settings.ignored:
            log.warning("%s", ignored_warning(settings.ignored))   # once per write / query start
        return settings

    def writer(self, schema: StructType, overwrite: bool) -> FastKafkaWriter:
        """A batch write. ``.save()`` needs ``.mode("append")``: Spark refuses ErrorIfExists (the
        default) and Ignore for every Python data source before this runs; Overwrite is refused
        here (Kafka topics are append-only)."""
        if overwrite:
            raise ConfigError(OVERWRITE_REFUSED)
        settings = self._settings(schema)
        if settings.exactly_once and settings.batch_id >= 0:
            if not settings.transaction_log_path:
                raise ConfigError(
                    "exactly_once with a micro-batch id (batch_writer / foreachBatch) needs the "
                    "option 'transaction.log.path': a directory where the driver records the "
                    "committed micro-batches, so that a replayed one is not written twice")
            TransactionCommitter(settings).recover()
        return FastKafkaWriter(settings, self._accumulators)

    def streamWriter(self, schema: StructType, overwrite: bool) -> FastKafkaStreamWriter:
        """A streaming query. ``overwrite`` is True in the output mode complete: each micro-batch
        writes the whole result table, appended to the topic, as Spark's Kafka sink does."""
        settings = self._settings(schema)
        if settings.exactly_once:
            if not settings.transaction_log_path:
                raise ConfigError(
                    "exactly_once streaming needs a checkpoint location (option "
                    "'checkpointLocation') or the option 'transaction.log.path'")
            # Before any task of this (re)started query: finish what a failed driver left half
            # committed (a replayed task would otherwise abort it).
            TransactionCommitter(settings).recover()
        return FastKafkaStreamWriter(settings, self._accumulators)


def with_accumulators(accumulators: SinkAccumulators) -> type[FastKafkaDataSource]:
    """A subclass of :class:`FastKafkaDataSource` carrying ``accumulators``. It is made here, not
    importable by name, so that Spark's cloudpickle sends it by value, the accumulators with it,
    to the Python workers that plan the write and run its tasks."""
    return type("FastKafkaDataSourceWithAccumulators", (FastKafkaDataSource,),
                {"_accumulators": accumulators, "__module__": __name__})
