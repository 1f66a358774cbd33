r"""Kafka wire protocol: request/response framing for the APIs the producer uses.

Messages are defined as data in :mod:`fastkafka.protocol.messages`; :mod:`fastkafka.protocol.codec`
compiles each (api, version) once into closures that are cached here.

Client side::

    frame = encode_request(ApiKey.PRODUCE, 9, correlation_id=7, client_id="app", body={
        "acks": -1, "timeout_ms": 30000,
        "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": batch.buffer()}]}],
    })
    sock.sendmsg(frame)               # frame[0] starts with the 4-byte size; batches are not copied
    ...
    corr, body = decode_response(ApiKey.PRODUCE, 9, payload)   # payload without the size prefix

The other half, decoding requests and encoding responses, is a test broker's and lives with the
tests (``tests/faultbroker/protocol.py``).

ApiVersions negotiation
-----------------------
Send ApiVersions at our highest version (3) with non-empty ``client_software_name`` and
``client_software_version`` (the schema default is ``""``, which Kafka brokers reject for v3+ with
error 42 INVALID_REQUEST; they must match ``[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?``). A broker that does not support that version answers
with error 35 (UNSUPPORTED_VERSION) in a **v0-format** body (header v0), whose ``api_keys`` normally
holds the broker's ApiVersions range. :func:`decode_response` detects this (an ApiVersions response
whose error code is 35 is always decoded as v0, the other fields take their defaults) so the caller
gets ``body["error_code"] == 35`` instead of a decoding error. The client must then pick
``pick_version(ApiKey.API_VERSIONS, min, max)`` from the ``api_keys`` entry with ``api_key == 18``
(or version 0 if there is none) and send ApiVersions again on the same connection.
"""

from __future__ import annotations

import struct
from enum import IntEnum

from fastkafka.errors import CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import codec as _codec
from fastkafka.protocol import messages as _messages
from fastkafka.protocol.codec import Writer, _Corrupt

__all__ = [
    "ApiKey", "SUPPORTED_VERSIONS", "encode_request", "decode_response", "pick_version",
    "request_header_version", "response_header_version", "is_flexible",
]


class ApiKey(IntEnum):
    PRODUCE = 0
    LIST_OFFSETS = 2
    METADATA = 3
    FIND_COORDINATOR = 10
    SASL_HANDSHAKE = 17
    API_VERSIONS = 18
    CREATE_TOPICS = 19
    DELETE_TOPICS = 20
    INIT_PRODUCER_ID = 22
    ADD_PARTITIONS_TO_TXN = 24
    ADD_OFFSETS_TO_TXN = 25
    END_TXN = 26
    TXN_OFFSET_COMMIT = 28
    SASL_AUTHENTICATE = 36
    LIST_TRANSACTIONS = 66


#: Versions this codec can encode and decode, per API (inclusive).
SUPPORTED_VERSIONS = {
    ApiKey.PRODUCE: (3, 11),
    ApiKey.LIST_OFFSETS: (1, 8),
    ApiKey.METADATA: (1, 12),
    ApiKey.API_VERSIONS: (0, 3),
    ApiKey.CREATE_TOPICS: (2, 7),
    ApiKey.DELETE_TOPICS: (1, 6),
    ApiKey.INIT_PRODUCER_ID: (0, 5),
    ApiKey.SASL_HANDSHAKE: (0, 1),
    ApiKey.SASL_AUTHENTICATE: (0, 2),
    ApiKey.FIND_COORDINATOR: (1, 3),
    ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3),
    ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
    ApiKey.END_TXN: (0, 3),
    ApiKey.TXN_OFFSET_COMMIT: (0, 3),
    ApiKey.LIST_TRANSACTIONS: (0, 1),
}

_UNSUPPORTED_VERSION = 35
_HDR = struct.Struct(">hhi")
_I32 = struct.Struct(">i")
_DECODE_ERRORS = (struct.error, IndexError, UnicodeDecodeError, _Corrupt, ValueError, OverflowError)


def _encode_error(e, msg):
    """A caller-side mistake in a body: TypeError for wrong types, ValueError for bad values."""
    return TypeError(msg) if isinstance(e, (TypeError, AttributeError, KeyError)) else ValueError(msg)


def _api_name(api_key) -> str:
    try:
        return f"{ApiKey(api_key).name} ({int(api_key)})"
    except ValueError:
        return f"api key {api_key}"


def _check(api_key, version):
    rng = SUPPORTED_VERSIONS.get(api_key)
    if rng is None:
        raise UnsupportedVersionError(f"{_api_name(api_key)} is not supported by fastkafka.protocol")
    if not rng[0] <= version <= rng[1]:
        raise UnsupportedVersionError(
            f"{_api_name(api_key)} version {version} is not supported (fastkafka supports {rng[0]}-{rng[1]})")


def is_flexible(api_key, version) -> bool:
    """True when this (api, version) uses compact types and tagged fields."""
    return _messages.REQUESTS[api_key].is_flexible(version)


def request_header_version(api_key, version) -> int:
    """Request header version: 2 (flexible, with tagged fields) or 1."""
    return 2 if _messages.REQUESTS[api_key].is_flexible(version) else 1


