"""The Spark 3.5 job of tests/spark35/test_spark35.py, run in the Spark 3.5 environment
(``fastkafka_tools.spark35``), never by pytest itself:

    python job35.py BOOTSTRAP SPEC_JSON WORK_DIR

SPEC_JSON names the topics ({"rows": t, "stream_arrow": t, "stream_rows": t, "exactly_once": t})
and the row count. Writes with ``partition_writer`` (foreachPartition) and ``batch_writer``
(foreachBatch on a file stream, two micro-batches each): through Arrow batches, through Rows, and
exactly once. With ``"registry": {"url", "user_info", "topics"}`` it also writes struct values as
Schema Registry Avro and JSON (:func:`registry_writes`). Prints one JSON line: what the parent
checks besides the records."""
from __future__ import annotations

import json
import os
import sys


def rows_sql(n_from: str = "id"):
    """Columns of row i: key (null every 7th), value (empty every 11th, null every 13th), headers
    (none, empty, or two with a duplicate name and a null value)."""
    return [
        f"CASE WHEN {n_from} % 7 = 3 THEN NULL ELSE cast(concat('k', {n_from}) AS binary) END AS key",
        f"CASE WHEN {n_from} % 13 = 5 THEN NULL WHEN {n_from} % 11 = 4 THEN cast('' AS binary) "
        f"ELSE cast(concat('v', {n_from}) AS binary) END AS value",
        f"CASE WHEN {n_from} % 3 = 0 THEN NULL WHEN {n_from} % 3 = 1 THEN "
        f"cast(array() AS array<struct<key: string, value: binary>>) "
        f"ELSE array(named_struct('key', 'h', 'value', cast(cast({n_from} AS string) AS binary)), "
        f"named_struct('key', 'h', 'value', cast(NULL AS binary))) END AS headers",
    ]


def record_sql(n_from: str = "id"):
    """A struct value for the Schema Registry writes (test_spark35.expected_record computes the
    same in Python): longs, non-ASCII text, a decimal, a date, a timestamp, an array (empty every
    4th), a map (empty every 3rd), a nested struct, nulls; a null value (a tombstone) every 13th."""
    i = n_from
    return [
        f"cast({i} AS string) AS key",
        f"CASE WHEN {i} % 13 = 5 THEN NULL ELSE named_struct("
        f"'n', {i}, 's', CASE WHEN {i} % 5 = 0 THEN NULL ELSE concat('ü日', cast({i} AS string)) END, "
        f"'dec', cast({i} / 4.0 - 10 AS decimal(12,3)), "
        f"'dt', date_add(DATE'2000-01-01', cast({i} AS int)), "
        f"'ts', timestamp_micros({i} * 1000003), "
        f"'arr', CASE WHEN {i} % 4 = 0 THEN cast(array() AS array<bigint>) ELSE array({i}, -{i}) END, "
        f"'m', CASE WHEN {i} % 3 = 0 THEN cast(map() AS map<string,bigint>) "
        f"ELSE map('a', {i}) END, "
        f"'inner', named_struct('b', {i} % 2 = 0, 'x', CASE WHEN {i} % 7 = 0 THEN NULL "
        f"ELSE cast({i} AS double) / 2 END)) END AS value",
    ]


