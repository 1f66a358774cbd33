"""Fault-path tests of fastkafka.Producer against the in-process fault-injecting broker.

Every test checks what the broker stored (record count, each value exactly once, per-partition order,
CRCs via kafka-python's decoder) against what the futures reported. Timeouts are short; the only timing
assertions are generous "does not hang" bounds.
"""
from __future__ import annotations

import logging
import time

import pytest
from kafka.record.default_records import DefaultRecordBatch

from faultbroker import (Cluster, FaultBroker, delay, disconnect_before_response, disconnect_mid_response,
                         no_response, oversized_size_prefix, parse_batches, partition_error, rewrite_response,
                         slow_read, split_frames, wrong_correlation_id)
from fastkafka import Producer
from fastkafka.errors import (BufferExhaustedError, CorrelationIdMismatchError, CorruptFrameError,
                              DeliveryTimeoutError, InvalidRecordError, KafkaTimeoutError,
                              ProducerClosedError, RecordTooLargeError, RequestTimedOutError,
                              UnknownPartitionError, error_for_code)
from fastkafka.protocol import ApiKey
from nodefaults import produce_in_flight

pytestmark = pytest.mark.faultbroker

UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
MESSAGE_TOO_LARGE = 10
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46

FAST = dict(request_timeout_ms=2000, delivery_timeout_ms=15000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=5000)


# ------------------------------------------------------------------------------------- fixtures
@pytest.fixture
def fastkafka_debug(caplog):
    caplog.set_level(logging.DEBUG, logger="fastkafka")
    return caplog


# -------------------------------------------------------------------------------------- helpers
def stored(cluster, topic, partition):
    """[(offset, key, value)] of what the broker stored, CRC-checked, in offset order."""
    out = []
    for sb in cluster.batches(topic, partition):
        batch = DefaultRecordBatch(sb.data)
        assert batch.validate_crc(), f"bad CRC in stored batch at {sb.base_offset}"
        out.extend((r.offset, r.key, r.value) for r in batch)
    return out


def stored_values(cluster, topic, partitions):
    return {p: [v for _, _, v in stored(cluster, topic, p)] for p in range(partitions)}


def send_values(p, topic, n, partition=None, prefix=b"v", keyed=False):
    futs = []
    for i in range(n):
        value = b"%s-%05d" % (prefix, i)
        futs.append((value, p.send(topic, value=value, key=value if keyed else None, partition=partition)))
    return futs


def assert_exactly_once(cluster, topic, partitions, futs, timeout=20):
    """Every future succeeded; the broker stored each sent value exactly once, at the offset its
    future reported, and each partition's values in send order."""
    results = {v: f.get(timeout=timeout) for v, f in futs}
    values = stored_values(cluster, topic, partitions)
    flat = [v for vs in values.values() for v in vs]
    assert sorted(flat) == sorted(results), "stored records differ from the records sent"
    assert cluster.record_count(topic) == len(futs)
    for part, vs in values.items():
        assert vs == sorted(vs), f"partition {part} out of order"
    where = {v: (part, off) for part in range(partitions) for off, _, v in stored(cluster, topic, part)}
    for v, md in results.items():
        assert (md.partition, md.offset) == where[v]
    return results


def closed_with(caplog, error_type):
    """The errors NetworkClient closed connections with (from its debug log)."""
    return [r.args[1] for r in caplog.records
            if r.name == "fastkafka" and r.msg.startswith("closed connection to node")
            and isinstance(r.args[1], error_type)]


def produce_base_sequences(req):
    out = {}
    for td in req.body["topic_data"]:
        for pd in td["partition_data"]:
            infos = parse_batches(bytes(pd["records"]) if not isinstance(pd["records"], list)
                                  else b"".join(bytes(x) for x in pd["records"]))
            out[(td["name"], pd["index"])] = [(i.producer_epoch, i.base_sequence) for i in infos]
    return out


# ---------------------------------------------------------------------------- framing faults
def test_split_frames_and_slow_reads_deliver_every_record(fb, make_producer):
    fb.create_topic("t", 3)
    for api in (ApiKey.API_VERSIONS, ApiKey.METADATA, ApiKey.INIT_PRODUCER_ID, ApiKey.PRODUCE):
        fb.script.on(api, split_frames(chunk=1, pause=0), times=None)
    slow = fb.script.on(ApiKey.PRODUCE, slow_read(0.002, chunk=7), times=3)
    p = make_producer(fb)
    futs = send_values(p, "t", 60, keyed=True)
    assert_exactly_once(fb.cluster, "t", 3, futs)
    assert slow.fired >= 1
    # every response was written a byte at a time
    assert all(any(a.kind == "split_frames" for a in r.actions) for r in fb.received(ApiKey.PRODUCE))


@pytest.mark.parametrize("fault", [disconnect_before_response(), disconnect_mid_response(6),
                                   disconnect_mid_response(2)], ids=["before", "mid6", "mid2"])
