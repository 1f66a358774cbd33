"""PKCS12 key and trust stores made from the tests' PKI (``fastkafka_tools.tlsrig.make_pki``), as a
Java user has them: the trust store is made by the JDK's ``keytool`` (an independent writer), the
key store (client key, certificate and CA) with the ``cryptography`` package."""
from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass


@dataclass(frozen=True)
class JavaStores:
    keystore: str          # PKCS12: client key + certificate + CA certificate
    keystore_password: str
    truststore: str        # PKCS12 made by keytool: the CA certificate
    truststore_password: str


def make_stores(pki, directory: str) -> JavaStores:
    from cryptography import x509
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.serialization import pkcs12

    os.makedirs(directory, exist_ok=True)
    ks_pw = "keystore-pass-" + os.urandom(4).hex()
    ts_pw = "truststore-pass-" + os.urandom(4).hex()
    with open(pki.client_key, "rb") as f:
        key = serialization.load_pem_private_key(f.read(), None)
    with open(pki.client_cert, "rb") as f:
        cert = x509.load_pem_x509_certificate(f.read())
    with open(pki.ca, "rb") as f:
        ca = x509.load_pem_x509_certificate(f.read())
    keystore = os.path.join(directory, "client.keystore.p12")
    with open(keystore, "wb") as f:
        f.write(pkcs12.serialize_key_and_certificates(
            b"client", key, cert, [ca], serialization.BestAvailableEncryption(ks_pw.encode())))
    truststore = os.path.join(directory, "client.truststore.p12")
    if os.path.exists(truststore):
        os.unlink(truststore)
    subprocess.run(["keytool", "-importcert", "-noprompt", "-alias", "fastkafka-ca", "-file", pki.ca,
                    "-keystore", truststore, "-storetype", "PKCS12", "-storepass", ts_pw],
                   check=True, capture_output=True, timeout=60)
    return JavaStores(keystore, ks_pw, truststore, ts_pw)
