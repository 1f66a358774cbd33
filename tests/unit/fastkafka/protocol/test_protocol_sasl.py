"""SaslHandshake (17) and SaslAuthenticate (36): field lists and byte layouts per Apache Kafka's
message schemas, encoded and decoded by the generic codec in every supported version."""
from __future__ import annotations

import struct

import pytest

from faultbroker.protocol import decode_request, encode_response
from fastkafka import protocol as P
from fastkafka.protocol import ApiKey


def _payload(frame) -> bytes:
    data = b"".join(bytes(b) for b in frame)
    assert struct.unpack(">i", data[:4])[0] == len(data) - 4
    return data[4:]


def _request_body(frame, api, version, client_id=b"c") -> bytes:
    """The body bytes after the request header (v1, or v2 with an empty tag section)."""
    data = _payload(frame)
    assert struct.unpack(">hhi", data[:8]) == (api, version, 5)
    pos = 8 + 2 + len(client_id)
    if P.request_header_version(api, version) == 2:
        assert data[pos] == 0
        pos += 1
    return data[pos:]


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_request_layout(version):
    frame = P.encode_request(ApiKey.SASL_HANDSHAKE, version, 5, "c", {"mechanism": "SCRAM-SHA-256"})
    assert _request_body(frame, 17, version) == b"\x00\x0dSCRAM-SHA-256"
    header, body = decode_request(_payload(frame))
    assert header["api_key"] == 17 and header["api_version"] == version
    assert body == {"mechanism": "SCRAM-SHA-256"}


@pytest.mark.parametrize("version", [0, 1])
def test_sasl_handshake_response_layout(version):
    raw = struct.pack(">i", 9) + struct.pack(">h", 33) + struct.pack(">i", 2) + \
        b"\x00\x05PLAIN" + b"\x00\x0bOAUTHBEARER"
    corr, body = P.decode_response(ApiKey.SASL_HANDSHAKE, version, raw)
    assert corr == 9
    assert body == {"error_code": 33, "mechanisms": ["PLAIN", "OAUTHBEARER"]}
    framed = encode_response(ApiKey.SASL_HANDSHAKE, version, 9, body)
    assert framed[4:] == raw


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_request_layout(version):
    token = b"\x00alice\x00alice-secret"
    frame = P.encode_request(ApiKey.SASL_AUTHENTICATE, version, 5, "c", {"auth_bytes": token})
    body = _request_body(frame, 36, version)
    if version < 2:
        assert body == struct.pack(">i", len(token)) + token
    else:   # compact bytes (uvarint length + 1) and an empty tag section
        assert body == bytes([len(token) + 1]) + token + b"\x00"
    _, decoded = decode_request(_payload(frame))
    assert decoded == {"auth_bytes": token}


@pytest.mark.parametrize("version", [0, 1, 2])
def test_sasl_authenticate_response_layout(version):
    if version < 2:
        raw = struct.pack(">ih", 3, 58) + b"\x00\x03bad" + struct.pack(">i", 2) + b"v="
        if version == 1:
            raw += struct.pack(">q", 3_600_000)
        tail = b""
    else:   # response header v1 (tags), compact string and bytes, tags
        raw = struct.pack(">i", 3) + b"\x00" + struct.pack(">h", 58) + b"\x04bad" + b"\x03v=" + \
            struct.pack(">q", 3_600_000)
        tail = b"\x00"
    corr, body = P.decode_response(ApiKey.SASL_AUTHENTICATE, version, raw + tail)
    assert corr == 3
    assert body["error_code"] == 58 and body["error_message"] == "bad"
    assert bytes(body["auth_bytes"]) == b"v="
    assert body["session_lifetime_ms"] == (0 if version == 0 else 3_600_000)
    assert encode_response(ApiKey.SASL_AUTHENTICATE, version, 3, body)[4:] == raw + tail


def test_sasl_authenticate_response_null_error_message():
    raw = struct.pack(">ih", 1, 0) + b"\xff\xff" + struct.pack(">i", 0) + struct.pack(">q", 0)
    _, body = P.decode_response(ApiKey.SASL_AUTHENTICATE, 1, raw)
    assert body["error_message"] is None and bytes(body["auth_bytes"]) == b""