def test_disconnect_retried_and_deduplicated(fb, make_producer, fault):
    fb.create_topic("t", 2)
    rule = fb.script.on(ApiKey.PRODUCE, fault, times=2)
    p = make_producer(fb)
    futs = send_values(p, "t", 40, keyed=True)
    assert_exactly_once(fb.cluster, "t", 2, futs)
    assert rule.fired == 2
    m = p.metrics()
    assert m["net_disconnects"] >= 2 and m["retries"] >= 1
    # the first attempts were stored, so at least one retry was answered from the duplicate check
    assert len(fb.received(ApiKey.PRODUCE)) >= 3


def test_wrong_correlation_id_closes_and_retries(fb, make_producer, fastkafka_debug):
    fb.create_topic("t", 1)
    rule = fb.script.on(ApiKey.PRODUCE, wrong_correlation_id(), times=1)
    p = make_producer(fb)
    futs = send_values(p, "t", 10)
    assert_exactly_once(fb.cluster, "t", 1, futs)
    assert rule.fired == 1
    assert closed_with(fastkafka_debug, CorrelationIdMismatchError)


@pytest.mark.parametrize("size", [2**31 - 1, -1, -(2**31)], ids=["huge", "minus1", "int32min"])
def test_bad_size_prefix_closes_and_retries(fb, make_producer, fastkafka_debug, size):
    fb.create_topic("t", 1)
    rule = fb.script.on(ApiKey.PRODUCE, oversized_size_prefix(size), times=1)
    p = make_producer(fb)
    futs = send_values(p, "t", 10)
    assert_exactly_once(fb.cluster, "t", 1, futs)
    assert rule.fired == 1
    errs = closed_with(fastkafka_debug, CorruptFrameError)
    assert errs, "the connection was not closed with CorruptFrameError"


# ---------------------------------------------------------------------- per-partition errors
@pytest.mark.parametrize("code", [NOT_LEADER_OR_FOLLOWER, UNKNOWN_TOPIC_OR_PARTITION])
def test_metadata_errors_retried_after_metadata_refresh(fb, make_producer, code):
    fb.create_topic("t", 1)
    p = make_producer(fb)
    p.send("t", b"warm-up").get(10)
    fb.script.on(ApiKey.PRODUCE, partition_error(code), times=2)
    futs = send_values(p, "t", 5)
    for _, f in futs:
        f.get(10)
    log = fb.received()
    produce_idx = [i for i, r in enumerate(log) if r.api_key == ApiKey.PRODUCE]
    failed = [i for i in produce_idx if any(a.kind == "partition_error" for a in log[i].actions)]
    assert len(failed) == 2
    for i in failed:
        nxt = next(j for j in produce_idx if j > i)
        assert any(r.api_key == ApiKey.METADATA for r in log[i + 1:nxt]), \
            f"no Metadata request between the failed Produce and its retry ({code})"
    assert fb.cluster.record_count("t") == 6
    assert p.metrics()["retries"] >= 2


def test_request_timed_out_error_retried(fb, make_producer):
    fb.create_topic("t", 2)
    rule = fb.script.on(ApiKey.PRODUCE, partition_error(REQUEST_TIMED_OUT), times=3)
    p = make_producer(fb)
    futs = send_values(p, "t", 20, keyed=True)
    assert_exactly_once(fb.cluster, "t", 2, futs)
    assert rule.fired == 3
    assert p.metrics()["retries"] >= 3


@pytest.mark.parametrize("code", [REQUEST_TIMED_OUT, NOT_LEADER_OR_FOLLOWER])
def test_retriable_error_with_pipelined_requests_keeps_order(fb, make_producer, code):
    """A retriable error on one request while later batches of the partition are pipelined behind it:
    the broker rejects those with OUT_OF_ORDER_SEQUENCE_NUMBER (an earlier batch is missing), which
    must be retried without an epoch bump; the partition ends up complete and in order."""
    fb.create_topic("t", 1)

    def mid_stream(header, body):
        return any(seq > 0 for seqs in produce_base_sequences_body(body).values() for _, seq in seqs)

    fb.script.on(ApiKey.PRODUCE, partition_error(code), times=1, match=mid_stream)
    fb.script.on(ApiKey.PRODUCE, delay(0.05), times=3, match=mid_stream)  # let requests pile up
    p = make_producer(fb, linger_ms=0, batch_size=256)
    futs = []
    for wave in range(5):
        futs += send_values(p, "t", 40, prefix=b"w%d" % wave)
        time.sleep(0.01)
    assert_exactly_once(fb.cluster, "t", 1, futs)
    answers = [pr["error_code"] for r in fb.received(ApiKey.PRODUCE) if r.response
               for t in r.response["responses"] for pr in t["partition_responses"]]
    assert code in answers and OUT_OF_ORDER_SEQUENCE_NUMBER in answers
    assert p.metrics()["epoch_bumps"] == 0
    assert len(fb.received(ApiKey.INIT_PRODUCER_ID)) == 1


