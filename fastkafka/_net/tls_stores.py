"""Java-style key and trust stores for the TLS context (:func:`fastkafka._net.tls.build_context`).

* ``ssl_truststore_location`` (PKCS12, or a PEM file with ``ssl_truststore_type=PEM``) and
  ``ssl_truststore_certificates`` (PEM text, KIP-651): the CA certificates, loaded with
  ``load_verify_locations(cadata=...)``;
* ``ssl_keystore_location`` (PKCS12, or a PEM file holding key and chain) and ``ssl_keystore_key`` +
  ``ssl_keystore_certificate_chain`` (PEM text): the client certificate for mutual TLS.

PKCS12 is read with the ``cryptography`` package (the extra ``fastkafka-producer[tls]``). The ssl
module loads a private key only from a file: the key is written, encrypted with a one-time random
password, to an anonymous in-memory file (``memfd_create``; a private 0600 temporary file where
that does not exist, removed at once) and loaded from there. JKS is refused with the ``keytool``
command that converts it. No message of this module shows a password or a key.
"""
from __future__ import annotations

import os
import secrets
import ssl
import tempfile

from fastkafka.errors import ConfigError

STORE_TYPES = ("PKCS12", "PEM")
TLS_EXTRA = 'pip install "fastkafka-producer[tls]"'


def parse_store_type(name: str, value) -> str | None:
    """The ``ssl_keystore_type`` / ``ssl_truststore_type`` setting, upper case; JKS refused."""
    if value is None:
        return None
    if not isinstance(value, str):
        raise ConfigError(f"{name} must be PKCS12 or PEM, got {type(value).__name__}")
    kind = value.strip().upper()
    if kind in STORE_TYPES:
        return kind
    if kind == "JKS":
        which = "keystore" if "keystore" in name else "truststore"
        raise ConfigError(
            f"{name}=JKS is not supported (no maintained Python reader of JKS exists): convert the "
            f"{which} to PKCS12 with: keytool -importkeystore -srckeystore {which}.jks "
            f"-srcstoretype JKS -destkeystore {which}.p12 -deststoretype PKCS12, then set "
            f"ssl.{which}.location to {which}.p12 and ssl.{which}.type=PKCS12")
    raise ConfigError(f"{name} must be PKCS12 or PEM, got {value!r}")


def _crypto():
    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import serialization
        from cryptography.hazmat.primitives.serialization import pkcs12
    except ImportError:
        raise ConfigError(f"PKCS12 and PEM-text key stores need the 'cryptography' package: "
                          f"{TLS_EXTRA}") from None
    return x509, serialization, pkcs12


def _read(setting: str, path: str) -> bytes:
    from fastkafka._net.tls import _check_file

    _check_file(setting, path)
    with open(path, "rb") as f:
        return f.read()


def _load_pkcs12(setting: str, path: str, passwords: list):
    """The PKCS12 file's (key, cert, additional certs), trying each password (None: none)."""
    _, _, pkcs12 = _crypto()
    data = _read(setting, path)
    tried = []
    for pw in passwords:
        if pw in tried:
            continue
        tried.append(pw)
        try:
            return pkcs12.load_key_and_certificates(data, None if pw is None else pw.encode("utf-8"))
        except (ValueError, TypeError):
            continue
    pw_setting = setting.replace("_location", "_password")
    given = any(pw is not None for pw in tried)
    raise ConfigError(f"{setting} {path!r} cannot be opened as PKCS12: "
                      + (f"{pw_setting} is wrong, or the file is not PKCS12" if given else
                         f"it needs a password ({pw_setting}), or the file is not PKCS12"))


def _pem_certs(setting: str, text: str | bytes) -> list:
    x509, _, _ = _crypto()
    data = text.encode("ascii", "replace") if isinstance(text, str) else text
    try:
        certs = x509.load_pem_x509_certificates(data)
    except ValueError:
        certs = []
    if not certs:
        raise ConfigError(f"{setting} holds no PEM certificate")
    return certs


def _to_pem(certs) -> str:
    _, serialization, _ = _crypto()
    return "".join(c.public_bytes(serialization.Encoding.PEM).decode("ascii") for c in certs)


def trust_cadata(v: dict) -> tuple[str | None, str | None]:
    """(cadata PEM text, cafile) of the trust-store settings, or (None, None) when none is set."""
    location, certificates = v.get("ssl_truststore_location"), v.get("ssl_truststore_certificates")
    kind = v.get("ssl_truststore_type")
    if location is None and certificates is None:
        for n in ("ssl_truststore_password", "ssl_truststore_type"):
            if v.get(n) is not None:
                raise ConfigError(f"{n} is set without ssl_truststore_location or "
                                  f"ssl_truststore_certificates")
        return None, None
    if v.get("ssl_cafile") is not None:
        raise ConfigError("ssl_cafile and a trust store (ssl_truststore_*) are both set: use one")
    if location is not None and certificates is not None:
        raise ConfigError("ssl_truststore_location and ssl_truststore_certificates are both set: "
                          "use one")
    if certificates is not None:
        if kind == "PKCS12":
            raise ConfigError("ssl_truststore_certificates is PEM text: set ssl_truststore_type=PEM")
        return _to_pem(_pem_certs("ssl_truststore_certificates", certificates)), None
    if kind == "PEM":
        if v.get("ssl_truststore_password") is not None:
            raise ConfigError("ssl_truststore_password is set, but a PEM trust store has none")
        return None, location
    _, cert, extra = _load_pkcs12("ssl_truststore_location", location,
                                  [v.get("ssl_truststore_password")])
    certs = ([cert] if cert is not None else []) + list(extra or [])
    if not certs:
        raise ConfigError(f"ssl_truststore_location {location!r} holds no certificate")
    return _to_pem(certs), None


