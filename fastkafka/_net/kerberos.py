"""SASL GSSAPI (Kerberos V5, RFC 4752) through the ``gssapi`` package (the optional extra
``fastkafka-producer[gssapi]``; it binds the machine's libkrb5).

The exchange with a broker:

1. the client's initial token: GSS-API ``init_sec_context`` for the broker's service, by default
   the host-based name ``<sasl_kerberos_service_name>@<broker host>`` (``kafka@broker1.example``,
   the principal ``kafka/broker1.example@REALM``); ``sasl_kerberos_domain_name`` replaces the host,
   ``sasl_kerberos_name`` gives the whole name. Mutual authentication is asked for: the broker's
   answer proves it holds the service's key.
2. the context's further tokens until it is established (one round with MIT and Java);
3. the security layer (RFC 4752 3.1): the broker's wrapped 4 bytes (the layers it offers and its
   largest buffer) are unwrapped; the answer, wrapped, is "no security layer" (1) with a buffer of
   0, as Kafka's clients answer (TLS, not Kerberos, protects the bytes when wanted).

Credentials (:class:`KerberosCredentials`): with ``sasl_kerberos_keytab`` (and
``sasl_kerberos_principal``) the ticket is acquired from the keytab into a memory ticket cache of
this producer (``MEMORY:``), never the user's cache, and acquired again once less than
``sasl_kerberos_min_time_before_relogin`` ms of its life remain; without a keytab the user's ticket
cache (``KRB5CCNAME``, or ``sasl_kerberos_ticket_cache``) is used as ``kinit`` left it, for the
principal ``sasl_kerberos_principal`` if given (renewing it is the user's ``kinit``'s business).

Blocking: the first step may talk to the KDC (the ticket from the keytab, the service ticket), and
libkrb5 waits on the network there with its own timeouts (``krb5.conf``), which are not this
producer's. So that step runs on a thread of its own (:class:`GssapiJob`), and the I/O thread takes
its outcome, or a :class:`~fastkafka.errors.SaslAuthenticationError` once
``socket_connection_setup_timeout_ms`` has passed, whichever comes first; a KDC that does not
answer costs that bound, never a stalled I/O thread. The later steps are local computations
(checking the broker's answer, wrapping 4 bytes) and run on the I/O thread.

Errors are SaslAuthenticationError naming what failed (GSS-API's major and minor messages, e.g.
"Preauthentication failed" for a stale keytab, "Cannot contact any KDC" for a KDC that is down,
"The referenced credential has expired" for an expired ticket cache); no key or ticket is ever in
a message, repr or log line.
"""
from __future__ import annotations

import logging
import os
import secrets
import threading
import time
from typing import Any, Callable

from fastkafka.errors import ConfigError, SaslAuthenticationError
from fastkafka._net.sasl import Mechanism

log = logging.getLogger("fastkafka")

__all__ = ["INSTALL_HINT", "load_gssapi", "check_kerberos_settings", "KerberosCredentials",
           "Gssapi", "GssapiJob"]

INSTALL_HINT = 'pip install "fastkafka-producer[gssapi]"'
KERBEROS_SETTINGS = ("sasl_kerberos_service_name", "sasl_kerberos_domain_name", "sasl_kerberos_name",
                     "sasl_kerberos_principal", "sasl_kerberos_keytab", "sasl_kerberos_ticket_cache",
                     "sasl_kerberos_min_time_before_relogin", "sasl_kerberos_krb5_conf")

#: How long an exchange waits for another one's ticket acquisition (stuck on a silent KDC, say).
LOCK_WAIT_S = 30.0

# RFC 4752 3.1: security layer bit masks.
LAYER_NONE = 1


def load_gssapi():
    """The ``gssapi`` package, or ConfigError saying how to install it."""
    try:
        import gssapi
        import gssapi.raw  # noqa: F401  (the C binding: fails where libkrb5 is missing)
    except ImportError as e:
        raise ConfigError(
            f"sasl_mechanism=GSSAPI needs the gssapi package (and the machine's Kerberos library, "
            f"libkrb5): {INSTALL_HINT} ({type(e).__name__}: {e})") from None
    return gssapi