def test_message_too_large_fails_only_that_partition(fb, make_producer):
    fb.create_topic("t", 3)
    # refused every time: the batch is split down to single records, and each of them fails
    refusing = [True]
    fb.script.on(ApiKey.PRODUCE, partition_error(MESSAGE_TOO_LARGE, [1]), times=None,
                 match=lambda header, body: refusing[0])
    p = make_producer(fb, linger_ms=50)
    futs = {part: send_values(p, "t", 5, partition=part, prefix=b"p%d" % part) for part in range(3)}
    too_large = error_for_code(MESSAGE_TOO_LARGE).__class__
    for _, f in futs[1]:
        with pytest.raises(too_large):
            f.get(10)
    for part in (0, 2):
        for v, f in futs[part]:
            assert f.get(10).partition == part
    values = stored_values(fb.cluster, "t", 3)
    assert values[1] == []
    assert values[0] == [v for v, _ in futs[0]] and values[2] == [v for v, _ in futs[2]]
    # the partition keeps working afterwards (its sequence gap is resolved)
    refusing[0] = False
    later = send_values(p, "t", 5, partition=1, prefix=b"later")
    for v, f in later:
        assert f.get(10).partition == 1
    assert stored_values(fb.cluster, "t", 3)[1] == [v for v, _ in later]


def test_duplicate_sequence_number_is_success(make_producer, no_leaks):
    cluster = Cluster(duplicate_mode="error")
    with FaultBroker(cluster) as b:
        b.create_topic("t", 1)
        # the first attempt is stored but its response lost; the retry is answered 46
        b.script.on(ApiKey.PRODUCE, disconnect_before_response(), times=1)
        p = make_producer(b)
        futs = send_values(p, "t", 10)
        for _, f in futs:
            f.get(10)
        assert cluster.record_count("t") == 10
        answers = [pr["error_code"] for r in b.received(ApiKey.PRODUCE) if r.response
                   for t in r.response["responses"] for pr in t["partition_responses"]]
        assert DUPLICATE_SEQUENCE_NUMBER in answers
        assert [v for _, _, v in stored(cluster, "t", 0)] == [v for v, _ in futs]
        p.close(5)


def test_out_of_order_sequence_on_next_batch_bumps_epoch(fb, make_producer):
    fb.create_topic("t", 2)
    fb.script.on(ApiKey.PRODUCE, partition_error(OUT_OF_ORDER_SEQUENCE_NUMBER, [0]), times=1)
    p = make_producer(fb)
    futs = send_values(p, "t", 30, keyed=True)
    assert_exactly_once(fb.cluster, "t", 2, futs)
    inits = fb.received(ApiKey.INIT_PRODUCER_ID)
    assert len(inits) == 2
    first_id = inits[0].response["producer_id"]
    assert inits[1].body["producer_id"] == first_id and inits[1].body["producer_epoch"] == 0
    assert inits[1].api_version >= 3
    m = p.metrics()
    assert m["epoch_bumps"] >= 1 and m["producer_id"] == first_id and m["producer_epoch"] == 1
    # partition 0 was re-written under the new epoch from sequence 0
    b0 = fb.batches("t", 0)
    assert b0[0].producer_epoch == 1 and b0[0].base_sequence == 0


@pytest.mark.parametrize("init_error,new_id", [(15, False), (35, True)], ids=["retriable", "unsupported"])
def test_epoch_bump_with_failing_init_producer_id(fb, make_producer, init_error, new_id):
    """The bump's InitProducerId fails: a retriable error is retried; a non-retriable one falls back
    to a fresh producer id. Either way every record is stored exactly once and nothing hangs."""
    fb.create_topic("t", 2)
    p = make_producer(fb)
    p.send("t", b"warm", partition=1).get(10)
    fb.script.on(ApiKey.PRODUCE, partition_error(OUT_OF_ORDER_SEQUENCE_NUMBER, [0]), times=1)
    fb.script.on(ApiKey.INIT_PRODUCER_ID, partition_error(init_error), times=2)
    futs = send_values(p, "t", 30, keyed=True)
    results = {v: f.get(15) for v, f in futs}
    values = stored_values(fb.cluster, "t", 2)
    assert sorted(v for vs in values.values() for v in vs) == sorted([b"warm", *results])
    inits = fb.received(ApiKey.INIT_PRODUCER_ID)
    first_id = inits[0].response["producer_id"]
    assert inits[1].body["producer_id"] == first_id          # the bump asked with the current id
    if new_id:
        assert p.metrics()["producer_id"] != first_id and inits[-1].body["producer_id"] == -1
    else:
        assert p.metrics()["producer_id"] == first_id and p.metrics()["producer_epoch"] == 1


