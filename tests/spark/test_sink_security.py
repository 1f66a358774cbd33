"""The Spark sink over TLS and SASL on Apache Kafka (the module's ``tls_kafka`` node, one JVM).

The ``fastkafka`` data source passes ``kafka.security.protocol``, ``kafka.ssl.*`` and ``kafka.sasl.*``
(and the pythonic names) through to the producer in each task:

* DataFrames written over SSL, mutual TLS with an encrypted client key or with PKCS12 key and trust
  stores (Java's ``ssl.keystore.*`` / ``ssl.truststore.*``), and SASL_SSL with SCRAM-SHA-256 (given
  as settings or as ``sasl.jaas.config``), PLAIN and OAUTHBEARER (``sasl.jaas.config`` with Kafka's
  unsecured login) are read back by confluent-kafka over the same listener, every row exactly;
* a failing handshake (an untrusted CA, a wrong SCRAM password) fails the job with the typed error
  (TlsAuthenticationError / SaslAuthenticationError) in the task, long before the delivery deadline
  the job sets (``kafka.delivery.timeout.ms``, and the task's flush deadline that follows from it);
* no password (``sasl.password``, ``ssl.key.password``) appears in Spark's error text, in the
  sink's settings as Spark shows them (their repr), or in the summary file (``summary.path``).
"""
from __future__ import annotations

import collections
import time

import pytest
from pyspark.errors import PythonException

import spark_sink
from brokers import read_back, unique_name
from spark_sink.options import settings_from_options
from spark_sink.task import check_schema
from tlskafka import SASL_USERS, tls_reader_config

pytestmark = [pytest.mark.spark, pytest.mark.broker, pytest.mark.timeout(300)]

NPART = 3
ROWS = 6000
WRONG_PASSWORD = "not-bobs-password-7431"
DELIVERY_TIMEOUT_MS = 120_000     # what a failing handshake must not wait out
FAIL_BOUND_S = 45                 # the job, every task attempt included, fails well before that


@pytest.fixture(scope="module")
def stores(pki, tmp_path_factory):
    """PKCS12 key and trust stores of the module's PKI (the trust store made by keytool)."""
    from javastores import make_stores

    return make_stores(pki, str(tmp_path_factory.mktemp("stores")))


JAAS = "org.apache.kafka.common.security.{0}.{1}LoginModule required {2};"


def _cases(pki, stores=None):
    """listener -> (producer options for the sink, confluent-kafka reader settings, secrets)."""
    bob, bob_pw = SASL_USERS["SCRAM-SHA-256"]
    alice, alice_pw = SASL_USERS["PLAIN"]
    plain_reader = tls_reader_config(pki, **{"security.protocol": "SASL_SSL", "sasl.mechanisms": "PLAIN",
                                             "sasl.username": alice, "sasl.password": alice_pw})
    java_stores = {} if stores is None else {
        # Java's names, PKCS12 stores (Java's default type, written out here as jobs do)
        "mtls_pkcs12": ("MTLS", {"security.protocol": "SSL",
                                 "ssl.truststore.location": stores.truststore,
                                 "ssl.truststore.password": stores.truststore_password,
                                 "ssl.keystore.type": "PKCS12",
                                 "ssl.keystore.location": stores.keystore,
                                 "ssl.keystore.password": stores.keystore_password,
                                 "ssl.key.password": stores.keystore_password},
                        tls_reader_config(pki, **{"ssl.certificate.location": pki.client_cert,
                                                  "ssl.key.location": pki.client_key}),
                        (stores.keystore_password, stores.truststore_password)),
        # SASL the way every Spark job sets it: sasl.jaas.config
        "sasl_ssl_jaas_scram": ("SASLSSL", {"security.protocol": "SASL_SSL",
                                            "ssl.truststore.location": stores.truststore,
                                            "ssl.truststore.password": stores.truststore_password,
                                            "sasl.mechanism": "SCRAM-SHA-256",
                                            "sasl.jaas.config": JAAS.format(
                                                "scram", "Scram", f'username="{bob}" password="{bob_pw}"')},
                                plain_reader, (bob_pw, stores.truststore_password)),
        "sasl_ssl_jaas_plain": ("SASLSSL", {"security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca,
                                            "sasl.mechanism": "PLAIN",
                                            "sasl.jaas.config": JAAS.format(
                                                "plain", "Plain", f'username="{alice}" password="{alice_pw}"')},
                                plain_reader, (alice_pw,)),
        "sasl_ssl_oauthbearer": ("SASLSSL", {"security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca,
                                             "sasl.mechanism": "OAUTHBEARER",
                                             "sasl.jaas.config": JAAS.format(
                                                 "oauthbearer", "OAuthBearer",
                                                 'unsecuredLoginStringClaim_sub="spark-job"')},
                                 plain_reader, ()),
    }
    return {**java_stores,
        # pythonic names
        "ssl": ("SSL", {"security_protocol": "SSL", "ssl_cafile": pki.ca}, tls_reader_config(pki), ()),
        # dotted names, a client certificate whose key is encrypted
        "mtls": ("MTLS", {"security.protocol": "SSL", "ssl.ca.location": pki.ca,
                          "ssl.certificate.location": pki.client_cert,
                          "ssl.key.location": pki.client_key_encrypted,
                          "ssl.key.password": pki.client_key_password},
                 tls_reader_config(pki, **{"ssl.certificate.location": pki.client_cert,
                                           "ssl.key.location": pki.client_key}),
                 (pki.client_key_password,)),
        "sasl_ssl_scram": ("SASLSSL", {"security.protocol": "SASL_SSL", "ssl.ca.location": pki.ca,
                                       "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": bob,
                                       "sasl.password": bob_pw},
                           tls_reader_config(pki, **{"security.protocol": "SASL_SSL",
                                                     "sasl.mechanisms": "SCRAM-SHA-256",
                                                     "sasl.username": bob, "sasl.password": bob_pw}),
                           (bob_pw,)),
    }


