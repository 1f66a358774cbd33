"""The Produce response parser without the GIL (parse_produce_response_c) and decode_frame on top of it.

``parse_produce_response_c`` is reached through the test seam ``fastkafka._producer.testing.parse_answer``, which copies the
frame so that it ends right before an unreadable page (a read past ``size`` crashes the test run)
and puts guard entries after the ``out_cap`` answers (a write past them fails the call).

The reference is a Python port of the decoder as it was before the parser (``RefDecoder``: it raised
as it walked, strings decoded as they came): ``ProduceCodec.decode`` must give the same values, or
raise CorruptFrameError with exactly the same message, for valid, truncated, mutated and garbage
frames; ``parse_produce_response_c`` (which does not validate UTF-8) must find the same values and
refuse the same frames with the same message as the reference run without UTF-8 decoding.
"""
from __future__ import annotations

import random
import struct

import pytest

from faultbroker.protocol import encode_response
from fastkafka.protocol.produce_codec import ProduceCodec
from fastkafka._producer.testing import parse_answer as parse
from fastkafka.errors import CorruptFrameError, UnsupportedVersionError
from fastkafka.protocol import ApiKey

CODEC = ProduceCodec()
VERSIONS = list(range(3, 12))


# ==================================================================================== reference
class RefCorrupt(Exception):
    pass


class RefDecoder:
    """The decoder of before, in Python: same walk, same checks, same messages. With
    ``utf8=False`` strings are returned as bytes, never decoded (what the nogil pass checks)."""

    def __init__(self, version, data, utf8=True):
        self.v, self.d, self.utf8 = version, bytes(data), utf8
        self.pos, self.end, self.size = 0, len(data), len(data)

    def corrupt(self, what):
        raise RefCorrupt(f"cannot decode PRODUCE (0) v{self.v} response ({self.size} bytes): {what}")

    def need(self, n):
        if n > self.end - self.pos:
            self.corrupt(f"needs {n} bytes at offset {self.pos}, only {self.end - self.pos} left")

    def int(self, n):
        self.need(n)
        v = int.from_bytes(self.d[self.pos:self.pos + n], "big", signed=True)
        self.pos += n
        return v

    def uvarint(self):
        v = shift = 0
        while True:
            if self.pos >= self.end:
                self.corrupt(f"unsigned varint runs past the end at offset {self.pos}")
            b = self.d[self.pos]
            self.pos += 1
            v |= (b & 0x7F) << shift
            if b < 0x80:
                return min(v, 2**64 - 1)
            shift += 7
            if shift > 63:
                self.corrupt(f"unsigned varint longer than 10 bytes at offset {self.pos}")

    def string(self, compact, nullable, what):
        if compact:
            u = self.uvarint()
            if u == 0:
                if not nullable:
                    self.corrupt(f"null {what}")
                return None
            if u - 1 > self.end - self.pos:
                self.corrupt(f"{what} of {u - 1} bytes at offset {self.pos}, only {self.end - self.pos} left")
            n = u - 1
        else:
            n = self.int(2)
            if n < 0:
                if not nullable or n != -1:
                    self.corrupt(f"invalid {what} length {n}")
                return None
            self.need(n)
        at = self.pos
        self.pos += n
        raw = self.d[at:at + n]
        if not self.utf8:
            return raw
        try:
            return raw.decode()
        except UnicodeDecodeError as e:
            self.corrupt(f"{what} at offset {at} is not UTF-8 ({e.reason})")

    def count(self, compact, what):
        if compact:
            u = self.uvarint()
            if u == 0:
                self.corrupt(f"{what} is null")
            if u - 1 > self.end - self.pos:
                self.corrupt(f"{what} claims {u - 1} elements but only {self.end - self.pos} bytes remain")
            return u - 1
        n = self.int(4)
        if n < 0:
            self.corrupt(f"invalid {what} length {n}")
        if n > self.end - self.pos:
            self.corrupt(f"{what} claims {n} elements but only {self.end - self.pos} bytes remain")
        return n

    def tagged_field(self):
        tag = self.uvarint()
        size = self.uvarint()
        if size > self.end - self.pos:
            self.corrupt(f"tagged field of {size} bytes at offset {self.pos} runs past the end")
        return tag, self.pos + size

    def skip_tags(self):
        n = self.uvarint()
        k = 0
        while k < n:
            _, self.pos = self.tagged_field()
            k += 1

    def walk_tags(self, read0, what):
        n = self.uvarint()
        k = 0
        while k < n:
            tag, end = self.tagged_field()
            if tag == 0 and self.v >= 10:
                start, outer = self.pos, self.end
                self.end = end
                read0()
                self.end = outer
                if self.pos != end:
                    self.corrupt(f"tagged field {what} has size {end - start} but used {self.pos - start}")
            self.pos = end
            k += 1

    def decode(self):
        """(correlation_id, throttle_time_ms, partitions, node_endpoints): a partition is
        (topic, partition, error_code, base_offset, log_append_time_ms, log_start_offset,
        error_message, record_errors, leader_id, leader_epoch); node_endpoints None when absent."""
        flexible = self.v >= 9
        out = {"nodes": None}
        correlation_id = self.int(4)
        if flexible:
            self.skip_tags()
        parts = []
        for _ in range(self.count(flexible, "responses")):
            topic = self.string(flexible, False, "topic name")
            for _ in range(self.count(flexible, "partition_responses")):
                p = [topic, self.int(4), self.int(2), self.int(8), self.int(8),
                     self.int(8) if self.v >= 5 else -1, None, [], -1, -1]
                if self.v >= 8:
                    for _ in range(self.count(flexible, "record_errors")):
                        batch_index = self.int(4)
                        message = self.string(flexible, True, "batch_index_error_message")
                        if flexible:
                            self.skip_tags()
                        p[7].append((batch_index, message))
                    p[6] = self.string(flexible, True, "error_message")
                if flexible:
                    def leader(p=p):
                        p[8] = self.int(4)
                        p[9] = self.int(4)
                        self.skip_tags()
                    self.walk_tags(leader, "current_leader (tag 0)")
                parts.append(tuple(p))
            if flexible:
                self.skip_tags()
        throttle = self.int(4)
        if flexible:
            def nodes():
                got = []
                for _ in range(self.count(True, "node_endpoints")):
                    node_id = self.int(4)
                    host = self.string(True, False, "node_endpoints host")
                    port = self.int(4)
                    rack = self.string(True, True, "node_endpoints rack")
                    self.skip_tags()
                    got.append((node_id, host, port, rack))
                out["nodes"] = got
            self.walk_tags(nodes, "node_endpoints (tag 0)")
        return correlation_id, throttle, parts, out["nodes"]


