"""The Spark Python data source ``fastkafka`` (Spark 4's Python Data Source API, Arrow writers).

``writer()`` / ``streamWriter()`` run on the driver: the options and the DataFrame's schema are
checked there, before any task starts. ``write()`` runs once per task on an executor's Python worker
and gets the partition's rows as pyarrow RecordBatches, which go to the producer's Arrow path.
"""

from __future__ import annotations

import json
import sys
from dataclasses import asdict

from pyspark.sql.datasource import (DataSource, DataSourceArrowWriter, DataSourceStreamArrowWriter,
                                    WriterCommitMessage)

from .options import check_schema, settings_from_options
from .task import TaskReport, TaskWriter


class TaskCommit(WriterCommitMessage):
    """One task's report, carried to the driver."""

    def __init__(self, report: TaskReport):
        self.report = report


def write_task(settings, batches) -> TaskCommit:
    writer = TaskWriter(settings)
    for batch in batches:
        writer.write_arrow(batch)
    return TaskCommit(writer.finish())


def summarize(settings, messages, batch_id: int | None = None, aborted: bool = False) -> dict:
    """The driver-side summary of one write or micro-batch: logged to stderr (Spark's driver log)
    and, with the option ``summary.path``, appended to that file as one JSON line. (Spark runs
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
        "reports": [asdict(r) for r in reports],
    }
    line = (f"fastkafka sink {'aborted' if aborted else 'committed'}: {summary['rows']} rows, "
            f"{summary['bytes']} bytes from {summary['tasks']} tasks"
            + ("" if batch_id is None else f" (batch {batch_id})"))
    print(line, file=sys.stderr)  # the driver's Python worker: stderr ends up in Spark's log
    if settings.summary_path:
        with open(settings.summary_path, "a") as f:
            f.write(json.dumps(summary) + "\n")
    return summary


class FastKafkaWriter(DataSourceArrowWriter):
    def __init__(self, settings):
        self.settings = settings

    def write(self, iterator):
        return write_task(self.settings, iterator)

    def commit(self, messages):
        summarize(self.settings, messages)

    def abort(self, messages):
        summarize(self.settings, messages, aborted=True)


class FastKafkaStreamWriter(DataSourceStreamArrowWriter):
    def __init__(self, settings):
        self.settings = settings

    def write(self, iterator):
        return write_task(self.settings, iterator)

    def commit(self, messages, batchId):
        summarize(self.settings, messages, batchId)

    def abort(self, messages, batchId):
        summarize(self.settings, messages, batchId, aborted=True)


class FastKafkaDataSource(DataSource):
    """``df.write.format("fastkafka")``: see :mod:`spark_sink.options` for the options."""

    @classmethod
    def name(cls) -> str:
        return "fastkafka"

    def _settings(self, schema):
        return check_schema(schema, settings_from_options(self.options))

    def writer(self, schema, overwrite):
        return FastKafkaWriter(self._settings(schema))

    def streamWriter(self, schema, overwrite):
        return FastKafkaStreamWriter(self._settings(schema))
