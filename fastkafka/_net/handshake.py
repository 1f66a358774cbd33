"""One connection to one broker as a state machine that is fed frames and time, and the steps
that bring a new connection to READY.

:class:`Connection` (compiled: :mod:`fastkafka._net.connection`) knows the connection's state,
its negotiated API versions, the requests it has in flight (in order), the bytes queued for it and
the frames read from it, its deadlines (connection set-up, the oldest request, SASL
re-authentication, idleness, a broker's throttle) and what to do with a response frame (match it
to the oldest request, decode it, note the throttle). It owns no socket and does no I/O:
:class:`~fastkafka._net.network.NetworkClient` owns the sockets and the poller, moves bytes between
them and each connection's send queue and frame reader, and acts on what the connection reports
(close it, complete a request, start the next handshake step). Produce requests of batches are in
flight in the same ring as the others and come back answered or failed as :class:`ProduceRequest`
objects.
"""

from __future__ import annotations

import abc

from typing import TYPE_CHECKING

from fastkafka._version import __version__
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

if TYPE_CHECKING:
    from fastkafka._net.connection import Connection

__all__ = ["API_VERSIONS_BODY", "ApiVersionsStep", "HandshakeStep", "TlsHandshakeStep"]

#: The ApiVersions request this client sends (handshake, and the acks=0 close barrier).
API_VERSIONS_BODY = {"client_software_name": "fastkafka", "client_software_version": __version__}


class HandshakeStep(abc.ABC):
    """One step of bringing a new connection to READY: TLS, ApiVersions, then the SASL steps
    (fastkafka._net.sasl), each a subclass."""

    @abc.abstractmethod
    def start(self, client, conn: "Connection", now: int) -> None:
        """Queue this step's request(s) on ``conn``; call ``client._next_handshake_step`` when done."""


class ApiVersionsStep(HandshakeStep):
    def __init__(self, version: int | None = None):
        self.version = version if version is not None else SUPPORTED_VERSIONS[ApiKey.API_VERSIONS][1]

    def start(self, client, conn, now):
        client._send_internal(conn, ApiKey.API_VERSIONS, self.version, API_VERSIONS_BODY, now,
                              lambda resp, err: client._on_api_versions(conn, self, resp, err))


class TlsHandshakeStep(HandshakeStep):
    """The TLS handshake (security_protocol SSL / SASL_SSL): first of the steps, driven by the
    poller's events on the I/O thread (``NetworkClient._tls_handshake``); the next step starts
    when it completes."""

    def __init__(self, context):
        self.context = context

    def start(self, client, conn, now):
        from fastkafka._net.tls import TlsSession
        conn.tls = TlsSession(self.context, conn.host, f"node {conn.node_id} ({conn.host}:{conn.port})")
        client._tls_handshake(conn, now)