def reference(version, frame, utf8=True):
    try:
        return RefDecoder(version, frame, utf8).decode()
    except RefCorrupt as e:
        return ("corrupt", str(CorruptFrameError(str(e))))


def compiled(version, frame):
    """ProduceCodec.decode in the reference's shape, or ("corrupt", message)."""
    try:
        r = CODEC.decode(version, frame)
    except CorruptFrameError as e:
        return ("corrupt", str(e))
    parts = [(p.topic, p.partition, p.error_code, p.base_offset, p.log_append_time_ms,
              p.log_start_offset, p.error_message, list(p.record_errors), p.leader_id, p.leader_epoch)
             for p in r.partitions]
    nodes = None if r.node_endpoints == () else list(r.node_endpoints)
    return r.correlation_id, r.throttle_time_ms, parts, nodes


def parsed(version, frame, **kw):
    """parse_produce_response_c in the reference's shape (strings as bytes, record_errors as
    their count), or ("corrupt", message)."""
    got = parse(version, frame, **kw)
    if got["result"] < 0:
        assert isinstance(got["error"], CorruptFrameError)
        assert got["info"]["error"] != 0
        return ("corrupt", str(got["error"]))
    assert got["error"] is None and got["info"]["error"] == 0
    assert got["result"] == got["info"]["nparts"] == len(got["answers"])
    parts = [(a["topic"], a["partition"], a["error_code"], a["base_offset"], a["log_append_time_ms"],
              a["log_start_offset"], a["error_message"], a["record_errors_count"], a["leader_id"],
              a["leader_epoch"]) for a in got["answers"]]
    info = got["info"]
    nodes = None if info["node_endpoints_count"] < 0 else info["node_endpoints_count"]
    return info["correlation_id"], info["throttle_time_ms"], parts, nodes


