"""The buffer pool owns the batch buffers: a builder's buffer is what the pool reserved for its batch,
in size classes (4 KiB doubling up to ``batch_size``) that follow what the batches hold; free buffers
of each class are kept and reused, and the bytes held by live builders plus the free buffers never
exceed ``buffer_memory`` (``BufferPool.total``)."""
from __future__ import annotations

import gc
import random
import threading
import time

import pytest

from fastkafka import Producer
from fastkafka._producer.accumulator import RecordAccumulator, live_resources
from fastkafka._producer.bufferpool import BufferPool, pool_counters
from fastkafka._wire.records import BatchBuilder, buffer_counters, record_size
from fastkafka.errors import BufferExhaustedError

import reference_records as ref
from reference_records import decode_batch

HEADER = 61
TS0 = 1_700_000_000_000


class Cluster:
    def __init__(self, partitions, leader=1):
        self.leaders = {("t", p): leader for p in partitions}

    def leader_for(self, topic, partition):
        return self.leaders.get((topic, partition), -1)


def release_split(acc, pool, batch, pieces):
    """Deliver and free a split batch's pieces and the batch itself: the pool is whole again."""
    for p in pieces:
        p.complete(0, -1, None)
        acc.deallocate(p)
    acc.deallocate(batch)
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


def make(batch_size=1024, memory=8 * 1024, compression=0):
    pool = BufferPool(memory, batch_size)
    return RecordAccumulator(batch_size, compression, None, 0, 100, 120000, pool, False), pool


def drain_and_free(acc, cluster):
    out = acc.drain(cluster, [1], 1 << 30, 0).get(1, [])
    n = 0
    for b in out:
        b.complete(0, -1, None)
        acc.deallocate(b)
        n += b.record_count
    return n


def check_bound(pool):
    assert pool.held_bytes + pool.free_bytes <= pool.total, pool
    assert pool.free_bytes <= pool.available_memory, pool


# ---- the bound ------------------------------------------------------------------------------------

def test_held_plus_free_never_exceed_total_over_many_batches():
    """Batches of the usual size fill the pool and are freed (their buffers kept), then records larger
    than batch_size need buffers of their own size: the free buffers those bytes no longer cover are
    freed, so held + free stays within total at every step (and at the high-water mark)."""
    acc, pool = make(batch_size=1024, memory=8 * 1024)
    bufs0 = buffer_counters()["batch_buffer_bytes"]
    cluster = Cluster(range(8))
    rnd = random.Random(7)
    for rnd_i in range(200):
        # fill as many partitions as the pool allows, sometimes with an oversized record
        for p in range(8):
            size = rnd.choice([100, 300, 900, 2500, 5000]) if rnd_i % 3 == 0 else 300
            try:
                acc.append("t", p, TS0, None, b"x" * size, None, None, 0, 0)
            except BufferExhaustedError:
                pass
            check_bound(pool)
            # every byte a live builder holds is a byte the pool counts as held
            assert buffer_counters()["batch_buffer_bytes"] - bufs0 == pool.held_bytes
        drain_and_free(acc, cluster)
        check_bound(pool)
    assert pool.buffers_reused > 100          # the usual-size buffers were kept and reused ...
    assert pool.free_buffers > 0
    assert 0 < pool.peak_bytes <= pool.total  # ... and never beyond total
    assert live_resources()["buffer_pool_overflow"] == 0
    for b in acc.abort_undrained():
        acc.deallocate(b)
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


