"""fastkafka.protocol: definitions, round trips, byte-compatibility with kafka-python, corruption."""

from __future__ import annotations

import json
import pathlib
import re
import struct
import uuid

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import kafka.protocol.schemas as kp_schemas
from faultbroker.protocol import decode_request, encode_response
from fastkafka import protocol as P
from fastkafka.errors import CorruptFrameError, KafkaError, NetworkError, UnsupportedVersionError
from fastkafka.protocol import ApiKey, SUPPORTED_VERSIONS, codec, messages
from fastkafka.protocol.schema import Field, in_versions

ALL_VERSIONS = [(k, v) for k, (lo, hi) in SUPPORTED_VERSIONS.items() for v in range(lo, hi + 1)]
HSETTINGS = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def _join(frame) -> bytes:
    return b"".join(bytes(p) for p in frame)


# ----------------------------------------------------------------------------------- strategies
_INT_RANGES = {"int8": 8, "int16": 16, "int32": 32, "int64": 64, "varint": 32, "varlong": 64}


def _prim_strategy(ftype, nullable):
    if ftype in _INT_RANGES:
        b = _INT_RANGES[ftype]
        s = st.integers(-(1 << (b - 1)), (1 << (b - 1)) - 1)
    elif ftype == "uint16":
        s = st.integers(0, 65535)
    elif ftype == "uvarint":
        s = st.integers(0, (1 << 63) - 1)
    elif ftype == "bool":
        s = st.booleans()
    elif ftype == "float64":
        s = st.floats(allow_nan=False)
    elif ftype == "uuid":
        s = st.uuids()
    elif ftype == "string":
        s = st.text(max_size=12)
    elif ftype in ("bytes", "records"):
        s = st.binary(max_size=40)
    else:
        raise AssertionError(ftype)
    return st.one_of(st.none(), s) if nullable else s


def struct_strategy(fields, version, flexible, depth=0):
    """A strategy for a dict with every field present in ``version`` (absent ones left out)."""
    out = {}
    for f in fields:
        if not in_versions(f.versions, version):
            continue
        nullable = in_versions(f.nullable, version)
        if f.elem == "struct":
            s = st.lists(struct_strategy(f.fields, version, flexible, depth + 1), max_size=3 if depth < 2 else 2)
        elif f.elem is not None:
            s = st.lists(_prim_strategy(f.elem, False), max_size=4)
        elif f.type == "struct":
            s = struct_strategy(f.fields, version, flexible, depth + 1)
        else:
            s = _prim_strategy(f.type, False)
        if nullable:
            s = st.one_of(st.none(), s)
        out[f.name] = s
    return st.fixed_dictionaries(out)


def with_defaults(fields, version, value):
    """What the decoder returns for ``value``: absent fields filled with their defaults."""
    out = {}
    for f in fields:
        if not in_versions(f.versions, version):
            out[f.name] = f.default_value()
            continue
        v = value.get(f.name, f.default_value())
        if v is not None and f.elem == "struct":
            v = [with_defaults(f.fields, version, x) for x in v]
        elif v is not None and f.type == "struct":
            v = with_defaults(f.fields, version, v)
        out[f.name] = v
    return out


# ----------------------------------------------------------------------------- basic API checks
def test_api_keys_and_supported_versions():
    assert [int(k) for k in ApiKey] == [0, 2, 3, 10, 17, 18, 19, 20, 22, 24, 25, 26, 28, 36, 66]
    assert SUPPORTED_VERSIONS == {
        ApiKey.PRODUCE: (3, 11), ApiKey.LIST_OFFSETS: (1, 8), ApiKey.METADATA: (1, 12),
        ApiKey.API_VERSIONS: (0, 3), ApiKey.CREATE_TOPICS: (2, 7), ApiKey.DELETE_TOPICS: (1, 6),
        ApiKey.INIT_PRODUCER_ID: (0, 5), ApiKey.SASL_HANDSHAKE: (0, 1),
        ApiKey.SASL_AUTHENTICATE: (0, 2), ApiKey.FIND_COORDINATOR: (1, 3),
        ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3), ApiKey.ADD_OFFSETS_TO_TXN: (0, 3),
        ApiKey.END_TXN: (0, 3), ApiKey.TXN_OFFSET_COMMIT: (0, 3), ApiKey.LIST_TRANSACTIONS: (0, 1),
    }


@pytest.mark.parametrize("api,first_flexible", [
    (ApiKey.PRODUCE, 9), (ApiKey.LIST_OFFSETS, 6), (ApiKey.METADATA, 9), (ApiKey.API_VERSIONS, 3),
    (ApiKey.CREATE_TOPICS, 5), (ApiKey.DELETE_TOPICS, 4), (ApiKey.INIT_PRODUCER_ID, 2),
    (ApiKey.SASL_HANDSHAKE, 99), (ApiKey.SASL_AUTHENTICATE, 2),
])
def test_header_versions(api, first_flexible):
    lo, hi = SUPPORTED_VERSIONS[api]
    for v in range(lo, hi + 1):
        flexible = v >= first_flexible
        assert P.is_flexible(api, v) is flexible
        assert P.request_header_version(api, v) == (2 if flexible else 1)
        expected_resp = 0 if api == ApiKey.API_VERSIONS else (1 if flexible else 0)
        assert P.response_header_version(api, v) == expected_resp


