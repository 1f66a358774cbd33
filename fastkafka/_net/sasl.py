"""SASL authentication (``security_protocol`` SASL_PLAINTEXT and SASL_SSL) as connection handshake steps.

After ApiVersions, a connection to a broker runs two more :class:`~fastkafka._net.handshake.HandshakeStep`\\ s:

* :class:`SaslHandshakeStep`: SaslHandshake v1 with the configured mechanism. A broker that does not
  offer it answers UNSUPPORTED_SASL_MECHANISM with the mechanisms it has; the error names them.
* :class:`SaslAuthenticateStep`: SaslAuthenticate requests carrying the mechanism's messages until
  the mechanism is done:

  - PLAIN (RFC 4616): one message ``authzid NUL user NUL password`` (empty authzid).
  - SCRAM-SHA-256 / SCRAM-SHA-512 (RFC 5802, RFC 7677): client-first (user, fresh client nonce from
    :mod:`secrets`), the server's salt and iteration count, client-final with the proof computed
    from the PBKDF2-salted password, and then the server's signature is checked: a server that
    cannot prove it knows the password is refused (:class:`SaslAuthenticationError`).
  - OAUTHBEARER (RFC 7628): the client's initial response ``n,,\\x01auth=Bearer <token>\\x01\\x01``
    with the token from ``sasl_oauth_token_provider`` (a callable returning ``(token, expiry in
    epoch seconds)``, called again when the cached token is within 20 % of its lifetime, at most
    one minute, of expiring; it runs on the I/O thread).
  - GSSAPI (Kerberos V5, RFC 4752): fastkafka._net.kerberos (the optional ``gssapi`` package); its
    first step, which may wait on the KDC, runs off the I/O thread, bounded by
    ``socket_connection_setup_timeout_ms``.

Failures (wrong credentials, unknown user, a mechanism the broker does not offer, a bad server
signature, a token provider that raises) are :class:`~fastkafka.errors.SaslAuthenticationError`,
not retriable, naming the node, its address and the mechanism, never a secret. The network client
closes the connection, waits ``reconnect_backoff_max_ms`` before trying that node again and hands
the error to whoever waits on that node (see :mod:`fastkafka._net.network`).

Re-authentication (KIP-368): SaslAuthenticate v1+ answers carry the session lifetime the broker
grants (``connections.max.reauth.ms``, or a token's expiry). At a random point between 85 % and 95 %
of it the connection takes no new requests; once its in-flight requests are answered it is closed
and a new one is opened and authenticated (:meth:`Authenticated.reauth_deadline`). Requests are
never cut off: a request in flight is answered on the old connection before it closes.
"""
from __future__ import annotations

import abc

import base64
import hashlib
import hmac
import logging
import random
import secrets
import time
from typing import Any, Callable

from fastkafka.errors import ConfigError, SaslAuthenticationError
from fastkafka._net.handshake import HandshakeStep
from fastkafka.protocol import ApiKey

log = logging.getLogger("fastkafka")

MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512", "OAUTHBEARER", "GSSAPI")
SASL_PROTOCOLS = ("SASL_PLAINTEXT", "SASL_SSL")

# Broker error codes of the SASL APIs.
UNSUPPORTED_SASL_MECHANISM = 33
ILLEGAL_SASL_STATE = 34
SASL_AUTHENTICATION_FAILED = 58

#: Highest PBKDF2 iteration count accepted from a broker: the computation runs on the I/O thread,
#: and a broker asking for more is refused rather than obeyed (Kafka allows at most 16384).
MAX_SCRAM_ITERATIONS = 100_000
MIN_SCRAM_ITERATIONS = 4096   # RFC 7677: at least 4096 for SCRAM-SHA-256 (Kafka's minimum too)

#: Re-authentication happens at this fraction of the session lifetime (uniformly in the range).
REAUTH_WINDOW = (0.85, 0.95)


