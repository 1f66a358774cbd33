"""``df.write.format("fastkafka")`` in a session where nobody called ``spark_sink.register``: Spark's
own discovery of Python data sources (modules named ``pyspark_*`` with a ``DefaultSource``) finds
the module ``pyspark_fastkafka``.

The session's JVM runs that discovery once, on its first data source lookup, for all its sessions;
``spark.newSession()`` is a session of the same JVM without the data sources the fixture's session
registered, as a user's new session is."""
from __future__ import annotations

import pickle

import pytest
from pyspark.errors import AnalysisException
from pyspark.sql.datasource import DataSource

import pyspark_fastkafka
from brokers import read_back, unique_name
from spark_sink.datasource import FastKafkaDataSource

pytestmark = pytest.mark.spark


def test_spark_discovery_finds_the_data_source(spark):
    """Spark's discovery as Spark runs it (a Python worker started by the JVM) names 'fastkafka'
    with the data source class."""
    assert pyspark_fastkafka.DefaultSource is FastKafkaDataSource
    jvm = spark.sparkContext._jvm
    found = jvm.org.apache.spark.sql.execution.datasources.v2.python \
        .UserDefinedPythonDataSource.lookupAllDataSourcesInPython()
    names = list(found.names())
    assert "fastkafka" in names, names
    assert pickle.loads(bytes(found.dataSources()[names.index("fastkafka")])) is FastKafkaDataSource


def test_a_new_session_writes_without_register(spark, kafka_broker):
    """What a user types in a new session: no register, format("fastkafka"), the rows arrive."""
    topic = unique_name("sdisc")
    kafka_broker.create_topic(topic, 1)
    fresh = spark.newSession()

    class Probe(DataSource):
        @classmethod
        def name(cls) -> str:
            return "fastkafka_probe"

    # the control: what the fixture's session registers is not seen by the new session
    spark.dataSource.register(Probe)
    with pytest.raises(AnalysisException, match="'fastkafka_probe' not found"):
        fresh.range(1).selectExpr("'x' AS value").write.format("fastkafka_probe").mode("append").save()

    df = fresh.range(20).selectExpr("cast(id AS string) AS value").repartition(2)
    (df.write.format("fastkafka").mode("append")
       .option("kafka.bootstrap.servers", kafka_broker.bootstrap).option("topic", topic)
       .option("progress", "false").save())
    got = read_back(kafka_broker.bootstrap, topic, 1, 20, timeout=60)
    assert sorted(int(m.value) for m in got[0]) == list(range(20))
