"""The Produce request as segments (encode_produce_c, what the GIL-free turn of the I/O thread
calls, and what ProduceCodec.encode goes through): the same bytes as the generic schema codec for
every version, glue coalesced between the batches referenced in place, and the buffer sizes it asks
for when the caller's are too small."""
from __future__ import annotations

import random
import struct

import pytest

from fastkafka.protocol.produce_codec import ProduceCodec
from fastkafka._producer.testing import encode_segments
from fastkafka._wire.records import BatchBuilder, BatchView
from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey, encode_request

CODEC = ProduceCodec()
VERSIONS = list(range(3, 12))
assert SUPPORTED_VERSIONS[ApiKey.PRODUCE] == (3, 11)


def nested(transactional_id, acks, timeout_ms, parts) -> dict:
    """The generic codec's body: partitions grouped by topic in the order each topic first
    appears; a records entry of several pieces is their concatenation."""
    topics: dict = {}
    for topic, partition, records in parts:
        if isinstance(records, BatchView):
            records = records.tobytes()
        elif isinstance(records, (list, tuple)):
            records = b"".join(bytes(r) for r in records)
        topics.setdefault(topic, []).append({"index": partition, "records": records})
    return {"transactional_id": transactional_id, "acks": acks, "timeout_ms": timeout_ms,
            "topic_data": [{"name": t, "partition_data": ps} for t, ps in topics.items()]}


def joined(frame) -> bytes:
    return b"".join(bytes(p) for p in frame)


def compressed_batch(n=40):
    b = BatchBuilder(1 << 20, "lz4")
    for i in range(n):
        assert b.append(1_700_000_000_000 + i, b"k%d" % i, b"value " * 20)
    b.close()
    b.stamp(7, 1, 100)
    return b


def plain_batch(n=3):
    b = BatchBuilder(1 << 16)
    for i in range(n):
        assert b.append(1_700_000_000_000 + i, None, b"v%d" % i)
    b.close()
    b.stamp(-1, -1, -1)
    return b


def parts_interleaved():
    c1, c2, p1 = compressed_batch(), compressed_batch(7), plain_batch()
    return [("orders", 0, c1.buffer()),                             # two pieces (header, payload)
            ("payments", 3, p1.buffer()),                           # one piece
            ("orders", 7, (memoryview(b"h" * 61), b"payload")),     # two pieces given as a tuple
            ("audit", 1, None),                                     # null records
            ("payments", 1, b""),                                   # empty records
            ("orders", 2, c2.buffer()),
            ("audit", 0, memoryview(b"a" * 33))]


CASES = {"interleaved": parts_interleaved, "no parts": lambda: [],
         "one": lambda: [("t", 5, plain_batch().buffer())]}


@pytest.mark.parametrize("version", VERSIONS)
@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("client_id", [None, "client-é"])
@pytest.mark.parametrize("transactional_id", [None, "txn-ü"])
def test_encode_equals_the_generic_encoder_with_batches_by_reference(version, case, client_id,
                                                                    transactional_id):
    parts = CASES[case]()
    body = (transactional_id, -1, 30000, parts)
    got = CODEC.encode(version, 99, client_id, body)
    want = encode_request(ApiKey.PRODUCE, version, 99, client_id, nested(*body))
    assert joined(got) == joined(want)
    assert struct.unpack_from(">i", got[0])[0] == len(joined(got)) - 4
    # glue is bytes, never two in a row; every batch piece is there as itself, in order
    pieces = []
    for topic in dict.fromkeys(t for t, _, _ in parts):
        for t, _, records in parts:
            if t != topic or records is None:
                continue
            rs = records.pieces if isinstance(records, BatchView) else (
                records if isinstance(records, tuple) else (records,))
            pieces += [r for r in rs if len(r)]
    refs = [p for p in got if type(p) is not bytes or any(p is r for r in pieces)]
    assert len(refs) == len(pieces)
    for p, r in zip(refs, pieces):
        assert p is r or (type(p) is memoryview and p.obj is r.obj)   # the builder's header view
    kinds = [type(p) is bytes and not any(p is r for r in pieces) for p in got]
    assert not any(a and b for a, b in zip(kinds, kinds[1:]))
    assert kinds[0]


# ---- encode_produce_c itself ---------------------------------------------------------------

def raw_parts(rnd, n, topics=(b"a", b"topic-\xc3\xa9", b"t" * 300)):
    """(topic, partition, records, records2) in runs of one topic; records None: null."""
    out = []
    for _ in range(n):
        kind = rnd.randrange(5)
        records = None if kind == 0 else bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 90)))
        records2 = (bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 40)))
                    if kind >= 3 else None)
        out.append((rnd.choice(topics), rnd.randrange(-1, 1000), records, records2))
    out.sort(key=lambda p: p[0])                # consecutive parts of one topic: one entry
    return out