def reference_as_parsed(version, frame):
    """The reference without UTF-8 decoding, in parsed()'s shape."""
    got = reference(version, frame, utf8=False)
    if got[0] == "corrupt":
        return got
    correlation_id, throttle, parts, nodes = got
    parts = [p[:7] + (len(p[7]),) + p[8:] for p in parts]
    return correlation_id, throttle, parts, None if nodes is None else len(nodes)


# ======================================================================================= frames
def partition(index, error_code=0, base_offset=0, **kw) -> dict:
    d = {"index": index, "error_code": error_code, "base_offset": base_offset,
         "log_append_time_ms": -1, "log_start_offset": 0}
    d.update(kw)
    return d


MIXED = {
    "throttle_time_ms": 250,
    "responses": [
        {"name": "orders", "partition_responses": [
            partition(0, 0, 1000, log_append_time_ms=1_700_000_000_000, log_start_offset=12),
            partition(7, 87, -1, error_message="INVALID_RECORD: one record is bad",
                      record_errors=[{"batch_index": 0, "batch_index_error_message": "bad key"},
                                     {"batch_index": 5, "batch_index_error_message": None}]),
            partition(3, 6, -1, current_leader={"leader_id": 2, "leader_epoch": 17})]},
        {"name": "主题-é", "partition_responses": [partition(1, 45, -1, error_message=None)]},
        {"name": "empty", "partition_responses": []},
        {"name": "orders", "partition_responses": [partition(0, 10, -1, error_message="too big")]},
    ],
    "node_endpoints": [{"node_id": 2, "host": "broker-2.example", "port": 9093, "rack": "r1"},
                       {"node_id": 5, "host": "b5", "port": 19092, "rack": None}],
}

PLAIN = {
    "throttle_time_ms": 0,
    "responses": [
        {"name": "orders", "partition_responses": [
            partition(0, 0, 1000, log_append_time_ms=-1, log_start_offset=3),
            partition(1, 46, 2000)]},        # DUPLICATE_SEQUENCE_NUMBER: a success
        {"name": "audit", "partition_responses": [partition(4, 0, 7)]},
    ],
}


def frame_of(version, body, correlation_id=77) -> bytes:
    return encode_response(ApiKey.PRODUCE, version, correlation_id, body)[4:]


def unknown_tags_frame(version):
    """A v9+ frame with unknown tagged fields in the header, after a partition and after the body."""
    body = {"throttle_time_ms": 9, "responses": [{"name": "t", "partition_responses": [
        partition(0, 87, 55, error_message="m",
                  record_errors=[{"batch_index": 1, "batch_index_error_message": "x"}],
                  current_leader={"leader_id": 4, "leader_epoch": 5})]}],
        "node_endpoints": [{"node_id": 4, "host": "h", "port": 1, "rack": None}]}
    frame = frame_of(version, body, correlation_id=5)
    header = struct.pack(">i", 5) + bytes([2, 0, 1, 0xAA, 6, 2, 0xBB, 0xCC])
    return header + frame[5:]


def frames(version):
    out = [frame_of(version, MIXED), frame_of(version, PLAIN)]
    if version >= 9:
        out.append(unknown_tags_frame(version))
    return out