def check_kerberos_settings(v: dict[str, Any], explicit) -> None:
    """ConfigError for an inconsistent GSSAPI configuration (``v`` has the canonical names)."""
    mech = v["sasl_mechanism"]
    given = sorted(n for n in KERBEROS_SETTINGS if n in explicit and v.get(n) is not None
                   and n != "sasl_kerberos_service_name")
    if mech != "GSSAPI":
        if given:
            raise ConfigError(f"{', '.join(given)} given, but sasl_mechanism is {mech}: the "
                              f"Kerberos settings are for sasl_mechanism=GSSAPI")
        return
    load_gssapi()
    extra = [n for n in ("sasl_plain_username", "sasl_plain_password", "sasl_oauth_token_provider")
             if v.get(n) is not None]
    if extra:
        raise ConfigError(f"{', '.join(extra)} given, but sasl_mechanism=GSSAPI takes its "
                          f"credentials from a keytab (sasl_kerberos_keytab) or a ticket cache")
    if not v["sasl_kerberos_service_name"]:
        raise ConfigError("sasl_kerberos_service_name is empty (the broker's service, 'kafka')")
    keytab, principal = v["sasl_kerberos_keytab"], v["sasl_kerberos_principal"]
    if keytab is not None:
        if principal is None:
            raise ConfigError("sasl_kerberos_keytab needs sasl_kerberos_principal (the client "
                              "principal whose keys the keytab holds, e.g. 'alice@EXAMPLE.COM')")
        if not os.path.isfile(keytab) or not os.access(keytab, os.R_OK):
            raise ConfigError(f"sasl_kerberos_keytab {keytab!r} is not a readable file")
        if v["sasl_kerberos_ticket_cache"] is not None:
            raise ConfigError("sasl_kerberos_keytab and sasl_kerberos_ticket_cache are both given: "
                              "with a keytab the ticket is kept in a cache of the producer's own")
    conf = v["sasl_kerberos_krb5_conf"]
    if conf is not None:
        if not os.path.isfile(conf) or not os.access(conf, os.R_OK):
            raise ConfigError(f"sasl_kerberos_krb5_conf {conf!r} is not a readable file")
        current = os.environ.get("KRB5_CONFIG")
        if current and os.path.realpath(current) != os.path.realpath(conf):
            raise ConfigError(f"sasl_kerberos_krb5_conf {conf!r} differs from the process's "
                              f"KRB5_CONFIG {current!r}: libkrb5 takes one krb5.conf per process")
    for name in ("sasl_kerberos_principal", "sasl_kerberos_name"):
        if v.get(name) is not None and (not v[name] or "\0" in v[name]):
            raise ConfigError(f"{name} is empty or contains a NUL character")


def use_krb5_conf(path: str | None) -> None:
    """Point this process's libkrb5 at ``path`` (KRB5_CONFIG; checked by check_kerberos_settings)."""
    if path is not None and not os.environ.get("KRB5_CONFIG"):
        os.environ["KRB5_CONFIG"] = path


def _gss_text(e: BaseException) -> str:
    """GSS-API's own words for an error (major and minor messages), bounded."""
    text = ""
    gen = getattr(e, "gen_message", None)
    if callable(gen):
        try:
            text = gen()
        except Exception:
            text = ""
    return (text or str(e) or type(e).__name__).replace("\n", " ")[:400]


class KerberosCredentials:
    """The client's Kerberos credentials, shared by the connections of one producer.

    With a keytab: acquired from it into a memory ticket cache of this object (a new one each time,
    so the KDC is asked again), and again once less than ``relogin_s`` of the ticket's life remain.
    Without: the ticket cache (``ccache``, else the default of ``KRB5CCNAME``) as it is."""

    def __init__(self, principal: str | None, keytab: str | None, ccache: str | None,
                 relogin_s: float = 60.0, clock: Callable[[], float] = time.monotonic):
        self.principal = principal
        self.keytab = keytab
        self.ccache = ccache
        self.relogin_s = relogin_s
        self.clock = clock
        self._creds = None
        self._expires_at = 0.0
        self._lock = threading.Lock()
        self.acquisitions = 0     # tickets acquired from the keytab (tests, metrics)

    def __repr__(self) -> str:
        source = "keytab" if self.keytab else "ticket cache"
        return f"KerberosCredentials({self.principal or 'default principal'}, {source})"

    def get(self):
        """The credentials for init_sec_context (may talk to the KDC: called off the I/O thread)."""
        gssapi = load_gssapi()
        # One acquisition at a time; one stuck on a silent KDC holds the lock until libkrb5 gives
        # up, and the exchanges queued behind it give up after a while too (each is answered by
        # its own bound meanwhile), so that waiting threads do not pile up.
        if not self._lock.acquire(timeout=LOCK_WAIT_S):
            raise SaslAuthenticationError("GSSAPI: another ticket acquisition is still waiting on "
                                          "the KDC")
        try:
            return self._get(gssapi)
        finally:
            self._lock.release()

    def _get(self, gssapi):
        """get() under the lock: the cached credentials, or new ones."""
        now = self.clock()
        if self._creds is not None and now < self._expires_at - self.relogin_s:
            return self._creds
        name = (gssapi.Name(self.principal, gssapi.NameType.kerberos_principal)
                if self.principal else None)
        if self.keytab:
            store = {"client_keytab": self.keytab,
                     "ccache": f"MEMORY:fastkafka-{secrets.token_hex(8)}"}
            creds = gssapi.Credentials(name=name, usage="initiate", store=store)
            self.acquisitions += 1
        else:
            store = {"ccache": self.ccache} if self.ccache else None
            creds = gssapi.Credentials(name=name, usage="initiate", store=store)
        # Asking for the lifetime makes libkrb5 get the keytab's ticket now (it is otherwise
        # fetched lazily by init_sec_context): a stale keytab fails here, with the KDC's words.
        lifetime = creds.lifetime
        self._creds = creds
        # (a ticket shorter than the re-login margin is acquired again for every exchange)
        self._expires_at = now + (lifetime if lifetime is not None else 10 * 365 * 86400)
        return creds


