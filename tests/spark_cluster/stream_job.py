"""The streaming driver program of the cluster tests (``spark-submit stream_job.py SPEC.json``).

A text-file stream (each line of a file one row, its ``value``; ``files_per_trigger`` files per
micro-batch, so a micro-batch has one Spark partition per file) into ``writeStream.format("fastkafka")``
with a checkpoint. Spark records each micro-batch's files in the checkpoint before running it: a
micro-batch replayed after a restart reads the same files, so its rows are the same.

Runs until every file present at its start is written (``processAllAvailable``), then stops the
query and writes ``result`` (the application id). The sink's summary file has a line per micro-batch.

SPEC (JSON): ``bootstrap``, ``topic``, ``guarantee``, ``prefix`` (transactional id prefix),
``checkpoint``, ``input`` (the directory of the files), ``files_per_trigger``, ``summary`` (the
sink's summary file), ``result``, ``crash`` (optional: the sink's ``test.crash`` option) and
``hold`` (when the query fails: say so on stderr and wait to be killed rather than exit, as a
driver that dies at that point would leave things).
"""
import json
import sys
import time

from pyspark.sql import SparkSession

import spark_sink


def main(spec_path):
    with open(spec_path) as f:
        spec = json.load(f)
    spark = SparkSession.builder.appName("fastkafka-stream-test").getOrCreate()
    spark_sink.register(spark)
    lines = (spark.readStream.format("text")
             .option("maxFilesPerTrigger", str(spec["files_per_trigger"])).load(spec["input"]))
    writer = (lines.writeStream.format("fastkafka")
              .option("kafka.bootstrap.servers", spec["bootstrap"]).option("topic", spec["topic"])
              .option("task.headers", "true").option("delivery.guarantee", spec["guarantee"])
              .option("summary.path", spec["summary"]).option("checkpointLocation", spec["checkpoint"]))
    if spec["guarantee"] == "exactly_once":
        writer = writer.option("transactional.id.prefix", spec["prefix"])
    if spec.get("crash"):
        writer = writer.option("test.crash", spec["crash"])
    query = writer.start()
    try:
        query.processAllAvailable()
    except Exception as e:  # noqa: BLE001 - the test decides what a failed query means
        if spec.get("hold"):
            print(f"stream_job: the query failed, waiting to be killed: {str(e)[:300]}",
                  file=sys.stderr, flush=True)
            time.sleep(600)
        raise
    query.stop()
    with open(spec["result"], "w") as f:
        json.dump({"app_id": spark.sparkContext.applicationId}, f)
    spark.stop()


if __name__ == "__main__":
    main(sys.argv[1])
