"""The router (fastkafka._producer.router): the partition of every record of send(), produce() and
send_batch() (lists and Arrow), driven by a fake cluster (its metadata answers and updates) and a
fake clock, with no producer, accumulator or broker."""
from __future__ import annotations

import array
import time

import pyarrow as pa
import pytest
from test_partitioner import JAVA_VECTORS, ref_murmur2, ref_partition

from fastkafka import Producer
from fastkafka._net.cells import VersionCell
from fastkafka._producer.partitioner import PARTITIONERS, StickyPartitioner
from fastkafka._producer.router import (IO_THREAD, MAX_PARTITION, NO_AVAILABLE, NO_SUCH, OUTSIDE_INT32,
                                        PARTITIONER, Router, unknown_partition)
from fastkafka._producer.testing import route
from fastkafka.errors import (InvalidRecordError, KafkaTimeoutError, MalformedRecordError,
                              UnknownPartitionError)


class FakeCluster(Router):
    """A router whose metadata is a dict topic -> partition count, updated at scheduled times of a
    fake clock. Its metadata wait (the hook the producer implements with its Metadata) waits as
    the producer's does: for the topic, or, for a partition past the count, for one update; never
    past ``max_wait_ms``. Every call of the hook is recorded with the time it was made."""

    def __init__(self, topics=None, partitioner="murmur2", max_block_ms=1000, updates=(),
                 unavailable=()):
        self.version = VersionCell()          # the metadata's version, as Metadata keeps it
        self._init_router(self.version, partitioner, max_block_ms)
        self.topics = dict(topics or {})
        self.updates = sorted(updates, key=lambda u: u[0])   # (at_ms, {topic: partitions})
        self.unavailable = set(unavailable)                  # partitions without a leader
        self.now = 50_000
        self.asked = []
        self.sticky = StickyPartitioner(seed=7)
        self.sticky_asked = []

    def _now_ms(self):
        return self.now

    def _sticky_partition(self, topic, available):
        self.sticky_asked.append((topic, list(available)))
        return self.sticky.partition(topic, available)

    def update(self, topics):
        """A metadata update: new counts, and the version every cache entry is checked against."""
        self.topics.update(topics)
        self.version.value += 1

    def _next_update(self, deadline):
        if self.updates and self.updates[0][0] <= deadline:
            at, topics = self.updates.pop(0)
            self.now = max(self.now, at)
            self.update(topics)
            return True
        self.now = deadline
        return False

    def _topic_info(self, topic, partition, max_wait_ms):
        self.asked.append((topic, partition, max_wait_ms, self.now))
        deadline = self.now + max_wait_ms
        n = self.topics.get(topic, 0)
        if n == 0 or (partition is not None and partition >= n):
            while True:
                if not self._next_update(deadline):
                    raise KafkaTimeoutError(
                        f"topic {topic!r} not present in metadata after {max_wait_ms} ms")
                n = self.topics.get(topic, 0)
                if n > 0:
                    break
        available = [p for p in range(n) if p not in self.unavailable]
        return self.version.value, n, available


make = FakeCluster


def as_list(parts) -> list:
    """send_batch's per-record partitions (array.array, or an Arrow int32 array) as a list."""
    return parts.to_pylist() if isinstance(parts, pa.Array) else list(parts)


def expected_partition(key: bytes, n: int) -> int:
    return (ref_murmur2(key) & 0x7FFFFFFF) % n


KEYS = [b"k%05d" % i for i in range(300)] + [bytes([i]) * (i % 9) for i in range(1, 40)] + [b""]


# ---- explicit partitions ---------------------------------------------------------------------------

def test_explicit_partition_in_range_is_kept():
    r = make({"t": 4})
    assert [route(r, "t", partition=p)[0] for p in range(4)] == [0, 1, 2, 3]
    assert route(r, "t", key=b"ignored", partition=2)[0] == 2
    assert len(r.asked) == 1          # the topic's metadata read once, then cached


def test_explicit_partition_past_the_topic_waits_for_one_update_then_is_refused():
    r = make({"t": 4}, updates=[(50_200, {"t": 4})])
    route(r, "t")
    with pytest.raises(UnknownPartitionError) as ei:
        route(r, "t", partition=4)
    assert str(ei.value).endswith("partition 4 of topic 't' does not exist (the topic has 4 partitions)")
    assert r.asked[-1] == ("t", 4, 1000, 50_000)   # asked to wait for newer metadata first
    assert r.now == 50_200


def test_explicit_partition_past_the_topic_is_placed_when_the_update_adds_it():
    r = make({"t": 4}, updates=[(50_300, {"t": 8})])
    route(r, "t")
    assert route(r, "t", partition=6) == (6, 700)   # 300 ms of the 1000 spent waiting