# ============================================================== decode_frame: today's behaviour
def test_reference_port_reads_what_the_generic_decoder_reads():
    # the port is faithful: on valid frames it reads the same values as ProduceCodec.decode
    for version in VERSIONS:
        for frame in frames(version):
            assert compiled(version, frame) == reference(version, frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_messages_equal_the_reference_when_truncated(version):
    for frame in frames(version):
        for cut in range(len(frame)):
            want = reference(version, frame[:cut])
            assert want[0] == "corrupt"
            assert compiled(version, frame[:cut]) == want, cut


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_messages_equal_the_reference_when_mutated(version):
    rnd = random.Random(7000 + version)
    base = frames(version)
    kinds = {"corrupt": 0, "decoded": 0, "utf8": 0}
    for _ in range(2500):
        frame = bytearray(rnd.choice(base))
        for _ in range(rnd.choice((1, 1, 2, 3))):
            i = rnd.randrange(len(frame))
            frame[i] = rnd.choice((0, 1, 0x7F, 0x80, 0xC3, 0xFF, rnd.randrange(256), frame[i] ^ 1))
        if rnd.random() < 0.3:
            frame = frame[:rnd.randrange(len(frame))]
        frame = bytes(frame)
        want = reference(version, frame)
        assert compiled(version, frame) == want, frame.hex()
        if want[0] == "corrupt":
            kinds["utf8" if "UTF-8" in want[1] else "corrupt"] += 1
        else:
            kinds["decoded"] += 1
    assert min(kinds.values()) > 10, kinds


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_garbage_messages_equal_the_reference(version):
    rnd = random.Random(9000 + version)
    for _ in range(1500):
        frame = bytes(rnd.randrange(256) for _ in range(rnd.randrange(50)))
        assert compiled(version, frame) == reference(version, frame), frame.hex()


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_decode_raises_the_first_fault_of_the_frame(version):
    """A topic that is not UTF-8 before a truncation: the UTF-8 fault comes first, as when the
    decoder raised as it went; and the other way round."""
    frame = bytearray(frame_of(version, MIXED))
    at = bytes(frame).index("主题-é".encode())
    frame[at] = 0xFF
    cut = bytes(frame[:len(frame) - 3])
    with pytest.raises(CorruptFrameError, match=f"topic name at offset {at} is not UTF-8 "
                                                r"\(invalid start byte\)"):
        CODEC.decode(version, cut)
    assert compiled(version, cut) == reference(version, cut)
    # an error message that is not UTF-8, after a fault: the fault is raised
    frame = bytearray(frame_of(version, MIXED))
    frame[bytes(frame).index(b"orders")] = 0xFF   # the first topic name
    message = bytes(frame).find(b"too big")
    if message > 0:
        frame[message] = 0xC3
        frame[message + 1] = 0x28
    got = compiled(version, bytes(frame))
    assert got == reference(version, bytes(frame))
    assert "topic name at offset" in got[1]


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_many_partitions(version):
    """More partitions than decode_frame's stack holds: the heap answers give the same objects."""
    body = {"throttle_time_ms": 3, "responses": [
        {"name": f"t{t}", "partition_responses": [
            partition(p, (0, 46, 6)[p % 3], p * 10, error_message="m%d" % p if p % 5 == 0 else None,
                      record_errors=[{"batch_index": p, "batch_index_error_message": "e"}] if p % 7 == 0 else [])
            for p in range(40)]}
        for t in range(7)]}
    frame = frame_of(version, body)
    got = compiled(version, frame)
    assert got == reference(version, frame)
    assert len(got[2]) == 280
    r = CODEC.decode(version, frame)
    assert r.get(("t6", 39)).base_offset == 390
    # the partitions of one topic entry share its name
    assert r.partitions[0].topic is r.partitions[39].topic


@pytest.mark.parametrize("version", VERSIONS)
def test_decode_partition_listed_twice_resolves_to_the_last(version):
    body = {"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [partition(0, 0, 5), partition(0, 46, 9)]},
        {"name": "b", "partition_responses": [partition(1, 0, 1)]},
        {"name": "a", "partition_responses": [partition(0, 10, -1)]}]}
    r = CODEC.decode(version, frame_of(version, body))
    assert [p.base_offset for p in r.partitions] == [5, 9, 1, -1]
    assert r.get(("a", 0)).error_code == 10
    assert r.get(("b", 1)).base_offset == 1