def test_bound_holds_with_threads_appending_and_the_io_side_freeing():
    acc, pool = make(batch_size=4096, memory=64 * 1024)
    cluster = Cluster(range(6))
    stop = threading.Event()
    errors = []
    sent = []

    def producer(seed):
        rnd = random.Random(seed)
        n = 0
        try:
            for i in range(4000):
                size = 10_000 if i % 97 == 0 else rnd.randrange(1, 600)
                acc.append("t", rnd.randrange(6), TS0, None, b"y" * size, None, None, 0, 5000)
                n += 1
        except Exception as e:      # pragma: no cover - reported below
            errors.append(e)
        sent.append(n)

    def io_side():
        while not stop.is_set():
            drain_and_free(acc, cluster)
            time.sleep(0.0005)

    io = threading.Thread(target=io_side)
    io.start()
    threads = [threading.Thread(target=producer, args=(s,)) for s in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    stop.set()
    io.join(10)
    assert not errors, errors
    assert sum(sent) == 16000
    assert pool.peak_bytes <= pool.total, pool
    assert pool.buffers_reused > 0
    assert live_resources()["buffer_pool_overflow"] == 0
    for b in acc.abort_undrained():
        acc.deallocate(b)
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


# ---- reuse ----------------------------------------------------------------------------------------

def test_a_second_batch_gets_the_first_ones_buffer_back_from_the_pool():
    acc, pool = make(batch_size=64 * 1024, memory=1 << 20)
    cluster = Cluster([0])
    acc.append("t", 0, TS0, b"k", b"a" * 5000, None, None, 0, 0)
    assert (pool.buffers_made, pool.buffers_reused, pool.free_buffers) == (1, 0, 0)
    assert pool.held_bytes == 8192                  # the size class that holds the record
    assert drain_and_free(acc, cluster) == 1
    assert pool.free_buffers == 1 and pool.free_bytes == 8192 and pool.held_bytes == 0
    assert pool.available_memory == pool.total      # a free buffer is available memory
    # the partition's last batch held ~5 KB: its next batch starts in that class, the same buffer
    acc.append("t", 0, TS0, b"k", b"b", None, None, 0, 0)
    assert (pool.buffers_made, pool.buffers_reused, pool.free_buffers) == (1, 1, 0)
    assert pool.held_bytes == 8192
    acc.close()
    for b in acc.abort_undrained():
        acc.deallocate(b)


def test_a_reused_buffer_carries_no_stale_bytes():
    """A reused buffer still holds an old batch's bytes; the new batch must encode exactly like one
    in a fresh buffer."""
    acc, pool = make(batch_size=1 << 17, memory=1 << 20)
    cluster = Cluster([0])
    for _ in range(20):
        acc.append("t", 0, TS0, b"k" * 40, bytes([0xAB]) * 5000, [("h", b"x" * 30)], None, 0, 0)
    drain_and_free(acc, cluster)
    # the batch grew through the classes 8, 16, 32, 64 and 128 KiB: the buffers it outgrew were
    # freed, the one it went out with is kept
    assert pool.free_buffers == 1 and pool.free_bytes == 128 * 1024
    assert pool.buffers_reused == 0
    new = [(TS0 + i, None if i % 2 else b"key", b"v%d" % i, None) for i in range(50)]
    for ts, k, v, h in new:
        acc.append("t", 0, ts, k, v, h, None, 0, 0)
    assert pool.buffers_reused == 1                 # the 128 KiB one: the last batch's class
    assert pool.held_bytes == 1 << 17
    [b] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    b.builder.stamp(-1, -1, -1)
    assert bytes(b.builder.buffer()) == ref.encode_batch(new)
    b.complete(0, -1, None)
    acc.deallocate(b)
    acc.close()


def test_only_usual_size_buffers_are_kept_and_closing_the_pool_frees_them():
    acc, pool = make(batch_size=1024, memory=64 * 1024)
    cluster = Cluster([0, 1])
    acc.append("t", 0, TS0, None, b"x" * 10, None, None, 0, 0)
    acc.append("t", 1, TS0, None, b"x" * 8000, None, None, 0, 0)   # a buffer of its own size
    drain_and_free(acc, cluster)
    assert pool.free_buffers == 1 and pool.free_bytes == 1024
    before = pool_counters()["buffer_pool_free_bytes"]
    pool.close()
    assert pool.free_buffers == 0 and pool.free_bytes == 0
    assert pool_counters()["buffer_pool_free_bytes"] == before - 1024
    acc.close()


# ---- sizes ------------------------------------------------------------------------------------------

def test_an_oversized_record_gets_a_buffer_of_its_own_size_and_goes_through():
    acc, pool = make(batch_size=1024, memory=64 * 1024)
    cluster = Cluster([0])
    acc.append("t", 0, TS0, b"small", b"v", None, None, 0, 0)
    value = bytes(range(256)) * 40                          # 10240 bytes, ten batch sizes
    fut = acc.append("t", 0, TS0 + 1, b"big", value, [("h", b"1")], None, 0, 0)
    batches = acc.queued("t", 0)
    assert [b.record_count for b in batches] == [1, 1]
    need = HEADER + record_size(0, 0, 3, len(value), [("h", b"1")])
    assert batches[1].reserved == need                     # exactly the record's size ...
    assert pool.held_bytes == 1024 + need                  # ... held in the pool
    assert pool.available_memory == pool.total - 1024 - need
    [b0] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    [b1] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    assert b1 is fut.batch
    b1.builder.stamp(-1, -1, -1)
    [rec] = decode_batch(b1.builder.buffer()).records
    assert rec.key == b"big" and rec.value == value
    for b in (b0, b1):
        b.complete(0, -1, None)
        acc.deallocate(b)
    assert pool.held_bytes == 0 and pool.free_bytes == 1024   # the odd-sized one was freed
    acc.close()


@pytest.mark.parametrize("room", [True, False], ids=["pool-has-room", "pool-full"])
def test_a_batch_that_does_not_compress_grows_from_the_pool_or_goes_out_uncompressed(room):
    """Compressed records larger than the batch's buffer: the buffer grows by bytes the pool has
    free at once, else the batch goes out uncompressed; never beyond the pool's total."""
    import os
    acc, pool = make(batch_size=4096, memory=64 * 1024 if room else 4096, compression="snappy")
    cluster = Cluster([0])
    noise = os.urandom(4096 - HEADER - 20)                 # fills the batch, does not compress
    acc.append("t", 0, TS0, None, noise, None, None, 0, 0)
    [b] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    if room:
        assert b.builder.compression_type == 2
        assert b.builder.capacity == b.builder.size_in_bytes > 4096
        assert pool.held_bytes == b.builder.capacity      # the extra bytes are the pool's
    else:
        assert b.builder.compression_type == 0
        assert b.builder.capacity == pool.held_bytes == 4096
    b.builder.stamp(-1, -1, -1)
    [rec] = decode_batch(b.builder.buffer()).records
    assert rec.value == noise
    assert pool.peak_bytes <= pool.total
    b.complete(0, -1, None)
    acc.deallocate(b)
    assert pool.held_bytes == 0
    # a grown buffer of an odd size (what the compressed batch needed) is not kept, nor the one it
    # outgrew; without room the batch kept its 4096-byte buffer, which is
    assert pool.free_bytes == (0 if room else 4096)
    acc.close()


def test_a_standalone_builder_mallocs_its_own_buffer_and_grows():
    before = buffer_counters()
    b = BatchBuilder(1024)
    assert buffer_counters()["batch_buffers"] == before["batch_buffers"] + 1
    assert b.append(TS0, None, b"x" * 100_000)             # the first record always fits
    assert buffer_counters()["batch_buffer_bytes"] > before["batch_buffer_bytes"] + 100_000
    del b
    assert buffer_counters() == before


# ---- split ------------------------------------------------------------------------------------------

@pytest.mark.parametrize("codec", [0, "gzip"])
def test_split_pieces_take_over_the_batch_memory_exactly(codec):
    acc, pool = make(batch_size=8192, memory=32 * 1024, compression=codec)
    cluster = Cluster([0])
    rnd = random.Random(3)
    records = []
    while len(acc.queued("t", 0)) < 2:
        v = bytes(rnd.randrange(256) for _ in range(rnd.randrange(50, 400)))
        ts = TS0 + rnd.randrange(-5000, 5000)
        records.append((ts, None, v))
        acc.append("t", 0, ts, None, v, None, None, 0, 0)
    records.pop()                              # it started the second batch
    [b] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    for x in acc.abort_undrained():            # the record that started a second batch
        acc.deallocate(x)
    bufs = buffer_counters()["batch_buffers"]
    assert pool.held_bytes == 8192
    pieces = acc.split_and_reenqueue(b, 0, 3)
    assert len(pieces) == 3
    # the batch's buffer is gone, each piece's is exactly its size, all held in the pool
    assert buffer_counters()["batch_buffers"] == bufs - 1 + 3
    sizes = [p.builder.capacity for p in pieces]
    assert sum(sizes) == pool.held_bytes and pool.held_bytes + pool.free_bytes <= pool.total
    got = []
    for p in pieces:
        if codec == 0:
            assert p.builder.size_in_bytes == p.builder.capacity
        got += [(r.timestamp, r.key, r.value) for r in decode_batch(p.builder.buffer()).records]
    assert got == records
    release_split(acc, pool, b, pieces)


def test_split_without_the_bytes_in_the_pool_refuses_and_loses_nothing():
    acc, pool = make(batch_size=2048, memory=2048)
    cluster = Cluster([0])
    for i in range(20):
        acc.append("t", 0, TS0, None, b"%03d" % i + b"z" * 60, None, None, 0, 0)
    assert len(acc.queued("t", 0)) == 1
    [b] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    b.builder.stamp(-1, -1, -1)
    view = b.builder.buffer()            # a request still holds the batch's bytes
    with pytest.raises(BufferExhaustedError):
        acc.split_and_reenqueue(b, 0, 2)   # pieces would need memory of their own: none is free
    assert pool.held_bytes == 2048 and pool.available_memory == 0
    view.release()
    pieces = acc.split_and_reenqueue(b, 0, 2)   # now the batch's own memory passes to the pieces
    assert [p.record_count for p in pieces] == [10, 10]
    release_split(acc, pool, b, pieces)


def test_split_takes_the_few_bytes_more_it_needs_ahead_of_waiting_threads():
    """The pieces of a full batch need a little more than its buffer (a header each): the I/O thread
    takes those bytes while they are free, even with a thread waiting for a whole batch."""
    acc, pool = make(batch_size=2048, memory=2 * 2048 + 100)
    cluster = Cluster([0])
    values = []
    left = 2048 - HEADER                         # fill the first batch to its last byte
    while left > 0:
        v = 190 if left > 400 else next(n for n in range(left, -1, -1)
                                        if record_size(0, len(values), -1, n) <= left)
        values.append(bytes([len(values)]) * v)
        left -= record_size(0, len(values) - 1, -1, v)
        acc.append("t", 0, TS0, None, values[-1], None, None, 0, 0)
    assert left == 0 and len(acc.queued("t", 0)) == 1
    acc.append("t", 0, TS0, None, b"next", None, None, 0, 0)
    [a] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    assert pool.available_memory == 100
    waited = []
    t = threading.Thread(target=lambda: waited.append(
        acc.append("t", 1, TS0, None, b"w", None, None, 0, 5000)))
    t.start()
    deadline = time.monotonic() + 5
    while pool.queued == 0 and time.monotonic() < deadline:
        time.sleep(0.001)
    assert pool.queued == 1
    pieces = acc.split_and_reenqueue(a, 0, 2)
    caps = [p.builder.capacity for p in pieces]
    assert sum(caps) > 2048                      # more than the batch had ...
    assert pool.held_bytes == 2048 + sum(caps) and pool.peak_bytes <= pool.total   # ... within total
    assert [r.value for p in pieces for r in decode_batch(p.builder.buffer()).records] == values
    for b in pieces + acc.abort_undrained():
        acc.deallocate(b)
    acc.deallocate(a)
    t.join(5)
    assert len(waited) == 1 and pool.queued == 0
    for b in acc.abort_undrained():
        acc.deallocate(b)
    del a, pieces, b
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


# ---- the producer -----------------------------------------------------------------------------------

@pytest.mark.parametrize("deliver", [True, False], ids=["delivered", "aborted"])
def test_closing_the_producer_returns_every_byte(mock_cluster, deliver):
    mock_cluster.create_topic("pooled", 3)
    before = live_resources()
    p = Producer(bootstrap_servers=mock_cluster.bootstraps, batch_size=4096,
                 buffer_memory=256 * 1024, linger_ms=5 if deliver else 60_000)
    pool = p._pool
    futs = []
    for i in range(3000):
        futs.append(p.send("pooled", b"v" * (20_000 if i % 500 == 7 else 200), partition=i % 3))
    assert pool.held_bytes > 0
    if deliver:
        p.flush(30)
        assert all(f.done() and f.exception() is None for f in futs)
        assert pool.buffers_reused > 0
    p.close(30 if deliver else 0)
    assert pool.held_bytes == 0 and pool.free_bytes == 0
    assert pool.available_memory == pool.total
    assert pool.peak_bytes <= pool.total
    del p, pool, futs
    gc.collect()
    now = live_resources()
    for name in ("buffer_pool_bytes", "batch_buffers", "batch_buffer_bytes", "buffer_pool_overflow"):
        assert now[name] == before[name], name


# ---- size classes: memory follows what the batches hold -------------------------------------------

def test_size_classes_double_from_4_kib_up_to_batch_size():
    pool = BufferPool(1 << 30, 100_000)
    assert [pool.class_for(n) for n in (1, 4096, 4097, 50_000, 65_537, 100_000)] == \
        [4096, 4096, 8192, 65536, 100_000, 100_000]
    assert pool.class_for(100_001) == 100_001          # a record beyond batch_size: its own size
    assert BufferPool(1 << 20, 1000).class_for(1) == 1000


def test_a_thousand_partitions_of_small_batches_hold_a_small_buffer_each():
    """Keyed records over many partitions: each open batch holds a buffer of the smallest class,
    not batch_size, so a pool far smaller than partitions x batch_size takes them all at once."""
    partitions = 1000
    acc, pool = make(batch_size=256 * 1024, memory=8 << 20)      # 8 MiB < 1000 x 256 KiB
    cluster = Cluster(range(partitions))
    for i in range(5 * partitions):
        acc.append("t", i % partitions, TS0, b"key%d" % i, b"v" * 100, None, None, 0, 0)
    assert pool.held_bytes == partitions * 4096
    assert pool.queued == 0 and pool.blocked_count == 0
    assert [b.record_count for b in acc.queued("t", 7)] == [5]
    assert drain_and_free(acc, cluster) == 5 * partitions
    assert pool.held_bytes == 0 and pool.available_memory == pool.total
    acc.close()


def test_a_batch_grows_through_the_classes_and_keeps_every_record_in_order():
    acc, pool = make(batch_size=64 * 1024, memory=1 << 20)
    cluster = Cluster([0])
    values = [bytes([i % 251]) * 1000 for i in range(60)]        # ~61 KB: 4 -> 8 -> ... -> 64 KiB
    for i, v in enumerate(values):
        acc.append("t", 0, TS0 + i, b"k%d" % i, v, None, None, 0, 0)
    [batch] = acc.queued("t", 0)
    assert batch.record_count == 60 and batch.builder.capacity == 64 * 1024
    assert pool.held_bytes == 64 * 1024
    assert pool.free_bytes == 0                                   # the buffers it outgrew: freed
    [b] = acc.drain(cluster, [1], 1 << 30, 0)[1]
    b.builder.stamp(-1, -1, -1)
    assert bytes(b.builder.buffer()) == ref.encode_batch(
        [(TS0 + i, b"k%d" % i, v, None) for i, v in enumerate(values)])
    b.complete(0, -1, None)
    acc.deallocate(b)
    acc.close()


def test_a_batch_the_pool_cannot_grow_at_once_is_full_and_the_next_record_starts_a_batch():
    """Growth never waits: without the bytes free at once the batch is closed for appends (so it
    is sendable at once) and the record goes into a new batch, which waits for memory like any new
    batch (max_block_ms); the full batch's records are untouched."""
    acc, pool = make(batch_size=64 * 1024, memory=12 * 1024)
    cluster = Cluster([0, 1])
    for i in range(3):                                           # 3 x ~1 KB: one 4 KiB buffer
        acc.append("t", 0, TS0, None, b"a" * 1000, None, None, 0, 0)
    acc.append("t", 1, TS0, None, b"b" * 6000, None, None, 0, 0)  # an 8 KiB buffer: pool full
    assert pool.available_memory == 0
    with pytest.raises(BufferExhaustedError):
        acc.append("t", 0, TS0, None, b"c" * 1000, None, None, 0, 0)
    [full] = acc.queued("t", 0)
    assert full.record_count == 3 and full.is_full and full.builder.capacity == 4096
    assert drain_and_free(acc, cluster) == 4                     # memory back: 12 KiB free
    acc.append("t", 0, TS0, None, b"c" * 1000, None, None, 0, 0)
    [b] = acc.queued("t", 0)
    assert b.record_count == 1
    assert drain_and_free(acc, cluster) == 1
    acc.close()
