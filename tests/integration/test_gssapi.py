"""SASL GSSAPI (Kerberos) on Apache Kafka against a real MIT KDC (tests/kdc_rig.py): the realm's
KDC issues the tickets, the broker checks them with its keytab (Krb5LoginModule).

One module-scoped Kafka node with the GSSAPI (SASL_PLAINTEXT), GSSAPI_SSL (SASL_SSL) and REAUTH
(connections.max.reauth.ms=3000) listeners, advertised as ``localhost`` (the host of the broker's
principal ``kafka/localhost``). Every record is read back by confluent-kafka over the node's
PLAINTEXT listener: confluent-kafka's wheels have no GSSAPI (librdkafka built without libsasl2).

Covered: round trips with a keytab (SASL_PLAINTEXT and SASL_SSL), with a ticket cache filled by
kinit, through ``sasl.jaas.config`` (Krb5LoginModule), through the confluent-kafka and kafka-python
layers' names; re-authentication while records flow, the keytab's ticket acquired again as it nears
expiry; a stale keytab, an expired ticket, a KDC that is down or silent: typed errors within a bound
asserted here, with the records sent before them all delivered.
"""
from __future__ import annotations

import time

import pytest

from fastkafka import Producer
from fastkafka.errors import SaslAuthenticationError

from brokers import read_back, unique_name
from sasl_checks import assert_refused_fast
from kdc_rig import (BROKER_HOST, CLIENT, KRB5_MODULE, client_keytab, gssapi_kafka_cluster,  # noqa: F401
                     kafka_keytab, kdc)

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

SETUP_MS = 2000          # socket_connection_setup_timeout_ms of the failure tests: their bound
FAIL_BOUND_S = 8.0       # a failure is reported well within this (max_block_ms is 60 s)


@pytest.fixture(scope="module")
def gkafka(kdc, kafka_keytab, pki):
    kc = gssapi_kafka_cluster(kdc, kafka_keytab, pki)
    kc.start()
    yield kc
    kc.stop()


def keytab_settings(kdc, keytab, principal=CLIENT, **kw) -> dict:
    return {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
            "sasl_kerberos_principal": kdc.principal(principal), "sasl_kerberos_keytab": keytab,
            **kw}


