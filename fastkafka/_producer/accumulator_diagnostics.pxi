# accumulator_diagnostics.pxi: the live-resource counters the tests' teardown check reads.
# Included by accumulator.pyx; the contract is in accumulator.pxd, the explanation in
# docs/internals.md.

# Live-resource counter (touched with the GIL held): RecordAccumulators alive and not closed. The
# other counters are kept where their resources are made. See live_resources().
cdef int64_t _open_accumulators = 0

#: The counters :func:`live_resources` reports that must come back to where they were once
#: everything a piece of code opened is closed and collected (what the tests' teardown check reads).
LIVE_COUNTERS = ("accumulators_open", "io_threads", "producer_batches", "buffer_pools",
                 "buffer_pool_bytes", "batch_buffers", "batch_buffer_bytes",
                 "buffer_pool_overflow")


def live_resources():
    """live_resources() -> dict[str, int]: the compiled core's live resources in this process.

    * ``accumulators_open``: RecordAccumulators alive and not closed (one per open producer);
    * ``io_threads``: producer I/O threads running (registered with ``register_io_thread``);
    * ``producer_batches``: ProducerBatch objects alive (queued, in flight, or still referenced);
    * ``buffer_pools`` / ``buffer_pool_bytes``: BufferPools alive and the bytes they have handed
      to batches and not had back;
    * ``batch_buffers`` / ``batch_buffer_bytes``: batch buffers owned by live BatchBuilders (from
      a pool or not);
    * ``buffer_pool_overflow``: bytes of free batch buffers a pool keeps beyond its
      ``buffer_memory`` (always 0: the bytes held by live builders plus the free buffers never
      exceed it; ``pool_counters()`` has the free buffers themselves).

    Each comes back to its earlier value once everything opened in between is closed and garbage
    collected (the tests check this after every test: ``tests/live_resources.py``).

    >>> sorted(live_resources()) == sorted(LIVE_COUNTERS)
    True
    """
    cdef dict pools = pool_counters()
    cdef dict bufs = buffer_counters()
    cdef dict batches = batch_counters()
    return {
        "accumulators_open": _open_accumulators,
        "io_threads": batches["io_threads"],
        "producer_batches": batches["producer_batches"],
        "buffer_pools": pools["buffer_pools"],
        "buffer_pool_bytes": pools["buffer_pool_bytes"],
        "batch_buffers": bufs["batch_buffers"],
        "batch_buffer_bytes": bufs["batch_buffer_bytes"],
        "buffer_pool_overflow": pools["buffer_pool_overflow"],
    }