def test_epoch_bump_keeps_unresolved_batches_of_other_partitions_deduplicated(fb, make_producer):
    """A bump triggered on partition 0 while partition 1 has a batch whose response was lost: that
    batch must be resent under its old epoch/sequence (the broker deduplicates it), not re-stamped as
    a new batch (which the broker would store twice)."""
    fb.create_topic("t", 2)

    def second_batch(header, body):     # sequences 0 (warm-up) and 1-5 (first) come before
        return any(seq >= 6 for seqs in produce_base_sequences_body(body).values() for _, seq in seqs)

    p = make_producer(fb, linger_ms=30)
    # Each partition's first batch acknowledged: the next batches may be pipelined (a partition's
    # first batch of a producer id is sent alone).
    warm = [*send_values(p, "t", 1, partition=0, prefix=b"_0"), *send_values(p, "t", 1, partition=1, prefix=b"_1")]
    for _, f in warm:
        f.get(10)
    fb.script.on(ApiKey.PRODUCE, partition_error(OUT_OF_ORDER_SEQUENCE_NUMBER, [0]), times=1)
    held = fb.script.on(ApiKey.PRODUCE, delay(1.5), times=1)    # under request_timeout_ms (2 s)
    lost = fb.script.on(ApiKey.PRODUCE, disconnect_before_response(), times=1, match=second_batch)
    first = [*send_values(p, "t", 5, partition=0, prefix=b"a0"), *send_values(p, "t", 5, partition=1, prefix=b"a1")]
    deadline = time.monotonic() + 10
    while not held.fired:
        assert time.monotonic() < deadline, "the first request did not reach the broker within 10 s"
        time.sleep(0.005)
    second = [*send_values(p, "t", 5, partition=0, prefix=b"b0"), *send_values(p, "t", 5, partition=1, prefix=b"b1")]
    # The second request pipelined behind the held one (the broker reads it once that is answered).
    deadline = time.monotonic() + 10
    while len(produce_in_flight(p, fb.node_id)) < 2:
        assert not p.metrics()["epoch_bumps"], "the held request was answered before a second one was sent"
        assert time.monotonic() < deadline, "no second Produce request in flight within 10 s"
        time.sleep(0.005)
    third = [*send_values(p, "t", 5, partition=0, prefix=b"c0"), *send_values(p, "t", 5, partition=1, prefix=b"c1")]
    assert_exactly_once(fb.cluster, "t", 2, warm + first + second + third)
    assert p.metrics()["epoch_bumps"] >= 1
    assert lost.fired == 1, "no response of a later batch was lost"


def produce_base_sequences_body(body):
    out = {}
    for td in body["topic_data"]:
        for pd in td["partition_data"]:
            recs = pd["records"]
            raw = b"".join(bytes(x) for x in recs) if isinstance(recs, list) else bytes(recs)
            out[(td["name"], pd["index"])] = [(i.producer_epoch, i.base_sequence) for i in parse_batches(raw)]
    return out


# ------------------------------------------------------------------------------- timeouts
def test_delayed_response_times_out_and_is_retried_once(fb, make_producer, fastkafka_debug):
    fb.create_topic("t", 1)
    rule = fb.script.on(ApiKey.PRODUCE, delay(1.5), times=1)
    p = make_producer(fb, request_timeout_ms=1000, delivery_timeout_ms=10000)
    futs = send_values(p, "t", 10)
    assert_exactly_once(fb.cluster, "t", 1, futs)
    assert rule.fired == 1
    assert p.metrics()["net_timeouts"] >= 1
    assert closed_with(fastkafka_debug, RequestTimedOutError)


def test_delivery_timeout_while_broker_keeps_failing(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, request_timeout_ms=1000, delivery_timeout_ms=1500, linger_ms=0)
    p.send("t", b"ok").get(10)
    fb.script.on(ApiKey.PRODUCE, partition_error(REQUEST_TIMED_OUT), times=None)
    start = time.monotonic()
    futs = send_values(p, "t", 10)
    for _, f in futs:
        with pytest.raises(DeliveryTimeoutError):
            f.get(10)
    assert time.monotonic() - start < 8
    assert fb.cluster.record_count("t") == 1
    fb.script.clear()
    # the producer recovers once the broker does
    assert p.send("t", b"after").get(10).offset == 1


def test_delivery_timeout_when_broker_goes_down(fb, make_producer):
    """The producer itself fails every record with DeliveryTimeoutError once delivery_timeout_ms
    (1.5 s) has passed. get()'s own timeout (a plain KafkaTimeoutError, the base class) is far
    longer, so it cannot stand in for the producer's error."""
    fb.create_topic("t", 1)
    p = make_producer(fb, request_timeout_ms=1000, delivery_timeout_ms=1500, linger_ms=0)
    p.send("t", b"ok").get(10)
    fb.set_down()
    start = time.monotonic()
    futs = send_values(p, "t", 5)
    for _, f in futs:
        with pytest.raises(DeliveryTimeoutError, match="delivery_timeout_ms=1500"):
            f.get(20)
        assert f.done()
    elapsed = time.monotonic() - start
    assert 1.4 <= elapsed < 10, f"records failed after {elapsed:.2f} s, delivery_timeout_ms is 1.5 s"
    assert fb.cluster.record_count("t") == 1
    fb.set_up()
    # the producer recovers once the broker is back
    assert p.send("t", b"after").get(10).offset == 1