def test_decode_node_endpoints_absent_empty_present():
    frame = frame_of(11, PLAIN)
    assert CODEC.decode(11, frame).node_endpoints == ()
    assert frame[-1] == 0
    tagged = frame[:-1] + bytes([1, 0, 1, 1])      # one tag: 0, of 1 byte: an empty array
    assert CODEC.decode(11, tagged).node_endpoints == []
    assert reference(11, tagged)[3] == []
    got = parse(11, tagged)["info"]
    assert (got["node_endpoints_at"], got["node_endpoints_count"]) == (len(tagged), 0)
    # twice: the last one counts
    nodes = frame_of(11, MIXED)
    at = parse(11, nodes)["info"]["node_endpoints_at"] - 1         # the array's count
    twice = frame[:-1] + bytes([2, 0, 1, 1]) + nodes[at - 2:]       # tag 0 empty, then MIXED's tag 0
    assert twice[len(frame) + 3:len(frame) + 5] == bytes([0, len(nodes) - at])
    assert CODEC.decode(11, twice).node_endpoints == CODEC.decode(11, nodes).node_endpoints
    assert parse(11, twice)["info"]["node_endpoints_count"] == 2


def test_decode_version_checked():
    with pytest.raises(UnsupportedVersionError, match="version 2 is not supported"):
        CODEC.decode(2, frame_of(3, PLAIN))
    with pytest.raises(UnsupportedVersionError, match="version 12 is not supported"):
        CODEC.decode(12, frame_of(11, PLAIN))


# =================================================================== parse_produce_response_c
@pytest.mark.parametrize("version", VERSIONS)
def test_parse_mixed_answers(version):
    frame = frame_of(version, MIXED)
    got = parse(version, frame)
    info = got["info"]
    assert got["result"] == 5 and got["error"] is None
    assert info == dict(info, correlation_id=77, throttle_time_ms=250, nparts=5, ntopics=4,
                        all_plain=False, end=len(frame), error=0, err_field=None)
    a = got["answers"]
    assert [(x["topic"], x["partition"], x["error_code"]) for x in a] == [
        (b"orders", 0, 0), (b"orders", 7, 87), (b"orders", 3, 6), ("主题-é".encode(), 1, 45),
        (b"orders", 0, 10)]
    assert frame[a[0]["topic_at"]:a[0]["topic_at"] + 6] == b"orders"
    assert a[0]["topic_at"] == a[1]["topic_at"] == a[2]["topic_at"] != a[4]["topic_at"]
    assert (a[0]["base_offset"], a[0]["log_append_time_ms"]) == (1000, 1_700_000_000_000)
    assert a[0]["log_start_offset"] == (12 if version >= 5 else -1)
    if version >= 8:
        assert a[1]["error_message"] == b"INVALID_RECORD: one record is bad"
        at = a[1]["error_message_at"]
        assert frame[at:at + a[1]["error_message_len"]] == a[1]["error_message"]
        assert a[1]["record_errors_count"] == 2
        # the first record error: batch_index 0, then its message "bad key"
        at = a[1]["record_errors_at"]
        assert frame[at:at + 4] == b"\0\0\0\0"
        assert b"bad key" in frame[at + 4:at + 4 + 9]
        assert a[4]["error_message"] == b"too big"
        assert a[3]["error_message"] is None and a[3]["error_message_at"] == -1
        assert a[0]["record_errors_count"] == 0 and a[0]["record_errors_at"] > 0
    else:
        assert all(x["error_message"] is None and x["error_message_len"] == -1 for x in a)
        assert all(x["record_errors_count"] == 0 and x["record_errors_at"] == -1 for x in a)
    if version >= 10:
        assert (a[2]["leader_id"], a[2]["leader_epoch"]) == (2, 17)
        assert info["node_endpoints_count"] == 2
        at = info["node_endpoints_at"]
        assert frame[at:at + 4] == struct.pack(">i", 2)
        assert frame[at + 4:at + 5 + len(b"broker-2.example")] == bytes([17]) + b"broker-2.example"
    else:
        assert (a[2]["leader_id"], a[2]["leader_epoch"]) == (-1, -1)
        assert (info["node_endpoints_at"], info["node_endpoints_count"]) == (-1, -1)
    assert parsed(version, frame) == reference_as_parsed(version, frame)


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_plain_success(version):
    frame = frame_of(version, PLAIN, correlation_id=-5)
    got = parse(version, frame)
    assert got["result"] == 3
    assert got["info"]["all_plain"] is True
    assert got["info"]["correlation_id"] == -5
    assert [(a["topic"], a["partition"], a["error_code"], a["base_offset"]) for a in got["answers"]] == [
        (b"orders", 0, 0, 1000), (b"orders", 1, 46, 2000), (b"audit", 4, 0, 7)]
    assert parse(version, frame_of(version, {"throttle_time_ms": 0, "responses": []}))["info"]["all_plain"]


