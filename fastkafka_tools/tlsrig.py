"""Certificates for TLS tests and benchmarks, and Apache Kafka SSL listener settings for them.

``make_pki(directory)`` writes PEM files made with the ``cryptography`` package (a test dependency):
a CA, a server certificate for 127.0.0.1 / localhost (SAN IP and DNS), a client certificate for
mutual TLS, an expired server certificate, one for another host, and a second CA that signed none of
them. ``kafka_ssl_listener(name, pki, ...)`` gives the ``listener.name.<name>.ssl.*`` broker
properties of a :class:`fastkafka_tools.apachekafka.KafkaCluster` listener using them (PEM key store and
trust store files).

This module is a test and benchmark rig; the producer itself does not use it.
"""
from __future__ import annotations

import datetime
import ipaddress
import os
from dataclasses import dataclass

__all__ = ["Pki", "make_pki", "kafka_ssl_listener"]


@dataclass(frozen=True)
class Pki:
    dir: str
    ca: str                 # CA certificate (PEM): the trust store of clients and brokers
    other_ca: str           # a CA that signed nothing used here (an untrusted trust store)
    server: str             # server certificate + key, 127.0.0.1 / localhost (Kafka PEM key store)
    server_cert: str        # the server certificate alone
    server_key: str         # its key alone (PKCS#8, unencrypted)
    expired: str            # server certificate + key, expired yesterday
    wrong_host: str         # server certificate + key for another host name and address
    client_cert: str        # client certificate (mutual TLS)
    client_key: str         # its key, unencrypted
    client_key_encrypted: str   # the same key encrypted with ``client_key_password``
    client_key_password: str


def _key():
    from cryptography.hazmat.primitives.asymmetric import ec

    return ec.generate_private_key(ec.SECP256R1())


def _name(cn: str):
    from cryptography.x509.oid import NameOID
    from cryptography import x509

    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, cn),
                      x509.NameAttribute(NameOID.ORGANIZATION_NAME, "fastkafka tests")])


def _cert(subject_cn, key, issuer_cn, issuer_key, *, ca=False, sans=(), ips=(), client=False,
          not_before=None, not_after=None):
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes
    from cryptography.x509.oid import ExtendedKeyUsageOID

    now = datetime.datetime.now(datetime.timezone.utc)
    b = (x509.CertificateBuilder()
         .subject_name(_name(subject_cn))
         .issuer_name(_name(issuer_cn))
         .public_key(key.public_key())
         .serial_number(x509.random_serial_number())
         .not_valid_before(not_before or now - datetime.timedelta(days=1))
         .not_valid_after(not_after or now + datetime.timedelta(days=30))
         .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True))
    if ca:
        b = b.add_extension(x509.KeyUsage(digital_signature=True, key_cert_sign=True, crl_sign=True,
                                          content_commitment=False, key_encipherment=False,
                                          data_encipherment=False, key_agreement=False,
                                          encipher_only=False, decipher_only=False), critical=True)
        b = b.add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
    else:
        names = [x509.DNSName(n) for n in sans] + [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        if names:
            b = b.add_extension(x509.SubjectAlternativeName(names), critical=False)
        b = b.add_extension(x509.ExtendedKeyUsage(
            [ExtendedKeyUsageOID.CLIENT_AUTH if client else ExtendedKeyUsageOID.SERVER_AUTH]),
            critical=False)
        b = b.add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(issuer_key.public_key()),
                            critical=False)
    return b.sign(issuer_key, hashes.SHA256())


def _pem_cert(cert) -> bytes:
    from cryptography.hazmat.primitives import serialization

    return cert.public_bytes(serialization.Encoding.PEM)


def _pem_key(key, password: str | None = None) -> bytes:
    from cryptography.hazmat.primitives import serialization

    enc = (serialization.BestAvailableEncryption(password.encode()) if password
           else serialization.NoEncryption())
    return key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, enc)


def make_pki(directory: str) -> Pki:
    """Write the certificates and keys into ``directory`` (created if needed)."""
    os.makedirs(directory, exist_ok=True)
    now = datetime.datetime.now(datetime.timezone.utc)

    def write(name: str, *parts: bytes) -> str:
        path = os.path.join(directory, name)
        with open(path, "wb") as f:
            f.write(b"".join(parts))
        os.chmod(path, 0o600)
        return path

    ca_key = _key()
    ca = _cert("fastkafka test CA", ca_key, "fastkafka test CA", ca_key, ca=True)
    other_key = _key()
    other = _cert("another CA", other_key, "another CA", other_key, ca=True)
    local = dict(sans=("localhost",), ips=("127.0.0.1",))
    server_key = _key()
    server = _cert("localhost", server_key, "fastkafka test CA", ca_key, **local)
    expired_key = _key()
    expired = _cert("localhost", expired_key, "fastkafka test CA", ca_key, **local,
                    not_before=now - datetime.timedelta(days=30),
                    not_after=now - datetime.timedelta(days=1))
    wrong_key = _key()
    wrong = _cert("broker.example.com", wrong_key, "fastkafka test CA", ca_key,
                  sans=("broker.example.com",), ips=("192.0.2.7",))
    client_key = _key()
    client = _cert("fastkafka client", client_key, "fastkafka test CA", ca_key, client=True)
    password = "client-key-pass-" + os.urandom(4).hex()
    return Pki(
        dir=directory,
        ca=write("ca.pem", _pem_cert(ca)),
        other_ca=write("other-ca.pem", _pem_cert(other)),
        server=write("server.pem", _pem_key(server_key), _pem_cert(server), _pem_cert(ca)),
        server_cert=write("server-cert.pem", _pem_cert(server)),
        server_key=write("server-key.pem", _pem_key(server_key)),
        expired=write("expired.pem", _pem_key(expired_key), _pem_cert(expired), _pem_cert(ca)),
        wrong_host=write("wrong-host.pem", _pem_key(wrong_key), _pem_cert(wrong), _pem_cert(ca)),
        client_cert=write("client-cert.pem", _pem_cert(client)),
        client_key=write("client-key.pem", _pem_key(client_key)),
        client_key_encrypted=write("client-key-enc.pem", _pem_key(client_key, password)),
        client_key_password=password,
    )


def kafka_ssl_listener(name: str, keystore: str, truststore: str, client_auth: str = "none") -> dict:
    """Broker properties of SSL listener ``name``: PEM key store (key + chain in one file), PEM trust
    store, ``ssl.client.auth`` (none / requested / required)."""
    p = f"listener.name.{name.lower()}.ssl."
    return {
        p + "keystore.type": "PEM",
        p + "keystore.location": keystore,
        p + "truststore.type": "PEM",
        p + "truststore.location": truststore,
        p + "client.auth": client_auth,
        # The broker checks nothing about a client's host name.
        p + "endpoint.identification.algorithm": "",
    }