@pytest.mark.parametrize("partition", [-1, -2**40, MAX_PARTITION + 1, 2**40, 2**70])
def test_a_partition_outside_int32_is_refused_without_asking_for_metadata(partition):
    for call in (lambda r: route(r, "t", partition=partition),
                 lambda r: r._route_batch("t", partition, None, 1)):
        r = make({})          # the topic is unknown: asking would wait for max_block_ms
        with pytest.raises(UnknownPartitionError) as ei:
            call(r)
        assert str(ei.value).endswith(f"partition {partition} of topic 't' cannot exist: Kafka "
                                      f"numbers partitions 0 to 2147483647")
        assert r.asked == [] and r.now == 50_000


def test_partition_max_int32_is_a_possible_partition():
    r = make({"t": 3}, updates=[(50_100, {"t": 3})])
    with pytest.raises(UnknownPartitionError, match="does not exist"):
        route(r, "t", partition=MAX_PARTITION)


@pytest.mark.parametrize("bad", ["1", 1.0, True, b"\x01"])
def test_a_partition_that_is_not_an_int_is_an_invalid_record(bad):
    r = make({"t": 3})
    with pytest.raises(InvalidRecordError, match="partition must be an int or None"):
        route(r, "t", partition=bad)
    assert r.asked == []


# ---- keyed records: murmur2, as the Java client ---------------------------------------------------

@pytest.mark.parametrize("n", [1, 3, 6, 100, 1000])
def test_keyed_records_go_where_murmur2_puts_them(n):
    r = make({"t": n})
    assert [route(r, "t", key=k)[0] for k in KEYS] == [expected_partition(k, n) for k in KEYS]


def test_keyed_placement_matches_the_java_clients_murmur2():
    r = make({"t": 7})
    for key, java_hash in JAVA_VECTORS:
        assert route(r, "t", key=key)[0] == (java_hash & 0x7FFFFFFF) % 7


def test_a_key_of_any_buffer_type_places_as_its_bytes():
    r = make({"t": 12})
    for k in KEYS[:50]:
        assert route(r, "t", key=bytearray(k))[0] == route(r, "t", key=memoryview(k))[0] \
            == expected_partition(k, 12)


# ---- null keys: sticky ----------------------------------------------------------------------------

def test_null_keys_go_to_the_sticky_partition():
    r = make({"t": 6})
    assert route(r, "t")[0] == -1             # -1: the accumulator's sticky partition
    assert route(r, "t", key=None)[0] == -1
    r = make({"t": 6}, partitioner="random")
    assert [route(r, "t", key=k)[0] for k in KEYS[:20]] == [-1] * 20


def test_send_batch_without_keys_is_sticky_and_spreads_batches_over_available_partitions():
    r = make({"t": 6}, unavailable={1, 4})
    parts, available, max_block = r._route_batch("t", None, None, 10)
    assert parts == -1 and available == [0, 2, 3, 5] and max_block == 1000
    parts, _, _ = r._route_batch("t", None, [None] * 10, 10)
    # keyed records with null keys: the sticky partition of the available ones, for each
    assert set(parts) == {r.sticky.current("t")} and r.sticky.current("t") in (0, 2, 3, 5)
    assert r.sticky_asked == [("t", [0, 2, 3, 5])]


def test_send_batch_null_partitions_without_keys_take_the_sticky_partition():
    for partitioner, keys in (("murmur2", None), ("random", [b"a", b"b", b"c"])):
        r = make({"t": 6}, partitioner=partitioner, unavailable={0, 5})
        parts, _, _ = r._route_batch("t", [None, 2, None], keys, 3)
        sticky = r.sticky.current("t")
        assert sticky in (1, 2, 3, 4) and list(parts) == [sticky, 2, sticky]
        assert r.sticky_asked == [("t", [1, 2, 3, 4])]


# ---- librdkafka's partitioner names ----------------------------------------------------------------

@pytest.mark.parametrize("name", list(PARTITIONERS))
def test_every_partitioner_name_places_send_and_send_batch_alike(name):
    n = 11
    r = make({"t": n}, partitioner=name)
    keys = KEYS + [None, b"x", None, b""]
    r.sticky.partition("t", list(range(n)))
    sticky = r.sticky.current("t")
    one_by_one = [route(r, "t", key=k)[0] for k in keys]
    expected = [ref_partition(name, k, n) for k in keys]
    assert one_by_one == [-1 if p is None else p for p in expected]
    want = [sticky if p is None else p for p in expected]   # a batch's sticky keys: the one now
    for column in (keys, pa.array(keys, pa.binary()), pa.array(keys, pa.large_binary()),
                   pa.chunked_array([keys[:100], keys[100:]], pa.binary())):
        parts, _, _ = r._route_batch("t", None, column, len(keys))
        if name == "random":
            assert parts == -1
        else:
            assert list(parts) == want, type(column)