def expected(version, cid, tid, acks, timeout, parts):
    body = (None if tid is None else tid.decode(), acks, timeout,
            [(t.decode(), p, None if r is None else r + (r2 or b"")) for t, p, r, r2 in parts])
    return joined(encode_request(ApiKey.PRODUCE, version, 5, None if cid is None else cid.decode(),
                                 nested(*body)))


def call(version, parts, glue_cap, segs_cap, cid=b"app", tid=None, acks=1, timeout=1500):
    return encode_segments(version, 5, cid, tid, acks, timeout, parts, glue_cap, segs_cap)


@pytest.mark.parametrize("version", VERSIONS)
def test_segments_are_the_request_with_glue_coalesced(version):
    rnd = random.Random(version)
    for n in (0, 1, 2, 5, 17, 60):
        for cid, tid in ((None, None), (b"app", b"txn"), (b"", b"")):
            parts = raw_parts(rnd, n)
            bound = call(version, parts, 0, 0, cid, tid)
            r = call(version, parts, bound["glue_bound"], bound["segs_bound"], cid, tid)
            assert 0 < r["result"] <= r["glue_bound"] and r["nsegs"] <= r["segs_bound"]
            segs = r["segments"]
            assert len(segs) == r["nsegs"]
            assert b"".join(b for _, b in segs) == expected(version, cid, tid, 1, 1500, parts)
            assert sum(len(b) for g, b in segs if g) == r["result"]
            # glue: never empty, never two segments in a row; the batches: each piece, in order
            assert all(len(b) for _, b in segs) and segs[0][0]
            assert not any(a[0] and b[0] for a, b in zip(segs, segs[1:]))
            want = [x for _, _, r1, r2 in parts if r1 is not None for x in (r1, r2) if x]
            assert [b for g, b in segs if not g] == want


@pytest.mark.parametrize("version", [3, 8, 9, 11])
def test_too_small_buffers_are_told_what_they_need(version):
    rnd = random.Random(100 + version)
    parts = raw_parts(rnd, 12)
    ok = call(version, parts, 1 << 16, 1000)
    used, nsegs = ok["result"], ok["nsegs"]
    assert used > 0
    for glue_cap, segs_cap in ((0, 0), (used - 1, nsegs), (used, nsegs - 1), (10, 1),
                               (used - 1, 0)):
        r = call(version, parts, glue_cap, segs_cap)
        assert (r["result"], r["nsegs"]) == (-used, nsegs), (glue_cap, segs_cap)
        assert r["segments"] is None
    exact = call(version, parts, used, nsegs)       # just enough
    assert exact["result"] == used and exact["segments"] == ok["segments"]


def test_consecutive_parts_of_one_topic_form_one_entry_whatever_their_pointers():
    parts = [(b"".join([b"to", b"pic"]), 0, b"x", None), (b"top" + b"ic", 1, b"y", b"z"),
             (b"other", 2, b"w", None), (b"topic", 3, None, None)]
    r = call(9, parts, 4096, 100)
    data = b"".join(b for _, b in r["segments"])
    # three entries: topic (0, 1), other (2), topic again (3): what the caller's order says
    want = joined(encode_request(ApiKey.PRODUCE, 9, 5, "app", {
        "transactional_id": None, "acks": 1, "timeout_ms": 1500, "topic_data": [
            {"name": "topic", "partition_data": [{"index": 0, "records": b"x"},
                                                 {"index": 1, "records": b"yz"}]},
            {"name": "other", "partition_data": [{"index": 2, "records": b"w"}]},
            {"name": "topic", "partition_data": [{"index": 3, "records": None}]}]}))
    assert data == want


def test_what_cannot_be_encoded_returns_zero():
    parts = [(b"t", 0, b"x", None)]
    assert call(2, parts, 4096, 100)["result"] == 0
    assert call(12, parts, 4096, 100)["result"] == 0
    assert call(9, [(b"t" * 32768, 0, b"x", None)], 1 << 17, 100)["result"] == 0
    assert call(9, parts, 1 << 17, 100, cid=b"c" * 32768)["result"] == 0
    assert call(9, parts, 1 << 17, 100, tid=b"c" * 32768)["result"] == 0
    assert call(9, [(b"t" * 32767, 0, b"x", None)], 1 << 17, 100)["result"] > 0


def test_the_bounds_hold_at_the_extremes():
    rnd = random.Random(7)
    long_topics = (b"t" * 32767, b"u" * 32767)
    for version in (3, 9, 11):
        for n in (0, 1, 300):
            parts = raw_parts(rnd, n, long_topics if n < 300 else (b"a", b"b"))
            cid, tid = b"c" * 32767, b"x" * 32767
            r = call(version, parts, 0, 0, cid, tid)
            assert -r["result"] <= r["glue_bound"] and r["nsegs"] <= r["segs_bound"]