def _frame(spark, n=ROWS):
    return spark.range(n).selectExpr(
        "cast(concat('k', id % 101) AS binary) AS key",
        "cast(concat('v', id, repeat('s', id % 40)) AS binary) AS value").repartition(2)


def _expected(n=ROWS):
    return collections.Counter((b"k%d" % (i % 101), b"v%d" % i + b"s" * (i % 40)) for i in range(n))


def _writer(df, bootstrap, topic, producer_options, summary=None, **extra):
    w = (df.write.format("fastkafka").mode("append").option("kafka.bootstrap.servers", bootstrap)
         .option("topic", topic).option("kafka.linger.ms", "5"))
    for k, v in {**producer_options, **extra}.items():
        w = w.option("kafka." + k, v)
    if summary is not None:
        w = w.option("summary.path", str(summary))
    return w


@pytest.mark.parametrize("case", ["ssl", "mtls", "sasl_ssl_scram", "mtls_pkcs12", "sasl_ssl_jaas_scram",
                                  "sasl_ssl_jaas_plain", "sasl_ssl_oauthbearer"])
def test_dataframe_written_over_tls_and_sasl_is_read_back_exactly(spark, tls_kafka, pki, stores, tmp_path,
                                                                   case):
    listener, options, reader, secrets = _cases(pki, stores)[case]
    bootstrap = tls_kafka.bootstrap_for(listener)
    topic = unique_name(f"spark-{case.replace('_', '-')}")
    tls_kafka.create_topic(topic, NPART)
    summary = tmp_path / "summary.jsonl"
    _writer(_frame(spark), bootstrap, topic, options, summary).save()
    got = read_back(bootstrap, topic, NPART, ROWS, timeout=60, extra_config=reader)
    msgs = [m for part in got.values() for m in part]
    assert collections.Counter((m.key, m.value) for m in msgs) == _expected()
    [s] = spark_sink.read_summaries(str(summary))
    assert s["rows"] == ROWS and s["errors"] == 0 and not s["aborted"]
    text = summary.read_text()
    for secret in secrets:
        assert secret not in text
    # The settings as Spark shows them (plans, logs): the secrets are masked.
    settings = settings_from_options({"kafka.bootstrap.servers": bootstrap, "topic": topic,
                                      **{"kafka." + k: v for k, v in options.items()}})
    shown = repr(settings) + repr(check_schema(_frame(spark).schema, settings))
    for secret in secrets:
        assert secret not in shown
    if secrets:
        assert "***" in shown


def _failing_job(spark, bootstrap, options, summary):
    """Run a write that cannot connect; return (Spark's error, seconds until save() raised)."""
    df = spark.range(200).selectExpr("cast(cast(id AS string) AS binary) AS value").coalesce(1)
    w = _writer(df, bootstrap, unique_name("spark-denied"), options, summary,
                **{"delivery.timeout.ms": str(DELIVERY_TIMEOUT_MS), "max.block.ms": "60000",
                   "request.timeout.ms": "30000"})
    t0 = time.monotonic()
    with pytest.raises(PythonException) as ei:
        w.save()
    return ei.value, time.monotonic() - t0


def _check_no_secret(err, summary, *secrets):
    texts = [str(err), repr(err)]
    if summary.exists():
        texts.append(summary.read_text())
    for text in texts:
        for secret in secrets:
            assert secret not in text


def test_untrusted_ca_fails_the_job_fast_with_the_typed_error(spark, tls_kafka, pki, tmp_path):
    bob, bob_pw = SASL_USERS["SCRAM-SHA-256"]
    bootstrap = tls_kafka.bootstrap_for("SASLSSL")
    summary = tmp_path / "summary.jsonl"
    err, elapsed = _failing_job(spark, bootstrap, {
        "security.protocol": "SASL_SSL", "ssl.ca.location": pki.other_ca,
        "sasl.mechanism": "SCRAM-SHA-256", "sasl.username": bob, "sasl.password": bob_pw}, summary)
    text = str(err)
    assert "fastkafka.errors.TlsAuthenticationError: " in text, text[-3000:]
    assert bootstrap in text and "certificate" in text
    assert elapsed < FAIL_BOUND_S < DELIVERY_TIMEOUT_MS / 1000, f"failed after {elapsed:.1f} s"
    _check_no_secret(err, summary, bob_pw)


def test_wrong_scram_password_fails_the_job_fast_with_the_typed_error(spark, tls_kafka, pki, tmp_path):
    bob, bob_pw = SASL_USERS["SCRAM-SHA-256"]
    bootstrap = tls_kafka.bootstrap_for("SASLSSL")
    summary = tmp_path / "summary.jsonl"
    err, elapsed = _failing_job(spark, bootstrap, {
        "security_protocol": "SASL_SSL", "ssl_cafile": pki.ca, "sasl_mechanism": "SCRAM-SHA-256",
        "sasl_plain_username": bob, "sasl_plain_password": WRONG_PASSWORD}, summary)
    text = str(err)
    assert "fastkafka.errors.SaslAuthenticationError: " in text, text[-3000:]
    assert "SASL_AUTHENTICATION_FAILED" in text and "SCRAM-SHA-256" in text
    assert elapsed < FAIL_BOUND_S < DELIVERY_TIMEOUT_MS / 1000, f"failed after {elapsed:.1f} s"
    _check_no_secret(err, summary, WRONG_PASSWORD, bob_pw)
