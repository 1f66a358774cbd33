"""Spark DataFrames to Kafka through fastkafka, with no JVM connector::

    import spark_sink
    spark_sink.register(spark)                      # the data source "fastkafka"
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", "host:9092").option("topic", "events").save())
    df.foreachPartition(spark_sink.partition_writer(topic="events", bootstrap_servers="host:9092"))
    sdf.writeStream.foreachBatch(spark_sink.batch_writer(topic="events",
                                                         bootstrap_servers="host:9092")).start()

``partition_writer`` and ``batch_writer`` also work on Spark 3.5 (the data source is Spark 4's).

Delivery is at-least-once by default: every task flushes before it returns and raises (so Spark
retries it) if any of its records failed or is still undelivered. The data source (and
``batch_writer``) can also write exactly once, in Kafka transactions the driver commits
(``delivery.guarantee=exactly_once``, :mod:`spark_sink.exactly_once`). See docs/spark.md.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Iterable, Mapping

from fastkafka.errors import ConfigError

from .options import SinkSettings, settings_from_kwargs
from .metrics import SinkAccumulators
from .task import DeliveryError, SchemaError, TaskReport, TaskWriter, check_schema, run_partition

if TYPE_CHECKING:
    from pyspark.sql import DataFrame, Row, SparkSession
    from pyspark.sql.types import StructType

__all__ = ["register", "partition_writer", "batch_writer", "read_summaries", "SchemaError",
           "DeliveryError", "TaskReport", "SinkAccumulators"]


def register(spark: SparkSession, accumulators: bool = True) -> SinkAccumulators | None:
    """Register the Spark Python data source ``fastkafka`` with this SparkSession (Spark 4: the
    data source needs Spark 4's Python Data Source API; on Spark 3.x this raises ConfigError, and
    ``partition_writer`` / ``batch_writer`` are the ways to write). On Spark 4.2 and later, Spark's
    discovery of Python data sources registers ``fastkafka`` by itself (the module
    ``pyspark_fastkafka``); this call then replaces it with one that carries the accumulators.

    Returns the :class:`~spark_sink.metrics.SinkAccumulators` the tasks add their rows, bytes
    and producer metrics to (``.value()`` on the driver), or None with ``accumulators=False`` or
    a session without a SparkContext (Spark Connect)."""
    from .batch_job import has_data_source_api

    if not has_data_source_api():
        import pyspark
        raise ConfigError(
            f"the data source 'fastkafka' needs Spark 4's Python Data Source API "
            f"(pyspark.sql.datasource), which pyspark {pyspark.__version__} does not have: on Spark "
            f"3.x write with df.foreachPartition(spark_sink.partition_writer(...)) or "
            f"writeStream.foreachBatch(spark_sink.batch_writer(...))")
    from .datasource import FastKafkaDataSource, with_accumulators
    from .metrics import SinkAccumulators

    accs = None
    if accumulators:
        try:
            sc = spark.sparkContext
        except Exception:       # Spark Connect: no SparkContext, no accumulators
            sc = None
        if sc is not None:
            accs = SinkAccumulators(sc)
    spark.dataSource.register(FastKafkaDataSource if accs is None else with_accumulators(accs))
    return accs


def read_summaries(path: str) -> list[dict[str, Any]]:
    """The summaries the data source appended to ``path`` (option ``summary.path``): one per
    committed or aborted write or micro-batch, with rows, bytes, task seconds, errors and each
    task's report."""
    import json
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


def partition_writer(topic: str | None = None, *, task_headers: bool = False,
                     flush_timeout_ms: int | None = None, config: Mapping[str, Any] | None = None,
                     value_format: str | None = None, key_format: str | None = None,
                     schema_registry: Mapping[str, Any] | None = None,
                     schema: StructType | None = None,
                     **producer_settings: Any) -> Callable[[Iterable[Row]], None]:
    """A function for ``df.foreachPartition``: sends each Row (columns as for the data source),
    flushes, and raises the first delivery error so Spark retries the task.

    Producer settings as keyword arguments (``bootstrap_servers=..., linger_ms=5``) and/or as a
    mapping with dotted keys (``config={"bootstrap.servers": ...}``); they are checked here, on the
    driver. The DataFrame's columns are checked on the first row of each task, or here with
    ``schema=df.schema``.

    ``value_format`` / ``key_format`` ("avro" or "json") write those columns for a Schema
    Registry (``schema_registry={"url": ...}``; the other options of the data source as keyword
    arguments: ``value_schema``, ``value_subject_name_strategy``, ``auto_register_schemas``, ...).
    The schema is registered here, on the driver, once: it is ``value_schema`` (``key_schema``),
    or derived from the column's type when ``schema=df.schema`` is given, or the subject's latest
    with ``use_latest_version=True``."""
    settings = settings_from_kwargs(topic, task_headers, flush_timeout_ms, config,
                                    _with_formats(producer_settings, value_format, key_format),
                                    schema_registry=schema_registry)
    if schema is not None:
        settings = check_schema(schema, settings)
    elif settings.formats is not None:
        from .formats import resolve_encoders

        settings = resolve_encoders(settings, None, None, known_types=False)

    def write_partition(rows: Iterable[Row]) -> None:
        run_partition(settings, rows)

    return write_partition