def test_pick_version():
    assert P.pick_version(ApiKey.PRODUCE, 0, 9) == 9
    assert P.pick_version(ApiKey.PRODUCE, 3, 13) == 11
    assert P.pick_version(ApiKey.METADATA, 0, 1) == 1
    assert P.pick_version(ApiKey.API_VERSIONS, 0, 4) == 3
    with pytest.raises(UnsupportedVersionError) as ei:
        P.pick_version(ApiKey.PRODUCE, 0, 2)
    msg = str(ei.value)
    assert "PRODUCE" in msg and "3-11" in msg and "0-2" in msg
    assert ei.value.code == 35
    with pytest.raises(UnsupportedVersionError):
        P.pick_version(ApiKey.METADATA, 13, 13)


def test_unsupported_versions_rejected():
    with pytest.raises(UnsupportedVersionError):
        P.encode_request(ApiKey.PRODUCE, 2, 1, "c", {})
    with pytest.raises(UnsupportedVersionError):
        P.decode_response(ApiKey.METADATA, 13, b"\x00" * 8)
    with pytest.raises(UnsupportedVersionError):
        P.encode_request(99, 0, 1, "c", {})


# ------------------------------------------------------------- definitions vs Apache JSON schemas
_RES = pathlib.Path(kp_schemas.__file__).parent / "resources"


def _load_schema(name):
    text = (_RES / f"{name}.json").read_text()
    data = json.loads(re.sub(r"(?m)^\s*//.*$", "", text))
    common = {s["name"]: s["fields"] for s in data.get("commonStructs", [])}
    return data, common


def _snake(name):
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name).lower()


def _parse_default(raw, ftype):
    if isinstance(raw, int):
        return raw
    if raw == "null":
        return None
    if ftype == "bool":
        return raw == "true"
    if ftype == "string":
        return raw
    return int(raw)


def _json_tree(fields, common, version, flexible):
    out = {}
    for jf in fields:
        if not in_versions(codec_versions(jf["versions"]), version):
            continue
        t = jf["type"]
        sub = jf.get("fields") or common.get(t.lstrip("[]"))
        if t.startswith("[]") and t[2:3].isupper():
            kind = "[]struct"
        elif t[:1].isupper():
            kind = "struct"
        else:
            kind = t
        tagged = flexible and "tag" in jf and in_versions(codec_versions(jf.get("taggedVersions")), version)
        entry = {
            "type": kind,
            "nullable": in_versions(codec_versions(jf.get("nullableVersions")), version),
            "tag": jf["tag"] if tagged else None,
            "sub": _json_tree(sub, common, version, flexible) if sub else None,
        }
        if kind not in ("struct", "[]struct") and not kind.startswith("[]"):
            if "default" in jf:
                entry["default"] = _parse_default(jf["default"], kind)
            else:
                entry["default"] = {"string": "", "bool": False, "uuid": uuid.UUID(int=0),
                                    "records": None, "bytes": b""}.get(kind, 0)
        out[_snake(jf["name"])] = entry
    return out


def codec_versions(spec):
    from fastkafka.protocol.schema import parse_versions
    return parse_versions(spec)


def _our_tree(fields, version, flexible):
    out = {}
    for f in fields:
        if not in_versions(f.versions, version):
            continue
        tagged = flexible and f.tag is not None and in_versions(f.tagged, version)
        entry = {
            "type": f.type if f.elem is None or f.elem != "struct" else "[]struct",
            "nullable": in_versions(f.nullable, version),
            "tag": f.tag if tagged else None,
            "sub": _our_tree(f.fields, version, flexible) if f.fields else None,
        }
        if f.fields is None and f.elem is None:
            entry["default"] = f.default_value()
        out[f.name] = entry
    return out


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_definitions_match_apache_schemas(api, version):
    """Our hand-written definitions describe the same wire layout as the Apache Kafka JSON schemas
    (the copies bundled with kafka-python): names, order, types, nullability, tags, defaults."""
    for ours, suffix in ((messages.REQUESTS[api], "Request"), (messages.RESPONSES[api], "Response")):
        data, common = _load_schema(ours.name)
        assert ours.name.endswith(suffix)
        jv = codec_versions(data["validVersions"])
        assert jv[0] <= version <= jv[1]
        flexible = in_versions(codec_versions(data["flexibleVersions"]), version)
        assert ours.is_flexible(version) == flexible
        theirs = _json_tree(data["fields"], common, version, flexible)
        mine = _our_tree(ours.fields, version, flexible)
        assert list(mine) == list(theirs)
        assert mine == theirs