def send_and_read_back(kc, listener, settings, n=200, topic=None) -> dict:
    topic = topic or unique_name("gssapi")
    records = [(b"k%d" % i, b"value-%d" % i) for i in range(n)]
    with Producer(bootstrap_servers=kc.bootstrap_for(listener), linger_ms=5, max_block_ms=30000,
                  **settings) as p:
        futs = [p.send(topic, v, key=k, partition=0) for k, v in records[: n // 2]]
        futs.append(p.send_batch(topic, [v for _, v in records[n // 2:]],
                                 keys=[k for k, _ in records[n // 2:]], partition=0))
        assert p.flush(60) == 0
        metrics = p.metrics()
    got = read_back(kc.bootstrap, topic, 1, n, timeout=60)[0]
    assert [(m.key, m.value) for m in got] == records
    assert metrics["net_authentication_failures"] == 0
    return metrics


def test_keytab_round_trip_over_sasl_plaintext(gkafka, kdc, client_keytab):
    send_and_read_back(gkafka, "GSSAPI", keytab_settings(kdc, client_keytab))


def test_keytab_round_trip_over_sasl_ssl(gkafka, kdc, client_keytab, pki):
    settings = keytab_settings(kdc, client_keytab, security_protocol="SASL_SSL",
                               ssl_cafile=pki.ca)
    send_and_read_back(gkafka, "GSSAPI_SSL", settings)


def test_ticket_cache_from_kinit(gkafka, kdc, client_keytab):
    ccache = kdc.kinit(CLIENT, client_keytab)
    send_and_read_back(gkafka, "GSSAPI", {"security_protocol": "SASL_PLAINTEXT",
                                          "sasl_mechanism": "GSSAPI",
                                          "sasl_kerberos_ticket_cache": ccache})


def test_java_names_and_jaas_config(gkafka, kdc, client_keytab):
    jaas = (f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{client_keytab}" '
            f'principal="{kdc.principal(CLIENT)}";')
    config = {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "GSSAPI",
              "sasl.kerberos.service.name": "kafka", "sasl.jaas.config": jaas}
    send_and_read_back(gkafka, "GSSAPI", config)


def test_confluent_kafka_layer_names(gkafka, kdc, client_keytab):
    from fastkafka.compat.confluent import Producer as CProducer

    topic = unique_name("gssapi-ck")
    p = CProducer({"bootstrap.servers": gkafka.bootstrap_for("GSSAPI"),
                   "security.protocol": "SASL_PLAINTEXT", "sasl.mechanisms": "GSSAPI",
                   "sasl.kerberos.service.name": "kafka",
                   "sasl.kerberos.principal": kdc.principal(CLIENT),
                   "sasl.kerberos.keytab": client_keytab,
                   "sasl.kerberos.min.time.before.relogin": 60000,
                   "sasl.kerberos.kinit.cmd": "kinit"})
    for i in range(50):
        p.produce(topic, b"ck-%d" % i, partition=0)
    assert p.flush(60) == 0
    got = read_back(gkafka.bootstrap, topic, 1, 50, timeout=60)[0]
    assert [m.value for m in got] == [b"ck-%d" % i for i in range(50)]


def test_kafka_python_layer_names_with_the_default_ticket_cache(gkafka, kdc, client_keytab):
    """kafka-python takes the ticket from the default cache (KRB5CCNAME, the realm's here) and
    names the service by sasl_kerberos_service_name / _domain_name, or a gssapi.Name."""
    import gssapi

    from fastkafka.compat.kafka_python import KafkaProducer

    kdc.kinit(CLIENT, client_keytab, ccache=kdc.environ()["KRB5CCNAME"])
    topic = unique_name("gssapi-kp")
    service = gssapi.Name(f"kafka@{BROKER_HOST}", gssapi.NameType.hostbased_service)
    for extra in ({"sasl_kerberos_service_name": "kafka", "sasl_kerberos_domain_name": BROKER_HOST},
                  {"sasl_kerberos_name": service}):
        p = KafkaProducer(bootstrap_servers=gkafka.bootstrap_for("GSSAPI"),
                          security_protocol="SASL_PLAINTEXT", sasl_mechanism="GSSAPI", **extra)
        p.send(topic, b"kp", partition=0).get(30)
        p.close()
    got = read_back(gkafka.bootstrap, topic, 1, 2, timeout=60)[0]
    assert [m.value for m in got] == [b"kp", b"kp"]


def _flow(p, topic, seconds) -> tuple[list, list]:
    records, futs = [], []
    t_end = time.monotonic() + seconds
    i = 0
    while time.monotonic() < t_end:
        records.append(b"r%06d" % i)
        futs.append(p.send(topic, records[-1], partition=0))
        i += 1
        time.sleep(0.004)
    return records, futs


def test_reauthentication_and_ticket_renewal_while_records_flow(gkafka, kdc):
    """A client whose tickets live 8 s (the principal's max life) sends for ~10 s to the listener
    with connections.max.reauth.ms=3000: the producer re-authenticates several times and acquires
    its ticket from the keytab again as it nears expiry (min_time_before_relogin 4 s); every
    record is read back exactly once, in order."""
    keytab = kdc.add_principal("shortlived", max_life_s=8)
    topic = unique_name("gssapi-reauth")
    gkafka.create_topic(topic, 1)
    with Producer(bootstrap_servers=gkafka.bootstrap_for("REAUTH"), linger_ms=2, max_block_ms=30000,
                  **keytab_settings(kdc, keytab, "shortlived",
                                    sasl_kerberos_min_time_before_relogin=4000)) as p:
        records, futs = _flow(p, topic, 10)
        assert p.flush(60) == 0
        assert [f.get(1).offset for f in futs] == list(range(len(records)))
        m = p.metrics()
        acquisitions = p._client.sasl.kerberos.acquisitions
    assert m["net_reauthentications"] >= 2, m
    assert m["net_authentication_failures"] == 0
    assert acquisitions >= 2, "the 8-second ticket was acquired again from the keytab"
    got = read_back(gkafka.bootstrap, topic, 1, len(records), timeout=60)[0]
    assert [msg.value for msg in got] == records


def _fails_fast(kc, settings, match, listener="GSSAPI") -> SaslAuthenticationError:
    err = assert_refused_fast(kc, listener, {"socket_connection_setup_timeout_ms": SETUP_MS, **settings},
                              match, FAIL_BOUND_S)
    assert err.mechanism == "GSSAPI"
    return err


def test_stale_keytab_is_a_typed_error(gkafka, kdc):
    keytab = kdc.stale_keytab("rekeyed")
    err = _fails_fast(gkafka, keytab_settings(kdc, keytab, "rekeyed"), "GSSAPI")
    # The KDC's answer is sealed with the principal's new key: the old one cannot open it
    # (with pre-authentication required the KDC would refuse first: "Preauthentication failed").
    assert any(words in str(err) for words in ("Decrypt integrity check failed",
                                               "Preauthentication failed")), str(err)
    with open(keytab, "rb") as f:
        assert f.read()[-16:].hex() not in str(err)


def test_expired_ticket_is_a_typed_error(gkafka, kdc, client_keytab):
    ccache = kdc.kinit(CLIENT, client_keytab, lifetime_s=2)
    time.sleep(2.5)
    err = _fails_fast(gkafka, {"security_protocol": "SASL_PLAINTEXT", "sasl_mechanism": "GSSAPI",
                               "sasl_kerberos_ticket_cache": ccache}, "GSSAPI")
    assert "expired" in str(err).lower(), str(err)


def test_kdc_down_or_silent_is_bounded_and_loses_nothing_already_sent(gkafka, kdc, client_keytab):
    """A producer authenticated before the KDC went away keeps sending (its tickets are in its
    own cache); a new producer fails typed: at once when the KDC's port refuses, within
    socket_connection_setup_timeout_ms when the KDC accepts and never answers."""
    topic = unique_name("gssapi-kdc-down")
    gkafka.create_topic(topic, 1)
    settings = keytab_settings(kdc, client_keytab)
    with Producer(bootstrap_servers=gkafka.bootstrap_for("GSSAPI"), linger_ms=2,
                  max_block_ms=30000, **settings) as early:
        first = [early.send(topic, b"before-%d" % i, partition=0) for i in range(20)]
        assert early.flush(30) == 0
        try:
            kdc.stop_kdc()
            err = _fails_fast(gkafka, settings, "GSSAPI")
            assert "KDC" in str(err), str(err)
            kdc.silence()
            t0 = time.monotonic()
            err = _fails_fast(gkafka, settings, "did not complete within "
                                                "socket_connection_setup_timeout_ms=2000")
            assert time.monotonic() - t0 >= SETUP_MS / 1000 * 0.9
            later = [early.send(topic, b"during-%d" % i, partition=0) for i in range(20)]
            assert early.flush(30) == 0
        finally:
            kdc.start_kdc()
    offsets = [f.get(1).offset for f in first + later]
    assert offsets == list(range(40))
    got = read_back(gkafka.bootstrap, topic, 1, 40, timeout=60)[0]
    assert [m.value for m in got] == ([b"before-%d" % i for i in range(20)]
                                      + [b"during-%d" % i for i in range(20)])
