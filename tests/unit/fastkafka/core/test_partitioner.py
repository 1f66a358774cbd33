"""murmur2 / java_partition against the Java client's vectors, a pure-Python reference and
librdkafka's ``murmur2_random`` partitioner; the sticky partitioner."""
from __future__ import annotations

import array
import random

import confluent_kafka
import pyarrow as pa
import pytest

from fastkafka._producer.partitioner import StickyPartitioner, java_partition, murmur2

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
        partitions_for_keys([b"a", "b"], 3)
    with pytest.raises(InvalidRecordError, match="Arrow type int64 is not supported"):
        partitions_for_keys(pa.array([1, 2]), 3)
    with pytest.raises(ValueError, match="num_partitions must be positive, got 0"):
        partitions_for_keys([b"a"], 0)