def check_settings(v: dict[str, Any], explicit) -> None:
    """ConfigError (naming the setting, never a secret) for an inconsistent SASL configuration."""
    proto = v["security_protocol"]
    mech = v["sasl_mechanism"]
    given = sorted(n for n in explicit if n.startswith("sasl_") and v.get(n) is not None)
    if proto not in SASL_PROTOCOLS:
        if given:
            raise ConfigError(f"{', '.join(given)} given, but security_protocol is {proto}: SASL "
                              f"settings need security_protocol SASL_PLAINTEXT or SASL_SSL")
        return
    if mech is None:
        raise ConfigError(f"security_protocol={proto} needs sasl_mechanism "
                          f"({', '.join(MECHANISMS)})")
    from fastkafka._net.kerberos import check_kerberos_settings

    check_kerberos_settings(v, explicit)   # GSSAPI's settings; refused with another mechanism
    if mech == "GSSAPI":
        return
    user, password = v["sasl_plain_username"], v["sasl_plain_password"]
    provider = v["sasl_oauth_token_provider"]
    if mech == "OAUTHBEARER":
        if provider is None:
            raise ConfigError("sasl_mechanism=OAUTHBEARER needs sasl_oauth_token_provider "
                              "(a callable returning (token, expiry_epoch_seconds))")
        extra = [n for n in ("sasl_plain_username", "sasl_plain_password") if v[n] is not None]
        if extra:
            raise ConfigError(f"{', '.join(extra)} given, but sasl_mechanism=OAUTHBEARER takes its "
                              f"credentials from sasl_oauth_token_provider")
        return
    missing = [n for n, x in (("sasl_plain_username", user), ("sasl_plain_password", password))
               if x is None]
    if missing:
        raise ConfigError(f"sasl_mechanism={mech} needs {' and '.join(missing)}")
    if provider is not None:
        raise ConfigError(f"sasl_oauth_token_provider given, but sasl_mechanism is {mech}: it is "
                          f"for OAUTHBEARER")
    if not user:
        raise ConfigError("sasl_plain_username is empty")
    if "\0" in user:
        raise ConfigError("sasl_plain_username contains a NUL character")
    if "\0" in password:
        raise ConfigError("sasl_plain_password contains a NUL character")  # never the value


# ----------------------------------------------------------------------------------- mechanisms
class Mechanism(abc.ABC):
    """One authentication exchange: :meth:`first` gives the first message, :meth:`receive` takes
    each server message and gives the next client message, or None when the exchange is complete.
    Raise SaslAuthenticationError (message without secrets) to refuse the server."""

    name = ""

    @abc.abstractmethod
    def first(self) -> bytes:
        """The client's first message."""

    def receive(self, data: bytes) -> bytes | None:
        return None


class Plain(Mechanism):
    name = "PLAIN"

    def __init__(self, user: str, password: str):
        self._message = b"\0" + user.encode("utf-8") + b"\0" + password.encode("utf-8")

    def first(self) -> bytes:
        return self._message

    def __repr__(self):
        return "Plain(***)"


def _saslname(user: str) -> str:
    return user.replace("=", "=3D").replace(",", "=2C")


