"""The documentation's uses of the public API, with the type annotations a user of ``mypy --strict``
writes: tests/unit/test_typing.py checks this file with ``mypy --strict`` (it is never run). Each
function follows an example of README.md or docs/*.md, named above it."""
from __future__ import annotations

import asyncio

from pyspark.sql import DataFrame, SparkSession

import spark_sink
from fastkafka import FutureRecordMetadata, KafkaError, Producer, RecordMetadata
from fastkafka.aio import AsyncProducer
from fastkafka.errors import BrokerError


# docs/producer.md, "One record": on_delivery(err, md) with the project's error type
def produce_with_kafka_error_callback() -> list[str]:
    outcomes: list[str] = []

    def on_delivery(err: KafkaError | None, md: RecordMetadata) -> None:
        outcomes.append("failed: %s" % err if err else "ok %d" % md.offset)

    with Producer(bootstrap_servers="localhost:9092") as p:
        for i in range(1000):
            p.produce("events", b"record-%d" % i, on_delivery=on_delivery)
        p.flush(timeout=30)
    return outcomes


# docs/migration.md, "From confluent-kafka": a callback written for any exception
def produce_with_exception_callback(p: Producer) -> list[Exception]:
    failures: list[Exception] = []

    def delivery_report(err: Exception | None, md: RecordMetadata) -> None:
        if err is not None:
            failures.append(err)

    p.produce("migrated", "order 1".encode(), key=b"customer-7", on_delivery=delivery_report)
    p.produce("migrated", b"order 2", b"customer-7", None, delivery_report)    # confluent's order
    p.produce("migrated", b"order 3", callback=delivery_report)
    return failures


# docs/producer.md: send() returns a future; add_callback(fn) calls fn(err, metadata)
def send_with_future(p: Producer) -> int:
    def done(err: KafkaError | None, md: RecordMetadata) -> None:
        if isinstance(err, BrokerError):
            print(err.code)

    fut: FutureRecordMetadata = p.send("events", b"v", key=b"k", on_delivery=done)
    fut.add_callback(done)
    fut.add_callback(lambda err, md: print("callback:", err, md.topic))
    error: BaseException | None = fut.exception(10)
    if error is None:
        return fut.get(10).offset
    return -1


# docs/asyncio.md: on_delivery runs on the loop
async def aio_produce() -> None:
    def on_delivery(err: KafkaError | None, md: RecordMetadata | None) -> None:
        print("callback on the loop:", err is None, md.offset if md is not None else None)

    async with AsyncProducer(bootstrap_servers="localhost:9092", linger_ms=5) as p:
        md = await p.send("aio-events", b"hello", key=b"user-1", headers=[("source", b"web")])
        print("offset", md.offset >= 0)
        p.produce("aio-events", b"fire and forget", on_delivery=on_delivery)
        p.produce("aio-events", b"fire and forget",
                  on_delivery=lambda err, md: print("callback on the loop:", err is None))
        print("left after flush:", await p.flush())


def run_aio() -> None:
    asyncio.run(aio_produce())


# docs/spark.md: the data source, partition_writer and batch_writer
def spark_writes(spark: SparkSession, df: DataFrame, sdf: DataFrame) -> None:
    accumulators = spark_sink.register(spark)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", "localhost:9092").option("topic", "events").save())
    df.foreachPartition(spark_sink.partition_writer(topic="events", bootstrap_servers="localhost:9092",
                                                    linger_ms=5))
    sdf.writeStream.foreachBatch(
        spark_sink.batch_writer(topic="events", bootstrap_servers="localhost:9092")).start()
    if accumulators is not None:
        rows: int = accumulators.value()["rows"]
        print(rows)
    for summary in spark_sink.read_summaries("summary.jsonl"):
        print(summary["rows"])
    report: spark_sink.TaskReport = spark_sink.TaskReport()
    print(report.rows, report.first_error)