def response_header_version(api_key, version) -> int:
    """Response header version: 1 (flexible) or 0. ApiVersions responses always use header v0."""
    if api_key == ApiKey.API_VERSIONS:
        return 0
    return 1 if _messages.RESPONSES[api_key].is_flexible(version) else 0


def pick_version(api_key, broker_min: int, broker_max: int) -> int:
    """Highest version supported by both fastkafka and the broker.

    >>> pick_version(ApiKey.PRODUCE, 0, 9)
    9

    Raises :class:`~fastkafka.errors.UnsupportedVersionError` naming the API and both ranges when
    the ranges do not overlap.
    """
    ours = SUPPORTED_VERSIONS.get(api_key)
    if ours is None:
        raise UnsupportedVersionError(f"{_api_name(api_key)} is not supported by fastkafka.protocol")
    lo = max(ours[0], broker_min)
    hi = min(ours[1], broker_max)
    if hi < lo:
        raise UnsupportedVersionError(
            f"no common version for {_api_name(api_key)}: fastkafka supports {ours[0]}-{ours[1]}, "
            f"the broker supports {broker_min}-{broker_max}")
    return hi


# ----------------------------------------------------------------------------------- caches
_REQ_CACHE: dict = {}
_RESP_CACHE: dict = {}


def _request_codec(api_key, version):
    key = (api_key, version)
    c = _REQ_CACHE.get(key)
    if c is None:
        _check(api_key, version)
        m = _messages.REQUESTS[api_key]
        c = _codec.compile_struct(m.fields, version, m.is_flexible(version)) + (m.is_flexible(version),)
        _REQ_CACHE[key] = c
    return c


def _response_codec(api_key, version):
    key = (api_key, version)
    c = _RESP_CACHE.get(key)
    if c is None:
        _check(api_key, version)
        m = _messages.RESPONSES[api_key]
        c = _codec.compile_struct(m.fields, version, m.is_flexible(version)) + (
            response_header_version(api_key, version) == 1,)
        _RESP_CACHE[key] = c
    return c


_CLIENT_ID_CACHE: dict = {}


def _client_id_bytes(client_id) -> bytes:
    b = _CLIENT_ID_CACHE.get(client_id)
    if b is None:
        if client_id is None:
            b = b"\xff\xff"
        else:
            raw = client_id.encode("utf-8") if isinstance(client_id, str) else bytes(client_id)
            b = struct.pack(">h", len(raw)) + raw
        if len(_CLIENT_ID_CACHE) < 64:
            _CLIENT_ID_CACHE[client_id] = b
    return b


def _skip_tagged(buf, pos):
    return _codec.skip_tagged_fields(buf, pos, "header tagged field")


# --------------------------------------------------------------------------------- client side
def encode_request(api_key, version: int, correlation_id: int, client_id, body: dict) -> list:
    """The complete request frame as a list of buffers for a gathered write.

    The first element starts with the 4-byte big-endian size prefix and holds the header and every
    field before the first ``records`` value; ``records`` values (bytes, memoryview, or a list/tuple
    of buffers) follow as their own elements, by reference; small glue bytes objects sit between
    them and after the last one. Fields missing from ``body`` take the schema default; fields the
    version does not have are ignored.
    """
    enc, _, flexible = _request_codec(api_key, version)
    w = Writer(b"\x00\x00\x00\x00")
    buf = w.buf
    buf += _HDR.pack(api_key, version, correlation_id)
    buf += _client_id_bytes(client_id)
    if flexible:
        buf.append(0)  # empty header tagged fields
    try:
        enc(w, body)
    except (struct.error, TypeError, ValueError, AttributeError, KeyError) as e:
        raise _encode_error(e, f"cannot encode {_api_name(api_key)} v{version} request: {e}") from e
    first = w.parts[0] if w.parts else w.buf
    _I32.pack_into(first, 0, w.glue_len() + w.ext_len - 4)
    return w.finish()


def decode_response(api_key, version: int, payload) -> tuple:
    """Decode a response frame (without its size prefix) into ``(correlation_id, body)``.

    Raises :class:`~fastkafka.errors.CorruptFrameError` for truncated or garbled input.
    """
    _, dec, flexible_header = _response_codec(api_key, version)
    try:
        correlation_id = _I32.unpack_from(payload, 0)[0]
        pos = 4
        if flexible_header:
            pos = _skip_tagged(payload, pos)
        if api_key == ApiKey.API_VERSIONS and version > 0 and \
                struct.unpack_from(">h", payload, pos)[0] == _UNSUPPORTED_VERSION:
            body, pos = _response_codec(api_key, 0)[1](payload, pos)
            # the body is in v0 format: give the other fields of the requested version their defaults
            full = _messages.RESPONSES[api_key]
            for f in full.fields:
                if f.name not in body:
                    body[f.name] = f.default_value()
        else:
            body, pos = dec(payload, pos)
    except _DECODE_ERRORS as e:
        raise CorruptFrameError(
            f"cannot decode {_api_name(api_key)} v{version} response ({len(payload)} bytes): {e}") from None
    # Bytes after the body are ignored, as Kafka's own parsers do: librdkafka's mock broker, for
    # one, pads some responses.
    return correlation_id, body
