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
from fastkafka.errors import CorruptFrameError
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey, decode_response

if TYPE_CHECKING:
    from fastkafka._net.connection import Connection

__all__ = ["API_VERSIONS_BODY", "API_VERSIONS_CODEC", "ApiVersionsStep", "HandshakeStep",
           "TlsHandshakeStep"]

#: The ApiVersions request this client sends (handshake, and the acks=0 close barrier).
API_VERSIONS_BODY = {"client_software_name": "fastkafka", "client_software_version": __version__}


# A broker's ApiVersions answer lists about a hundred APIs in under 2 KB; one of megabytes would
# take seconds to decode on the I/O thread's turn (and keep every deadline of the turn waiting).
API_VERSIONS_MAX_BYTES = 1 << 20


class _ApiVersionsCodec:
    """The codec of ApiVersions requests (see InFlightRequest.codec): the generic one, except
    that an answer over API_VERSIONS_MAX_BYTES is refused undecoded (the connection closes with
    CorruptFrameError, and is tried again after its back-off)."""

    __slots__ = ()

    def encode(self, version, correlation_id, client_id, body):
        from fastkafka.protocol import encode_request
        return encode_request(ApiKey.API_VERSIONS, version, correlation_id, client_id, body)

    def decode(self, version, frame):
        if len(frame) > API_VERSIONS_MAX_BYTES:
            raise CorruptFrameError(
                f"ApiVersions answer of {len(frame)} bytes refused undecoded (a broker's is a few "
                f"kilobytes; at most {API_VERSIONS_MAX_BYTES} are taken)")
        return decode_response(ApiKey.API_VERSIONS, version, frame)[1]


API_VERSIONS_CODEC = _ApiVersionsCodec()


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
                              lambda resp, err: client._on_api_versions(conn, self, resp, err),
                              API_VERSIONS_CODEC)


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