def test_consistent_and_fnv1a_hash_null_keys_in_send_batch_too():
    # librdkafka's consistent and fnv1a place a null key on one fixed partition, not the sticky one
    for name, fixed in (("consistent", 0), ("fnv1a", 0x7EE3623B % 6)):
        r = make({"t": 6}, partitioner=name)
        assert route(r, "t")[0] == fixed
        assert r._route_batch("t", None, None, 10)[0] == fixed
        assert list(r._route_batch("t", None, [None] * 3, 3)[0]) == [fixed] * 3
        assert list(r._route_batch("t", [None, 2, None], None, 3)[0]) == [fixed, 2, fixed]
    for name in ("consistent_random", "murmur2_random", "fnv1a_random"):
        r = make({"t": 6}, partitioner=name)
        assert r._route_batch("t", None, None, 10)[0] == -1
        parts, _, _ = r._route_batch("t", [None, 2, None], None, 3)
        assert list(parts) == [r.sticky.current("t"), 2, r.sticky.current("t")]


def test_an_unknown_partitioner_name_is_refused():
    with pytest.raises(ValueError, match="partitioner must be one of 'murmur2'"):
        make({"t": 6}, partitioner="Consistent")


# ---- a user partitioner ---------------------------------------------------------------------------

def test_a_partitioner_callable_gets_key_count_and_available_partitions():
    seen = []

    def partitioner(key, n, available):
        seen.append((key, n, list(available)))
        return len(key or b"") % n

    r = make({"t": 5}, partitioner=partitioner, unavailable={0})
    assert route(r, "t", key=b"abcdefg")[0] == 2
    assert route(r, "t")[0] == 0
    assert seen == [(b"abcdefg", 5, [1, 2, 3, 4]), (None, 5, [1, 2, 3, 4])]
    keys = [b"a", None, b"abc"]
    seen.clear()
    assert list(r._route_batch("t", None, keys, 3)[0]) == [1, 0, 3]
    assert list(r._route_batch("t", None, pa.array(keys, pa.binary()), 3)[0]) == [1, 0, 3]
    assert [k for k, _, _ in seen] == keys + keys


@pytest.mark.parametrize("answer", [5, -1, True, "1", None, 1.0])
def test_a_partitioner_answer_outside_the_topic_is_refused(answer):
    r = make({"t": 5}, partitioner=lambda key, n, available: answer)
    message = f"partitioner returned {answer!r} for topic 't' with 5 partitions"
    with pytest.raises(UnknownPartitionError) as ei:
        route(r, "t", key=b"k")
    assert str(ei.value).endswith(message)
    with pytest.raises(UnknownPartitionError) as ei:
        r._route_batch("t", None, [b"k"], 1)
    assert str(ei.value).endswith(message)


# ---- unknown topics, the metadata wait and the clock ------------------------------------------------

def test_an_unknown_topic_waits_for_metadata_and_the_wait_counts_against_max_block_ms():
    r = make({}, max_block_ms=1000, updates=[(50_400, {"t": 3})])
    p, max_block = route(r, "t", key=b"x")
    assert p == expected_partition(b"x", 3)
    assert r.asked == [("t", None, 1000, 50_000)]
    assert max_block == 600                      # left for the append (buffer memory)
    assert route(r, "t", key=b"x") == (p, 1000)  # cached: no wait, the whole max_block_ms


def test_an_unknown_topic_fails_after_max_block_ms_and_not_later():
    r = make({}, max_block_ms=1500, updates=[(51_600, {"t": 3})])
    with pytest.raises(KafkaTimeoutError, match="after 1500 ms"):
        route(r, "t")
    assert r.now == 51_500
    r = make({}, max_block_ms=1500, updates=[(51_600, {"t": 3})])
    with pytest.raises(KafkaTimeoutError):
        r._route_batch("t", None, None, 1)
    assert r.now == 51_500


def test_a_wait_longer_than_max_block_leaves_nothing_for_the_append():
    class Slow(FakeCluster):
        def _topic_info(self, topic, partition, max_wait_ms):
            self.now += max_wait_ms + 250         # a wait that overran its bound
            return super()._topic_info(topic, partition, max_wait_ms)

    r = Slow({"t": 2}, max_block_ms=800)
    assert route(r, "t")[1] == 0