class Scram(Mechanism):
    """RFC 5802 client, without channel binding (``n,,``)."""

    def __init__(self, name: str, user: str, password: str, nonce: str | None = None):
        self.name = name
        self._hash = {"SCRAM-SHA-256": "sha256", "SCRAM-SHA-512": "sha512"}[name]
        self._user = user
        self._password = password.encode("utf-8")
        self._nonce = nonce if nonce is not None else secrets.token_urlsafe(24)
        self._client_first_bare = f"n={_saslname(user)},r={self._nonce}"
        self._server_signature: bytes | None = None
        self._state = "first"

    def __repr__(self):
        return f"Scram({self.name}, ***)"

    def first(self) -> bytes:
        self._state = "server-first"
        return ("n,," + self._client_first_bare).encode("utf-8")

    def _hmac(self, key: bytes, msg: bytes) -> bytes:
        return hmac.new(key, msg, self._hash).digest()

    def receive(self, data: bytes) -> bytes | None:
        try:
            text = bytes(data).decode("utf-8")
        except UnicodeDecodeError:
            raise SaslAuthenticationError(f"{self.name}: the server's message is not UTF-8") from None
        attrs = {}
        for part in text.split(","):
            if len(part) >= 2 and part[1] == "=":
                attrs.setdefault(part[0], part[2:])
        if "e" in attrs:
            raise SaslAuthenticationError(f"{self.name}: the server refused: {attrs['e'][:200]}")
        if self._state == "server-first":
            return self._client_final(text, attrs)
        if self._state == "server-final":
            return self._verify(attrs)
        raise SaslAuthenticationError(f"{self.name}: unexpected server message after the exchange")

    def _client_final(self, server_first: str, attrs: dict) -> bytes:
        nonce, salt_b64, iters = attrs.get("r"), attrs.get("s"), attrs.get("i")
        if nonce is None or salt_b64 is None or iters is None:
            raise SaslAuthenticationError(f"{self.name}: the server's first message lacks r, s or i")
        if not nonce.startswith(self._nonce) or len(nonce) <= len(self._nonce):
            raise SaslAuthenticationError(
                f"{self.name}: the server's nonce does not extend the client's")
        try:
            salt = base64.b64decode(salt_b64, validate=True)
            iterations = int(iters)
        except (ValueError, TypeError):
            raise SaslAuthenticationError(f"{self.name}: bad salt or iteration count") from None
        if not MIN_SCRAM_ITERATIONS <= iterations <= MAX_SCRAM_ITERATIONS:
            raise SaslAuthenticationError(
                f"{self.name}: iteration count {iterations} outside {MIN_SCRAM_ITERATIONS}.."
                f"{MAX_SCRAM_ITERATIONS}")
        salted = hashlib.pbkdf2_hmac(self._hash, self._password, salt, iterations)
        without_proof = f"c=biws,r={nonce}"   # biws = base64("n,,"): no channel binding
        auth_message = ",".join((self._client_first_bare, server_first, without_proof)).encode("utf-8")
        client_key = self._hmac(salted, b"Client Key")
        stored_key = hashlib.new(self._hash, client_key).digest()
        signature = self._hmac(stored_key, auth_message)
        proof = bytes(a ^ b for a, b in zip(client_key, signature))
        server_key = self._hmac(salted, b"Server Key")
        self._server_signature = self._hmac(server_key, auth_message)
        self._state = "server-final"
        return (without_proof + ",p=" + base64.b64encode(proof).decode("ascii")).encode("utf-8")

    def _verify(self, attrs: dict) -> None:
        self._state = "done"
        given = attrs.get("v")
        try:
            sig = base64.b64decode(given or "", validate=True)
        except ValueError:
            sig = b""
        if not given or not hmac.compare_digest(sig, self._server_signature or b"\0"):
            raise SaslAuthenticationError(
                f"{self.name}: the server's signature is wrong: the broker did not prove that it "
                f"knows the password (refused)")
        return None


class TokenSource:
    """The OAUTHBEARER token of ``provider``, cached until it nears its expiry."""

    def __init__(self, provider: Callable[[], Any], clock: Callable[[], float] = time.time):
        self.provider = provider
        self.clock = clock
        self._token: str | None = None
        self._refresh_at = 0.0
        self.calls = 0

    def token(self) -> str:
        now = self.clock()
        if self._token is not None and now < self._refresh_at:
            return self._token
        self.calls += 1
        try:
            result = self.provider()
        except SaslAuthenticationError:
            raise   # the project's own providers: their message names the source, no secret
        except Exception as e:
            raise SaslAuthenticationError(
                f"OAUTHBEARER: sasl_oauth_token_provider raised {type(e).__name__}") from e
        try:
            token, expiry = result
            expiry = float(expiry)
        except (TypeError, ValueError):
            raise SaslAuthenticationError(
                "OAUTHBEARER: sasl_oauth_token_provider must return (token, expiry_epoch_seconds), "
                f"got a {type(result).__name__}") from None
        if isinstance(token, bytes):
            token = token.decode("ascii", "replace")
        if not isinstance(token, str) or not token or "\x01" in token or not token.isascii():
            raise SaslAuthenticationError("OAUTHBEARER: sasl_oauth_token_provider returned an "
                                          "empty or malformed token")
        if expiry <= now:
            raise SaslAuthenticationError(
                f"OAUTHBEARER: sasl_oauth_token_provider returned a token that expired "
                f"{now - expiry:.0f} s ago")
        margin = min((expiry - now) * 0.2, 60.0)
        self._token, self._refresh_at = token, expiry - margin
        return token


class OAuthBearer(Mechanism):
    name = "OAUTHBEARER"

    def __init__(self, source: TokenSource, extensions: dict | None = None):
        self._source = source
        self._extensions = extensions or {}
        self._failed = False

    def first(self) -> bytes:
        token = self._source.token()
        # RFC 7628 3.1: key=value pairs after the auth one, each ended by %x01
        ext = b"".join(f"{k}={v}".encode("ascii") + b"\x01" for k, v in self._extensions.items())
        return b"n,,\x01auth=Bearer " + token.encode("ascii") + b"\x01" + ext + b"\x01"

    def receive(self, data: bytes) -> bytes | None:
        if data:
            # RFC 7628 3.2.2: an error challenge (JSON status) is answered with a lone %x01; the
            # broker then fails the exchange. Its status is kept for the message (no token in it).
            self._failed = True
            return b"\x01"
        return None


