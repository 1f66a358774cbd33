# cython: language_level=3
"""The one router: the partition of every record of ``send()``, ``produce()`` and ``send_batch()``
(lists and Arrow), and the one maker of :class:`~fastkafka.errors.UnknownPartitionError`.
Contract in router.pxd; the rules in docs/internals.md, "The router"."""
import array
import operator
from collections.abc import Mapping, Set as AbstractSet

cimport cython
from cpython.buffer cimport PyBuffer_Release
from cpython.long cimport PyLong_AsLongLongAndOverflow
from libc.stdint cimport int32_t, int64_t
from posix.time cimport CLOCK_MONOTONIC

from fastkafka._net.cells cimport VersionCell
from fastkafka._net.clock cimport clock_ms
from fastkafka._producer.columns cimport is_arrow, pyarrow_module
from fastkafka._producer.partitioner cimport part_kind
from fastkafka._wire.records cimport get_view

from fastkafka._producer.partitioner import partitions_for_keys
from fastkafka._producer.partitioner import StickyPartitioner
from fastkafka.errors import (InvalidRecordError, KafkaTimeoutError, MalformedRecordError,
                              UnknownPartitionError)

# The sticky choices of routers with no accumulator of their own (Router._sticky_partition).
_OWN_STICKY = StickyPartitioner()

#: The highest partition number Kafka can have (an int32 on the wire).
MAX_PARTITION = MAX_PARTITION_C

#: refuse_partition's reasons, for :func:`unknown_partition` from Python.
NO_SUCH = NO_SUCH_PARTITION
OUTSIDE_INT32 = CANNOT_EXIST
IO_THREAD = ON_IO_THREAD
PARTITIONER = BAD_PARTITIONER
NO_AVAILABLE = NONE_AVAILABLE


def unknown_partition(int why, topic, partition, int64_t n=-1, Py_ssize_t index=-1):
    """unknown_partition(why, topic, partition, n=-1, index=-1) -> UnknownPartitionError

    The error for a partition the router refuses, with its message: ``why`` one of NO_SUCH,
    OUTSIDE_INT32, IO_THREAD, PARTITIONER, NO_AVAILABLE; ``n`` the topic's partition count;
    ``index`` the record's index in a send_batch call (-1: a single record)."""
    what = f"partition {partition}" if index < 0 else f"partition[{index}] = {partition}"
    if why == CANNOT_EXIST:
        msg = (f"{what} of topic {topic!r} cannot exist: Kafka numbers partitions 0 to "
               f"{MAX_PARTITION}")
    elif why == ON_IO_THREAD:
        msg = (f"{what} of topic {topic!r} does not exist (the topic has {n} partitions as far as "
               f"the producer knows; new metadata was requested, but this call was made on the "
               f"producer's I/O thread, e.g. in a delivery callback, which does not wait for it)")
    elif why == BAD_PARTITIONER:
        msg = f"partitioner returned {partition!r} for topic {topic!r} with {n} partitions"
    elif why == NONE_AVAILABLE:
        msg = f"no available partitions known for the sticky partitioning of topic {topic!r}"
    else:
        msg = f"{what} of topic {topic!r} does not exist (the topic has {n} partitions)"
    return UnknownPartitionError(msg)


cdef int refuse_partition(int why, object topic, object partition, int64_t n,
                          Py_ssize_t index) except -1:
    raise unknown_partition(why, topic, partition, n, index)


cdef int64_t explicit_partition(object topic, object partition) except -1:
    cdef int overflow = 0
    cdef long long p
    if isinstance(partition, bool) or not isinstance(partition, int):
        raise InvalidRecordError(f"partition must be an int or None, got {type(partition).__name__}")
    p = PyLong_AsLongLongAndOverflow(partition, &overflow)
    if overflow or p < 0 or p > MAX_PARTITION_C:
        refuse_partition(CANNOT_EXIST, topic, partition, -1, -1)  # no topic has it: no wait
    return p


def check_column(list column, str name):
    """check_column(column, name): raise what send() raises for the first entry of a list of
    keys or values that is not bytes-like, str or None, naming it ``name[index]``; the error path of
    callers that read the list elsewhere first."""
    cdef Py_buffer view
    cdef const char *p
    cdef Py_ssize_t i, n
    for i in range(len(column)):
        x = column[i]
        if x is None or type(x) is bytes:
            continue
        if get_view(x, f"{name}[{i}]", &view, &p, &n):
            PyBuffer_Release(&view)


