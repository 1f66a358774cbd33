"""murmur2 / java_partition against the Java client's vectors, a pure-Python reference and
librdkafka's ``murmur2_random`` partitioner; crc32 against zlib, fnv1a against a pure-Python
reference, and the placement of every ``partitioner`` name (librdkafka's) against the rules
written out here and against librdkafka itself; the sticky partitioner."""
from __future__ import annotations

import array
import random
import zlib

import confluent_kafka
import pyarrow as pa
import pytest

from fastkafka._producer.partitioner import (
    PARTITIONERS, StickyPartitioner, crc32, fnv1a, java_partition, key_partition, murmur2,
    partitions_for_keys)

# Utils.murmur2 results from the Java client's UtilsTest.testMurmur2, plus the empty input.
JAVA_VECTORS = [
    (b"21", -973932308),
    (b"foobar", -790332482),
    (b"a-little-bit-long-string", -985981536),
    (b"a-little-bit-longer-string", -1486304829),
    (b"lkjh234lh9fiuh90y23oiuhsafujhadof229phr9h19h89h8", -58897971),
    (b"abc", 479470107),
    (b"", 275646681),
]


def ref_murmur2(data: bytes) -> int:
    """Straightforward transcription of the algorithm with explicit 32-bit masking."""
    mask = 0xFFFFFFFF
    m, r = 0x5BD1E995, 24
    n = len(data)
    h = (0x9747B28C ^ n) & mask
    for i in range(n // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & mask
        k ^= k >> r
        k = (k * m) & mask
        h = (h * m) & mask
        h ^= k
    base = n & ~3
    rem = n & 3
    if rem == 3:
        h ^= data[base + 2] << 16
    if rem >= 2:
        h ^= data[base + 1] << 8
    if rem >= 1:
        h ^= data[base]
        h = (h * m) & mask
    h ^= h >> 13
    h = (h * m) & mask
    h ^= h >> 15
    return h - (1 << 32) if h & 0x80000000 else h


@pytest.mark.parametrize("data,expected", JAVA_VECTORS)
def test_java_vectors(data, expected):
    assert murmur2(data) == expected
    assert ref_murmur2(data) == expected


def test_matches_reference_every_length_and_high_bytes():
    rnd = random.Random(1234)
    for n in range(0, 70):
        for _ in range(20):
            data = bytes(rnd.randrange(256) for _ in range(n))
            assert murmur2(data) == ref_murmur2(data), data
    # bytes >= 0x80 in the tail: Java masks with & 0xff, a signed-char bug would differ here
    for tail in (b"\xff", b"\x80\xff", b"\xfe\x81\xff"):
        data = b"abcd" + tail
        assert murmur2(data) == ref_murmur2(data)


def test_result_is_signed_int32():
    values = [murmur2(bytes([i]) * 7) for i in range(256)]
    assert all(-(2 ** 31) <= v < 2 ** 31 for v in values)
    assert any(v < 0 for v in values) and any(v > 0 for v in values)


def test_accepts_any_buffer():
    data = b"a-little-bit-long-string"
    expected = -985981536
    assert murmur2(bytearray(data)) == expected
    assert murmur2(memoryview(data)) == expected
    assert murmur2(memoryview(b"xx" + data)[2:]) == expected
    assert murmur2(array.array("B", data)) == expected
    with pytest.raises(TypeError):
        murmur2("foobar")
    with pytest.raises(TypeError):
        murmur2(None)


def test_java_partition():
    # (-790332482 & 0x7fffffff) = 1357151166
    assert java_partition(b"foobar", 10) == 1357151166 % 10 == 6
    assert java_partition(b"foobar", 50) == 16
    for data, h in JAVA_VECTORS:
        for n in (1, 3, 7, 12, 100):
            assert java_partition(data, n) == (h & 0x7FFFFFFF) % n
    with pytest.raises(ValueError, match="num_partitions must be positive, got 0"):
        java_partition(b"x", 0)


@pytest.mark.mock
def test_same_placement_as_librdkafka_murmur2_random():
    """Produce keyed records through librdkafka (partitioner=murmur2_random) to its in-process
    mock cluster and compare the partition of every delivery report with java_partition."""
    from mockcluster import MockCluster

    num_partitions = 7
    keys = [b"key-%d" % i for i in range(200)] + [d for d, _ in JAVA_VECTORS if d]
    placed = {}
    with MockCluster(1) as mc:
        mc.create_topic("placement", num_partitions)
        p = confluent_kafka.Producer({"bootstrap.servers": mc.bootstraps,
                                      "partitioner": "murmur2_random", "linger.ms": 5})

        def on_delivery(err, msg):
            assert err is None, err
            placed[msg.key()] = msg.partition()

        for k in keys:
            p.produce("placement", key=k, value=b"v", on_delivery=on_delivery)
        assert p.flush(30) == 0
    assert len(placed) == len(keys)
    for k in keys:
        assert placed[k] == java_partition(k, num_partitions), k


def test_sticky_partitioner_sticks_and_switches():
    sp = StickyPartitioner(seed=42)
    avail = [0, 1, 2, 3, 4]
    first = sp.partition("t", avail)
    assert first in avail
    assert all(sp.partition("t", avail) == first for _ in range(100))
    assert sp.current("t") == first
    # an unrelated partition filling up does not move the sticky one
    other = (first + 1) % 5
    assert sp.next_partition("t", avail, other) == first
    # the sticky one filling up does, always to a different available partition
    seen = set()
    cur = first
    for _ in range(200):
        nxt = sp.next_partition("t", avail, cur)
        assert nxt != cur and nxt in avail
        assert sp.partition("t", avail) == nxt
        seen.add(nxt)
        cur = nxt
    assert seen == set(avail)  # random, but covers every partition over 200 switches
    # topics are independent
    assert sp.current("u") is None
    assert sp.partition("u", [9]) == 9
    assert sp.next_partition("u", [9], 9) == 9  # only one choice
    with pytest.raises(ValueError, match="no available partitions"):
        sp.partition("empty", [])


def test_partitions_for_keys_list_and_arrow():
    from fastkafka._producer.partitioner import partitions_for_keys
    from fastkafka.errors import InvalidRecordError

    keys = [None if i % 4 == 0 else b"key-%d" % i for i in range(200)]
    expected = [9 if k is None else java_partition(k, 7) for k in keys]
    assert list(partitions_for_keys(keys, 7, 9)) == expected
    assert list(partitions_for_keys([bytearray(b"foobar"), memoryview(b"foobar")], 10)) == [6, 6]
    for typ in (pa.binary(), pa.large_binary()):
        arr = pa.array(keys, typ)[13:150]           # slice: offset != 0
        assert list(partitions_for_keys(arr, 7, 9)) == expected[13:150]
    strs = pa.array([None if k is None else k.decode() for k in keys], pa.string())
    assert list(partitions_for_keys(strs, 7, 9)) == expected
    assert list(partitions_for_keys(pa.nulls(3), 7, 2)) == [2, 2, 2]
    with pytest.raises(InvalidRecordError, match=r"keys\[1\]"):
        partitions_for_keys([b"a", 2.5], 3)
    assert list(partitions_for_keys(["foobar", "\u00e9"], 10)) == list(
        partitions_for_keys([b"foobar", "\u00e9".encode()], 10))     # a str key is its UTF-8
    with pytest.raises(InvalidRecordError, match="Arrow type int64 is not supported"):
        partitions_for_keys(pa.array([1, 2]), 3)
    with pytest.raises(ValueError, match="num_partitions must be positive, got 0"):
        partitions_for_keys([b"a"], 0)


# ---- librdkafka's partitioners: CRC-32, FNV-1a and the placement of each name ---------------------

CRC32_KEYS = [b"", b"a", b"foobar", b"123456789", b"key-17", bytes(range(256)), b"\xff" * 33]


@pytest.mark.parametrize("data", CRC32_KEYS)
def test_crc32_is_zlibs(data):
    assert crc32(data) == zlib.crc32(data)


def test_crc32_known_values_and_buffers():
    assert crc32(b"") == 0
    assert crc32(b"123456789") == 0xCBF43926      # the CRC-32 check value
    assert crc32(b"foobar") == 0x9EF61F95
    rnd = random.Random(99)
    for n in range(0, 80):
        data = bytes(rnd.randrange(256) for _ in range(n))
        assert crc32(data) == zlib.crc32(data), data
    assert crc32(bytearray(b"foobar")) == crc32(memoryview(b"xxfoobar")[2:]) == 0x9EF61F95
    with pytest.raises(TypeError):
        crc32("foobar")
    with pytest.raises(TypeError):
        crc32(None)


def ref_fnv1a(data: bytes) -> int:
    """FNV-1a, 32 bits, from its definition: xor the byte in, then multiply by the FNV prime."""
    h = 0x811C9DC5
    for byte in data:
        h = ((h ^ byte) * 0x01000193) & 0xFFFFFFFF
    return h


def abs_int32(h: int) -> int:
    """librdkafka's ``fnv1a``: the absolute value of the hash read as an int32 (0x80000000 stays)."""
    return (1 << 32) - h if h >= 1 << 31 else h


# FNV-1a 32 of the FNV reference's test strings, then absolute values as librdkafka's partitioner
# takes them (its unit test checks these against Go's hash/fnv).
FNV1A_VECTORS = [(b"", 0x811C9DC5), (b"a", 0xE40C292C), (b"foobar", 0xBF9CF968)]
FNV1A_ABS_VECTORS = [
    (b"kafka", 0x0D33C4E1), (b"giberish123456789", 0x77A58295), (b"1234", 0x023BDD03),
    (b"234", 0x2DEA3CD2), (b"34", 0x740FA83E), (b"4", 0x310CA263), (b"", 0x7EE3623B),
]
# A key whose FNV-1a is 0x80000000, the one hash with no positive int32 absolute value (found by
# meeting FNV's forward steps from the offset basis and its inverse steps from the hash halfway).
FNV1A_INT32_MIN_KEY = b"\x02W\x96\xdfM"


@pytest.mark.parametrize("data,expected", FNV1A_VECTORS)
def test_fnv1a_vectors(data, expected):
    assert fnv1a(data) == ref_fnv1a(data) == expected


@pytest.mark.parametrize("data,expected", FNV1A_ABS_VECTORS)
def test_fnv1a_absolute_value_vectors(data, expected):
    assert abs_int32(fnv1a(data)) == expected


def test_fnv1a_matches_reference():
    rnd = random.Random(7)
    for n in range(0, 80):
        data = bytes(rnd.randrange(256) for _ in range(n))
        assert fnv1a(data) == ref_fnv1a(data), data
    assert fnv1a(FNV1A_INT32_MIN_KEY) == ref_fnv1a(FNV1A_INT32_MIN_KEY) == 0x80000000
    assert fnv1a(array.array("B", b"foobar")) == 0xBF9CF968
    with pytest.raises(TypeError):
        fnv1a("foobar")


def ref_partition(name: str, key: bytes | None, n: int) -> int | None:
    """librdkafka's placement as its source states it (src/rdkafka_msg.c, src/rdkafka_topic.c),
    None where it takes the sticky partition; ``murmur2`` is the Java client's (null keys sticky)."""
    if name == "random":
        return None
    if key is None:
        if name not in ("consistent", "fnv1a"):
            return None
        key = b""                          # hashed as no bytes
    if name in ("murmur2", "murmur2_random"):
        return (ref_murmur2(key) & 0x7FFFFFFF) % n
    if name in ("consistent", "consistent_random"):
        if key == b"" and name == "consistent_random":
            return None
        return zlib.crc32(key) % n
    return abs_int32(ref_fnv1a(key)) % n


PLACEMENT_KEYS = ([None, b"", FNV1A_INT32_MIN_KEY] + [d for d, _ in JAVA_VECTORS]
                  + [d for d, _ in FNV1A_ABS_VECTORS] + [b"key-%d" % i for i in range(100)])


@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_key_partition_follows_the_rules(name):
    for n in (1, 2, 7, 100, 2**31 - 1):
        for key in PLACEMENT_KEYS:
            assert key_partition(key, n, name) == ref_partition(name, key, n), (key, n)


def test_key_partition_null_and_empty_keys():
    # consistent: CRC-32 of no bytes is 0; fnv1a: |0x811C9DC5 as int32| = 0x7EE3623B
    assert [key_partition(None, 100, "consistent"), key_partition(b"", 100, "consistent")] == [0, 0]
    assert key_partition(None, 100, "fnv1a") == key_partition(b"", 100, "fnv1a") == 0x7EE3623B % 100
    # consistent_random: null and empty keys sticky; murmur2(_random), fnv1a_random: null only
    assert key_partition(b"", 100, "consistent_random") is None
    assert key_partition(b"", 100, "murmur2") == key_partition(b"", 100, "murmur2_random") == \
        (275646681 & 0x7FFFFFFF) % 100
    assert key_partition(b"", 100, "fnv1a_random") == 0x7EE3623B % 100
    for name in ("murmur2", "murmur2_random", "consistent_random", "fnv1a_random", "random"):
        assert key_partition(None, 100, name) is None
    assert key_partition(FNV1A_INT32_MIN_KEY, 7, "fnv1a") == 2**31 % 7
    with pytest.raises(ValueError, match="partitioner must be one of 'murmur2', .*'random'"):
        key_partition(b"k", 3, "round-robin")
    with pytest.raises(ValueError, match="not a callable"):
        key_partition(b"k", 3, lambda *a: 0)
    with pytest.raises(ValueError, match="num_partitions must be positive"):
        key_partition(b"k", 0, "consistent")


@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_partitions_for_keys_every_partitioner(name):
    keys = [None if i % 5 == 0 else b"" if i % 7 == 0 else b"key-%d" % i for i in range(300)]
    expected = [ref_partition(name, k, 13) for k in keys]
    expected = [9 if p is None else p for p in expected]      # 9: the sticky partition given
    assert list(partitions_for_keys(keys, 13, 9, name)) == expected
    for typ in (pa.binary(), pa.large_binary()):
        arr = pa.array(keys, typ)[21:250]                       # slice: offset != 0
        assert list(partitions_for_keys(arr, 13, 9, name)) == expected[21:250]
    strs = pa.array([None if k is None else k.decode() for k in keys], pa.large_string())
    assert list(partitions_for_keys(strs, 13, 9, name)) == expected


@pytest.mark.mock
@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_same_placement_as_librdkafka(name):
    """Every partitioner name through librdkafka (its mock cluster): each keyed record, empty key
    and, where librdkafka hashes it, null key lands where key_partition says."""
    from mockcluster import MockCluster

    keys = [k for k in PLACEMENT_KEYS if ref_partition(name, k, 7) is not None]
    if name == "random":
        keys = []
    placed = []
    with MockCluster(1) as mc:
        mc.create_topic("placement", 7)
        p = confluent_kafka.Producer({"bootstrap.servers": mc.bootstraps, "partitioner": name,
                                      "linger.ms": 5})

        def on_delivery(err, msg):
            assert err is None, err
            placed.append((msg.key(), msg.partition()))

        for k in keys:
            p.produce("placement", key=k, value=b"v", on_delivery=on_delivery)
        assert p.flush(30) == 0
    assert len(placed) == len(keys)
    for k, partition in placed:
        assert partition == key_partition(k, 7, name), k
