"""A local OpenID Connect identity provider for tests: signed access tokens a Kafka broker validates.

:class:`IdentityProvider` serves, over HTTP on 127.0.0.1:

* ``POST /token``: the OAuth 2 client-credentials grant (RFC 6749 4.4). The client authenticates
  with HTTP Basic (``client_secret_basic``, id and secret URL-encoded first, RFC 6749 2.3.1) or
  with ``client_id`` / ``client_secret`` in the form (``client_secret_post``). The answer is a JWT
  (RS256 or ES256, with the signing key's ``kid``) with ``iss``, ``aud``, the subject claim,
  ``iat``, ``exp`` and ``scope``, plus ``expires_in``.
* ``GET /jwks``: the JSON Web Key Set of the published public keys (RFC 7517).
* ``GET /.well-known/openid-configuration``: the discovery document naming both.

Keys rotate as identity providers do: :meth:`IdentityProvider.rotate` publishes a new key and signs
with it from then on, and keeps the old public key in the JWKS for ``grace_s`` seconds (tokens
signed with it stay valid) before dropping it. :meth:`publish_key` publishes a key before it is
used, so that validators have fetched it by the time the first token signed with it arrives.

For failure tests: :meth:`fail_next` answers the next requests of a path with an HTTP status,
``delay_s`` holds every answer back, :meth:`refuse_client` answers a client ``401``, and
:meth:`mint` makes a token directly with any claim changed or signed by any key (an unpublished
one, an expired token, a wrong audience). Counters: ``requests`` (per path) and ``tokens_issued``.

Only the standard library and ``cryptography`` (a test dependency).
"""
from __future__ import annotations

import base64
import json
import threading
import time
import urllib.parse
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.asymmetric import ec, padding, rsa
from cryptography.hazmat.primitives.asymmetric.utils import decode_dss_signature

__all__ = ["IdentityProvider", "SigningKey", "ALGORITHMS"]

ALGORITHMS = ("RS256", "ES256")


def b64url(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).rstrip(b"=").decode("ascii")