# ------------------------------------------------------------------------------- round trips
def _message_strategy(msg, version):
    return struct_strategy(msg.fields, version, msg.is_flexible(version))


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
@HSETTINGS
@given(data=st.data())
def test_request_round_trip(api, version, data):
    msg = messages.REQUESTS[api]
    body = data.draw(_message_strategy(msg, version))
    corr = data.draw(st.integers(-(1 << 31), (1 << 31) - 1))
    client_id = data.draw(st.one_of(st.none(), st.text(max_size=10)))
    frame = P.encode_request(api, version, corr, client_id, body)
    raw = _join(frame)
    assert struct.unpack(">i", raw[:4])[0] == len(raw) - 4
    header, decoded = decode_request(raw[4:])
    assert header == {"api_key": api, "api_version": version, "correlation_id": corr, "client_id": client_id}
    assert decoded == with_defaults(msg.fields, version, body)


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
@HSETTINGS
@given(data=st.data())
def test_response_round_trip(api, version, data):
    msg = messages.RESPONSES[api]
    body = data.draw(_message_strategy(msg, version))
    if api == ApiKey.API_VERSIONS and body["error_code"] == 35:
        body["error_code"] = 0  # 35 switches to the v0 fallback format (tested separately)
    corr = data.draw(st.integers(-(1 << 31), (1 << 31) - 1))
    raw = encode_response(api, version, corr, body)
    assert struct.unpack(">i", raw[:4])[0] == len(raw) - 4
    got_corr, decoded = P.decode_response(api, version, raw[4:])
    assert got_corr == corr
    assert decoded == with_defaults(msg.fields, version, body)
    # the decoded body encodes to the same bytes
    assert encode_response(api, version, corr, decoded) == raw


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_empty_bodies_take_schema_defaults(api, version):
    msg = messages.REQUESTS[api]
    _, body = decode_request(_join(P.encode_request(api, version, 5, "x", {}))[4:])
    assert body == with_defaults(msg.fields, version, {})
    rmsg = messages.RESPONSES[api]
    corr, rbody = P.decode_response(api, version, encode_response(api, version, 6, {})[4:])
    assert corr == 6
    assert rbody == with_defaults(rmsg.fields, version, {})


# ----------------------------------------------------------------------- concrete known bytes
def test_produce_v3_bytes_by_hand():
    body = {"transactional_id": None, "acks": 1, "timeout_ms": 1500,
            "topic_data": [{"name": "ab", "partition_data": [{"index": 2, "records": b"REC"}]}]}
    frame = P.encode_request(ApiKey.PRODUCE, 3, 0x01020304, "cid", body)
    expected_body = (
        struct.pack(">hhi", 0, 3, 0x01020304) + b"\x00\x03cid"
        + b"\xff\xff" + struct.pack(">hi", 1, 1500)
        + struct.pack(">i", 1) + b"\x00\x02ab"
        + struct.pack(">i", 1) + struct.pack(">i", 2) + struct.pack(">i", 3)
    )
    assert frame[0] == struct.pack(">i", len(expected_body) + 3) + expected_body
    assert frame[1] is body["topic_data"][0]["partition_data"][0]["records"]
    assert len(frame) == 2


def test_produce_v9_flexible_bytes_by_hand():
    rec = memoryview(b"0123456789")
    body = {"acks": -1, "timeout_ms": 30000,
            "topic_data": [{"name": "t", "partition_data": [{"index": 0, "records": rec}]}]}
    frame = P.encode_request(ApiKey.PRODUCE, 9, 7, "c", body)
    head = (struct.pack(">hhi", 0, 9, 7) + b"\x00\x01c" + b"\x00"  # header v2: tagged fields
            + b"\x00"  # transactional_id null (compact)
            + struct.pack(">hi", -1, 30000)
            + b"\x02" + b"\x02t"  # 1 topic, compact string
            + b"\x02" + struct.pack(">i", 0) + b"\x0b")  # 1 partition, index, compact len 10+1
    tail = b"\x00" + b"\x00" + b"\x00"  # partition, topic, body tagged fields
    assert frame[0][4:] == head
    assert frame[1] is rec
    assert frame[2] == tail
    assert struct.unpack(">i", frame[0][:4])[0] == len(head) + 10 + len(tail)


def test_records_passed_by_reference_and_lists_summed():
    a, b = b"A" * 100, bytearray(b"B" * 50)
    c = memoryview(b"C" * 30)
    d = memoryview(bytearray(b"D" * 8)).cast("B")
    body = {"acks": 1, "timeout_ms": 10, "topic_data": [
        {"name": "t1", "partition_data": [{"index": 0, "records": [a, b]}, {"index": 1, "records": c}]},
        {"name": "t2", "partition_data": [{"index": 0, "records": (d,)}, {"index": 1, "records": None},
                                          {"index": 2, "records": []}]},
    ]}
    for version in (3, 7, 9, 11):
        frame = P.encode_request(ApiKey.PRODUCE, version, 1, "c", body)
        refs = [p for p in frame if p is a or p is b or p is c or p is d]
        assert refs == [a, b, c, d]
        # everything else is bytes (glue), never a copy of a record buffer
        assert all(type(p) is bytes for p in frame if not any(p is r for r in refs))
        assert len(frame) == 1 + 4 + 3  # head, 4 refs, glue after [a,b], glue after c, tail
        raw = _join(frame)
        assert struct.unpack(">i", raw[:4])[0] == len(raw) - 4
        _, got = decode_request(raw[4:])
        parts = [p["records"] for t in got["topic_data"] for p in t["partition_data"]]
        assert parts == [bytes(a) + bytes(b), bytes(c), bytes(d), None, b""]


