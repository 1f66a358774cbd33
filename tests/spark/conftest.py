"""One SparkSession for every Spark test (master ``local[2,4]``: two cores, and a failed task is
retried up to 4 times, as on a cluster). Spark starts lazily, on the first test that needs it."""
from __future__ import annotations

import os
import sys

import pytest


@pytest.fixture(scope="session")
def spark():
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import spark_sink

    session = (SparkSession.builder.master("local[2,4]").appName("fastkafka-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    spark_sink.register(session)
    yield session
    session.stop()