def _int_bytes(n: int, length: int | None = None) -> bytes:
    return n.to_bytes(length or max(1, (n.bit_length() + 7) // 8), "big")


@dataclass
class SigningKey:
    """One key pair: its ``kid``, algorithm and, once published, when it leaves the JWKS."""

    kid: str
    alg: str
    private: Any = field(repr=False)
    drop_at: float | None = None    # monotonic time at which the JWKS stops listing it

    @classmethod
    def generate(cls, alg: str, kid: str) -> "SigningKey":
        if alg == "RS256":
            private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
        elif alg == "ES256":
            private = ec.generate_private_key(ec.SECP256R1())
        else:
            raise ValueError(f"algorithm must be one of {ALGORITHMS}, not {alg!r}")
        return cls(kid, alg, private)

    def jwk(self) -> dict:
        """The public key as a JWK (RFC 7518 6.2 / 6.3)."""
        public = self.private.public_key().public_numbers()
        if self.alg == "RS256":
            return {"kty": "RSA", "kid": self.kid, "use": "sig", "alg": "RS256",
                    "n": b64url(_int_bytes(public.n)), "e": b64url(_int_bytes(public.e))}
        return {"kty": "EC", "kid": self.kid, "use": "sig", "alg": "ES256", "crv": "P-256",
                "x": b64url(_int_bytes(public.x, 32)), "y": b64url(_int_bytes(public.y, 32))}

    def sign(self, claims: dict) -> str:
        """A compact JWS of ``claims`` (RFC 7515), header ``{alg, typ, kid}``."""
        header = {"alg": self.alg, "typ": "JWT", "kid": self.kid}
        signing_input = (b64url(json.dumps(header, separators=(",", ":")).encode()) + "."
                         + b64url(json.dumps(claims, separators=(",", ":")).encode()))
        data = signing_input.encode("ascii")
        if self.alg == "RS256":
            signature = self.private.sign(data, padding.PKCS1v15(), hashes.SHA256())
        else:   # JWS wants r || s, 32 bytes each (RFC 7518 3.4), not DER
            r, s = decode_dss_signature(self.private.sign(data, ec.ECDSA(hashes.SHA256())))
            signature = _int_bytes(r, 32) + _int_bytes(s, 32)
        return signing_input + "." + b64url(signature)


class _QuietServer(ThreadingHTTPServer):
    def handle_error(self, request, client_address):
        # A client that gave up (its timeout against delay_s) leaves a broken pipe: expected.
        pass


class IdentityProvider:
    """The identity provider (see the module docstring). ``clients``: client id -> secret.
    ``lifetime_s`` is the tokens' lifetime; ``issuer`` defaults to the server's URL."""

    def __init__(self, clients: dict[str, str] | None = None, *, alg: str = "RS256",
                 audience: str = "kafka", issuer: str | None = None, lifetime_s: float = 300,
                 subject_claim: str = "sub", host: str = "127.0.0.1"):
        self.clients = dict(clients or {})
        self.audience = audience
        self.lifetime_s = lifetime_s
        self.subject_claim = subject_claim
        self.delay_s = 0.0
        self.requests: dict[str, int] = {}
        self.tokens_issued = 0
        self.auth_methods: list[str] = []    # client_secret_basic / client_secret_post, per token
        self.scopes: list[str | None] = []
        self._lock = threading.Lock()
        self._failures: dict[str, list[int]] = {}
        self._refused: set[str] = set()
        self._serial = 0
        self._keys: list[SigningKey] = []
        self._server = _QuietServer((host, 0), self._handler())
        self._server.daemon_threads = True
        self.url = f"http://{host}:{self._server.server_port}"
        self.issuer = issuer or self.url
        self.token_url = self.url + "/token"
        self.jwks_url = self.url + "/jwks"
        self.discovery_url = self.url + "/.well-known/openid-configuration"
        self.current = self.publish_key(alg)
        self._thread = threading.Thread(target=self._server.serve_forever, name="oidc-idp",
                                        daemon=True)
        self._thread.start()

    def __repr__(self) -> str:
        return f"<IdentityProvider {self.url} keys={[k.kid for k in self.published()]}>"

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()

    stop = close

    def __enter__(self) -> "IdentityProvider":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # -- keys ------------------------------------------------------------------------------------
    def new_key(self, alg: str = "RS256") -> SigningKey:
        """A fresh key pair, not published (tokens signed with it fail validation)."""
        with self._lock:
            self._serial += 1
            kid = f"{alg.lower()}-{self._serial}"
        return SigningKey.generate(alg, kid)

    def publish_key(self, alg: str = "RS256") -> SigningKey:
        """A fresh key, listed in the JWKS from now on, not yet signing."""
        key = self.new_key(alg)
        with self._lock:
            self._keys.append(key)
        return key

    def use_key(self, key: SigningKey) -> None:
        """Sign new tokens with ``key`` (published already, or published now)."""
        with self._lock:
            if key not in self._keys:
                self._keys.append(key)
            self.current = key

    def rotate(self, alg: str | None = None, grace_s: float = 60.0,
               key: SigningKey | None = None) -> SigningKey:
        """Sign with a new key (``key``, or a fresh one of ``alg``); the old one stays in the JWKS
        for ``grace_s`` seconds, then is dropped."""
        key = key or self.publish_key(alg or self.current.alg)
        with self._lock:
            old = self.current
            if key not in self._keys:
                self._keys.append(key)
            self.current = key
            old.drop_at = time.monotonic() + grace_s
        return key

    def published(self) -> list[SigningKey]:
        now = time.monotonic()
        with self._lock:
            self._keys = [k for k in self._keys if k.drop_at is None or k.drop_at > now]
            return list(self._keys)

    def jwks(self) -> dict:
        return {"keys": [k.jwk() for k in self.published()]}

    # -- tokens ----------------------------------------------------------------------------------
    def claims(self, subject: str, scope: str | None = None, **overrides) -> dict:
        now = int(time.time())
        claims = {"iss": self.issuer, "aud": self.audience, self.subject_claim: subject,
                  "iat": now, "exp": now + int(self.lifetime_s)}
        if scope:
            claims["scope"] = scope
        for name, value in overrides.items():
            if value is None:
                claims.pop(name, None)
            else:
                claims[name] = value
        return claims

    def mint(self, subject: str = "tester", *, key: SigningKey | None = None,
             scope: str | None = None, **overrides) -> str:
        """A token for ``subject`` signed with ``key`` (default: the current key); ``overrides``
        replace claims (``aud="other"``, ``exp=...``; None removes one)."""
        return (key or self.current).sign(self.claims(subject, scope, **overrides))

    # -- failure injection -----------------------------------------------------------------------
    def fail_next(self, path: str = "/token", status: int = 500, count: int = 1) -> None:
        """Answer the next ``count`` requests of ``path`` with HTTP ``status``."""
        with self._lock:
            self._failures.setdefault(path, []).extend([status] * count)

    def refuse_client(self, client_id: str, refused: bool = True) -> None:
        """Answer the client's token requests 401 (as for a revoked client)."""
        with self._lock:
            (self._refused.add if refused else self._refused.discard)(client_id)

    def count(self, path: str) -> int:
        with self._lock:
            return self.requests.get(path, 0)

    # -- HTTP ------------------------------------------------------------------------------------
    def _take_failure(self, path: str) -> int | None:
        with self._lock:
            self.requests[path] = self.requests.get(path, 0) + 1
            queue = self._failures.get(path)
            return queue.pop(0) if queue else None

    def _token_answer(self, headers, body: bytes) -> tuple[int, dict]:
        form = dict(urllib.parse.parse_qsl(body.decode("utf-8", "replace")))
        if form.get("grant_type") != "client_credentials":
            return 400, {"error": "unsupported_grant_type"}
        auth = headers.get("Authorization") or ""
        if auth.startswith("Basic "):
            try:
                pair = base64.b64decode(auth[6:], validate=True).decode()
                client_id, secret = (urllib.parse.unquote(x) for x in pair.split(":", 1))
            except (ValueError, UnicodeDecodeError):
                return 401, {"error": "invalid_client"}
            method = "client_secret_basic"
        elif "client_id" in form:
            client_id, secret = form["client_id"], form.get("client_secret", "")
            method = "client_secret_post"
        else:
            return 401, {"error": "invalid_client"}
        with self._lock:
            known = self.clients.get(client_id)
            refused = client_id in self._refused
        if known is None or known != secret or refused:
            return 401, {"error": "invalid_client"}
        scope = form.get("scope") or None
        token = self.mint(client_id, scope=scope)
        with self._lock:
            self.tokens_issued += 1
            self.auth_methods.append(method)
            self.scopes.append(scope)
        answer = {"access_token": token, "token_type": "Bearer",
                  "expires_in": int(self.lifetime_s)}
        if scope:
            answer["scope"] = scope
        return 200, answer

    def _handler(self):
        idp = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def _answer(self, status: int, obj: dict) -> None:
                body = json.dumps(obj).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.send_header("Cache-Control", "no-store")
                self.end_headers()
                self.wfile.write(body)

            def _common(self) -> bool:
                failure = idp._take_failure(self.path)
                if idp.delay_s:
                    time.sleep(idp.delay_s)
                if failure is not None:
                    self._answer(failure, {"error": "server_error"})
                    return False
                return True

            def do_GET(self):
                if not self._common():
                    return
                if self.path == "/jwks":
                    self._answer(200, idp.jwks())
                elif self.path == "/.well-known/openid-configuration":
                    self._answer(200, {
                        "issuer": idp.issuer, "token_endpoint": idp.token_url,
                        "jwks_uri": idp.jwks_url,
                        "grant_types_supported": ["client_credentials"],
                        "token_endpoint_auth_methods_supported": ["client_secret_basic",
                                                                  "client_secret_post"],
                        "id_token_signing_alg_values_supported": list(ALGORITHMS)})
                else:
                    self._answer(404, {"error": "not_found"})

            def do_POST(self):
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                if not self._common():
                    return
                if self.path != "/token":
                    self._answer(404, {"error": "not_found"})
                    return
                self._answer(*idp._token_answer(self.headers, body))

            def log_message(self, *args):   # quiet: tests read the counters
                pass

        return Handler