def test_request_fields_not_in_version_are_ignored():
    body = {"transactional_id": "tx", "acks": 1, "timeout_ms": 5, "topic_data": []}
    # v3 has transactional_id; Metadata v1 lacks allow_auto_topic_creation (4+)
    raw = _join(P.encode_request(ApiKey.METADATA, 1, 1, "c", {"topics": None, "allow_auto_topic_creation": False}))
    _, got = decode_request(raw[4:])
    assert got["topics"] is None and got["allow_auto_topic_creation"] is True  # default: absent in v1
    raw3 = _join(P.encode_request(ApiKey.PRODUCE, 3, 1, "c", body))
    assert b"tx" in raw3


def test_api_versions_v3_request_bytes():
    raw = _join(P.encode_request(ApiKey.API_VERSIONS, 3, 1, "cli", {
        "client_software_name": "fastkafka", "client_software_version": "0.1.0"}))
    expected = (struct.pack(">hhi", 18, 3, 1) + b"\x00\x03cli" + b"\x00"
                + b"\x0afastkafka" + b"\x060.1.0" + b"\x00")
    assert raw == struct.pack(">i", len(expected)) + expected
    raw0 = _join(P.encode_request(ApiKey.API_VERSIONS, 0, 1, "cli", {"client_software_name": "ignored"}))
    assert raw0[4:] == struct.pack(">hhi", 18, 0, 1) + b"\x00\x03cli"


# --------------------------------------------------------------- byte-compat with kafka-python
from kafka.protocol.admin.topics import (  # noqa: E402
    CreateTopicsRequest, CreateTopicsResponse, DeleteTopicsRequest, DeleteTopicsResponse)
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse  # noqa: E402
from kafka.protocol.metadata.api_versions import ApiVersionsRequest, ApiVersionsResponse  # noqa: E402
from kafka.protocol.metadata.metadata import MetadataRequest, MetadataResponse  # noqa: E402
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse  # noqa: E402
from kafka.protocol.metadata.find_coordinator import (  # noqa: E402
    FindCoordinatorRequest, FindCoordinatorResponse)
from kafka.protocol.producer.transaction import (  # noqa: E402
    AddOffsetsToTxnRequest, AddOffsetsToTxnResponse, AddPartitionsToTxnRequest,
    AddPartitionsToTxnResponse, EndTxnRequest, EndTxnResponse, InitProducerIdRequest,
    InitProducerIdResponse, TxnOffsetCommitRequest, TxnOffsetCommitResponse)
from kafka.protocol.admin import ListTransactionsRequest, ListTransactionsResponse  # noqa: E402
from kafka.protocol.sasl import (  # noqa: E402
    SaslAuthenticateRequest, SaslAuthenticateResponse, SaslHandshakeRequest, SaslHandshakeResponse)

KP = {
    ApiKey.PRODUCE: (ProduceRequest, ProduceResponse),
    ApiKey.LIST_OFFSETS: (ListOffsetsRequest, ListOffsetsResponse),
    ApiKey.METADATA: (MetadataRequest, MetadataResponse),
    ApiKey.API_VERSIONS: (ApiVersionsRequest, ApiVersionsResponse),
    ApiKey.CREATE_TOPICS: (CreateTopicsRequest, CreateTopicsResponse),
    ApiKey.DELETE_TOPICS: (DeleteTopicsRequest, DeleteTopicsResponse),
    ApiKey.INIT_PRODUCER_ID: (InitProducerIdRequest, InitProducerIdResponse),
    ApiKey.SASL_HANDSHAKE: (SaslHandshakeRequest, SaslHandshakeResponse),
    ApiKey.SASL_AUTHENTICATE: (SaslAuthenticateRequest, SaslAuthenticateResponse),
    ApiKey.FIND_COORDINATOR: (FindCoordinatorRequest, FindCoordinatorResponse),
    ApiKey.ADD_PARTITIONS_TO_TXN: (AddPartitionsToTxnRequest, AddPartitionsToTxnResponse),
    ApiKey.ADD_OFFSETS_TO_TXN: (AddOffsetsToTxnRequest, AddOffsetsToTxnResponse),
    ApiKey.END_TXN: (EndTxnRequest, EndTxnResponse),
    ApiKey.TXN_OFFSET_COMMIT: (TxnOffsetCommitRequest, TxnOffsetCommitResponse),
    ApiKey.LIST_TRANSACTIONS: (ListTransactionsRequest, ListTransactionsResponse),
}


