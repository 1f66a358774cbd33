"""Kerberos fixtures: a realm with its KDC (``fastkafka_tools.kdc``) per session, and the Apache Kafka
node with GSSAPI listeners the Kerberos tests share (one per test module that asks for it).

``kdc`` starts the realm and points this process's libkrb5 at it (``KRB5_CONFIG``, and
``KRB5CCNAME`` at a cache of the realm's directory, so no test reads or writes the user's own
tickets); the variables are restored at the end of the session. ``kafka_keytab`` /
``client_keytab`` are the broker's (``kafka/localhost``) and a client's (``alice``) keytabs.

:func:`gssapi_kafka_cluster` is a KafkaCluster with three extra listeners advertised as
``localhost`` (the host of the broker's service principal): ``GSSAPI`` (SASL_PLAINTEXT),
``GSSAPI_SSL`` (SASL_SSL, certificates of ``fastkafka_tools.tlsrig``) and ``REAUTH``
(SASL_PLAINTEXT with a short ``connections.max.reauth.ms``). Records are read back over its
PLAINTEXT listener: confluent-kafka's wheels are built without GSSAPI (librdkafka without
libsasl2: "No provider for SASL mechanism GSSAPI").
"""
from __future__ import annotations

import os

import pytest

BROKER_SERVICE = "kafka"
BROKER_HOST = "localhost"
CLIENT = "alice"
REAUTH_MS = 3000
KRB5_MODULE = "com.sun.security.auth.module.Krb5LoginModule"


@pytest.fixture(scope="session")
def kdc():
    """The session's realm (``fastkafka_tools.kdc.Kdc``), libkrb5 of this process pointed at it."""
    from fastkafka_tools.kdc import Kdc

    realm = Kdc().start()
    saved = {k: os.environ.get(k) for k in realm.environ()}
    os.environ.update(realm.environ())
    try:
        yield realm
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
        realm.close()


@pytest.fixture(scope="session")
def kafka_keytab(kdc) -> str:
    """The keytab of the broker's service principal ``kafka/localhost@REALM``."""
    return kdc.add_principal(f"{BROKER_SERVICE}/{BROKER_HOST}")


@pytest.fixture(scope="session")
def client_keytab(kdc) -> str:
    """The keytab of the client principal ``alice@REALM``."""
    return kdc.add_principal(CLIENT)


def broker_jaas(kdc, keytab: str) -> str:
    return (f'{KRB5_MODULE} required useKeyTab=true storeKey=true keyTab="{keytab}" '
            f'principal="{BROKER_SERVICE}/{BROKER_HOST}@{kdc.realm}";')


def gssapi_kafka_cluster(kdc, keytab: str, pki, heap_mb: int = 384):
    """A one-node KafkaCluster (not started) with the GSSAPI, GSSAPI_SSL and REAUTH listeners."""
    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import kafka_ssl_listener

    props = {"sasl.enabled.mechanisms": "GSSAPI", "sasl.kerberos.service.name": BROKER_SERVICE}
    for name in ("GSSAPI", "GSSAPI_SSL", "REAUTH"):
        p = f"listener.name.{name.lower()}."
        props[p + "sasl.enabled.mechanisms"] = "GSSAPI"
        props[p + "gssapi.sasl.jaas.config"] = broker_jaas(kdc, keytab)
        props[p + "gssapi.sasl.kerberos.service.name"] = BROKER_SERVICE
    props["listener.name.reauth.gssapi.connections.max.reauth.ms"] = str(REAUTH_MS)
    props.update(kafka_ssl_listener("GSSAPI_SSL", pki.server, pki.ca))
    return KafkaCluster(
        listeners={"GSSAPI": "SASL_PLAINTEXT", "GSSAPI_SSL": "SASL_SSL", "REAUTH": "SASL_PLAINTEXT"},
        advertised_hosts={n: BROKER_HOST for n in ("GSSAPI", "GSSAPI_SSL", "REAUTH")},
        jvm_options=[f"-Djava.security.krb5.conf={kdc.krb5_conf}",
                     "-Dsun.security.krb5.disableReferrals=true"],
        properties=props, heap_mb=heap_mb)