# ------------------------------------------------------------------------------- handshake steps
class SaslSettings:
    """What a client needs to authenticate each connection; one per NetworkClient."""

    def __init__(self, config):
        self.mechanism = config.sasl_mechanism
        self._user = config.sasl_plain_username
        self._password = config.sasl_plain_password
        self.tokens = (TokenSource(config.sasl_oauth_token_provider)
                       if self.mechanism == "OAUTHBEARER" else None)
        self.kerberos = None
        if self.mechanism == "GSSAPI":
            from fastkafka._net.kerberos import KerberosCredentials, use_krb5_conf

            use_krb5_conf(config.sasl_kerberos_krb5_conf)
            self.service = config.sasl_kerberos_service_name
            self.domain = config.sasl_kerberos_domain_name
            self.target_name = config.sasl_kerberos_name
            self.kerberos = KerberosCredentials(
                config.sasl_kerberos_principal, config.sasl_kerberos_keytab,
                config.sasl_kerberos_ticket_cache,
                config.sasl_kerberos_min_time_before_relogin / 1000.0)
        self._extensions = getattr(config, "sasl_oauthbearer_extensions", None)

    def __repr__(self):
        return f"SaslSettings({self.mechanism})"

    def set_credentials(self, user: str, password: str) -> None:
        """The PLAIN/SCRAM credentials of the next exchange (confluent-kafka's
        set_sasl_credentials); connections authenticated already keep theirs."""
        self._user, self._password = user, password

    def new_exchange(self, host: str | None = None) -> Mechanism:
        """A new exchange of the mechanism; ``host`` is the broker's (GSSAPI names its service by it)."""
        if self.mechanism == "GSSAPI":
            from fastkafka._net.kerberos import Gssapi

            target = self.target_name or f"{self.service}@{self.domain or host or 'localhost'}"
            return Gssapi(self.kerberos, target)
        if self.mechanism == "PLAIN":
            return Plain(self._user, self._password)
        if self.mechanism == "OAUTHBEARER":
            return OAuthBearer(self.tokens, self.extensions())
        return Scram(self.mechanism, self._user, self._password)

    def extensions(self) -> dict:
        """The SASL extensions of the next OAUTHBEARER exchange: sasl_oauthbearer_extensions and
        the provider's ``extensions()`` (checked as the setting is)."""
        from fastkafka._net.jaas import check_extension, parse_extensions

        out = parse_extensions(self._extensions)
        ext = getattr(self.tokens.provider, "extensions", None)
        if callable(ext):
            try:
                more = dict(ext() or {})
                for k, val in more.items():
                    check_extension(k, val, "the token provider's extensions()")
            except Exception as e:
                raise SaslAuthenticationError(
                    f"OAUTHBEARER: the token provider's extensions() failed: "
                    f"{type(e).__name__}") from e
            out.update(more)
        return out

    def steps(self) -> list:
        return [SaslHandshakeStep(self)]

    @staticmethod
    def from_config(config) -> "SaslSettings | None":
        if getattr(config, "security_protocol", "PLAINTEXT") in SASL_PROTOCOLS:
            return SaslSettings(config)
        return None


def _where(conn) -> str:
    return f"node {conn.node_id} ({conn.host}:{conn.port})"


def _fail(client, conn, now, mechanism: str, text: str, broker_code=None, cause=None,
          like: SaslAuthenticationError | None = None) -> None:
    # ``like``: a token provider's own typed error (e.g. AwsCredentialsError): the error reported
    # is of its class, with its attributes (``source``), and names the node as well
    error = SaslAuthenticationError.__new__(type(like) if like is not None
                                            else SaslAuthenticationError)
    if like is not None:
        error.__dict__.update(like.__dict__)
    SaslAuthenticationError.__init__(
        error, f"SASL {mechanism} authentication with {_where(conn)} failed: {text}",
        node=conn.node_id, host=conn.host, port=conn.port, mechanism=mechanism,
        broker_code=broker_code)
    if cause is not None:
        error.__cause__ = cause
    client._authentication_failed(conn, now, error)