# ------------------------------------------------------------------------------- leader move
def test_leader_move_mid_stream_exactly_once_in_order(make_producer, no_leaks):
    cluster = Cluster()
    with FaultBroker(cluster) as b1, FaultBroker(cluster) as b2:
        cluster.create_topic("t", 4)
        p = make_producer(b1, linger_ms=1, batch_size=512)
        futs = []
        for round_ in range(6):
            futs += send_values(p, "t", 100, prefix=b"r%d" % round_, keyed=True)
            if round_ == 2:
                for part in range(4):
                    cluster.set_leader("t", part, b2.node_id if cluster.leader("t", part) == b1.node_id
                                       else b1.node_id)
            time.sleep(0.02)
        results = assert_exactly_once(cluster, "t", 4, futs)
        assert len(results) == 600
        # both brokers appended data, and some requests were answered NOT_LEADER
        assert {sb.node_id for sb in cluster.batches("t")} == {b1.node_id, b2.node_id}
        p.close(5)


# ---------------------------------------------------------------------------- in-flight limit
@pytest.mark.parametrize("max_in_flight", [1, 3])
def test_max_in_flight_respected_at_broker(fb, make_producer, max_in_flight):
    """The broker swallows every Produce response for a while: the client may pipeline at most
    ``max_in_flight`` requests on a connection, then must wait (here: until the request timeout
    closes the connection). Counted at the broker, per connection."""
    fb.create_topic("t", 6)
    p = make_producer(fb, max_in_flight_requests_per_connection=max_in_flight, linger_ms=0,
                      batch_size=256, request_timeout_ms=1000)
    p.send("t", b"warm", partition=0).get(10)
    fb.script.on(ApiKey.PRODUCE, no_response(), times=None)
    futs = send_values(p, "t", 300, keyed=True)
    # Until the request timeout closed the swallowing connection (its requests all sent by then).
    deadline = time.monotonic() + 20
    while p.metrics()["net_timeouts"] == 0:
        assert time.monotonic() < deadline, f"no request timed out: {p.metrics()}"
        time.sleep(0.01)
    fb.script.clear()
    for _, f in futs:
        f.get(20)
    per_conn = {}
    for r in fb.received(ApiKey.PRODUCE):
        if any(a.kind == "no_response" for a in r.actions):
            per_conn[r.conn_id] = per_conn.get(r.conn_id, 0) + 1
    assert per_conn, "no request was swallowed"
    assert max(per_conn.values()) == max_in_flight, per_conn
    values = stored_values(fb.cluster, "t", 6)
    assert sorted(v for vs in values.values() for v in vs) == sorted([b"warm"] + [v for v, _ in futs])


# ------------------------------------------------------------------------------------ acks=0
def test_acks_zero_completes_and_stores(fb, make_producer):
    fb.create_topic("t", 2)
    # a long request timeout: a write-completed request must not wait for the next poll timeout
    p = make_producer(fb, acks=0, request_timeout_ms=20000, delivery_timeout_ms=30000)
    start = time.monotonic()
    futs = send_values(p, "t", 50, keyed=True)
    for _, f in futs:
        md = f.get(10)
        assert md.offset == -1
    assert time.monotonic() - start < 5
    deadline = time.monotonic() + 5
    while fb.cluster.record_count("t") < 50 and time.monotonic() < deadline:
        time.sleep(0.01)
    values = stored_values(fb.cluster, "t", 2)
    assert sorted(v for vs in values.values() for v in vs) == sorted(v for v, _ in futs)
    assert all(r.response is None for r in fb.received(ApiKey.PRODUCE))


# ------------------------------------------------------------------------------- produce()
def test_produce_without_futures_keeps_offsets_and_callbacks(fb, make_producer):
    """produce() queues records with no future; records from send() and produce() interleaved in
    one batch keep their own offsets, and produce()'s on_delivery gets the stored offset."""
    fb.create_topic("t", 2)
    p = make_producer(fb, linger_ms=50)
    futs, reported, order = {}, {}, []
    for i in range(300):
        value = b"m-%04d" % i
        order.append(value)
        if i % 3 == 0:
            futs[value] = p.send("t", value, partition=1)
        elif i % 3 == 1:
            assert p.produce("t", value, partition=1) is None
        else:
            p.produce("t", value, partition=1,
                      on_delivery=lambda err, md, v=value: reported.__setitem__(v, (err, md.offset)))
    assert p.flush(20) == 0
    stored_log = stored(fb.cluster, "t", 1)
    assert [v for _, _, v in stored_log] == order
    where = {v: off for off, _, v in stored_log}
    assert {v: f.get(1).offset for v, f in futs.items()} == {v: where[v] for v in futs}
    assert reported == {v: (None, where[v]) for v in order[2::3]}
    assert p.metrics()["records_sent"] == 300