# kafka-python renames the Metadata authorized-operations fields and presents them as a set of bits
_KP_RENAME = {"cluster_authorized_operations": "authorized_operations",
              "topic_authorized_operations": "authorized_operations"}


def _int_to_bits(v):
    return {i for i in range(32) if (v & 0xFFFFFFFF) >> i & 1}


def _bits_to_int(bits):
    u = sum(1 << i for i in bits)
    return u - (1 << 32) if u >= 1 << 31 else u


def _to_kp(cls, fields, version, flexible, d):
    """Our dict -> a kafka-python data object (tagged fields equal to the default left out, since
    kafka-python writes every explicitly set tagged field)."""
    kw = {}
    for f in fields:
        if not in_versions(f.versions, version) or f.name not in d:
            continue
        v = d[f.name]
        if flexible and f.tag is not None and in_versions(f.tagged, version) and v == f.default_value():
            continue
        kp_name = _KP_RENAME.get(f.name, f.name)
        kf = cls._struct.fields[kp_name]
        if v is not None and f.elem == "struct":
            v = [_to_kp(kf.data_class, f.fields, version, flexible, x) for x in v]
        elif v is not None and f.type == "struct":
            v = _to_kp(kf.data_class, f.fields, version, flexible, v)
        if f.name in _KP_RENAME:
            v = _int_to_bits(v)
        kw[kp_name] = v
    return cls(**kw)


def _from_kp(obj, fields, version):
    out = {}
    for f in fields:
        if not in_versions(f.versions, version):
            continue
        v = getattr(obj, _KP_RENAME.get(f.name, f.name))
        if v is not None and f.elem == "struct":
            v = [_from_kp(x, f.fields, version) for x in v]
        elif v is not None and f.type == "struct":
            v = _from_kp(v, f.fields, version)
        elif isinstance(v, (bytearray, memoryview)):
            v = bytes(v)
        elif f.name in _KP_RENAME:
            v = -2147483648 if v is None else _bits_to_int(v)  # kafka-python: None = "not requested"
        out[f.name] = v
    return out


def _kp_normalise(fields, version, d):
    out = {}
    for f in fields:
        if not in_versions(f.versions, version):
            continue
        v = d[f.name]
        if v is not None and f.elem == "struct":
            v = [_kp_normalise(f.fields, version, x) for x in v]
        elif v is not None and f.type == "struct":
            v = _kp_normalise(f.fields, version, v)
        out[f.name] = v
    return out


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
@HSETTINGS
@given(data=st.data())
def test_request_bytes_equal_kafka_python(api, version, data):
    msg = messages.REQUESTS[api]
    flexible = msg.is_flexible(version)
    body = data.draw(_message_strategy(msg, version))
    kp_req = _to_kp(KP[api][0], msg.fields, version, flexible, body)
    kp_req.with_header(correlation_id=77, client_id="fk-test")
    theirs = bytes(kp_req.encode(version=version, header=True, framed=True))
    ours = _join(P.encode_request(api, version, 77, "fk-test", body))
    assert ours == theirs


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
@HSETTINGS
@given(data=st.data())
def test_response_bytes_equal_kafka_python(api, version, data):
    msg = messages.RESPONSES[api]
    flexible = msg.is_flexible(version)
    body = data.draw(_message_strategy(msg, version))
    if api == ApiKey.API_VERSIONS:
        body["error_code"] = 0
    kp_resp = _to_kp(KP[api][1], msg.fields, version, flexible, body)
    # kafka-python's response-header encoder needs request context: compare the bodies, and check
    # our header separately (size, correlation id, tagged fields for flexible non-ApiVersions).
    theirs_body = bytes(kp_resp.encode(version=version))
    ours = encode_response(api, version, -5, body)
    hdr = struct.pack(">i", -5) + (b"\x00" if P.response_header_version(api, version) == 1 else b"")
    assert ours[:4] == struct.pack(">i", len(ours) - 4)
    assert ours[4:4 + len(hdr)] == hdr
    assert ours[4 + len(hdr):] == theirs_body
    # kafka-python decodes our bytes to the same values, and we decode theirs
    back = KP[api][1].decode(ours[4 + len(hdr):], version=version)
    assert _from_kp(back, msg.fields, version) == _kp_normalise(msg.fields, version,
                                                                with_defaults(msg.fields, version, body))
    corr, mine = P.decode_response(api, version, hdr + theirs_body)
    assert corr == -5 and mine == with_defaults(msg.fields, version, body)


