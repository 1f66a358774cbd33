"""The driver's stderr line per write or micro-batch, and the option ``progress`` that turns it off
(the data source's summary and Spark 3.5's ``batch_writer`` job), without Spark running; the column
rules' old import path."""
from __future__ import annotations

import json

import pytest

import spark_sink
from fastkafka.errors import ConfigError
from spark_sink import batch_job, options, task
from spark_sink.datasource import TaskCommit, summarize
from spark_sink.options import settings_from_kwargs, settings_from_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9092", "topic": "t"}
LINE = "fastkafka sink committed: 7 rows, 70 bytes from 1 tasks"


def report() -> task.TaskReport:
    return task.TaskReport(partition_id=0, rows=7, bytes=70)


@pytest.mark.parametrize("given,printed", [({}, True), ({"progress": "true"}, True),
                                           ({"progress": "false"}, False),
                                           ({"Progress": "FALSE"}, False)])
def test_the_data_source_line_follows_the_option(capsys, tmp_path, given, printed):
    summary = tmp_path / "summary.jsonl"
    settings = settings_from_options({**BASE, "summary.path": str(summary), **given})
    assert settings.progress is printed
    summarize(settings, [TaskCommit(report())], batch_id=3)
    err = capsys.readouterr().err
    assert (LINE + " (batch 3)" in err) is printed, err
    if not printed:
        assert "fastkafka sink" not in err
    # the summary file does not depend on it
    assert [json.loads(x)["rows"] for x in summary.read_text().splitlines()] == [7]


def test_a_bad_progress_value_is_a_config_error():
    with pytest.raises(ConfigError, match="option 'progress' must be true or false, got 'maybe'"):
        settings_from_options({**BASE, "progress": "maybe"})


@pytest.mark.parametrize("progress", [True, False])
def test_the_spark35_job_line_follows_progress(capsys, progress):
    settings = settings_from_kwargs("t", False, None, None, {"bootstrap_servers": "127.0.0.1:1"},
                                    progress=progress)
    batch_job._log(settings, [report()], 5)
    batch_job._log(settings, None, 6)
    err = capsys.readouterr().err
    assert (LINE + " (batch 5)" in err) is progress, err
    assert ("fastkafka sink aborted (batch 6)" in err) is progress, err


@pytest.mark.parametrize("progress", [True, False])
def test_batch_writer_passes_progress_to_the_data_source(progress, monkeypatch):
    seen: dict[str, str] = {}

    class Writer:
        def format(self, name):
            assert name == "fastkafka"
            return self

        def mode(self, mode):
            return self

        def options(self, **opts):
            seen.update(opts)
            return self

        def option(self, key, value):
            seen[key] = value
            return self

        def save(self):
            pass

    class Frame:
        sparkSession = None
        write = Writer()

    monkeypatch.setattr(spark_sink, "register", lambda spark, accumulators=True: None)
    monkeypatch.setattr(batch_job, "has_data_source_api", lambda: True)
    spark_sink.batch_writer(topic="t", bootstrap_servers="127.0.0.1:1", progress=progress)(Frame(), 1)
    assert seen["progress"] == ("true" if progress else "false")
    assert settings_from_options({k: v for k, v in seen.items() if k != "batch.id"}).progress is progress


def test_the_column_rules_live_in_task_and_keep_their_old_import_path():
    from spark_sink.options import SchemaError, check_schema

    assert check_schema is task.check_schema
    assert SchemaError is task.SchemaError is spark_sink.SchemaError
    assert "check_schema" not in vars(options)
    with pytest.raises(AttributeError, match="has no attribute 'nothing'"):
        options.nothing  # noqa: B018