def registry_writes(spark, bootstrap, spec, incoming, work):
    """Struct values for the Schema Registry: partition_writer (Rows; the schema derived from
    schema=df.schema on the driver) as Avro, and batch_writer micro-batches as Avro (Arrow tasks
    and Row tasks) and JSON."""
    import spark_sink
    import spark_sink.batch_job as batch_job

    reg = spec["registry"]
    registry = {"url": reg["url"], "basic.auth.user.info": reg["user_info"]}
    topics = reg["topics"]
    frame = spark.range(0, spec["rows"], 1, 2).selectExpr(*record_sql())
    done = {}

    def attempt(name, write):
        # each write on its own: a failure is reported under its name (the parent's test of that
        # write fails with it) and the other writes still run
        try:
            done[name] = write()
        except Exception as e:
            done[name] = f"failed: {type(e).__name__}: {str(e)[-3000:]}"

    def rows():
        frame.foreachPartition(spark_sink.partition_writer(
            topics["rows"], bootstrap_servers=bootstrap, value_format="avro", schema=frame.schema,
            schema_registry=registry))
        return 1

    def stream(topic, name, **kwargs):
        sdf = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(incoming)
               .repartition(2).selectExpr(*record_sql()))
        q = (sdf.writeStream.foreachBatch(spark_sink.batch_writer(
                topic, bootstrap_servers=bootstrap, schema_registry=registry, **kwargs))
             .option("checkpointLocation", os.path.join(work, "checkpoint-" + name))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return q.lastProgress["batchId"] + 1 if q.lastProgress else 0

    attempt("rows", rows)
    attempt("avro_arrow", lambda: stream(topics["avro_arrow"], "avro-arrow", value_format="avro"))
    attempt("json", lambda: stream(topics["json"], "json", value_format="json"))
    batch_job.arrow_tasks_available = lambda: False      # the Row path, as without pandas
    attempt("avro_rows", lambda: stream(topics["avro_rows"], "avro-rows", value_format="avro"))
    batch_job.arrow_tasks_available = lambda: True
    return done


def main() -> None:
    bootstrap, spec, work = sys.argv[1], json.loads(sys.argv[2]), sys.argv[3]
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    import pyspark
    from pyspark.sql import SparkSession

    import spark_sink
    import spark_sink.batch_job as batch_job
    from fastkafka.errors import ConfigError

    out = {"pyspark": pyspark.__version__,
           "data_source_api": batch_job.has_data_source_api(),
           "datasource_imported": "pyspark.sql.datasource" in sys.modules}
    spark = (SparkSession.builder.master("local[1]").appName("fastkafka-spark35")
             .config("spark.ui.enabled", "false").config("spark.ui.showConsoleProgress", "false")
             .config("spark.driver.memory", "512m")
             .config("spark.sql.shuffle.partitions", "2")
             .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
             .getOrCreate())
    spark.sparkContext.setLogLevel("ERROR")
    try:
        spark_sink.register(spark)
        out["register_error"] = None
    except ConfigError as e:
        out["register_error"] = str(e)

    n = spec["rows"]
    # partition_writer: foreachPartition, the row path; two partitions
    frame = spark.range(0, n, 1, 2).selectExpr(*rows_sql())
    frame.foreachPartition(spark_sink.partition_writer(spec["topics"]["rows"], bootstrap_servers=bootstrap))

    # batch_writer: a file stream of two files, one micro-batch each
    incoming = os.path.join(work, "incoming")
    os.makedirs(incoming)
    for part, ids in enumerate((range(0, n // 2), range(n // 2, n))):
        with open(os.path.join(incoming, f"part-{part}.json"), "w") as f:
            f.write("\n".join(json.dumps({"id": i}) for i in ids))

    def stream(topic, name, **kwargs):
        sdf = (spark.readStream.schema("id long").option("maxFilesPerTrigger", 1).json(incoming)
               .repartition(2))
        if kwargs.pop("headers", True):
            sdf = sdf.selectExpr(*rows_sql())
        else:
            sdf = sdf.selectExpr(*rows_sql()[:2])
        q = (sdf.writeStream.foreachBatch(spark_sink.batch_writer(topic, bootstrap_servers=bootstrap,
                                                                  **kwargs))
             .option("checkpointLocation", os.path.join(work, "checkpoint-" + name))
             .trigger(availableNow=True).start())
        q.awaitTermination()
        return q.lastProgress["batchId"] + 1 if q.lastProgress else 0

    out["arrow_tasks_available"] = batch_job.arrow_tasks_available()
    out["batches_arrow"] = stream(spec["topics"]["stream_arrow"], "arrow", task_headers=True)
    batch_job.arrow_tasks_available = lambda: False      # the Row path, as without pandas
    out["batches_rows"] = stream(spec["topics"]["stream_rows"], "rows")
    batch_job.arrow_tasks_available = lambda: True
    out["batches_exactly_once"] = stream(
        spec["topics"]["exactly_once"], "eo", headers=False, delivery_guarantee="exactly_once",
        transactional_id_prefix="spark35-" + os.path.basename(work),
        transaction_log_path=os.path.join(work, "txlog"))
    out["txlog"] = sorted(os.listdir(os.path.join(work, "txlog")))
    if spec.get("registry"):
        out["registry"] = registry_writes(spark, bootstrap, spec, incoming, work)
    spark.stop()
    print("RESULT " + json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
