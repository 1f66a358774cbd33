"""Compression in C without the GIL (fastkafka._wire.ccodecs): its output, read back by the codecs'
Python libraries (zlib, cramjam's snappy and zstd, lz4.frame) and not by the project's own
decoder, in the formats Kafka reads; levels; threads; the builder's close in C; the fallback to the
Python codecs when a library is missing (a child process that does not load it)."""
from __future__ import annotations

import os
import struct
import subprocess
import sys
import threading
import zlib
from pathlib import Path

import cramjam
import lz4.frame
import pytest

from fastkafka._wire import ccodecs, compression
from fastkafka._wire.compression import CODEC_SPECS, CODECS, validate_level
from fastkafka._wire.records import BatchBuilder
import reference_records as ref

C_CODECS = ["gzip", "snappy", "lz4", "zstd"]
SIZES = [0, 1, 2, 100, 4095, 32 * 1024 - 1, 32 * 1024, 32 * 1024 + 1, 64 * 1024, 64 * 1024 + 1,
         200_000, 1 << 20]
REPO = Path(__file__).resolve().parents[4]


def sample(kind: str, n: int) -> bytes:
    if kind == "text":
        return (b"kafka record %d, " * (n // 10 + 1) % tuple(range(n // 10 + 1)))[:n]
    if kind == "random":                    # incompressible
        return os.urandom(n)
    return bytes(n)                         # zeros


def independent_decompress(name: str, data: bytes) -> bytes:
    """The Python libraries' decoders, checking Kafka's framing on the way."""
    if name == "gzip":
        assert data[:3] == b"\x1f\x8b\x08"                      # a gzip member, deflate
        d = zlib.decompressobj(31)
        out = d.decompress(data) + d.flush()
        assert d.eof and d.unused_data == b""
        return out
    if name == "snappy":
        # xerial: magic, version 1, compat 1, then [int32 BE length][raw snappy block]; each block
        # holds at most 32 KiB of input
        assert data[:16] == b"\x82SNAPPY\x00" + struct.pack(">ii", 1, 1)
        pos, out = 16, []
        while pos < len(data):
            (size,) = struct.unpack_from(">i", data, pos)
            pos += 4
            assert 0 < size <= len(data) - pos
            block = bytes(cramjam.snappy.decompress_raw(data[pos:pos + size]))
            assert 0 < len(block) <= 32 * 1024
            out.append(block)
            pos += size
        assert all(len(b) == 32 * 1024 for b in out[:-1])
        return b"".join(out)
    if name == "lz4":
        # frame magic; FLG: version 01, independent blocks, no checksums, no content size;
        # BD: 64 KiB blocks
        assert data[:4] == b"\x04\x22\x4d\x18"
        assert data[4] == 0x60 and data[5] == 0x40
        return lz4.frame.decompress(data)
    assert data[:4] == b"\x28\xb5\x2f\xfd"                      # a zstd frame
    return bytes(cramjam.zstd.decompress(data))


def levels(name: str) -> list[int]:
    spec = CODEC_SPECS[CODECS[name]]
    if not spec.takes_level:
        return [0]
    picks = {spec.min_level, spec.default_level, spec.max_level, 1}
    if name == "zstd":
        picks |= {-5, 0, 19}
    if name == "lz4":
        picks |= {3, 9}
    return sorted(p for p in picks if spec.min_level <= p <= spec.max_level)


@pytest.fixture(params=C_CODECS)
def codec(request):
    name = request.param
    # the test machine has every codec's library (scripts/setup.sh installs the missing ones)
    assert ccodecs.in_c(name), f"{name} is not compressed in C here: {ccodecs.available()}"
    return name


def test_every_codec_library_is_loaded_here():
    assert sorted(ccodecs.available()) == sorted(C_CODECS)
    assert all(compression.in_c(c) for c in C_CODECS) and compression.in_c("none")


@pytest.mark.parametrize("kind", ["text", "random", "zeros"])
@pytest.mark.parametrize("n", SIZES)
def test_output_decompresses_with_the_python_libraries(codec, kind, n):
    data = sample(kind, n)
    level = validate_level(codec, None) or 0
    out = ccodecs.compress(codec, data, level)
    assert independent_decompress(codec, out) == data
    assert compression.decompress(codec, out) == data
    if kind == "random" and n >= 4095:      # incompressible: stored, a little framing only
        assert len(out) <= n + n // 100 + 64


def test_every_level_round_trips(codec):
    data = sample("text", 150_000) + sample("random", 3000)
    for level in levels(codec):
        out = ccodecs.compress(codec, data, level)
        assert independent_decompress(codec, out) == data, level


@pytest.mark.parametrize("name,low,high", [("gzip", 1, 9), ("lz4", 0, 16), ("zstd", -5, 19)])
def test_the_level_is_honoured(name, low, high):
    import random
    rnd = random.Random(1)
    words = [b"alpha", b"beta", b"gamma", b"delta", b"kafka", b"record", b"batch"]
    data = b" ".join(rnd.choice(words) + b"%d" % rnd.randrange(1000) for _ in range(60_000))
    fast, best = ccodecs.compress(name, data, low), ccodecs.compress(name, data, high)
    assert fast != best and len(best) < len(fast)
    # a level change on the same thread (the gzip stream is made again for it)
    assert ccodecs.compress(name, data, low) == fast


def test_gzip_is_zlibs_own_stream():
    # the same library as Python's zlib module, the same parameters: the same bytes, at every level
    if zlib.ZLIB_RUNTIME_VERSION != zlib.ZLIB_VERSION:
        pytest.fail(f"Python's zlib {zlib.ZLIB_RUNTIME_VERSION} was built for {zlib.ZLIB_VERSION}")
    data = sample("text", 70_000)
    for level in range(1, 10):
        assert ccodecs.compress("gzip", data, level) == compression.compress("gzip", data, level)


def test_threads_each_use_their_own_contexts(codec):
    datas = [sample("text", 40_000 + 997 * i) + sample("random", 100 * i) for i in range(6)]
    bad = []

    def work(i):
        for _ in range(30):
            out = ccodecs.compress(codec, datas[i], validate_level(codec, None) or 0)
            if independent_decompress(codec, out) != datas[i]:
                bad.append(i)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(len(datas))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert bad == []


def test_compress_refuses_what_it_cannot_do():
    with pytest.raises(ValueError):
        ccodecs.compress("brotli", b"x")
    assert ccodecs.compress("none", b"abc") == b"abc"


# ---- the builder --------------------------------------------------------------------------------

def _records(n, size=200, seed=0):
    import random
    rnd = random.Random(seed)
    return [(1_700_000_000_000 + i, b"k%d" % i,
             (b"value %d " % (i % 5)) * (size // 8) + rnd.randbytes(8), [("h", b"%d" % i)])
            for i in range(n)]


@pytest.mark.parametrize("n", [0, 1, 200, 3000])
def test_builder_close_compresses_in_c(codec, n):
    before = compression.counters()
    recs = _records(n)
    level = levels(codec)[-1] if codec != "zstd" else 5
    b = BatchBuilder(1 << 22, codec, level if CODEC_SPECS[CODECS[codec]].takes_level else None)
    for ts, k, v, h in recs:
        assert b.append(ts, k, v, h)
    b.close()
    b.stamp(7, 1, 10)
    pieces = b.buffers()
    assert len(pieces) == 1                 # the compressed records after the header, in the buffer
    data = bytes(pieces[0])
    assert len(data) == b.size_in_bytes
    batch = ref.decode_batch(data)          # checks the CRC
    assert batch.compression_type == CODECS[codec]
    assert [(r.timestamp, r.key, r.value) for r in batch.records] == [(t, k, v) for t, k, v, _ in recs]
    after = compression.counters()
    assert after["c"][codec]["calls"] == before["c"][codec]["calls"] + 1
    assert after["python"][codec] == before["python"][codec]
    # the pieces split from it close in C too
    if n >= 2:
        parts = b.split(2)
        got = []
        for p in parts:
            p.close()
            p.stamp(7, 1, 10)
            got += ref.decode_batch(bytes(p.buffer())).records
        assert [r.value for r in got] == [v for _, _, v, _ in recs]


def test_builder_that_did_not_compress_grows_its_buffer(codec):
    # random records filling the buffer: the codec's framing makes them larger than they were
    b = BatchBuilder(300, codec)
    assert b.append(1, None, os.urandom(230))
    b.close()
    b.stamp(-1, -1, -1)
    batch = ref.decode_batch(bytes(b.buffer()))
    assert batch.compression_type == CODECS[codec]
    assert [r.value for r in batch.records] == [batch.records[0].value] and len(batch.records[0].value) == 230


def test_a_codec_turned_off_goes_through_python(codec):
    assert ccodecs.use_c(codec, False) is False
    try:
        before = compression.counters()
        b = BatchBuilder(1 << 16, codec)
        b.append(1, None, b"abc" * 1000)
        assert ccodecs.use_c(codec, True) is True      # a builder keeps the choice it was made with
        b.close()
        b.stamp(-1, -1, -1)
        assert ref.decode_batch(b"".join(bytes(p) for p in b.buffers())).records[0].value == b"abc" * 1000
        after = compression.counters()
        assert after["python"][codec] == before["python"][codec] + 1
        assert after["c"][codec]["calls"] == before["c"][codec]["calls"]
    finally:
        ccodecs.use_c(codec, True)


# ---- a missing library ----------------------------------------------------------------------------

CHILD = r"""
import json, sys
from fastkafka._wire import ccodecs, compression
from fastkafka._wire.records import BatchBuilder
from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.testing import drain_nogil
import reference_records as ref

class Cluster:
    def leader_for(self, topic, partition):
        return 1

out = {"available": sorted(ccodecs.available()), "versions": ccodecs.versions(), "in_c": {},
       "closed_by": {}, "gil_free": {}}
for name in ("gzip", "snappy", "lz4", "zstd"):
    out["in_c"][name] = compression.in_c(name)
    before = compression.counters()
    b = BatchBuilder(1 << 16, name)
    b.append(1, b"k", b"kafka " * 500)
    b.close()
    b.stamp(-1, -1, -1)
    batch = ref.decode_batch(b"".join(bytes(p) for p in b.buffers()))
    assert batch.compression_type == compression.CODECS[name] and batch.records[0].value == b"kafka " * 500
    after = compression.counters()
    out["closed_by"][name] = ("c" if after["c"][name]["calls"] > before["c"][name]["calls"] else "")
    out["closed_by"][name] += ("python" if after["python"][name] > before["python"][name] else "")
    # the GIL-free drain takes a batch of this codec only when it is compressed in C
    acc = RecordAccumulator(1024, name, None, 10, 100, 100000, BufferPool(1 << 20, 1024), False)
    acc.append("t", 0, 1000, None, b"v" * 100, None, None, 0, 0)
    acc.ready(Cluster(), 0)
    _, got = drain_nogil(acc, [[1, 1]], 1 << 20, 10, 64)
    out["gil_free"][name] = len(got)
    for _, bt in got:
        bt.complete(0, -1, None)
        acc.deallocate(bt)
    for bt in acc.abort_undrained():
        bt.complete(0, -1, None)
        acc.deallocate(bt)
    acc.close()
print(json.dumps(out))
"""


def run_child(only):
    import json
    env = dict(os.environ)
    env.pop("FASTKAFKA_C_CODECS", None)
    if only is not None:
        env["FASTKAFKA_C_CODECS"] = only
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), str(REPO / "tests")]
                                        + [p for p in env.get("PYTHONPATH", "").split(os.pathsep) if p])
    r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True, text=True,
                       timeout=120)
    assert r.returncode == 0, r.stderr
    return json.loads(r.stdout.strip().splitlines()[-1])