def test_new_metadata_is_read_again_and_a_grown_topic_places_keys_over_all_its_partitions():
    r = make({"t": 3})
    before = [route(r, "t", key=k)[0] for k in KEYS]
    r.update({"t": 12})
    after = [route(r, "t", key=k)[0] for k in KEYS]
    assert len(r.asked) == 2
    assert before == [expected_partition(k, 3) for k in KEYS]
    assert after == [expected_partition(k, 12) for k in KEYS]


def test_topics_are_cached_each_on_its_own():
    r = make({"a": 2, "b": 9})
    for _ in range(3):
        assert route(r, "a", key=b"foobar")[0] == expected_partition(b"foobar", 2)
        assert route(r, "b", key=b"foobar")[0] == expected_partition(b"foobar", 9)
    assert [a[0] for a in r.asked] == ["a", "b"]


def test_a_producer_without_a_broker_gives_up_on_an_unknown_topic_after_max_block_ms():
    """The producer's own metadata wait (real clock): bounded by max_block_ms for send() and
    send_batch() alike."""
    p = Producer(bootstrap_servers="127.0.0.1:1", max_block_ms=400, reconnect_backoff_ms=50)
    try:
        for call in (lambda: p.send("t", b"v"), lambda: p.send_batch("t", [b"v"], keys=[b"k"])):
            start = time.monotonic()
            with pytest.raises(KafkaTimeoutError, match="not present in metadata after 400 ms"):
                call()
            assert 0.39 <= time.monotonic() - start < 2.0
    finally:
        p.close(1)


# ---- send_batch: lists and Arrow place as send() does ------------------------------------------------

@pytest.mark.parametrize("n", [1, 6, 300])
def test_send_batch_places_keys_exactly_as_send(n):
    r = make({"t": n})
    keys = KEYS + [None, b"x", None]
    r.sticky.partition("t", list(range(n)))
    sticky = r.sticky.current("t")
    one_by_one = [route(r, "t", key=k)[0] for k in keys]
    assert one_by_one == [expected_partition(k, n) if k is not None else -1 for k in keys]
    want = [sticky if p == -1 else p for p in one_by_one]   # a batch's null keys: the sticky one
    for column in (keys, pa.array(keys, pa.binary()), pa.array(keys, pa.large_binary()),
                   pa.array([b"z"] + keys, pa.binary()).slice(1), pa.chunked_array([keys[:100], keys[100:]],
                                                                         pa.binary())):
        parts, _, _ = r._route_batch("t", None, column, len(keys))
        assert list(parts) == want, type(column)


def test_send_batch_of_str_keys_places_them_as_their_utf8():
    r = make({"t": 7})
    keys = ["é", "abc", "ключ"]
    parts, _, _ = r._route_batch("t", None, pa.array(keys, pa.string()), 3)
    assert list(parts) == [route(r, "t", key=k.encode())[0] for k in keys]


def test_send_batch_one_partition_for_every_record():
    r = make({"t": 4}, updates=[(50_100, {"t": 4})])
    assert r._route_batch("t", 3, [b"a", b"b"], 2)[0] == 3
    with pytest.raises(UnknownPartitionError) as ei:
        r._route_batch("t", 4, [b"a"], 1)
    assert str(ei.value).endswith("partition 4 of topic 't' does not exist (the topic has 4 partitions)")
    with pytest.raises(InvalidRecordError, match="got bool"):
        r._route_batch("t", True, [b"a"], 1)


@pytest.mark.parametrize("form", ["list", "tuple", "array", "arrow", "arrow64", "chunked"])
def test_send_batch_one_partition_per_record_nulls_placed_as_send(form):
    r = make({"t": 5})
    keys = [b"k%d" % i for i in range(8)]
    given = [None, 4, None, 0, 1, None, 2, 3]
    col = {"list": given, "tuple": tuple(given), "array": None,
           "arrow": pa.array(given, pa.int32()), "arrow64": pa.array(given, pa.int64()),
           "chunked": pa.chunked_array([given[:3], given[3:]], pa.int16())}[form]
    if form == "array":                        # array.array has no nulls
        given = [0 if p is None else p for p in given]
        col = array.array("q", given)
    parts, _, _ = r._route_batch("t", col, keys, 8)
    assert as_list(parts) == [route(r, "t", key=k, partition=p)[0] for k, p in zip(keys, given)]