def batch_writer(topic: str | None = None, *, task_headers: bool = False,
                 flush_timeout_ms: int | None = None, config: Mapping[str, Any] | None = None,
                 delivery_guarantee: str = "at_least_once", transactional_id_prefix: str | None = None,
                 transaction_log_path: str | None = None, progress: bool = True,
                 value_format: str | None = None, key_format: str | None = None,
                 schema_registry: Mapping[str, Any] | None = None,
                 **producer_settings: Any) -> Callable[[DataFrame, int], None]:
    """A function for ``writeStream.foreachBatch``: writes each micro-batch through the
    ``fastkafka`` data source (the Arrow path), with the batch id in the task headers when
    ``task_headers`` is set. Same settings and errors as :func:`partition_writer`.

    On Spark 3.x (no data source API) each micro-batch is one Spark job whose tasks write as the
    data source's do and report to the driver, which commits (:mod:`spark_sink.batch_job`); the
    same guarantees hold there.

    ``delivery_guarantee="exactly_once"`` writes each micro-batch in transactions the driver
    commits (see the data source options ``delivery.guarantee``, ``transactional.id.prefix`` and
    ``transaction.log.path``; the log directory is required here). ``progress=False`` leaves out
    the driver's stderr line per micro-batch (the option ``progress``).

    ``value_format`` / ``key_format``, ``schema_registry`` and the other Schema Registry keyword
    arguments as for :func:`partition_writer`; the schema is derived from each micro-batch's column
    type unless ``value_schema`` is given, and registered by the driver before the micro-batch's
    tasks run."""
    settings = settings_from_kwargs(topic, task_headers, flush_timeout_ms, config,
                                    _with_formats(producer_settings, value_format, key_format),
                                    schema_registry=schema_registry,
                                    delivery_guarantee=delivery_guarantee,
                                    transactional_id_prefix=transactional_id_prefix,
                                    transaction_log_path=transaction_log_path,
                                    progress=bool(progress))
    if settings.exactly_once and not transaction_log_path:
        raise ConfigError("batch_writer(delivery_guarantee='exactly_once') needs transaction_log_path: "
                          "a directory where the driver records the committed micro-batches")
    options = {"kafka." + k: _option_text(v) for k, v in settings.producer_config}
    if settings.formats is not None:
        from .formats import format_options

        options.update(format_options(settings.formats))
    options["delivery.guarantee"] = settings.delivery_guarantee
    options["progress"] = "true" if settings.progress else "false"
    if settings.exactly_once:       # (both are set: checked above)
        for option, value in (("transactional.id.prefix", settings.transactional_id_prefix),
                              ("transaction.log.path", settings.transaction_log_path)):
            if value is not None:
                options[option] = value
    if topic is not None:
        options["topic"] = topic
    options["task.headers"] = "true" if task_headers else "false"
    if flush_timeout_ms is not None:
        options["flush.timeout.ms"] = str(flush_timeout_ms)

    def write_batch(df: DataFrame, batch_id: int) -> None:
        from .batch_job import has_data_source_api

        if not has_data_source_api():       # Spark 3.x
            from .batch_job import write_batch as write_job
            write_job(df, settings, batch_id)
            return
        register(df.sparkSession)
        (df.write.format("fastkafka").mode("append").options(**options)
           .option("batch.id", str(batch_id)).save())

    return write_batch


def _with_formats(producer_settings: dict[str, Any], value_format: str | None,
                  key_format: str | None) -> dict[str, Any]:
    """The keyword arguments with the formats given (spark_sink.formats takes them out again)."""
    out = dict(producer_settings)
    if value_format is not None:
        out["value_format"] = value_format
    if key_format is not None:
        out["key_format"] = key_format
    return out


def _option_text(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, (list, tuple)):
        return ",".join(str(x) for x in v)
    if callable(v):
        raise SchemaError("batch_writer passes settings as Spark options: a callable partitioner "
                          "cannot be one; use partition_writer")
    return str(v)