def test_kafka_python_old_classes_produce_v3_v7_and_metadata():
    """The hand-written (pre-JSON) kafka-python classes agree too."""
    from kafka.protocol.old.produce import ProduceRequest as OldProduce
    from kafka.protocol.old.metadata import MetadataRequest as OldMetadata
    from kafka.protocol.old.api_versions import ApiVersionsRequest as OldApiVersions

    for version in (3, 7):
        cls = OldProduce[version]
        req = cls(None, 1, 1000, [("topic", [(0, b"batch-bytes"), (3, b"zz")])])
        theirs = req.encode()
        body = {"transactional_id": None, "acks": 1, "timeout_ms": 1000, "topic_data": [
            {"name": "topic", "partition_data": [{"index": 0, "records": b"batch-bytes"},
                                                 {"index": 3, "records": b"zz"}]}]}
        ours = _join(P.encode_request(ApiKey.PRODUCE, version, 9, "c", body))
        hdr = 4 + 8 + 2 + 1
        assert ours[hdr:] == bytes(theirs)
    n_meta = 0
    for version in range(1, 13):
        try:
            cls = OldMetadata[version]
        except (IndexError, KeyError, TypeError):
            break
        n_meta += 1
        args = [[("t1")]] if version < 4 else [[("t1")], True]
        if version >= 8:
            args += [False, False]
        if version >= 10:
            break
        req = cls(*args)
        body = {"topics": [{"name": "t1"}], "allow_auto_topic_creation": True}
        ours = _join(P.encode_request(ApiKey.METADATA, version, 9, "c", body))
        assert ours[4 + 8 + 3 + (1 if version >= 9 else 0):] == bytes(req.encode()), version
    assert n_meta >= 7
    n_api_versions = 0
    for version in range(0, 4):
        try:
            cls = OldApiVersions[version]
        except (IndexError, KeyError, TypeError):
            break
        n_api_versions += 1
        req = cls() if version < 3 else cls("fk", "1.0")
        body = {"client_software_name": "fk", "client_software_version": "1.0"}
        ours = _join(P.encode_request(ApiKey.API_VERSIONS, version, 9, "c", body))
        assert ours[4 + 8 + 3 + (1 if version >= 3 else 0):] == bytes(req.encode()), version
    assert n_api_versions == 4          # v0-v3 were all compared, not skipped by the except


# ------------------------------------------------------------------------ ApiVersions fallback
def test_api_versions_unsupported_version_fallback_decodes_v0_body():
    raw = encode_response(ApiKey.API_VERSIONS, 0, 11, {
        "error_code": 35, "api_keys": [{"api_key": 18, "min_version": 0, "max_version": 2}]})
    for asked in (1, 2, 3):
        corr, body = P.decode_response(ApiKey.API_VERSIONS, asked, raw[4:])
        assert corr == 11
        assert body["error_code"] == 35
        assert body["api_keys"] == [{"api_key": 18, "min_version": 0, "max_version": 2}]
        assert body["throttle_time_ms"] == 0 and body["finalized_features_epoch"] == -1
        entry = next(e for e in body["api_keys"] if e["api_key"] == ApiKey.API_VERSIONS)
        assert P.pick_version(ApiKey.API_VERSIONS, entry["min_version"], entry["max_version"]) == 2


def test_api_versions_v3_top_level_tagged_fields_any_order():
    body = {
        "error_code": 0,
        "api_keys": [{"api_key": 3, "min_version": 0, "max_version": 12},
                     {"api_key": 0, "min_version": 3, "max_version": 11}],
        "throttle_time_ms": 0,
        "supported_features": [{"name": "metadata.version", "min_version": 1, "max_version": 20}],
        "finalized_features_epoch": 42,
        "finalized_features": [{"name": "metadata.version", "max_version_level": 20, "min_version_level": 20}],
        "zk_migration_ready": True,
    }
    raw = encode_response(ApiKey.API_VERSIONS, 3, 1, body)
    _, got = P.decode_response(ApiKey.API_VERSIONS, 3, raw[4:])
    assert got == body
    # header v0 for ApiVersions even when flexible: correlation id then the body's error code
    assert raw[4:8] == b"\x00\x00\x00\x01" and raw[8:10] == b"\x00\x00"


# ---------------------------------------------------------------------- tagged field handling
def _with_extra_tags(fields, extra):
    return list(fields) + extra


def test_unknown_tagged_fields_are_skipped():
    msg = messages.RESPONSES[ApiKey.PRODUCE]
    part_fields = msg.fields[0].fields[2].fields
    assert msg.fields[0].fields[2].name == "partition_responses"
    # a "future" broker: same layout plus unknown tags 5 and 9 in the partition and at top level
    future_part = _with_extra_tags(part_fields, [
        Field("future_a", "string", "10+", tag=5), Field("future_b", "int64", "10+", tag=9)])
    future_topic = [msg.fields[0].fields[0], msg.fields[0].fields[1],
                    Field("partition_responses", "[]struct", fields=future_part)]
    future = [Field("responses", "[]struct", fields=future_topic), msg.fields[1], msg.fields[2],
              Field("future_top", "[]int32", "10+", tag=7)]
    value = {"responses": [{"name": "t", "partition_responses": [
        {"index": 1, "error_code": 6, "base_offset": -1, "future_a": "hello", "future_b": 99,
         "current_leader": {"leader_id": 2, "leader_epoch": 8}}]}],
        "throttle_time_ms": 3, "future_top": [1, 2, 3],
        "node_endpoints": [{"node_id": 2, "host": "h2", "port": 9092, "rack": "r"}]}
    body = codec.encode_struct(future, 10, True, value)
    header = struct.pack(">i", 123) + b"\x01" + b"\x04" + b"\x02zz"  # header with one unknown tag
    corr, got = P.decode_response(ApiKey.PRODUCE, 10, header + body)
    assert corr == 123
    p = got["responses"][0]["partition_responses"][0]
    assert "future_a" not in p and "future_top" not in got
    assert p["current_leader"] == {"leader_id": 2, "leader_epoch": 8}
    assert p["error_code"] == 6 and got["throttle_time_ms"] == 3
    assert got["node_endpoints"] == [{"node_id": 2, "host": "h2", "port": 9092, "rack": "r"}]