class SaslHandshakeStep(HandshakeStep):
    """SaslHandshake v1: asks for the configured mechanism."""

    def __init__(self, settings: SaslSettings):
        self.settings = settings

    def start(self, client, conn, now):
        mech = self.settings.mechanism
        version = conn.versions.get(int(ApiKey.SASL_HANDSHAKE))
        if version is None or version < 1 or int(ApiKey.SASL_AUTHENTICATE) not in conn.versions:
            _fail(client, conn, now, mech, "the broker supports no SaslHandshake v1 / "
                  "SaslAuthenticate (Kafka 1.0 or newer is needed)")
            return
        client._send_internal(conn, ApiKey.SASL_HANDSHAKE, 1, {"mechanism": mech}, now,
                              lambda body, err: self._on_response(client, conn, body, err))

    def _on_response(self, client, conn, body, error):
        if error is not None:
            return  # the connection is already being closed with this error
        now = client.clock()
        mech = self.settings.mechanism
        code = body["error_code"]
        if code == UNSUPPORTED_SASL_MECHANISM:
            offered = ", ".join(body["mechanisms"]) or "none"
            _fail(client, conn, now, mech, f"the broker does not offer {mech} (it offers: "
                  f"{offered})", broker_code=code)
            return
        if code != 0:
            _fail(client, conn, now, mech, f"SaslHandshake error {code}", broker_code=code)
            return
        conn.handshake.appendleft(SaslAuthenticateStep(self.settings))
        client._next_handshake_step(conn, now)

class SaslAuthenticateStep(HandshakeStep):
    """SaslAuthenticate requests until the mechanism's exchange is complete."""

    def __init__(self, settings: SaslSettings):
        self.settings = settings
        self.exchange: Mechanism | None = None
        self.job = None   # GSSAPI: the GssapiJob making the first message off the I/O thread

    def start(self, client, conn, now):
        mech = self.settings.mechanism
        try:
            self.exchange = self.settings.new_exchange(conn.host)
            if getattr(self.exchange, "blocking_first", False):
                self._start_off_thread(client, conn, now)
                return
            data = self.exchange.first()
        except SaslAuthenticationError as e:
            _fail(client, conn, now, mech, e.message, cause=e.__cause__,
                  like=e if type(e) is not SaslAuthenticationError else None)
            return
        self._send(client, conn, now, data)

    def _start_off_thread(self, client, conn, now):
        """The first message of a mechanism that may wait on the network (GSSAPI: the KDC) is made
        on a thread of its own, bounded by socket_connection_setup_timeout_ms; the I/O thread goes
        on meanwhile and takes the outcome through ``client.call_soon``."""
        from fastkafka._net.kerberos import GssapiJob

        sock = conn.sock
        timeout_ms = client.config.socket_connection_setup_timeout_ms

        def deliver(data, error):
            if conn.sock is not sock:
                return   # the connection was closed meanwhile (or is a newer one)
            at = client.clock()
            if error is not None:
                _fail(client, conn, at, self.settings.mechanism, error.message)
            else:
                self._send(client, conn, at, data)

        self.job = GssapiJob(self.exchange.first, deliver, client.call_soon, timeout_ms / 1000.0,
                             f"the Kerberos ticket for {_where(conn)}").start()

    def _send(self, client, conn, now, data: bytes):
        version = conn.versions[int(ApiKey.SASL_AUTHENTICATE)]
        client._send_internal(conn, ApiKey.SASL_AUTHENTICATE, version, {"auth_bytes": data},
                              now, lambda body, err: self._on_response(client, conn, body, err))

    def _on_response(self, client, conn, body, error):
        if error is not None:
            return
        now = client.clock()
        mech = self.settings.mechanism
        code = body["error_code"]
        if code != 0:
            why = body.get("error_message") or f"error {code}"
            if code == SASL_AUTHENTICATION_FAILED:
                why = f"SASL_AUTHENTICATION_FAILED: {why}"
            _fail(client, conn, now, mech, why[:500], broker_code=code)
            return
        try:
            reply = self.exchange.receive(bytes(body["auth_bytes"] or b""))
        except SaslAuthenticationError as e:
            _fail(client, conn, now, mech, e.message)
            return
        if reply is not None:
            self._send(client, conn, now, reply)
            return
        lifetime = body.get("session_lifetime_ms") or 0
        conn.reauth_at_ms = (now + int(lifetime * random.uniform(*REAUTH_WINDOW))
                             if lifetime > 0 else 0)
        log.debug("SASL %s authentication with %s done (session lifetime %s ms)", mech,
                  _where(conn), lifetime or "unlimited")
        client._next_handshake_step(conn, now)