def _version_number(text):
    major, minor, release = (int(x) for x in text.split("."))
    return major * 10000 + minor * 100 + release


def test_a_missing_library_falls_back_to_the_python_codec():
    # only zstd's and gzip's libraries are loaded: lz4 and snappy are as if missing
    got = run_child("zstd, gzip")
    assert got["available"] == ["gzip", "zstd"]
    assert got["in_c"] == {"gzip": True, "snappy": False, "lz4": False, "zstd": True}
    assert got["closed_by"] == {"gzip": "c", "snappy": "python", "lz4": "python", "zstd": "c"}
    assert got["gil_free"] == {"gzip": 1, "snappy": 0, "lz4": 0, "zstd": 1}


def test_by_default_the_others_are_compressed_in_c_and_zstd_by_its_version():
    # FASTKAFKA_C_CODECS unset: every library is loaded; zstd's C path is on from libzstd 1.5.7
    # (Debian 12's 1.5.4: off, the Python codec compresses zstd; a 1.5.7 one on the host:
    # tests/packaging/test_zstd_by_version.py)
    got = run_child(None)
    assert got["available"] == ["gzip", "lz4", "snappy", "zstd"]
    zstd_c = _version_number(got["versions"]["zstd"]) >= 10507
    assert got["in_c"] == {"gzip": True, "snappy": True, "lz4": True, "zstd": zstd_c}
    assert got["closed_by"] == {"gzip": "c", "snappy": "c", "lz4": "c",
                                "zstd": "c" if zstd_c else "python"}
    assert got["gil_free"] == {"gzip": 1, "snappy": 1, "lz4": 1, "zstd": int(zstd_c)}


def test_zstd_default_by_version():
    assert ccodecs.ZSTD_C_FROM == 10507
    assert ccodecs.zstd_c_by_default(10507) and ccodecs.zstd_c_by_default(10600)
    assert not ccodecs.zstd_c_by_default(10506) and not ccodecs.zstd_c_by_default(10504)
    assert not ccodecs.zstd_c_by_default(0) and not ccodecs.zstd_c_by_default(None)


def test_versions_are_the_loaded_libraries_own():
    import ctypes
    got = ccodecs.versions()
    assert set(got) == {"lz4", "zstd"}
    for name, soname, fn in (("zstd", "libzstd.so.1", "ZSTD_versionNumber"),
                             ("lz4", "liblz4.so.1", "LZ4_versionNumber")):
        number = getattr(ctypes.CDLL(soname), fn)()
        assert _version_number(got[name]) == number, (name, got[name], number)


def test_no_library_at_all_is_the_python_path_everywhere():
    got = run_child("")
    assert got["available"] == []
    assert set(got["closed_by"].values()) == {"python"}
    assert set(got["gil_free"].values()) == {0}
