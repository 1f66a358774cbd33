"""Micro benchmarks of the compiled core (pytest-benchmark).

    pytest bench/test_micro_core.py --benchmark-only
"""
from __future__ import annotations

import pyarrow as pa

from fastkafka._producer.accumulator import RecordAccumulator
from fastkafka._producer.batch import BatchFuture
from fastkafka._producer.bufferpool import BufferPool
from fastkafka._producer.partitioner import murmur2, partitions_for_keys

KEY16 = b"0123456789abcdef"
KEY16_MURMUR2 = 1438427052      # from the independent reference in tests/unit/fastkafka/_producer/test_partitioner.py
VALUE100 = b"v" * 100
N_BATCH = 10_000


def new_acc():
    return RecordAccumulator(16384, 0, None, 5, 100, 120000, BufferPool(1 << 30, 16384), False)


def test_murmur2_16_byte_key(benchmark):
    assert benchmark(murmur2, KEY16) == KEY16_MURMUR2


def test_partitions_for_keys_10k_arrow(benchmark):
    keys = pa.array([b"key-%08d" % i for i in range(N_BATCH)], pa.binary())
    out = benchmark(partitions_for_keys, keys, 12)
    assert len(out) == N_BATCH


def test_accumulator_append_100_bytes(benchmark):
    acc = new_acc()
    append = acc.append
    n = 1000

    def run():
        for _ in range(n):
            append("topic", 0, 0, None, VALUE100, None, None, 0, 1000)
        queued = acc.stats()["records_queued"]
        # drop the batches so memory stays flat between rounds
        acc.abort_undrained()
        return queued

    assert benchmark(run) == n
    benchmark.extra_info["records_per_round"] = n


def _append_batch(values, keys=None):
    acc = new_acc()
    fut = BatchFuture()
    n = acc.append_batch("topic", 0, values, keys, None, 0, fut, 0, 1000)
    return n


def test_append_batch_10k_from_list(benchmark):
    values = [VALUE100] * N_BATCH
    assert benchmark(_append_batch, values) == N_BATCH
    benchmark.extra_info["bytes"] = 100 * N_BATCH


def test_append_batch_10k_from_arrow_binary(benchmark):
    values = pa.array([VALUE100] * N_BATCH, pa.binary())
    assert benchmark(_append_batch, values) == N_BATCH
    benchmark.extra_info["bytes"] = 100 * N_BATCH