def test_produce_futures_are_left_out_of_the_garbage_collector(fb, make_producer):
    """produce() keeps a hidden future per record with a callback (in its batch until the answer);
    it is left out of the cyclic garbage collector, which would otherwise count and scan it. send()'s
    futures, which the caller holds, stay in. Every callback still runs once, and nothing stays
    alive after the answers."""
    import gc

    from fastkafka._producer.batch import FutureRecordMetadata

    def tracked_futures():
        return sum(1 for o in gc.get_objects() if type(o) is FutureRecordMetadata)

    fb.create_topic("t", 1)
    p = make_producer(fb, linger_ms=10_000)   # held in their batch until flush()
    first = p.send("t", b"first")
    assert p.flush(5) == 0 and first.get(0).offset == 0
    seen = []
    before = tracked_futures()
    for i in range(200):
        p.produce("t", b"p-%d" % i, on_delivery=lambda err, md: seen.append((err, md.offset)))
    assert tracked_futures() == before
    kept = [p.send("t", b"s-%d" % i) for i in range(50)]
    assert tracked_futures() == before + 50
    assert p.flush(20) == 0
    assert sorted(off for _, off in seen) == list(range(1, 201))
    assert all(err is None for err, _ in seen)
    assert [f.get(1).offset for f in kept] == list(range(201, 251))
    del kept
    assert tracked_futures() == before


def test_produce_rejects_bad_records_like_send(fb, make_producer):
    fb.create_topic("t", 2)
    p = make_producer(fb, max_request_size=10_000)
    bad = [(dict(value=1.5), InvalidRecordError, "value must be bytes-like"),
           (dict(value=b"v", key=7), InvalidRecordError, "key must be bytes-like"),
           (dict(value=b"v", partition=2), UnknownPartitionError, "partition 2 of topic 't'"),
           (dict(value=b"v", partition="0"), InvalidRecordError, "partition must be an int"),
           (dict(value=b"v", headers=[("k", 1)]), InvalidRecordError, "header 0: value"),
           (dict(value=b"v", timestamp=-1), InvalidRecordError, "timestamp_ms must be >= 0"),
           (dict(value=b"x" * 20_000), RecordTooLargeError, r"larger than max_request_size \(10000\)")]
    for kw, error, message in bad:
        with pytest.raises(error, match=message):
            p.produce("t", **kw)
    for topic in ("", None, b"t"):
        with pytest.raises(InvalidRecordError, match="topic"):
            p.produce(topic, b"v")
    p.produce("t", b"ok", partition=0)
    assert p.flush(10) == 0
    assert [v for _, _, v in stored(fb.cluster, "t", 0)] == [b"ok"]
    assert fb.cluster.record_count("t") == 1
    p.close(5)
    with pytest.raises(ProducerClosedError):
        p.produce("t", b"late")


def test_acks_zero_close_waits_for_a_request_answered_after_the_writes(fb, make_producer):
    """With acks=0 nothing confirms the Produce requests, and a broker may drop the ones it has
    not handled when the socket closes (seen on tansu). close() therefore sends an ApiVersions
    request on that connection after them and waits for its answer (brokers answer in order)."""
    fb.create_topic("t", 2)
    p = make_producer(fb, acks=0)
    send_values(p, "t", 50, keyed=True)
    assert p.flush(10) == 0
    rule = fb.script.on(ApiKey.API_VERSIONS, delay(0.4), times=1)
    start = time.monotonic()
    p.close(10)
    took = time.monotonic() - start
    assert rule.fired == 1
    barrier = fb.received(ApiKey.API_VERSIONS)[-1]
    assert barrier.conn_id == fb.received(ApiKey.PRODUCE)[-1].conn_id
    assert barrier.received_at >= fb.received(ApiKey.PRODUCE)[-1].received_at
    assert took >= 0.35, "close() returned before the broker answered"
    assert fb.cluster.record_count("t") == 50


def test_acks_zero_close_barrier_bounded_by_request_timeout(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, acks=0, request_timeout_ms=1000, delivery_timeout_ms=10000)
    send_values(p, "t", 5)
    assert p.flush(10) == 0
    fb.script.on(ApiKey.API_VERSIONS, no_response(), times=None)
    start = time.monotonic()
    p.close(30)
    assert time.monotonic() - start < 5     # gave up after request_timeout_ms, did not hang
    assert fb.cluster.record_count("t") == 5


