"""The secured Apache Kafka node the ``tls`` and ``sasl`` examples of the documentation run
against (docs/security.md), and the OAUTHBEARER token they are given.

One node (one JVM) with, beside PLAINTEXT, an ``SSL`` listener whose client certificate is requested
(so one port serves the TLS and the mutual TLS examples) and a ``SASLSSL`` listener with PLAIN,
SCRAM-SHA-256, SCRAM-SHA-512 and OAUTHBEARER (the broker's unsecured JWS validator). The users
alice (PLAIN), bob (SCRAM-SHA-256) and carol (SCRAM-SHA-512) share one password, which the
examples read from ``KAFKA_PASSWORD``.
"""
from __future__ import annotations

import base64
import json
import time

DOCS_PASSWORD = "docs-example-secret"
SASL_MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER")


def secured_kafka_cluster(pki):
    """The (not yet started) KafkaCluster of the tls/sasl examples."""
    from fastkafka_tools.apachekafka import KafkaCluster
    from fastkafka_tools.tlsrig import kafka_ssl_listener

    props = {"sasl.enabled.mechanisms": ",".join(SASL_MECHANISMS)}
    props.update(kafka_ssl_listener("SSL", pki.server, pki.ca, client_auth="requested"))
    props.update(kafka_ssl_listener("SASLSSL", pki.server, pki.ca))
    p = "listener.name.saslssl."
    props[p + "sasl.enabled.mechanisms"] = ",".join(SASL_MECHANISMS)
    props[p + "plain.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.plain.PlainLoginModule required "
        f'user_alice="{DOCS_PASSWORD}";')
    for mech in ("scram-sha-256", "scram-sha-512"):
        props[p + mech + ".sasl.jaas.config"] = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required;")
    props[p + "oauthbearer.sasl.jaas.config"] = (
        "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required;")
    props[p + "oauthbearer.sasl.server.callback.handler.class"] = (
        "org.apache.kafka.common.security.oauthbearer.internals.unsecured."
        "OAuthBearerUnsecuredValidatorCallbackHandler")
    return KafkaCluster(nodes=1, listeners={"SSL": "SSL", "SASLSSL": "SASL_SSL"}, properties=props,
                        scram_users=[("SCRAM-SHA-256", "bob", DOCS_PASSWORD),
                                     ("SCRAM-SHA-512", "carol", DOCS_PASSWORD)])


def fetch_token(subject: str = "dave", lifetime_s: float = 3600.0) -> tuple[str, float]:
    """An unsecured JWS (alg none), as the broker's unsecured validator takes it, and its expiry:
    what ``fetch_token()`` gives the OAUTHBEARER example."""
    def b64(obj) -> str:
        return base64.urlsafe_b64encode(json.dumps(obj).encode()).rstrip(b"=").decode()

    now = time.time()
    exp = now + lifetime_s
    return b64({"alg": "none"}) + "." + b64({"sub": subject, "iat": int(now) - 1, "exp": int(exp)}) + ".", exp