def _with(version, **kw):
    body = {"throttle_time_ms": 0, "responses": [{"name": "t", "partition_responses": [
        partition(0), partition(1, **kw)]}]}
    return frame_of(version, body)


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_plain_success_is_false_for_anything_else(version):
    assert parse(version, _with(version))["info"]["all_plain"] is True
    assert parse(version, _with(version, error_code=6))["info"]["all_plain"] is False
    assert parse(version, _with(version, error_code=-1))["info"]["all_plain"] is False
    if version >= 8:
        assert parse(version, _with(version, error_message=""))["info"]["all_plain"] is False
        assert parse(version, _with(version, error_message="x"))["info"]["all_plain"] is False
        errs = [{"batch_index": 0, "batch_index_error_message": None}]
        assert parse(version, _with(version, record_errors=errs))["info"]["all_plain"] is False
    else:   # no such fields before v8: the same values are not written
        assert parse(version, _with(version, error_message="x"))["info"]["all_plain"] is True


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_duplicate_partitions_in_frame_order(version):
    body = {"throttle_time_ms": 0, "responses": [
        {"name": "a", "partition_responses": [partition(0, 0, 5), partition(0, 46, 9)]},
        {"name": "a", "partition_responses": [partition(0, 0, 11)]}]}
    got = parse(version, frame_of(version, body))
    assert [(a["topic"], a["partition"], a["base_offset"]) for a in got["answers"]] == [
        (b"a", 0, 5), (b"a", 0, 9), (b"a", 0, 11)]
    assert got["info"]["ntopics"] == 2


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_out_cap_too_small(version):
    frame = frame_of(version, MIXED)
    full = parse(version, frame)
    for cap in range(0, 6):
        got = parse(version, frame, out_cap=cap)
        assert got["result"] == 5                       # the count; only cap answers written
        assert got["answers"] == full["answers"][:cap]
        assert got["info"] == full["info"]
    assert parse(version, frame, out_cap=50) == full


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_truncated_gives_an_error_code(version):
    for frame in frames(version):
        for cut in range(len(frame)):
            got = parse(version, frame[:cut])
            assert got["result"] == -1
            assert got["info"]["error"] > 1 and got["info"]["err_at"] >= 0
            assert ("corrupt", str(got["error"])) == reference_as_parsed(version, frame[:cut]), cut
            # the same with no room for answers, and with the validating pass
            assert parse(version, frame[:cut], out_cap=0)["result"] == -1
            assert parse(version, frame[:cut], validate_utf8=True)["result"] == -1


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_mutated_frames_like_the_reference(version):
    rnd = random.Random(100 + version)
    base = frames(version)
    outcomes = {True: 0, False: 0}
    for _ in range(2000):
        frame = bytearray(rnd.choice(base))
        for _ in range(rnd.choice((1, 1, 2, 3))):
            i = rnd.randrange(len(frame))
            frame[i] = rnd.choice((0, 1, 0x7F, 0x80, 0xFF, rnd.randrange(256), frame[i] ^ 1))
        frame = bytes(frame)
        want = reference_as_parsed(version, frame)
        got = parsed(version, frame, out_cap=rnd.choice((None, 0, 1, 2)) if want[0] == "corrupt" else None)
        assert got == want, frame.hex()
        # decode_frame's pass: the reference's message, UTF-8 faults included
        strict = parse(version, frame, validate_utf8=True)
        ref = reference(version, frame)
        assert (str(strict["error"]) if strict["result"] < 0 else None) == (
            ref[1] if ref[0] == "corrupt" else None), frame.hex()
        outcomes[want[0] == "corrupt"] += 1
    assert outcomes[True] > 100 and outcomes[False] > 100


