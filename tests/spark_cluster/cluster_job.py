"""The driver program the cluster tests submit (``spark-submit cluster_job.py SPEC.json``).

SPEC (JSON): ``bootstrap``, ``result`` (a file this program writes), ``probe`` (report where the
executors import fastkafka from), and ``writes``: a list of writes, each with ``topic``, ``rows``,
``partitions`` (Spark partitions), ``guarantee``, ``prefix`` (transactional id prefix), ``summary``
(the sink's summary file), ``pause`` (seconds every task sleeps
between two batches: a write slow enough to kill an executor in the middle) and ``slow``
(``{"partition": P, "seconds": {"0": S0, "1": S1}}``: attempt N of partition P sleeps S_N seconds
once its first batch reached the sink, the others not at all) and ``options`` (more options of the
sink, e.g. ``kafka.acks``); a batch is ``spark.sql.execution.arrow.maxRecordsPerBatch`` rows.

The result: the application id, the probe's findings, and per write its wall time and every task
attempt of its stages as the driver's REST API lists them (status, attempt, speculative, error).
"""
import json
import sys
import time
import urllib.request

from pyspark.sql import SparkSession
from pyspark.sql.functions import col, concat, lit, rpad

#: Values are "row-<i>" padded with dots to this length: Spark's streams to and from Python
#: workers are buffered (64 KiB), and small rows would sit there while a task sleeps.
VALUE_BYTES = 256

import spark_sink


def probe(spark, n):
    def where(_):
        import os
        import sys

        import fastkafka
        import spark_sink
        yield {"fastkafka": fastkafka.__file__, "spark_sink": spark_sink.__file__, "cwd": os.getcwd(),
               "executable": sys.executable, "path": sys.path}
    return spark.sparkContext.parallelize(range(n), n).mapPartitions(where).collect()


def value_udf(pause, slow, batch):
    """The rows' value column, made by a Python UDF that sleeps as the spec says: ``pause`` s at
    every ``batch``-th row of a task, and ``slow`` at the second of them. Spark hands the writer a
    batch once the row after it is there: a sleep at row 2 * batch + 1 holds the second batch back
    and lets the first reach the sink. (A UDF rather than mapInArrow: that needs pandas on the
    driver.)"""
    from pyspark.sql.functions import udf

    seen = {}

    def value(i):
        import time

        from pyspark import TaskContext

        ctx = TaskContext.get()
        key = (ctx.stageId(), ctx.partitionId(), ctx.attemptNumber())
        n = seen[key] = seen.get(key, 0) + 1
        if n > 1 and (n - 1) % batch == 0:
            if pause:
                time.sleep(pause)
            if slow and ctx.partitionId() == slow["partition"] and n - 1 == 2 * batch:
                time.sleep(float(slow["seconds"].get(str(ctx.attemptNumber()), 0)))
        return f"row-{i}".ljust(VALUE_BYTES, ".")

    return udf(value, "string")


def tasks(spark, job_group):
    """Every task attempt of the stages of ``job_group``'s jobs (the driver's REST API)."""
    sc = spark.sparkContext
    base = f"{sc.uiWebUrl}/api/v1/applications/{sc.applicationId}"
    out = []
    for job_id in sc.statusTracker().getJobIdsForGroup(job_group):
        for stage_id in sc.statusTracker().getJobInfo(job_id).stageIds:
            with urllib.request.urlopen(f"{base}/stages/{stage_id}?details=true", timeout=30) as r:
                for stage in json.loads(r.read()):
                    for t in stage.get("tasks", {}).values():
                        out.append({"stage": stage_id, "index": t["index"], "attempt": t["attempt"],
                                    "status": t["status"], "speculative": t.get("speculative", False),
                                    "executor": t.get("executorId"),
                                    "error": (t.get("errorMessage") or "")[:300]})
    return out


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    spark = SparkSession.builder.appName("fastkafka-cluster-test").getOrCreate()
    spark_sink.register(spark)
    import fastkafka
    result = {"app_id": spark.sparkContext.applicationId, "driver_fastkafka": fastkafka.__file__,
              "writes": []}
    if spec.get("probe"):
        result["probe"] = probe(spark, spec["probe"])
    for i, w in enumerate(spec["writes"]):
        group = f"write-{i}"
        spark.sparkContext.setJobGroup(group, group)
        df = spark.range(w["rows"], numPartitions=w["partitions"])
        if w.get("pause") or w.get("slow"):
            batch = int(spark.conf.get("spark.sql.execution.arrow.maxRecordsPerBatch"))
            value = value_udf(w.get("pause", 0), w.get("slow"), batch)("id")
        else:
            value = rpad(concat(lit("row-"), col("id").cast("string")), VALUE_BYTES, ".")
        df = df.select(col("id").cast("string").alias("key"), value.alias("value"))
        writer = (df.write.format("fastkafka").mode("append")
                  .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", w["topic"])
                  .option("task.headers", "true").option("delivery.guarantee", w["guarantee"])
                  .option("summary.path", w["summary"]))
        if w["guarantee"] == "exactly_once":
            writer = writer.option("transactional.id.prefix", w["prefix"])
        for k, v in w.get("options", {}).items():
            writer = writer.option(k, v)
        t0 = time.monotonic()
        writer.save()
        result["writes"].append({"seconds": round(time.monotonic() - t0, 3), "tasks": tasks(spark, group)})
    with open(spec["result"], "w") as f:
        json.dump(result, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