def test_known_tagged_field_emitted_only_when_not_default():
    base = {"topics": [{"name": "t", "error_code": 0, "num_partitions": 1, "replication_factor": 1}]}
    raw_default = encode_response(ApiKey.CREATE_TOPICS, 5, 1, base)
    tagged = {"topics": [dict(base["topics"][0], topic_config_error_code=40)]}
    raw_tagged = encode_response(ApiKey.CREATE_TOPICS, 5, 1, tagged)
    assert len(raw_tagged) == len(raw_default) + 4  # tag, size, int16
    _, got = P.decode_response(ApiKey.CREATE_TOPICS, 5, raw_tagged[4:])
    assert got["topics"][0]["topic_config_error_code"] == 40
    _, got0 = P.decode_response(ApiKey.CREATE_TOPICS, 5, raw_default[4:])
    assert got0["topics"][0]["topic_config_error_code"] == 0


def test_tagged_field_with_wrong_size_is_corrupt():
    # ProduceResponse v10, node_endpoints (tag 0) claims 3 bytes but its content is longer
    good = encode_response(ApiKey.PRODUCE, 10, 1, {
        "responses": [], "node_endpoints": [{"node_id": 1, "host": "h", "port": 1}]})[4:]
    # find the top-level tagged section: after corr(4)+hdr tags(1)+responses(1)+throttle(4)
    assert good[10] == 1 and good[11] == 0  # one tagged field, tag 0
    bad = good[:12] + bytes([good[12] - 1]) + good[13:]
    with pytest.raises(CorruptFrameError):
        P.decode_response(ApiKey.PRODUCE, 10, bad)


# ---------------------------------------------------------------------- truncation / garbage
def _sample_response(api, version):
    msg = messages.RESPONSES[api]
    body = _fill(msg.fields, version)
    if api == ApiKey.API_VERSIONS:
        body["error_code"] = 0
    return encode_response(api, version, 99, body)[4:]


def _fill(fields, version):
    """A deterministic body with every present field set to a non-default-ish value."""
    out = {}
    for i, f in enumerate(fields):
        if not in_versions(f.versions, version):
            continue
        if f.elem == "struct":
            v = [_fill(f.fields, version), _fill(f.fields, version)]
        elif f.elem is not None:
            v = {"string": ["a", "bc"], "int64": [1, 2]}.get(f.elem, [1, 2, 3])
        elif f.type == "struct":
            v = _fill(f.fields, version)
        else:
            v = {"string": f"s{i}", "bool": True, "uuid": uuid.UUID(int=i + 1), "records": b"rec",
                 "bytes": b"by", "float64": 1.5}.get(f.type, i + 1)
        out[f.name] = v
    return out


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_every_truncation_raises_corrupt_frame(api, version):
    payload = _sample_response(api, version)
    P.decode_response(api, version, payload)  # the full frame decodes
    for cut in range(len(payload)):
        with pytest.raises(CorruptFrameError) as ei:
            P.decode_response(api, version, payload[:cut])
        assert isinstance(ei.value, KafkaError) and isinstance(ei.value, NetworkError)
        assert "response" in str(ei.value)
    # Bytes after the body are ignored (librdkafka's mock broker pads some responses).
    assert P.decode_response(api, version, payload + b"\x00\x01\x00") == P.decode_response(api, version, payload)


@pytest.mark.parametrize("api,version", ALL_VERSIONS)
def test_every_request_truncation_raises_corrupt_frame(api, version):
    body = _fill(messages.REQUESTS[api].fields, version)
    raw = _join(P.encode_request(api, version, 3, "c", body))[4:]
    for cut in range(len(raw)):
        with pytest.raises(CorruptFrameError):
            decode_request(raw[:cut])


@settings(max_examples=300, deadline=None)
@given(api_version=st.sampled_from(ALL_VERSIONS), junk=st.binary(max_size=80), pos=st.integers(0, 400))
def test_garbage_raises_only_corrupt_frame(api_version, junk, pos):
    api, version = api_version
    payload = _sample_response(api, version)
    pos = min(pos, len(payload))
    mutated = payload[:pos] + junk + payload[pos + len(junk):]
    try:
        corr, body = P.decode_response(api, version, mutated)
    except CorruptFrameError:
        return
    assert isinstance(body, dict)