def load_keystore(ctx: ssl.SSLContext, v: dict) -> bool:
    """Load the key-store settings' client certificate into ``ctx``; False when none is set."""
    location, key = v.get("ssl_keystore_location"), v.get("ssl_keystore_key")
    chain, kind = v.get("ssl_keystore_certificate_chain"), v.get("ssl_keystore_type")
    if location is None and key is None and chain is None:
        for n in ("ssl_keystore_password", "ssl_keystore_type"):
            if v.get(n) is not None:
                raise ConfigError(f"{n} is set without ssl_keystore_location or ssl_keystore_key")
        return False
    clash = [n for n in ("ssl_certfile", "ssl_keyfile") if v.get(n) is not None]
    if clash:
        raise ConfigError(f"{' and '.join(clash)} and a key store (ssl_keystore_*) are both set: "
                          f"use one")
    _, serialization, _ = _crypto()
    key_password = v.get("ssl_password")      # ssl.key.password
    if location is not None:
        if key is not None or chain is not None:
            raise ConfigError("ssl_keystore_location and ssl_keystore_key / "
                              "ssl_keystore_certificate_chain are both set: use one")
        if kind == "PEM":
            data = _read("ssl_keystore_location", location)
            private, certs = _pem_key("ssl_keystore_location", data, key_password), \
                _pem_certs("ssl_keystore_location", data)
        else:
            private, cert, extra = _load_pkcs12(
                "ssl_keystore_location", location, [v.get("ssl_keystore_password"), key_password])
            if private is None or cert is None:
                raise ConfigError(f"ssl_keystore_location {location!r} holds no private key with "
                                  f"its certificate")
            certs = [cert] + list(extra or [])
    else:
        if key is None or chain is None:
            raise ConfigError("ssl_keystore_type=PEM needs both ssl_keystore_key and "
                              "ssl_keystore_certificate_chain")
        if kind == "PKCS12":
            raise ConfigError("ssl_keystore_key is PEM text: set ssl_keystore_type=PEM")
        private = _pem_key("ssl_keystore_key", key.encode("ascii", "replace"), key_password)
        certs = _pem_certs("ssl_keystore_certificate_chain", chain)
    _load_into(ctx, private, certs, serialization)
    return True


def _pem_key(setting: str, data: bytes, password: str | None):
    _, serialization, _ = _crypto()
    pw = None if password is None else password.encode("utf-8")
    try:
        return serialization.load_pem_private_key(data, pw)
    except TypeError:
        if pw is None:
            raise ConfigError(f"{setting}: the private key is encrypted and ssl.key.password "
                              f"(ssl_password) is not set") from None
        raise ConfigError(f"{setting}: the private key is not encrypted, but ssl.key.password "
                          f"(ssl_password) is set") from None
    except ValueError:
        raise ConfigError(f"{setting}: no usable PEM private key"
                          + (" (or ssl.key.password does not decrypt it)" if pw else "")) from None


def _load_into(ctx: ssl.SSLContext, private, certs, serialization) -> None:
    """``ctx.load_cert_chain`` from objects: the key encrypted with a one-time password in a
    memory file (never on disk where memfd_create exists)."""
    once = secrets.token_urlsafe(24)
    data = private.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                 serialization.BestAvailableEncryption(once.encode()))
    data += _to_pem(certs).encode("ascii")
    fd, path, unlink = _private_file()
    try:
        os.write(fd, data)
        try:
            ctx.load_cert_chain(path, password=once)
        except ssl.SSLError as e:
            raise ConfigError(f"the key store's certificate and private key cannot be used "
                              f"together: {getattr(e, 'reason', None) or e}") from None
    finally:
        os.close(fd)
        if unlink:
            os.unlink(path)


def _private_file() -> tuple[int, str, bool]:
    memfd = getattr(os, "memfd_create", None)
    if memfd is not None:
        try:
            fd = memfd("fastkafka-keystore", getattr(os, "MFD_CLOEXEC", 0))
            path = f"/proc/self/fd/{fd}"
            if os.path.exists(path):
                return fd, path, False
            os.close(fd)
        except OSError:
            pass
    fd, path = tempfile.mkstemp(prefix="fastkafka-key-", suffix=".pem")   # mode 0600
    return fd, path, True