cdef object _partition_column(object partition):
    """A per-record ``partition`` of send_batch: a list, a pyarrow array or an array.array as given,
    any other iterable read once into a list; InvalidRecordError for what is not one."""
    if type(partition) is list or is_arrow(partition) or isinstance(partition, array.array):
        return partition
    what = ("partition must be None, an int, or one int/None per record (a list or other iterable, "
            f"or a pyarrow integer array), got {type(partition).__name__}")
    if isinstance(partition, (float, str, bytes, bytearray, memoryview, Mapping, AbstractSet)):
        raise InvalidRecordError(what)
    try:
        it = iter(partition)
    except TypeError:
        raise InvalidRecordError(what) from None
    return list(it)


# What Router._last_topic holds when no topic's entry is in _last_info.
cdef object _NO_TOPIC = object()


@cython.final
cdef class TopicRoute:
    """One topic's entry in the router's cache (fields in router.pxd)."""


cdef class Router:
    """The partition rules, one place for ``send``, ``produce`` and ``send_batch``.

    Base class of :class:`fastkafka._producer.sendpath.ProducerCore` (so of
    :class:`fastkafka.Producer`); a subclass calls :meth:`_init_router` and provides the hooks
    ``_topic_info`` (the metadata wait), ``_sticky_partition`` and, to fake time, ``_now_ms``."""

    def _init_router(self, VersionCell metadata_version not None, partitioner, int64_t max_block_ms):
        self._meta_version = metadata_version
        self._part_kind = part_kind(partitioner)
        self._partitioner = partitioner
        self._max_block_ms = max_block_ms
        self._topics = {}
        self._last_topic = _NO_TOPIC        # no record yet: topic_c's fast path matches nothing
        self._last_info = None

    # -- hooks ---------------------------------------------------------------------------------
    cpdef tuple _topic_info(self, object topic, object partition, int64_t max_wait_ms):
        """(metadata version, partition count, available partitions) of ``topic``, waiting up to
        ``max_wait_ms`` for its metadata. A router alone has no metadata: it knows no topic
        (fastkafka.Producer answers from its cluster metadata)."""
        raise KafkaTimeoutError(f"topic {topic!r} not present in metadata: this router has no "
                                f"metadata source")

    cpdef int32_t _sticky_partition(self, str topic, list available) except -2:
        """The topic's sticky partition now: the router's own sticky choice among ``available``
        (fastkafka.Producer uses its accumulator's, which moves when a batch fills)."""
        return _OWN_STICKY.partition(topic, available)

    cpdef int64_t _now_ms(self) except? -1:
        """The monotonic clock in ms (the producer's one clock)."""
        return clock_ms(CLOCK_MONOTONIC)

    # -- rare paths ----------------------------------------------------------------------------
    cdef TopicRoute _refresh_c(self, object topic, object partition, int64_t *max_block):
        """The topic's metadata (waiting up to max_block_ms for it) into the cache; ``max_block``
        gets what is left of max_block_ms."""
        cdef TopicRoute info = TopicRoute.__new__(TopicRoute)
        cdef int64_t start = self._now_ms(), left
        version, n, available = self._topic_info(topic, partition, self._max_block_ms)
        left = self._max_block_ms - (self._now_ms() - start)
        max_block[0] = left if left > 0 else 0
        info.version = version
        info.partitions = n
        info.available = available
        self._topics[topic] = info
        return info

    cdef int32_t _topic_slow_c(self, object topic, int64_t partition, object partition_obj,
                               int64_t *max_block) except -1:
        """topic_c past its fast path: another topic than the last record's (a dict lookup), or
        its entry stale or short of ``partition`` (a refresh, which may wait)."""
        cdef TopicRoute info = self._topics.get(topic)
        if info is None or info.version != self._meta_version.value or partition >= info.partitions:
            info = self._refresh_c(topic, partition_obj, max_block)
        else:
            max_block[0] = self._max_block_ms
        # _last_topic matches no topic while the pair changes (dropping the old topic may run code)
        self._last_topic = _NO_TOPIC
        self._last_info = info
        self._last_topic = topic
        return info.partitions

    cdef int32_t _call_partitioner_c(self, object topic, object key, TopicRoute info) except -2:
        cdef int32_t n = info.partitions          # ``info`` may be replaced while the callable runs
        cdef object result = self._partitioner(key, n, info.available)
        if isinstance(result, bool) or not isinstance(result, int) or not 0 <= result < n:
            refuse_partition(BAD_PARTITIONER, topic, result, n, -1)
        return <int32_t>result

    def _route_batch(self, topic, partition, keys, Py_ssize_t n_records):
        """_route_batch(topic, partition, keys, n_records) -> (partitions, available, max_block_ms)

        send_batch's placement: ``partitions`` for ``RecordAccumulator.append_batch`` (one int,
        -1 for the sticky partition, or one int32 per record), the topic's available partitions,
        and what is left of max_block_ms after waiting for metadata. ``partition``: None, an int,
        or one int/None per record (list, iterable, array.array, pyarrow integer array); a None
        entry is placed as ``partition=None`` places a record."""
        cdef int64_t max_block, p = -1
        cdef bint per_record = partition is not None and not isinstance(partition, int)
        cdef TopicRoute info
        if per_record:
            partition = _partition_column(partition)
        elif isinstance(partition, bool):
            raise InvalidRecordError("partition must be None, an int, or one int/None per record, "
                                     "got bool")
        elif partition is not None:
            p = explicit_partition(topic, partition)
        self.topic_c(topic, p, partition if p >= 0 else None, &max_block)
        info = self._last_info
        if per_record:
            parts = self._record_partitions(topic, partition, keys, n_records, info)
        elif p >= 0:
            if p >= info.partitions:
                refuse_partition(NO_SUCH_PARTITION, topic, partition, info.partitions, -1)
            parts = <int32_t>p
        else:
            parts = self._default_partitions(topic, keys, n_records, info, False)
        return parts, info.available, max_block

    cdef object _record_partitions(self, object topic, object partition, object keys,
                                   Py_ssize_t n_records, TopicRoute info):
        """One int32 partition per record from a per-record ``partition`` column: nulls placed as
        ``partition=None`` places them; the first value outside the topic refused, by index."""
        cdef int32_t n = info.partitions
        cdef Py_ssize_t i
        cdef list parts
        if len(partition) != n_records:
            raise MalformedRecordError(
                f"partition has {len(partition)} entries but values has {n_records}: expected one "
                f"partition (int or None) per value")
        if is_arrow(partition):
            pa = pyarrow_module()
            import pyarrow.compute as pc
            if isinstance(partition, pa.ChunkedArray):
                partition = partition.combine_chunks()
            if not pa.types.is_integer(partition.type):
                raise InvalidRecordError(f"partition must be an integer array, got {partition.type}")
            if partition.null_count:
                fill = self._default_partitions(topic, keys, n_records, info, True)
                partition = pc.if_else(pc.is_valid(partition), partition.cast(pa.int64()),
                                       pa.array(fill, pa.int64()))
            bad = pc.or_(pc.less(partition, 0), pc.greater_equal(partition, n))
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                refuse_partition(NO_SUCH_PARTITION, topic, partition[i].as_py(), n, i)
            return partition.cast(pa.int32())
        parts = list(partition)
        if any(p is None for p in parts):
            fill = self._default_partitions(topic, keys, n_records, info, True)
            parts = [fill[i] if p is None else p for i, p in enumerate(parts)]
        for i in range(len(parts)):
            p = parts[i]
            if type(p) is not int:
                try:
                    if isinstance(p, bool):
                        raise TypeError
                    parts[i] = p = operator.index(p)  # numpy integers, ...
                except TypeError:
                    raise InvalidRecordError(
                        f"partition[{i}] must be an int or None, got {type(p).__name__}") from None
            if not 0 <= p < n:
                refuse_partition(NO_SUCH_PARTITION, topic, p, n, i)
        return array.array("i", parts)

    cdef object _default_partitions(self, object topic, object keys, Py_ssize_t n_records,
                                    TopicRoute info, bint concrete):
        """What ``partition=None`` picks for a send_batch call: the user partitioner's choices,
        or the hash of each key (where the partitioner gives a null key the sticky partition, the
        sticky partition of the moment); when no record has a key, the partition of a null key:
        -1 (the accumulator spreads the batches over sticky partitions), or with ``concrete`` the
        sticky partition for every record; ``consistent`` and ``fnv1a`` hash a null key."""
        cdef Py_ssize_t i
        cdef int32_t p
        if self._part_kind == PART_CALLABLE:
            key_list = keys if isinstance(keys, list) or keys is None else keys.to_pylist()
            return [self._call_partitioner_c(topic, None if key_list is None else key_list[i], info)
                    for i in range(n_records)]
        if keys is not None and self._part_kind != PART_RANDOM:
            try:
                return partitions_for_keys(keys, info.partitions,
                                           self._sticky_partition(topic, info.available),
                                           self._partitioner)
            except (TypeError, ValueError, BufferError):
                if type(keys) is list:
                    check_column(keys, "keys")  # raises the typed error naming the index
                raise
        p = key_partition_c(self._part_kind, NULL, -1, info.partitions)    # a null key
        if p >= 0:
            return array.array("i", [p]) * n_records if concrete else p
        if concrete:
            return array.array("i", [self._sticky_partition(topic, info.available)]) * n_records
        return -1