@pytest.mark.parametrize("version", VERSIONS)
def test_parse_garbage_never_crashes(version):
    rnd = random.Random(300 + version)
    for _ in range(1500):
        frame = bytes(rnd.randrange(256) for _ in range(rnd.randrange(70)))
        want = reference_as_parsed(version, frame)
        assert parsed(version, frame) == want, frame.hex()
        if want[0] == "corrupt":
            assert parsed(version, frame, out_cap=rnd.randrange(3)) == want, frame.hex()


def test_parse_does_not_validate_utf8_but_decode_does():
    frame = bytearray(frame_of(3, PLAIN))
    at = bytes(frame).index(b"audit")
    frame[at] = 0xFF
    got = parse(3, bytes(frame))
    assert got["result"] == 3 and got["answers"][2]["topic"] == b"\xffudit"
    strict = parse(3, bytes(frame), validate_utf8=True)
    assert strict["result"] == -1 and strict["info"]["err_field"] == "topic name"
    assert str(strict["error"]).endswith(f"topic name at offset {at} is not UTF-8 (invalid start byte)")
    with pytest.raises(CorruptFrameError, match="topic name at offset .* is not UTF-8"):
        CODEC.decode(3, bytes(frame))


def test_parse_unsupported_version():
    for version in (2, 12, -1):
        got = parse(version, frame_of(3, PLAIN))
        assert got["result"] == -1 and got["info"]["error"] == 1
        assert isinstance(got["error"], UnsupportedVersionError)


def test_parse_empty_frame():
    got = parse(3, b"")
    assert got["result"] == -1
    assert str(got["error"]).endswith("(0 bytes): needs 4 bytes at offset 0, only 0 left")


def test_parse_huge_counts_refused_before_anything_is_sized():
    head = struct.pack(">i", 1)
    got = parse(3, head + struct.pack(">i", 2**31 - 1) + b"\0" * 30, out_cap=0)
    assert got["result"] == -1 and got["info"]["err_field"] == "responses"
    got = parse(11, head + b"\x00" + b"\xff\xff\xff\xff\x0f" + b"\0" * 30, out_cap=0)
    assert got["result"] == -1 and "claims 4294967294 elements" in str(got["error"])
    got = parse(11, head + b"\x00" + b"\x80" * 10 + b"\x01")
    assert got["result"] == -1 and "longer than 10 bytes" in str(got["error"])


def _utf8_candidates():
    rnd = random.Random(5)
    edge = (0x00, 0x7F, 0x80, 0x8F, 0x90, 0x9F, 0xA0, 0xBF, 0xC0)
    for lead in range(0x80, 0x100):
        yield bytes([lead])
        for b1 in range(256):
            yield bytes([lead, b1])
        for b1 in edge if lead >= 0xE0 else ():
            for b2 in edge:
                yield bytes([lead, b1, b2])
                for b3 in edge if lead >= 0xF0 else ():
                    yield bytes([lead, b1, b2, b3])
    for _ in range(3000):
        yield bytes(rnd.randrange(256) for _ in range(rnd.randrange(1, 9)))
    for s in ("é", "主题", "🙂", "\U0010FFFF", "\uFFFF", "\uD7FF", "\uE000"):
        yield ("ab" + s + "c").encode()


def test_utf8_validation_is_pythons():
    """decode_frame's pass accepts exactly the strings Python's strict decoder accepts."""
    head = struct.pack(">ii", 1, 1)
    tail = struct.pack(">i", 0) + struct.pack(">i", 0)       # no partitions, throttle time
    for s in _utf8_candidates():
        frame = head + struct.pack(">h", len(s)) + s + tail
        got = parse(3, frame, validate_utf8=True)
        try:
            s.decode()
            reason = None
        except UnicodeDecodeError as e:
            reason = e.reason
        assert (got["result"] == 0) == (reason is None), s.hex()
        if reason is not None:
            assert got["info"]["err_field"] == "topic name" and got["info"]["err_at"] == 10
            assert str(got["error"]).endswith(f"topic name at offset 10 is not UTF-8 ({reason})")
        if s[0] & 0x0F == 0:
            assert parse(3, frame)["result"] == 0           # the nogil pass does not look