class Gssapi(Mechanism):
    """One GSSAPI authentication exchange (the Mechanism interface of fastkafka._net.sasl):
    :meth:`first` (blocking: the KDC; see GssapiJob), then :meth:`receive` for each broker answer."""

    name = "GSSAPI"
    blocking_first = True

    def __init__(self, credentials: KerberosCredentials, target: str):
        self.credentials = credentials
        self.target = target          # "service@host" (host-based) or "service/host@REALM"
        self._ctx = None
        self._state = "first"

    def __repr__(self) -> str:
        return f"Gssapi({self.target}, {self._state})"

    def first(self) -> bytes:
        gssapi = load_gssapi()
        try:
            creds = self.credentials.get()
            if "/" in self.target:
                name = gssapi.Name(self.target, gssapi.NameType.kerberos_principal)
            else:
                name = gssapi.Name(self.target, gssapi.NameType.hostbased_service)
            flags = [gssapi.RequirementFlag.mutual_authentication,
                     gssapi.RequirementFlag.out_of_sequence_detection]
            self._ctx = gssapi.SecurityContext(name=name, creds=creds, usage="initiate",
                                               flags=flags)
            token = self._ctx.step()
        except gssapi.exceptions.GSSError as e:
            raise SaslAuthenticationError(f"GSSAPI: no ticket for the brokers' service {self.target}: "
                                          f"{_gss_text(e)}") from None
        self._state = "layer" if self._ctx.complete else "context"
        return token or b""

    def receive(self, data: bytes) -> bytes | None:
        gssapi = load_gssapi()
        try:
            if self._state == "context":
                token = self._ctx.step(data)
                if self._ctx.complete:
                    self._state = "layer"
                return token or b""
            if self._state == "layer":
                return self._security_layer(data)
        except gssapi.exceptions.GSSError as e:
            raise SaslAuthenticationError(f"GSSAPI: the broker's answer was refused: "
                                          f"{_gss_text(e)}") from None
        if self._state == "done" and not data:
            return None
        raise SaslAuthenticationError("GSSAPI: unexpected broker message after the exchange")

    def _security_layer(self, data: bytes) -> bytes:
        if not data:
            raise SaslAuthenticationError("GSSAPI: the broker sent no security layer offer")
        offer = self._ctx.unwrap(data).message
        if len(offer) != 4:
            raise SaslAuthenticationError(f"GSSAPI: the broker's security layer offer has "
                                          f"{len(offer)} bytes, not 4")
        if not offer[0] & LAYER_NONE:
            raise SaslAuthenticationError(
                f"GSSAPI: the broker does not offer 'no security layer' (mask {offer[0]:#x}); "
                f"integrity and confidentiality layers are not supported (use SASL_SSL)")
        self._state = "done"
        return self._ctx.wrap(bytes([LAYER_NONE, 0, 0, 0]), False).message


class GssapiJob:
    """Runs ``work()`` (a GSS-API step that may wait on the KDC) on a daemon thread, and hands
    ``deliver(result, error)`` to the I/O thread through ``call_soon`` exactly once: with the
    outcome, or with a SaslAuthenticationError when ``timeout_s`` passes first (the thread is then
    left to finish on its own; its outcome is dropped)."""

    def __init__(self, work: Callable[[], Any], deliver: Callable[[Any, Any], None],
                 call_soon: Callable[[Callable], None], timeout_s: float, what: str):
        self._work = work
        self._deliver = deliver
        self._call_soon = call_soon
        self.timeout_s = timeout_s
        self.what = what
        self._lock = threading.Lock()
        self._done = False
        self._timer = threading.Timer(timeout_s, self._timed_out)
        self._timer.daemon = True
        self._thread = threading.Thread(target=self._run, name="fastkafka-gssapi", daemon=True)

    def start(self) -> "GssapiJob":
        self._timer.start()
        self._thread.start()
        return self

    def cancel(self) -> None:
        with self._lock:
            self._done = True
        self._timer.cancel()

    def _finish(self, result, error) -> None:
        with self._lock:
            if self._done:
                return
            self._done = True
        self._timer.cancel()
        try:
            self._call_soon(lambda _body, _err: self._deliver(result, error))
        except Exception:   # the client was closed meanwhile: nobody waits for the outcome
            log.debug("GSSAPI: %s: outcome dropped (the client is closed)", self.what)

    def _run(self) -> None:
        try:
            result = self._work()
        except SaslAuthenticationError as e:
            self._finish(None, e)
        except Exception as e:   # a binding's surprise: still a typed, bounded failure
            self._finish(None, SaslAuthenticationError(f"GSSAPI: {type(e).__name__}: {e}"[:400]))
        else:
            self._finish(result, None)
        finally:
            self._work = None

    def _timed_out(self) -> None:
        self._finish(None, SaslAuthenticationError(
            f"GSSAPI: {self.what} did not complete within socket_connection_setup_timeout_ms="
            f"{int(self.timeout_s * 1000)} (is the KDC reachable? libkrb5 waits on it with the "
            f"timeouts of krb5.conf)"))
