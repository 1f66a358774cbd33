"""Java key and trust stores in the TLS context: a PKCS12 trust store made by the JDK's keytool and a
PKCS12 key store give a mutual-TLS handshake with a server that requires a client certificate (the
server sees the client's certificate); PEM text in the config (KIP-651) does the same; a wrong
password, a missing one, JKS and conflicting settings are ConfigErrors naming the setting, never
the password. The private key never stays on disk."""
from __future__ import annotations

import os
import socket
import ssl
import threading

import pytest

from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError

from javastores import make_stores


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from fastkafka_tools.tlsrig import make_pki

    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def stores(pki, tmp_path_factory):
    return make_stores(pki, str(tmp_path_factory.mktemp("stores")))


def cfg(**kw):
    return ProducerConfig({"bootstrap.servers": "127.0.0.1:9093", "security.protocol": "SSL", **kw})


def handshake(pki, client_ctx) -> dict:
    """Mutual TLS over a socket pair with Python's TLS server (client certificate required);
    returns the client certificate the server saw."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH, cafile=pki.ca)
    server_ctx.load_cert_chain(pki.server)
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    a, b = socket.socketpair()
    seen, errors = {}, []

    def server():
        try:
            with server_ctx.wrap_socket(b, server_side=True) as s:
                seen.update(s.getpeercert())
                s.sendall(b"ok")
        except (ssl.SSLError, OSError) as e:
            errors.append(e)

    t = threading.Thread(target=server, daemon=True)
    t.start()
    with client_ctx.wrap_socket(a, server_hostname="127.0.0.1") as c:
        assert c.recv(2) == b"ok"
    t.join(10)
    assert not errors, errors
    return seen


def _cn(cert: dict) -> str:
    return dict(x[0] for x in cert["subject"])["commonName"]


def test_pkcs12_truststore_and_keystore_give_mutual_tls(pki, stores):
    c = cfg(**{"ssl.truststore.location": stores.truststore,
               "ssl.truststore.password": stores.truststore_password,
               "ssl.keystore.location": stores.keystore, "ssl.keystore.type": "PKCS12",
               "ssl.keystore.password": stores.keystore_password,
               "ssl.key.password": stores.keystore_password})
    assert _cn(handshake(pki, c.tls_context)) == "fastkafka client"
    shown = repr(c) + repr(c.as_dict())
    assert stores.keystore_password not in shown and stores.truststore_password not in shown


def test_truststore_alone_trusts_the_broker_and_without_a_keystore_the_server_refuses(pki, stores):
    c = cfg(ssl_truststore_location=stores.truststore, ssl_truststore_password=stores.truststore_password)
    with pytest.raises((ssl.SSLError, OSError, AssertionError)):
        handshake(pki, c.tls_context)      # a server requiring a client certificate refuses


def test_pem_text_stores_kip_651(pki):
    read = lambda p: open(p).read()   # noqa: E731
    c = cfg(**{"ssl.truststore.type": "PEM", "ssl.truststore.certificates": read(pki.ca),
               "ssl.keystore.type": "PEM", "ssl.keystore.key": read(pki.client_key_encrypted),
               "ssl.key.password": pki.client_key_password,
               "ssl.keystore.certificate.chain": read(pki.client_cert)})
    assert _cn(handshake(pki, c.tls_context)) == "fastkafka client"
    assert "PRIVATE KEY" not in repr(c) and "PRIVATE KEY" not in str(c.as_dict())
    # a PEM trust store file
    c = cfg(ssl_truststore_type="PEM", ssl_truststore_location=pki.ca,
            ssl_keystore_type="PEM", ssl_keystore_key=read(pki.client_key),
            ssl_keystore_certificate_chain=read(pki.client_cert))
    assert _cn(handshake(pki, c.tls_context)) == "fastkafka client"


@pytest.mark.parametrize("setting", ["keystore", "truststore"])
def test_wrong_or_missing_password_names_the_setting_not_the_password(stores, setting):
    wrong = "wrong-password-9361"
    location = getattr(stores, setting)
    with pytest.raises(ConfigError, match=f"ssl_{setting}_location .* ssl_{setting}_password is wrong") as ei:
        cfg(**{f"ssl.{setting}.location": location, f"ssl.{setting}.password": wrong})
    assert wrong not in str(ei.value) and getattr(stores, f"{setting}_password") not in str(ei.value)
    if setting == "keystore":   # keytool's trust store has no encrypted content: no password needed
        with pytest.raises(ConfigError, match=f"it needs a password \\(ssl_{setting}_password\\)"):
            cfg(**{f"ssl.{setting}.location": location})


def test_a_pem_file_is_not_pkcs12(pki):
    with pytest.raises(ConfigError, match="cannot be opened as PKCS12"):
        cfg(ssl_truststore_location=pki.ca)


@pytest.mark.parametrize("setting", ["ssl.keystore.type", "ssl.truststore.type"])
def test_jks_is_refused_with_the_keytool_command(setting):
    with pytest.raises(ConfigError, match="keytool -importkeystore .* -deststoretype PKCS12"):
        cfg(**{setting: "JKS"})
    with pytest.raises(ConfigError, match="must be PKCS12 or PEM"):
        cfg(**{setting: "BKS"})


def test_conflicting_settings(pki, stores):
    with pytest.raises(ConfigError, match="ssl_cafile and a trust store"):
        cfg(ssl_cafile=pki.ca, ssl_truststore_location=stores.truststore)
    with pytest.raises(ConfigError, match="ssl_certfile and a key store"):
        cfg(ssl_cafile=pki.ca, ssl_certfile=pki.client_cert, ssl_keystore_location=stores.keystore,
            ssl_keystore_password=stores.keystore_password)
    with pytest.raises(ConfigError, match="ssl_keystore_password is set without"):
        cfg(ssl_cafile=pki.ca, ssl_keystore_password="x")
    with pytest.raises(ConfigError, match="needs both ssl_keystore_key and"):
        cfg(ssl_cafile=pki.ca, ssl_keystore_type="PEM", ssl_keystore_key=open(pki.client_key).read())
    with pytest.raises(ConfigError, match="need SSL or SASL_SSL"):
        ProducerConfig(bootstrap_servers="h:1", ssl_truststore_location=stores.truststore)


def test_the_key_never_stays_on_disk(pki, stores, monkeypatch, tmp_path):
    """The loaded key goes through a memory file; without memfd_create, through a private temp
    file that is gone once the context is built."""
    import tempfile

    monkeypatch.delattr(os, "memfd_create", raising=False)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    c = cfg(ssl_cafile=pki.ca, ssl_keystore_location=stores.keystore,
            ssl_keystore_password=stores.keystore_password)
    assert _cn(handshake(pki, c.tls_context)) == "fastkafka client"
    assert os.listdir(tmp_path) == []


def test_missing_cryptography_names_the_extra(stores, monkeypatch):
    import builtins

    real_import = builtins.__import__

    def no_cryptography(name, *args, **kwargs):
        if name.startswith("cryptography"):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_cryptography)
    with pytest.raises(ConfigError, match=r'fastkafka-producer\[tls\]'):
        cfg(ssl_truststore_location=stores.truststore)