def test_huge_array_count_does_not_allocate():
    payload = struct.pack(">i", 1) + struct.pack(">i", 0x7FFFFFFF)  # Produce v3: responses count
    with pytest.raises(CorruptFrameError, match="claims"):
        P.decode_response(ApiKey.PRODUCE, 3, payload)


def test_decode_request_unknown_version_keeps_header():
    raw = struct.pack(">hhi", 18, 9, 55) + b"\x00\x01c" + b"\x00" + b"\x00"
    with pytest.raises(UnsupportedVersionError) as ei:
        decode_request(raw)
    assert ei.value.header == {"api_key": 18, "api_version": 9, "correlation_id": 55, "client_id": "c"}


def test_decode_accepts_memoryview_and_bytearray():
    payload = _sample_response(ApiKey.PRODUCE, 9)
    ref = P.decode_response(ApiKey.PRODUCE, 9, payload)
    assert P.decode_response(ApiKey.PRODUCE, 9, memoryview(payload)) == ref
    assert P.decode_response(ApiKey.PRODUCE, 9, bytearray(payload)) == ref


def test_encode_errors_name_the_message():
    with pytest.raises(TypeError, match="PRODUCE"):
        P.encode_request(ApiKey.PRODUCE, 9, 1, "c", {"topic_data": [{"name": None}]})
    with pytest.raises(ValueError, match="PRODUCE"):
        P.encode_request(ApiKey.PRODUCE, 9, 1, "c", {"acks": 1 << 20})


# ---------------------------------------------------------------------- primitive types
ALL_TYPES = [
    Field("i8", "int8"), Field("i16", "int16"), Field("i32", "int32"), Field("i64", "int64"),
    Field("u16", "uint16"), Field("vi", "varint"), Field("vl", "varlong"), Field("uv", "uvarint"),
    Field("b", "bool"), Field("f", "float64"), Field("u", "uuid"),
    Field("s", "string"), Field("ns", "string", nullable="0+"),
    Field("by", "bytes"), Field("nby", "bytes", nullable="0+"),
    Field("arr", "[]int32"), Field("narr", "[]string", nullable="0+"),
    Field("st", "struct", fields=[Field("x", "int16")]),
    Field("sa", "[]struct", fields=[Field("y", "string"), Field("z", "int64")]),
]


@pytest.mark.parametrize("flexible", [False, True])
@settings(max_examples=150, deadline=None)
@given(data=st.data())
def test_all_types_round_trip(flexible, data):
    value = data.draw(struct_strategy(ALL_TYPES, 0, flexible))
    raw = codec.encode_struct(ALL_TYPES, 0, flexible, value)
    got, used = codec.decode_struct(ALL_TYPES, 0, flexible, raw)
    assert used == len(raw)
    assert got == value


def test_varint_known_encodings():
    def enc(fields, v):
        return codec.encode_struct(fields, 0, False, {"v": v})
    vi, vl, uv = [Field("v", "varint")], [Field("v", "varlong")], [Field("v", "uvarint")]
    assert enc(vi, 0) == b"\x00" and enc(vi, -1) == b"\x01" and enc(vi, 1) == b"\x02"
    assert enc(vi, 63) == b"\x7e" and enc(vi, -64) == b"\x7f" and enc(vi, 64) == b"\x80\x01"
    assert enc(vi, 2147483647) == b"\xfe\xff\xff\xff\x0f"
    assert enc(vi, -2147483648) == b"\xff\xff\xff\xff\x0f"
    assert enc(vl, -(1 << 63)) == b"\xff" * 9 + b"\x01"
    assert enc(uv, 300) == b"\xac\x02"
    with pytest.raises(struct.error):
        enc(vi, 1 << 31)
    with pytest.raises(CorruptFrameError):
        # an over-long varint inside a struct surfaces as CorruptFrameError at the API level
        P.decode_response(ApiKey.PRODUCE, 9, struct.pack(">i", 1) + b"\x80" * 12)


def test_compact_and_classic_string_encodings():
    s = [Field("v", "string", nullable="0+")]
    assert codec.encode_struct(s, 0, False, {"v": "hé"}) == b"\x00\x03h\xc3\xa9"
    assert codec.encode_struct(s, 0, False, {"v": None}) == b"\xff\xff"
    assert codec.encode_struct(s, 0, True, {"v": "hé"}) == b"\x04h\xc3\xa9\x00"
    assert codec.encode_struct(s, 0, True, {"v": None}) == b"\x00\x00"
    a = [Field("v", "[]int16", nullable="0+")]
    assert codec.encode_struct(a, 0, False, {"v": None}) == b"\xff\xff\xff\xff"
    assert codec.encode_struct(a, 0, True, {"v": [1]}) == b"\x02\x00\x01\x00"