@pytest.mark.parametrize("as_arrow", [False, True], ids=["list", "arrow"])
def test_send_batch_per_record_partitions(fb, make_producer, as_arrow):
    """partition= one per record: explicit ones are kept, null ones are partitioned by key."""
    import pyarrow as pa

    from fastkafka._producer.partitioner import java_partition
    fb.create_topic("t", 3)
    p = make_producer(fb)
    values = [b"v%03d" % i for i in range(60)]
    keys = [b"k%03d" % i for i in range(60)]
    parts = [None if i % 4 == 0 else i % 3 for i in range(60)]
    arg = pa.array(parts, pa.int32()) if as_arrow else parts
    vals = pa.array(values, pa.binary()) if as_arrow else values
    assert p.send_batch("t", vals, keys=keys, partition=arg).get(10) == 60
    where = {v: part for part in range(3) for _, _, v in stored(fb.cluster, "t", part)}
    expected = {v: (java_partition(k, 3) if pt is None else pt) for v, k, pt in zip(values, keys, parts)}
    assert where == expected
    bad = parts[:10] + [3] + parts[11:]
    with pytest.raises(UnknownPartitionError, match=r"partition\[10\] = 3"):
        p.send_batch("t", vals, keys=keys, partition=pa.array(bad, pa.int32()) if as_arrow else bad)
    with pytest.raises(InvalidRecordError, match="entries"):
        p.send_batch("t", vals, keys=keys, partition=parts[:5])
    assert p.flush(10) == 0
    assert fb.cluster.record_count("t") == 60      # nothing of the rejected calls was queued


# ------------------------------------------------------------------------------- callbacks
def test_raising_delivery_callback_is_logged_and_loop_continues(fb, make_producer, caplog):
    caplog.set_level(logging.ERROR)
    fb.create_topic("t", 1)
    p = make_producer(fb, linger_ms=0)

    def boom(err, md):
        raise RuntimeError("callback exploded")

    p.send("t", b"first", on_delivery=boom).get(10)
    seen = []
    later = [p.send("t", b"x%d" % i, on_delivery=lambda e, m: seen.append((e, m.offset))) for i in range(10)]
    for f in later:
        f.get(10)
    deadline = time.monotonic() + 5
    while len(seen) < 10 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert sorted(o for _, o in seen) == list(range(1, 11)) and all(e is None for e, _ in seen)
    assert any("callback exploded" in (r.exc_text or "") or "callback exploded" in str(r.exc_info)
               for r in caplog.records), "the raising callback was not logged"


# ------------------------------------------------------------------------------ buffer memory
def test_buffer_exhaustion_blocks_then_raises_and_loses_nothing(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, buffer_memory=8192, batch_size=1024, max_block_ms=300, linger_ms=0,
                      delivery_timeout_ms=20000)
    p.send("t", b"warm").get(10)
    fb.script.on(ApiKey.PRODUCE, delay(1.5), times=2)
    queued = []
    start = time.monotonic()
    with pytest.raises(BufferExhaustedError):
        for i in range(1000):
            queued.append(p.send("t", value=b"%04d" % i + b"x" * 500))
    blocked = time.monotonic() - start
    assert blocked >= 0.25      # it blocked for max_block_ms before giving up
    assert len(queued) > 1
    for f in queued:
        f.get(15)
    got = [v for _, _, v in stored(fb.cluster, "t", 0)][1:]
    assert got == [b"%04d" % i + b"x" * 500 for i in range(len(queued))]


# ------------------------------------------------------------------------------ connections
def test_connection_refused_metadata_timeout_and_clean_close(make_producer, no_leaks):
    import socket
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    port = s.getsockname()[1]
    s.close()   # nothing listens on this port now
    p = make_producer(f"127.0.0.1:{port}", max_block_ms=400)
    start = time.monotonic()
    with pytest.raises(KafkaTimeoutError, match="'t' not present in metadata after 400 ms") as ei:
        p.send("t", b"x")
    assert type(ei.value) is KafkaTimeoutError    # not a subclass (buffer or delivery timeout)
    assert 0.3 <= time.monotonic() - start < 5
    p.close(2)
    assert not p._sender._thread.is_alive()


def test_idle_connection_closed(fb, make_producer):
    fb.create_topic("t", 1)
    p = make_producer(fb, connections_max_idle_ms=200, metadata_max_age_ms=60000)
    p.send("t", b"x").get(10)
    assert p.metrics()["connections"] >= 1
    deadline = time.monotonic() + 5
    while fb.open_connections and time.monotonic() < deadline:
        time.sleep(0.02)
    assert fb.open_connections == {}
    assert p.metrics()["connections"] == 0
    # and it reconnects on demand
    assert p.send("t", b"y").get(10).offset == 1