@pytest.mark.parametrize("form", ["list", "arrow"])
def test_send_batch_a_per_record_partition_outside_the_topic_is_refused_by_index(form):
    r = make({"t": 3})
    given = [0, 1, 2, 1, 7, -1]
    col = pa.array(given) if form == "arrow" else given
    with pytest.raises(UnknownPartitionError) as ei:
        r._route_batch("t", col, None, 6)
    assert str(ei.value).endswith("partition[4] = 7 of topic 't' does not exist (the topic has 3 partitions)")
    with pytest.raises(UnknownPartitionError, match=r"partition\[0\] = -1 "):
        r._route_batch("t", [-1], None, 1)


def test_send_batch_per_record_column_errors():
    r = make({"t": 3})
    with pytest.raises(MalformedRecordError, match="partition has 2 entries but values has 3"):
        r._route_batch("t", [0, 1], None, 3)
    with pytest.raises(InvalidRecordError, match=r"partition\[1\] must be an int or None, got str"):
        r._route_batch("t", [0, "1"], None, 2)
    with pytest.raises(InvalidRecordError, match=r"partition\[0\] must be an int or None, got bool"):
        r._route_batch("t", [False], None, 1)
    with pytest.raises(InvalidRecordError, match="partition must be an integer array, got double"):
        r._route_batch("t", pa.array([0.0]), None, 1)
    with pytest.raises(InvalidRecordError, match="got str"):
        r._route_batch("t", "012", None, 3)
    with pytest.raises(InvalidRecordError, match="got dict"):
        r._route_batch("t", {0: 1}, None, 1)
    assert list(r._route_batch("t", iter([2, None]), [b"a", b"b"], 2)[0]) == \
        [2, expected_partition(b"b", 3)]


def test_send_batch_bad_keys_are_named_by_index():
    r = make({"t": 3})
    with pytest.raises(InvalidRecordError, match=r"keys\[1\]"):
        r._route_batch("t", None, [b"a", 2.5], 2)
    with pytest.raises(MalformedRecordError, match=r"keys\[1\]: str cannot be encoded"):
        r._route_batch("t", None, [b"a", "\udc80"], 2)


# ---- the one maker of UnknownPartitionError ----------------------------------------------------------

def test_unknown_partition_messages():
    assert str(unknown_partition(NO_SUCH, "t", 5, 3)).endswith(
        "partition 5 of topic 't' does not exist (the topic has 3 partitions)")
    assert str(unknown_partition(NO_SUCH, "t", 5, 3, 2)).endswith(
        "partition[2] = 5 of topic 't' does not exist (the topic has 3 partitions)")
    assert str(unknown_partition(OUTSIDE_INT32, "t", -4)).endswith(
        "partition -4 of topic 't' cannot exist: Kafka numbers partitions 0 to 2147483647")
    assert "on the producer's I/O thread" in str(unknown_partition(IO_THREAD, "t", 5, 3))
    assert "3 partitions as far as the producer knows" in str(unknown_partition(IO_THREAD, "t", 5, 3))
    assert str(unknown_partition(PARTITIONER, "t", "x", 3)).endswith(
        "partitioner returned 'x' for topic 't' with 3 partitions")
    assert "no available partitions" in str(unknown_partition(NO_AVAILABLE, "t", None))
    for why in (NO_SUCH, OUTSIDE_INT32, IO_THREAD, PARTITIONER, NO_AVAILABLE):
        err = unknown_partition(why, "t", 1, 1)
        assert type(err) is UnknownPartitionError and isinstance(err, ValueError)


def test_the_router_is_the_only_maker_of_unknown_partition_error():
    """Outside fastkafka/_producer/router.pyx, the library's own modules make none (the accumulator
    and the producer call the router's); the accumulator's two checks of its own ring and the
    column reader's are the documented exceptions."""
    import pathlib

    import fastkafka
    root = pathlib.Path(fastkafka.__file__).parent
    makers = {}
    for path in sorted(root.rglob("*")):
        if path.suffix in (".py", ".pyx", ".pxi", ".pxd"):
            count = path.read_text().count("UnknownPartitionError(")
            if count and path.name != "errors.py":
                makers[str(path.relative_to(root))] = count
    assert makers.pop("_producer/router.pyx") == 1
    assert makers == {"_producer/accumulator.pyx": 2, "_producer/columns.pyx": 1}


def test_a_router_alone_knows_no_topic_and_keeps_its_own_sticky_choice():
    from fastkafka._producer.router import Router
    from fastkafka.errors import KafkaTimeoutError

    r = Router()
    with pytest.raises(KafkaTimeoutError, match="'t' not present in metadata"):
        r._topic_info("t", None, 0)
    first = r._sticky_partition("t", [3, 4])
    assert first in (3, 4)
    assert r._sticky_partition("t", [3, 4]) == first     # sticky until moved
