"""The TLS Apache Kafka rig shared by the TLS tests and the Spark sink's security tests (fixtures
``pki`` and ``tls_kafka`` in tests/conftest.py).

One Kafka node (one JVM) with a PLAINTEXT listener and five TLS listeners, all with PEM key and trust
stores made by ``fastkafka_tools.tlsrig``: ``SSL`` (server certificate for 127.0.0.1 / localhost), ``MTLS``
(the same, client certificate required), ``EXPIRED`` (an expired server certificate), ``WRONGHOST``
(a certificate for another host) and ``SASLSSL`` (SASL_SSL with PLAIN, SCRAM-SHA-256 and
OAUTHBEARER, the broker's unsecured JWS validator).
"""
from __future__ import annotations

LISTENERS = {"SSL": "SSL", "MTLS": "SSL", "EXPIRED": "SSL", "WRONGHOST": "SSL", "SASLSSL": "SASL_SSL"}
SASL_USERS = {"PLAIN": ("alice", "alice-secret"), "SCRAM-SHA-256": ("bob", "bob-secret")}


def tls_kafka_cluster(pki):
    """The (not yet started) KafkaCluster of the TLS tests."""
    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import kafka_ssl_listener

    props = {}
    props.update(kafka_ssl_listener("SSL", pki.server, pki.ca))
    props.update(kafka_ssl_listener("MTLS", pki.server, pki.ca, client_auth="required"))
    props.update(kafka_ssl_listener("EXPIRED", pki.expired, pki.ca))
    props.update(kafka_ssl_listener("WRONGHOST", pki.wrong_host, pki.ca))
    # SASL over TLS: PLAIN (user in the JAAS line) and SCRAM-SHA-256 (user made at format time)
    props.update(kafka_ssl_listener("SASLSSL", pki.server, pki.ca))
    p = "listener.name.saslssl."
    props[p + "sasl.enabled.mechanisms"] = "PLAIN,SCRAM-SHA-256,OAUTHBEARER"
    props[p + "plain.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_{SASL_USERS["PLAIN"][0]}="{SASL_USERS["PLAIN"][1]}";')
    props[p + "scram-sha-256.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    # OAUTHBEARER with Kafka's unsecured validator (unsigned JWS, the principal in "sub")
    props[p + "oauthbearer.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    props[p + "oauthbearer.sasl.server.callback.handler.class"] = (
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
        "OAuthBearerUnsecuredValidatorCallbackHandler")
    return KafkaCluster(nodes=1, listeners=LISTENERS, properties=props,
                        scram_users=[("SCRAM-SHA-256", *SASL_USERS["SCRAM-SHA-256"])])


def tls_reader_config(pki, **extra):
    """confluent-kafka settings for reading back over TLS (the fixture CA trusted)."""
    conf = {"security.protocol": "SSL", "ssl.ca.location": pki.ca}
    conf.update(extra)
    return conf