@pytest.mark.parametrize("where", ["retrying", "in_flight"])
def test_close_with_undeliverable_records_fails_them(fb, make_producer, where):
    fb.create_topic("t", 1)
    p = make_producer(fb, request_timeout_ms=5000, delivery_timeout_ms=30000)
    p.send("t", b"x").get(10)
    if where == "retrying":
        fb.script.on(ApiKey.PRODUCE, partition_error(NOT_LEADER_OR_FOLLOWER), times=None)
    else:
        fb.script.on(ApiKey.PRODUCE, delay(3), times=None)   # the request is in flight at close
    futs = send_values(p, "t", 20)
    # Until the records are where the test says: a batch retried, or a request in flight.
    deadline = time.monotonic() + 10
    while not (p.metrics()["retries"] if where == "retrying" else p.metrics()["in_flight_batches"]):
        assert time.monotonic() < deadline, f"no batch {where}: {p.metrics()}"
        time.sleep(0.005)
    start = time.monotonic()
    p.close(0.5)
    assert time.monotonic() - start < 5
    for _, f in futs:
        assert f.done()
        with pytest.raises(ProducerClosedError):
            f.get(0)
    assert p.metrics()["records_queued"] == 0


def test_loopback_connect_completes_at_once(fb, make_producer, monkeypatch, request):
    """connect_ex may return 0 at once (loopback); the client must go on to the handshake without
    waiting for a connect event that never comes."""
    import socket as socket_mod
    import fastkafka._net.failpoints as failpoints
    import fastkafka._net.network as network
    fb.create_topic("t", 1)

    def connect_ex(sock, addr):        # complete the connect synchronously, then report success
        sock.setblocking(True)
        try:
            sock.connect(addr)
        finally:
            sock.setblocking(False)
        return 0

    paths = []

    def spy(stage, client, conn):       # the client's fault-injection hook, used as a probe
        if stage == "connected":
            paths.append(conn.state)

    monkeypatch.setattr(socket_mod.socket, "connect_ex", connect_ex)
    failpoints.set_network_failpoint(spy)
    request.addfinalizer(lambda: failpoints.set_network_failpoint(None))
    p = make_producer(fb)
    assert p.send("t", b"x").get(10).offset == 0
    assert paths and all(s is network.State.DISCONNECTED for s in paths)  # the immediate path


# ------------------------------------------------------------------------- broker quotas (KIP-219)
def test_produce_throttle_time_holds_back_the_next_request(fb, make_producer):
    """A Produce answer with throttle_time_ms=300: the producer sends that broker no new request
    until 300 ms have passed, delivers every record, and counts the throttling in metrics()."""
    fb.create_topic("t", 1)

    def throttle(resp, header, body):
        return {**resp, "throttle_time_ms": 300}

    fb.script.on(ApiKey.PRODUCE, rewrite_response(throttle), times=1)
    p = make_producer(fb, linger_ms=0)
    first = send_values(p, "t", 1, partition=0, prefix=b"a")
    first[0][1].get(timeout=10)
    more = send_values(p, "t", 20, partition=0, prefix=b"b")
    assert_exactly_once(fb.cluster, "t", 1, first + more)
    produces = fb.received(ApiKey.PRODUCE)
    assert len(produces) >= 2
    gap = produces[1].received_at - produces[0].received_at
    assert 0.29 <= gap < 2.0, f"next Produce request {gap * 1000:.0f} ms after the throttled answer"
    m = p.metrics()
    assert m["net_throttled_responses"] == 1
    assert m["net_throttle_time_ms_total"] == 300


# ---------------------------------------------------------------------- rebootstrap (recovery)
def test_rebootstrap_when_every_known_broker_is_unreachable(make_producer, no_leaks):
    """Bootstrap A answers metadata listing only B; B goes down: after
    metadata_recovery_rebootstrap_trigger_ms the producer asks A again and delivers there."""
    with FaultBroker(node_id=1) as a, FaultBroker(node_id=7) as b:
        a.create_topic("t", 1)
        b.create_topic("t", 1)

        def only_b(resp, header, body):
            brokers = [{"node_id": b.node_id, "host": b.host, "port": b.port, "rack": None}]
            topics = [{**t, "partitions": [{**p, "leader_id": b.node_id, "replica_nodes": [b.node_id],
                                            "isr_nodes": [b.node_id]} for p in t["partitions"]]}
                      for t in resp["topics"]]
            return {**resp, "brokers": brokers, "topics": topics}

        a.script.on(ApiKey.METADATA, rewrite_response(only_b), times=None)
        p = make_producer(a, metadata_recovery_rebootstrap_trigger_ms=300)
        assert p.send("t", b"to-b", partition=0).get(timeout=10).offset == 0
        assert b.cluster.record_count("t") == 1
        b.set_down()
        a.script.clear()
        assert p.send("t", b"to-a", partition=0).get(timeout=10).offset == 0
        assert a.cluster.record_count("t") == 1
        assert p.metrics()["net_rebootstraps"] >= 1
