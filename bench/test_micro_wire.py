"""Micro benchmarks of the wire layer: CRC-32C, batch encoding, varints.

Run: python -m pytest bench/test_micro_wire.py --benchmark-only -q
Each benchmark records payload throughput (GB/s of the median) in extra_info.
"""
import os
import random

import crc32c as crc32c_pkg
import pytest

from fastkafka._wire import crc32c as fk_crc
from fastkafka._wire.records import BatchBuilder
from fastkafka._wire.varint import decode_varint, encode_varint

N_RECORDS = 10_000
VALUE_SIZE = 100
PAYLOAD = N_RECORDS * VALUE_SIZE
TS = 1_700_000_000_000
BATCH_SIZE = 4 * 1024 * 1024


def _gbps(benchmark, nbytes):
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        median = stats.stats.median
        benchmark.extra_info["payload_bytes"] = nbytes
        benchmark.extra_info["GB/s"] = round(nbytes / median / 1e9, 3)
        benchmark.extra_info["median_us"] = round(median * 1e6, 1)


@pytest.fixture(scope="module")
def mib():
    return os.urandom(1 << 20)


@pytest.fixture(scope="module")
def values():
    rnd = random.Random(1)
    return [rnd.randbytes(VALUE_SIZE) for _ in range(N_RECORDS)]


# ---- CRC-32C of 1 MiB ---------------------------------------------------------------

@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_fastkafka(benchmark, mib):
    assert benchmark(fk_crc.crc32c, mib) == crc32c_pkg.crc32c(mib)
    benchmark.extra_info["impl"] = fk_crc.implementation()
    _gbps(benchmark, len(mib))


@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_fastkafka_table(benchmark, mib):
    assert benchmark(fk_crc.crc32c_table, mib) == crc32c_pkg.crc32c(mib)
    _gbps(benchmark, len(mib))


@pytest.mark.benchmark(group="crc32c-1MiB")
def test_crc32c_pypi_package(benchmark, mib):
    assert benchmark(crc32c_pkg.crc32c, mib) == fk_crc.crc32c(mib)
    _gbps(benchmark, len(mib))


# ---- batch encode: 10k x 100-byte values, append loop + close + stamp -----------------

def _fk_append_loop(values):
    b = BatchBuilder(BATCH_SIZE)
    append = b.append
    for v in values:
        append(TS, None, v)
    b.close()
    b.stamp(-1, -1, -1)
    return b


def _fk_append_many(values):
    b = BatchBuilder(BATCH_SIZE)
    b.append_many(TS, None, values)
    b.close()
    b.stamp(-1, -1, -1)
    return b


def _fk_append_many_lz4(values):
    b = BatchBuilder(BATCH_SIZE, 3)
    b.append_many(TS, None, values)
    b.close()
    b.stamp(-1, -1, -1)
    return b


@pytest.mark.benchmark(group="batch-encode-10k-x-100B")
def test_encode_fastkafka_append(benchmark, values):
    b = benchmark(_fk_append_loop, values)
    assert b.record_count == N_RECORDS
    _gbps(benchmark, PAYLOAD)


@pytest.mark.benchmark(group="batch-encode-10k-x-100B")
def test_encode_fastkafka_append_many(benchmark, values):
    b = benchmark(_fk_append_many, values)
    assert b.record_count == N_RECORDS
    assert bytes(b.buffer()) == bytes(_fk_append_loop(values).buffer())
    _gbps(benchmark, PAYLOAD)


@pytest.mark.benchmark(group="batch-encode-10k-x-100B")
def test_encode_fastkafka_append_many_lz4(benchmark, values):
    # random values do not compress: this measures the codec's pass over the data
    b = benchmark(_fk_append_many_lz4, values)
    assert b.record_count == N_RECORDS and b.compression_type == 3
    _gbps(benchmark, PAYLOAD)


@pytest.mark.benchmark(group="batch-encode-10k-x-100B")
def test_encode_aiokafka_cython(benchmark, values):
    from aiokafka.record import default_records as ad
    Builder = ad.DefaultRecordBatchBuilder
    benchmark.extra_info["builder"] = f"{Builder.__module__}.{Builder.__name__}"

    def run():
        b = Builder(2, 0, 0, -1, -1, -1, BATCH_SIZE)
        append = b.append
        for i, v in enumerate(values):
            append(i, TS, None, v, [])
        return b.build()

    out = benchmark(run)
    assert len(out) == len(_fk_append_many(values).buffer())
    _gbps(benchmark, PAYLOAD)


@pytest.mark.benchmark(group="batch-encode-10k-x-100B")
def test_encode_kafka_python(benchmark, values):
    from kafka.record.default_records import DefaultRecordBatchBuilder

    def run():
        b = DefaultRecordBatchBuilder(2, 0, False, -1, -1, -1, BATCH_SIZE)
        append = b.append
        for i, v in enumerate(values):
            append(i, TS, None, v, [])
        return b.build()

    out = bytes(benchmark.pedantic(run, rounds=5, iterations=1))
    ours = bytes(_fk_append_many(values).buffer())
    # identical except partitionLeaderEpoch (bytes 12-16): kafka-python writes 0, we -1;
    # that field is outside the CRC, so the CRCs agree too
    assert out[:12] == ours[:12] and out[16:] == ours[16:]
    _gbps(benchmark, PAYLOAD)


# ---- varints ------------------------------------------------------------------------------

def ref_varint(n: int) -> bytes:
    """Zigzag + base-128 varint, written out here independently of fastkafka."""
    v = ((n << 1) ^ (n >> 63)) & 0xFFFFFFFFFFFFFFFF
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


_rnd = random.Random(2)
VARINT_VALUES = [_rnd.randint(-2**31, 2**31 - 1) for _ in range(1000)]
VARINT_BLOB = b"".join(ref_varint(n) for n in VARINT_VALUES)


@pytest.mark.benchmark(group="varint-1000")
def test_varint_encode(benchmark):
    def run():
        out = None
        for n in VARINT_VALUES:
            out = encode_varint(n)
        return out
    assert benchmark(run) == ref_varint(VARINT_VALUES[-1])
    assert b"".join(encode_varint(n) for n in VARINT_VALUES) == VARINT_BLOB
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        benchmark.extra_info["ns_per_op"] = round(stats.stats.median / 1000 * 1e9, 1)


@pytest.mark.benchmark(group="varint-1000")
def test_varint_decode(benchmark):
    def run():
        pos = 0
        blob = VARINT_BLOB
        out = 0
        for _ in range(1000):
            v, pos = decode_varint(blob, pos)
            out ^= v
        return pos, out
    expected_xor = 0
    for n in VARINT_VALUES:
        expected_xor ^= n
    assert benchmark(run) == (len(VARINT_BLOB), expected_xor)
    stats = getattr(benchmark, "stats", None)
    if stats is not None:
        benchmark.extra_info["ns_per_op"] = round(stats.stats.median / 1000 * 1e9, 1)
