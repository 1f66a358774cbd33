"""The broker's half of the Kafka wire protocol, for the test brokers: a request frame decoded into
its header and body, a response encoded into its frame. The client's half (requests encoded,
responses decoded) is ``fastkafka.protocol``, whose message tables and compiled codecs this shares.
"""
from __future__ import annotations

import struct

from fastkafka.errors import CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import (_DECODE_ERRORS, _HDR, _I32, _api_name, _encode_error, _request_codec,
                                _response_codec, _skip_tagged)
from fastkafka.protocol import codec as _codec
from fastkafka.protocol.codec import Writer

__all__ = ["decode_request", "encode_response"]


def decode_request(payload) -> tuple:
    """Decode a request frame (without size prefix) into ``(header, body)``.

    ``header`` is a dict with ``api_key``, ``api_version``, ``correlation_id``, ``client_id``.
    An API or version this codec does not know raises :class:`UnsupportedVersionError` with the
    parsed header in its ``.header`` attribute (so a broker can still answer, e.g. ApiVersions with
    error 35 in a v0 body). Garbled input raises :class:`CorruptFrameError`.
    """
    try:
        api_key, api_version, correlation_id = _HDR.unpack_from(payload, 0)
        pos = 8
        n = struct.unpack_from(">h", payload, pos)[0]
        pos += 2
        if n < 0:
            client_id = None
        else:
            raw, pos = _codec._take(payload, pos, n)
            client_id = str(raw, "utf-8")
    except _DECODE_ERRORS as e:
        raise CorruptFrameError(f"cannot decode request header ({len(payload)} bytes): {e}") from None
    header = {"api_key": api_key, "api_version": api_version, "correlation_id": correlation_id,
              "client_id": client_id}
    try:
        _, dec, flexible = _request_codec(api_key, api_version)
    except UnsupportedVersionError as e:
        e.header = header
        raise
    try:
        if flexible:
            pos = _skip_tagged(payload, pos)
        body, pos = dec(payload, pos)
    except _DECODE_ERRORS as e:
        raise CorruptFrameError(
            f"cannot decode {_api_name(api_key)} v{api_version} request ({len(payload)} bytes): {e}") from None
    # Trailing bytes are ignored, as Kafka's broker does (librdkafka pads some requests).
    return header, body


def encode_response(api_key, version: int, correlation_id: int, body: dict) -> bytes:
    """The complete response frame (size prefix, header, body) as one bytes object."""
    enc, _, flexible_header = _response_codec(api_key, version)
    w = Writer(b"\x00\x00\x00\x00")
    w.buf += _I32.pack(correlation_id)
    if flexible_header:
        w.buf.append(0)
    try:
        enc(w, body)
    except (struct.error, TypeError, ValueError, AttributeError, KeyError) as e:
        raise _encode_error(e, f"cannot encode {_api_name(api_key)} v{version} response: {e}") from e
    data = b"".join(w.finish())
    return _I32.pack(len(data) - 4) + data[4:]
