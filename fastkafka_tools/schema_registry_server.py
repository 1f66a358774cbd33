"""A Schema Registry server for tests and benchmarks: the Confluent REST API over HTTP(S), in memory.

Confluent's own server is not available to the test rig, so this one serves the subset of its REST API
that clients use (confluent-kafka's ``SchemaRegistryClient`` and serializers, and
``fastkafka.schema_registry.SchemaRegistryClient``): register (``POST /subjects/{s}/versions``), look
up (``POST /subjects/{s}``), ``GET /schemas/ids/{id}`` (and ``/schema``), ``GET /schemas/types``,
``GET /subjects``, ``GET /subjects/{s}/versions``, ``GET /subjects/{s}/versions/{v|latest}`` (and
``/schema``), ``DELETE`` of a subject or a version (soft, then ``permanent=true``), ``GET/PUT/DELETE
/config`` and ``/config/{s}``, ``POST /compatibility/subjects/{s}/versions/{v}``. Answers and errors
are the registry's: content type ``application/vnd.schemaregistry.v1+json``, error bodies
``{"error_code", "message"}`` with its codes. The registry logic is
:class:`fastkafka.schema_registry._mock.RegistryState` (what ``mock://`` URLs use in process); this
server adds HTTP, TLS, basic or bearer authentication, a full Avro parse of every Avro schema (with
``fastavro``; an invalid one is 42201), a log of the requests and injected failures for retry tests.

Compatibility checks cover Avro (see ``RegistryState``); JSON Schema and Protobuf schemas are taken
as compatible.

Run it: ``python -m fastkafka_tools.schema_registry_server --port 8081`` (``--tls-cert``/``--tls-key``,
``--user name:password``, ``--token``). In a test: ``with start_registry() as server: server.url``
or ``server = start_registry(); ...; server.stop()``.

This module is a test and benchmark rig; the producer itself does not use it.
"""

from __future__ import annotations

import argparse
import base64
import hmac
import json
import ssl
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional, Sequence, Tuple
from urllib.parse import parse_qsl, urlsplit

from fastkafka.schema_registry._mock import RegistryState, _Raw

__all__ = ["RegistryServer", "start_registry", "avro_validator"]

CONTENT_TYPE = "application/vnd.schemaregistry.v1+json"


def avro_validator(schema_type: str, parsed: Any) -> None:
    """Parses an Avro schema with fastavro (raises its error for an invalid one); other types
    pass."""
    if schema_type == "AVRO":
        import fastavro

        fastavro.parse_schema(parsed, _write_hint=False)


class _QuietServer(ThreadingHTTPServer):
    daemon_threads = True

    def handle_error(self, request, client_address) -> None:
        # a client that went away (a timeout, a refused TLS handshake) is not the server's error
        exc = sys.exc_info()[1]
        if isinstance(exc, (ConnectionError, ssl.SSLError, TimeoutError)):
            return
        super().handle_error(request, client_address)


