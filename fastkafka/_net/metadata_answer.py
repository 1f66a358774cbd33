"""Metadata answers too large to decode on the I/O thread's turn.

A valid Metadata answer can carry a million partitions (about 26 MB): decoding it and building
its :class:`~fastkafka._net.cluster.Cluster` takes seconds of interpreter time. Done inside one
turn of the I/O thread, that stalls every deadline the turn keeps (request timeouts, batch
expiry, ``close(timeout)``). So the network client asks for metadata with :class:`MetadataCodec`:
an answer of at most :data:`OFF_TURN_BYTES` decodes at once, as before; a larger one comes back
undecoded (a :class:`LargeMetadataAnswer`) and a :class:`MetadataDecodeJob` decodes it on a thread
of its own. The I/O thread keeps turning (the decoding thread gives up the GIL at the
interpreter's switch interval) and applies the finished Cluster on its next turn; no other
Metadata request is sent meanwhile. Closing the client cancels the job: its outcome is dropped,
the thread lets go of the client at once, and it stops at its next check (while it builds the
Cluster, every 4,096 partitions; the schema decoding before that runs to its end).
"""

from __future__ import annotations

import struct
import threading

from fastkafka._net.cluster import cluster_from_response
from fastkafka.protocol import ApiKey, _skip_tagged, decode_response, encode_request

# Answers larger than this (bytes, header included) are decoded off the I/O thread's turn: about
# 40,000 partitions, tens of milliseconds of decoding.
OFF_TURN_BYTES = 1 << 20

_THROTTLE = struct.Struct(">i")
_METADATA = ApiKey.METADATA


class LargeMetadataAnswer:
    """A Metadata answer frame (without its size prefix) left undecoded, with the one field the
    connection reads from every answer, ``throttle_time_ms``."""

    __slots__ = ("version", "frame", "throttle_time_ms")

    def __init__(self, version: int, frame: bytes):
        self.version = version
        self.frame = frame
        throttle = 0
        if version >= 3:                  # the body's first field from v3
            try:
                pos = _skip_tagged(frame, 4) if version >= 9 else 4
                throttle = _THROTTLE.unpack_from(frame, pos)[0]
            except (struct.error, IndexError, ValueError):
                throttle = 0              # a garbled frame fails when it is decoded
        self.throttle_time_ms = throttle

    def __repr__(self):
        return f"LargeMetadataAnswer(v{self.version}, {len(self.frame)} bytes)"


class MetadataCodec:
    """The codec of the network client's Metadata requests (see InFlightRequest.codec): the
    generic schema codec, except that an answer over ``off_turn_bytes`` is not decoded."""

    __slots__ = ("off_turn_bytes",)

    def __init__(self, off_turn_bytes: int = OFF_TURN_BYTES):
        self.off_turn_bytes = off_turn_bytes

    def encode(self, version, correlation_id, client_id, body):
        return encode_request(_METADATA, version, correlation_id, client_id, body)

    def decode(self, version, frame):
        if len(frame) > self.off_turn_bytes:
            return LargeMetadataAnswer(version, bytes(frame))
        return decode_response(_METADATA, version, frame)[1]


class Cancelled(Exception):
    """The decoding job was cancelled (the client closed)."""


class MetadataDecodeJob:
    """Decodes a :class:`LargeMetadataAnswer` into a Cluster on a daemon thread. ``outcome`` is
    ``(cluster, error, problems)`` once done (``error`` a KafkaError of a garbled answer); then
    ``on_done()`` runs on the decoding thread (it wakes the I/O thread). Never both outcome and
    a call after :meth:`cancel`."""

    def __init__(self, answer: LargeMetadataAnswer, on_done):
        self.outcome = None
        self._answer = answer
        self._on_done = on_done
        self._cancelled = False
        self._thread = threading.Thread(target=self._run, name="fastkafka-metadata-decode",
                                        daemon=True)

    def start(self) -> "MetadataDecodeJob":
        self._thread.start()
        return self

    def cancel(self) -> None:
        self._cancelled = True
        self._on_done = None              # the thread no longer holds the client

    @property
    def cancelled(self) -> bool:
        return self._cancelled

    def join(self, timeout: float | None = None) -> bool:
        """True once the decoding thread has ended (for tests and orderly shutdowns)."""
        self._thread.join(timeout)
        return not self._thread.is_alive()

    def _check(self) -> None:
        if self._cancelled:
            raise Cancelled()

    def _run(self) -> None:
        answer, self._answer = self._answer, None
        try:
            _, body = decode_response(_METADATA, answer.version, answer.frame)
            answer = None                 # the frame's bytes are no longer needed
            self._check()
            problems: list = []
            cluster = cluster_from_response(body, problems, self._check)
            outcome = (cluster, None, problems)
        except Cancelled:
            return
        except Exception as e:            # CorruptFrameError, or a failure to contain
            outcome = (None, e, [])
        on_done = self._on_done
        if self._cancelled or on_done is None:
            return
        self.outcome = outcome
        on_done()


__all__ = ["OFF_TURN_BYTES", "LargeMetadataAnswer", "MetadataCodec", "MetadataDecodeJob"]
