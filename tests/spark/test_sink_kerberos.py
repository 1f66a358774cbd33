"""The Spark sink with Kerberos (GSSAPI) on Apache Kafka, against the real KDC of tests/kdc_rig.py:
the options a Spark job sets for Spark's own Kafka sink (``kafka.security.protocol=SASL_PLAINTEXT``,
``kafka.sasl.mechanism=GSSAPI``, ``kafka.sasl.kerberos.service.name`` and ``kafka.sasl.jaas.config``
with ``Krb5LoginModule``, a keytab and a principal) write a DataFrame that confluent-kafka reads
back over the node's PLAINTEXT listener (its wheels have no GSSAPI); a keytab the KDC no longer
accepts fails the job with the typed error, long before the job's delivery deadline.

The tasks run in Spark's Python workers, whose environment was fixed when the session's JVM
started: ``kafka.sasl.kerberos.krb5.conf`` points their libkrb5 at the test realm (on a cluster,
the machines' /etc/krb5.conf does)."""
from __future__ import annotations

import collections
import time

import pytest
from pyspark.errors import PythonException

from brokers import read_back, unique_name
from kdc_rig import CLIENT, KRB5_MODULE, client_keytab, gssapi_kafka_cluster, kafka_keytab, kdc  # noqa: F401

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(300)]

ROWS = 500
DELIVERY_TIMEOUT_MS = 120_000
FAIL_BOUND_S = 45


@pytest.fixture(scope="module")
def gkafka(kdc, kafka_keytab, pki):
    kc = gssapi_kafka_cluster(kdc, kafka_keytab, pki)
    kc.start()
    yield kc
    kc.stop()


def _options(kdc, keytab, principal=CLIENT) -> dict:
    return {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
            "sasl.kerberos.service.name": "kafka", "sasl.kerberos.krb5.conf": kdc.krb5_conf,
            "sasl.jaas.config": (f'{KRB5_MODULE} required useKeyTab=true storeKey=true '
                                 f'keyTab="{keytab}" principal="{kdc.principal(principal)}";')}


def _writer(df, bootstrap, topic, options, **extra):
    w = (df.write.format("fastkafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.linger.ms", "5"))
    for k, v in {**options, **extra}.items():
        w = w.option("kafka." + k, v)
    return w


def test_dataframe_written_with_krb5_login_module_is_read_back(spark, gkafka, kdc, client_keytab):
    topic = unique_name("spark-gssapi")
    gkafka.create_topic(topic, 2)
    df = spark.range(ROWS).selectExpr("cast(concat('k', id % 7) AS binary) AS key",
                                      "cast(concat('v', id) AS binary) AS value").repartition(2)
    _writer(df, gkafka.bootstrap_for("GSSAPI"), topic, _options(kdc, client_keytab)).save()
    got = read_back(gkafka.bootstrap, topic, 2, ROWS, timeout=60)
    assert collections.Counter((m.key, m.value) for part in got.values() for m in part) == \
        collections.Counter((b"k%d" % (i % 7), b"v%d" % i) for i in range(ROWS))


def test_stale_keytab_fails_the_job_fast_with_the_typed_error(spark, gkafka, kdc):
    keytab = kdc.stale_keytab("spark-rekeyed")
    df = spark.range(50).selectExpr("cast(cast(id AS string) AS binary) AS value").coalesce(1)
    w = _writer(df, gkafka.bootstrap_for("GSSAPI"), unique_name("spark-gssapi-denied"),
                _options(kdc, keytab, "spark-rekeyed"),
                **{"delivery.timeout.ms": str(DELIVERY_TIMEOUT_MS), "max.block.ms": "60000",
                   "socket.connection.setup.timeout.ms": "3000"})
    t0 = time.monotonic()
    with pytest.raises(PythonException) as ei:
        w.save()
    elapsed = time.monotonic() - t0
    text = str(ei.value)
    assert "fastkafka.errors.SaslAuthenticationError: " in text, text[-3000:]
    assert "GSSAPI" in text
    assert elapsed < FAIL_BOUND_S < DELIVERY_TIMEOUT_MS / 1000, f"failed after {elapsed:.1f} s"