class RegistryServer:
    """A running server: ``url``, ``state`` (its :class:`RegistryState`), ``requests`` (the log of
    ``(method, path)``, the path with its query), ``fail_next(status, count, ...)`` and
    ``stop()``."""

    def __init__(self, host: str = "127.0.0.1", port: int = 0, *,
                 tls: Optional[Tuple[str, str]] = None, client_ca: Optional[str] = None,
                 users: Optional[Dict[str, str]] = None, tokens: Sequence[str] = (),
                 validate_avro: bool = True):
        self.state = RegistryState(validate=avro_validator if validate_avro else None)
        self.requests: List[Tuple[str, str]] = []
        self.auth_headers: List[Optional[str]] = []
        self._users = dict(users or {})
        self._tokens = list(tokens)
        self._faults: List[Tuple[int, Optional[str], Optional[float]]] = []
        self._lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            timeout = 30

            def log_message(self, format, *args):   # noqa: A002 - quiet
                pass

            def _answer(self, status: int, payload: Any) -> None:
                raw = (payload if isinstance(payload, _Raw) else json.dumps(payload)).encode("utf-8")
                self.send_response(status)
                self.send_header("Content-Type", CONTENT_TYPE)
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                with server._lock:
                    server.requests.append((self.command, self.path))
                    server.auth_headers.append(self.headers.get("Authorization"))
                    fault = server._take_fault(self.path)
                if fault is not None:
                    status, delay = fault
                    if delay:
                        import time
                        time.sleep(delay)
                    if status:
                        self._answer(status, {"error_code": status if status < 1000 else 50001,
                                              "message": f"injected failure {status}"})
                        return
                if not server._authorized(self.headers.get("Authorization")):
                    self._answer(401, {"error_code": 401, "message": "Unauthorized"})
                    return
                parts = urlsplit(self.path)
                body: Any = None
                if raw:
                    try:
                        body = json.loads(raw)
                    except ValueError:
                        self._answer(400, {"error_code": 400, "message": "Unrecognized JSON body"})
                        return
                status, payload = server.state.handle(self.command, parts.path,
                                                      dict(parse_qsl(parts.query)), body)
                self._answer(status, payload)

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self._httpd = _QuietServer((host, port), Handler)
        self._httpd.daemon_threads = True
        scheme = "http"
        if tls is not None:
            ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
            ctx.load_cert_chain(certfile=tls[0], keyfile=tls[1])
            if client_ca is not None:
                ctx.load_verify_locations(cafile=client_ca)
                ctx.verify_mode = ssl.CERT_REQUIRED
            # the handshake happens in the request's thread (on its first read), not in the
            # accepting loop, so a client that never completes it holds up nobody else
            self._httpd.socket = ctx.wrap_socket(self._httpd.socket, server_side=True,
                                                 do_handshake_on_connect=False)
            scheme = "https"
        self.host, self.port = str(self._httpd.server_address[0]), int(self._httpd.server_address[1])
        self.url = f"{scheme}://{self.host}:{self.port}"
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="schema-registry",
                                        daemon=True)
        self._thread.start()

    def _authorized(self, header: Optional[str]) -> bool:
        if not self._users and not self._tokens:
            return True
        if not header:
            return False
        kind, _, value = header.partition(" ")
        if kind.lower() == "basic" and self._users:
            try:
                user, _, password = base64.b64decode(value).decode("utf-8").partition(":")
            except ValueError:
                return False
            expected = self._users.get(user)
            return expected is not None and hmac.compare_digest(expected, password)
        if kind.lower() == "bearer" and self._tokens:
            return any(hmac.compare_digest(t, value) for t in self._tokens)
        return False

    def fail_next(self, status: int = 503, count: int = 1, *, path: Optional[str] = None,
                  delay: Optional[float] = None) -> None:
        """The next ``count`` requests (whose path contains ``path``, if given) answer HTTP
        ``status`` (0: no error answer, only the ``delay``) after ``delay`` seconds."""
        with self._lock:
            self._faults.extend([(status, path, delay)] * count)

    def _take_fault(self, request_path: str) -> Optional[Tuple[int, Optional[float]]]:
        for i, (status, path, delay) in enumerate(self._faults):
            if path is None or path in request_path:
                del self._faults[i]
                return status, delay
        return None

    def clear_log(self) -> None:
        with self._lock:
            self.requests.clear()
            self.auth_headers.clear()

    def count(self, method: str, path_prefix: str = "") -> int:
        """How many logged requests had ``method`` and a path starting with ``path_prefix``."""
        with self._lock:
            return sum(1 for m, p in self.requests if m == method and p.startswith(path_prefix))

    def stop(self) -> None:
        self._httpd.shutdown()
        self._httpd.server_close()
        self._thread.join(5)

    def __enter__(self) -> "RegistryServer":
        return self

    def __exit__(self, *exc) -> None:
        self.stop()


def start_registry(host: str = "127.0.0.1", port: int = 0, **kwargs: Any) -> RegistryServer:
    """A started :class:`RegistryServer` (``port=0``: a free port); a context manager too."""
    return RegistryServer(host, port, **kwargs)


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m fastkafka_tools.schema_registry_server",
                                     description="An in-memory Schema Registry (Confluent REST API).")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8081)
    parser.add_argument("--tls-cert", help="server certificate (PEM); with --tls-key: HTTPS")
    parser.add_argument("--tls-key", help="its private key (PEM)")
    parser.add_argument("--user", action="append", default=[],
                        help="name:password accepted by basic auth (repeatable)")
    parser.add_argument("--token", action="append", default=[], help="a bearer token accepted")
    args = parser.parse_args(argv)
    if bool(args.tls_cert) != bool(args.tls_key):
        parser.error("--tls-cert and --tls-key go together")
    users = {}
    for u in args.user:
        name, sep, password = u.partition(":")
        if not sep:
            parser.error("--user takes name:password")
        users[name] = password
    server = start_registry(args.host, args.port,
                            tls=(args.tls_cert, args.tls_key) if args.tls_cert else None,
                            users=users, tokens=args.token)
    print(f"Schema Registry listening on {server.url}", flush=True)
    try:
        server._thread.join()
    except KeyboardInterrupt:
        server.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
