"""Transactions against real brokers that implement them (Apache Kafka and noida-db; never tansu,
whose read_committed shows aborted records).

Everything written is read back by an independent client (confluent-kafka, CRCs checked) with
``isolation.level=read_committed`` -- exactly the committed records -- and, where it proves the
test has teeth, ``read_uncommitted``, which also shows the aborted records. Where a transaction must
have been *ended* (aborted by close(), a fencing, Admin), a record written afterwards to the same
partitions must be visible under read_committed: an open transaction would hold the last stable
offset back and hide it.
"""
from __future__ import annotations

import time

import pytest

from brokers import committed_offsets, read_all, unique_name
from fastkafka import Producer
from fastkafka.admin import Admin
from fastkafka.errors import (IllegalStateError, InvalidProducerEpochError, KafkaError, ProducerFencedError,
                              TransactionAbortableError, TransactionAbortedError)

pytestmark = pytest.mark.broker

FAST = dict(linger_ms=2, retry_backoff_ms=20, request_timeout_ms=10_000, max_block_ms=30_000,
            delivery_timeout_ms=30_000)


@pytest.fixture(params=["kafka", "noida"])
def txn_broker(request):
    b = request.getfixturevalue(f"{request.param}_broker")
    if not b.running:
        raise RuntimeError(f"session {request.param} broker died")
    return b


def topic(broker, partitions=3, config=None):
    name = unique_name("txn")
    if config is None:
        broker.create_topic(name, partitions)
        return name
    with Admin(bootstrap_servers=broker.bootstrap) as admin:
        admin.create_topics({name: partitions}, config=config)
        deadline = time.monotonic() + 30
        while True:
            try:
                parts = admin.describe_topic(name)
                if len(parts) == partitions and all(p.leader >= 0 for p in parts):
                    break
            except KafkaError:
                pass
            assert time.monotonic() < deadline, f"topic {name} not online"
            time.sleep(0.05)
        for p in range(partitions):   # writable once ListOffsets is answered
            while True:
                try:
                    admin.list_offsets(name, p, "latest")
                    break
                except KafkaError:
                    assert time.monotonic() < deadline, f"{name}-{p} not writable"
                    time.sleep(0.05)
    return name


def txn_producer(broker, tid=None, **kw):
    return Producer(bootstrap_servers=broker.bootstrap, transactional_id=tid or unique_name("tid"),
                    **{**FAST, **kw})


def write_marker(broker, topics_parts, value=b"after"):
    """A committed record in every given partition from a plain producer: visible under
    read_committed only when no transaction is open there any more."""
    with Producer(bootstrap_servers=broker.bootstrap, **FAST) as p:
        futs = [p.send(t, value=value, partition=part) for t, parts in topics_parts for part in range(parts)]
        for f in futs:
            f.get(timeout=30)


def values_of(prefix, n):
    return [b"%s-%04d" % (prefix, i) for i in range(n)]


def send_all(p, tpc, values):
    """Round-robin the values over the partitions; returns the futures."""
    t, parts = tpc
    return [p.send(t, value=v, partition=i % parts) for i, v in enumerate(values)]


def each_raises(error_type, *calls) -> None:
    """Every one of ``calls`` raises ``error_type``."""
    for call in calls:
        with pytest.raises(error_type):
            call()


def test_commit_and_abort_several_partitions_two_topics(txn_broker):
    a, b = topic(txn_broker, 3), topic(txn_broker, 2)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        assert p.transaction_state == "READY"

        p.begin_transaction()
        c1a, c1b = values_of(b"c1a", 30), values_of(b"c1b", 20)
        futs = send_all(p, (a, 3), c1a) + send_all(p, (b, 2), c1b)
        p.commit_transaction()
        assert all(f.done() for f in futs)
        for f in futs:
            f.get(timeout=0)
        assert p.transaction_state == "READY"

        p.begin_transaction()
        ab_a, ab_b = values_of(b"ab-a", 30), values_of(b"ab-b", 20)
        futs = send_all(p, (a, 3), ab_a) + send_all(p, (b, 2), ab_b)
        p.flush(30)   # written to the log, then aborted
        for f in futs:
            f.get(timeout=0)
        p.abort_transaction()
        assert p.transaction_state == "READY"

        p.begin_transaction()
        c2a, c2b = values_of(b"c2a", 9), values_of(b"c2b", 4)
        send_all(p, (a, 3), c2a)
        send_all(p, (b, 2), c2b)
        p.commit_transaction()
        m = p.metrics()
        assert m["txn_commits"] == 2 and m["txn_aborts"] == 1

    assert sorted(read_all(txn_broker.bootstrap, a, 3)) == sorted(c1a + c2a)
    assert sorted(read_all(txn_broker.bootstrap, b, 2)) == sorted(c1b + c2b)
    # Teeth: the aborted records are in the log.
    assert sorted(read_all(txn_broker.bootstrap, a, 3, "read_uncommitted")) == sorted(c1a + ab_a + c2a)
    assert sorted(read_all(txn_broker.bootstrap, b, 2, "read_uncommitted")) == sorted(c1b + ab_b + c2b)


@pytest.mark.parametrize("gil_free_io", [True, False])
def test_transactions_sent_without_the_gil_stay_exact(txn_broker, gil_free_io):
    """A transactional producer's batches go out from the GIL-free turn once their partition is in
    the transaction (only AddPartitionsToTxn and EndTxn need the GIL turn): several transactions
    of many linger-sized batches, committed and aborted in turn, read back exactly under
    read_committed; with gil_free_io=False every batch goes from the GIL turn."""
    t = topic(txn_broker, 4)
    committed, aborted = [], []
    with txn_producer(txn_broker, linger_ms=1, batch_size=2048, gil_free_io=gil_free_io) as p:
        p.init_transactions()
        for n in range(6):
            p.begin_transaction()
            vals = values_of(b"t%d" % n, 400)
            for i, v in enumerate(vals):
                p.produce(t, v, partition=i % 4)
                if i % 50 == 49:
                    time.sleep(0.003)      # past the linger: batches leave while the transaction is open
            if n % 3 == 2:
                p.flush(30)
                p.abort_transaction()
                aborted += vals
            else:
                p.commit_transaction()
                committed += vals
        m = p.metrics()
        assert m["txn_commits"] == 4 and m["txn_aborts"] == 2
        if gil_free_io:
            assert m["gil_free_requests"] > 0, m
        else:
            assert m["gil_free_requests"] == 0, m
    assert sorted(read_all(txn_broker.bootstrap, t, 4)) == sorted(committed)
    assert sorted(read_all(txn_broker.bootstrap, t, 4, "read_uncommitted")) == sorted(committed + aborted)


def test_fencing_by_a_second_producer(txn_broker):
    t = topic(txn_broker, 2)
    tid = unique_name("tid")
    p1 = txn_producer(txn_broker, tid)
    p2 = txn_producer(txn_broker, tid)
    try:
        p1.init_transactions()
        p1.begin_transaction()
        zombie = values_of(b"zombie", 10)
        for f in send_all(p1, (t, 2), zombie):
            f.get(timeout=30)          # in the log, in p1's open transaction

        p2.init_transactions()         # fences p1, aborts its open transaction
        p2.begin_transaction()
        good = values_of(b"p2", 6)
        send_all(p2, (t, 2), good)

        late = p1.send(t, value=b"zombie-late", partition=0)
        with pytest.raises(ProducerFencedError):
            late.get(timeout=30)
        with pytest.raises(ProducerFencedError):
            p1.commit_transaction()
        assert p1.transaction_state == "FATAL_ERROR"
        # Fatal: every later call raises it too.
        each_raises(ProducerFencedError, lambda: p1.send(t, value=b"x", partition=0),
                    p1.abort_transaction, p1.begin_transaction)

        p2.commit_transaction()
    finally:
        p1.close(10)
        p2.close(10)
    assert sorted(read_all(txn_broker.bootstrap, t, 2)) == sorted(good)
    everything = read_all(txn_broker.bootstrap, t, 2, "read_uncommitted")
    assert set(zombie) <= set(everything) and b"zombie-late" not in everything


def test_abort_after_a_record_fails_at_the_broker(txn_broker):
    small = topic(txn_broker, 2)
    tight = topic(txn_broker, 1, config={"max.message.bytes": "1000"})
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        doomed = values_of(b"doomed", 6)
        for f in send_all(p, (small, 2), doomed):
            f.get(timeout=30)
        big = p.send(tight, value=b"x" * 5000, partition=0)
        with pytest.raises(KafkaError) as ei:
            big.get(timeout=30)
        assert ei.value.code == 10, ei.value          # MESSAGE_TOO_LARGE, from the broker
        assert p.transaction_state == "ABORTABLE_ERROR"
        each_raises(TransactionAbortableError, lambda: p.send(small, value=b"after-failure", partition=0),
                    p.commit_transaction, p.prepare_transaction)
        p.abort_transaction()
        assert p.transaction_state == "READY"

        p.begin_transaction()
        good = values_of(b"good", 5)
        send_all(p, (small, 2), good)
        p.send(tight, value=b"fits", partition=0)
        p.commit_transaction()
    assert sorted(read_all(txn_broker.bootstrap, small, 2)) == sorted(good)
    assert read_all(txn_broker.bootstrap, tight, 1) == [b"fits"]
    assert sorted(read_all(txn_broker.bootstrap, small, 2, "read_uncommitted")) == sorted(doomed + good)


def test_send_offsets_to_transaction(txn_broker):
    src, out = topic(txn_broker, 2), topic(txn_broker, 1)
    g_commit, g_abort = unique_name("grp"), unique_name("grp")
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(out, value=b"with-offsets", partition=0)
        p.send_offsets_to_transaction({(src, 0): 7, (src, 1): (3, "meta")}, {"group_id": g_commit})
        p.commit_transaction()

        p.begin_transaction()
        p.send(out, value=b"aborted-with-offsets", partition=0)
        p.send_offsets_to_transaction({(src, 0): 11}, g_abort)
        p.abort_transaction()

        # offsets only (no record) commit too
        g_only = unique_name("grp")
        p.begin_transaction()
        p.send_offsets_to_transaction({(src, 1): 42}, g_only)
        p.commit_transaction()
    tps = [(src, 0), (src, 1)]
    assert committed_offsets(txn_broker.bootstrap, g_commit, tps) == {(src, 0): 7, (src, 1): 3}
    assert committed_offsets(txn_broker.bootstrap, g_abort, tps) == {(src, 0): None, (src, 1): None}
    assert committed_offsets(txn_broker.bootstrap, g_only, tps) == {(src, 0): None, (src, 1): 42}
    assert read_all(txn_broker.bootstrap, out, 1) == [b"with-offsets"]


def test_send_outside_a_transaction_and_before_init(txn_broker):
    t = topic(txn_broker, 1)
    with txn_producer(txn_broker) as p:
        with pytest.raises(IllegalStateError):
            p.send(t, value=b"before-init", partition=0)
        with pytest.raises(IllegalStateError):
            p.begin_transaction()
        p.init_transactions()
        with pytest.raises(IllegalStateError):
            p.send(t, value=b"outside", partition=0)
        with pytest.raises(IllegalStateError):
            p.send_batch(t, [b"outside-batch"], partition=0)
        p.begin_transaction()
        p.send(t, value=b"inside", partition=0)
        p.commit_transaction()
        with pytest.raises(IllegalStateError):
            p.send(t, value=b"after-commit", partition=0)
    assert read_all(txn_broker.bootstrap, t, 1, "read_uncommitted") == [b"inside"]


def test_close_aborts_an_open_transaction(txn_broker):
    t = topic(txn_broker, 2)
    tid = unique_name("tid")
    p = txn_producer(txn_broker, tid, transaction_timeout_ms=300_000)
    p.init_transactions()
    p.begin_transaction()
    opened = values_of(b"open", 8)
    for f in send_all(p, (t, 2), opened):
        f.get(timeout=30)
    p.close(30)
    # Aborted by close(), not left to the 5-minute transaction timeout: a later record is stable.
    write_marker(txn_broker, [(t, 2)])
    assert read_all(txn_broker.bootstrap, t, 2) == [b"after", b"after"]
    assert sorted(read_all(txn_broker.bootstrap, t, 2, "read_uncommitted")) == sorted(opened + [b"after"] * 2)
    # A new producer with the same id starts at once.
    started = time.monotonic()
    with txn_producer(txn_broker, tid, transaction_timeout_ms=300_000) as p2:
        p2.init_transactions(timeout=20)
        p2.begin_transaction()
        p2.send(t, value=b"next", partition=0)
        p2.commit_transaction(timeout=20)
    assert time.monotonic() - started < 25
    assert sorted(read_all(txn_broker.bootstrap, t, 2)) == [b"after", b"after", b"next"]


def test_prepare_then_commit_from_another_admin_retried(txn_broker):
    t = topic(txn_broker, 2)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        vals = values_of(b"prep", 10)
        futs = send_all(p, (t, 2), vals)
        prepared = p.prepare_transaction()
        assert all(f.done() for f in futs)
        assert prepared is not None and prepared.transactional_id == p.config.transactional_id
        assert prepared.producer_id >= 0 and prepared.producer_epoch >= 0
        assert p.transaction_state == "PREPARED"
        with pytest.raises(IllegalStateError):
            p.send(t, value=b"after-prepare", partition=0)
        # Prepared, not committed: nothing visible yet.
        assert read_all(txn_broker.bootstrap, t, 2) == []
    # close() leaves a prepared transaction open; another "process" commits it.
    with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
        admin.commit_transaction(prepared)
    with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
        admin.commit_transaction(prepared)     # retried after a crash: idempotent
    assert sorted(read_all(txn_broker.bootstrap, t, 2)) == sorted(vals)


def test_prepare_then_abort_from_admin(txn_broker):
    t = topic(txn_broker, 2)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        vals = values_of(b"prep-ab", 6)
        send_all(p, (t, 2), vals)
        prepared = p.prepare_transaction()
    with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
        admin.abort_transaction(prepared)
    write_marker(txn_broker, [(t, 2)])
    assert read_all(txn_broker.bootstrap, t, 2) == [b"after", b"after"]
    assert sorted(read_all(txn_broker.bootstrap, t, 2, "read_uncommitted")) == sorted(vals + [b"after"] * 2)


def test_prepared_transaction_committed_by_the_producer_itself(txn_broker):
    t = topic(txn_broker, 1)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        p.send(t, value=b"one", partition=0)
        assert p.prepare_transaction() is not None
        p.commit_transaction()
        assert p.transaction_state == "READY"
    assert read_all(txn_broker.bootstrap, t, 1) == [b"one"]


def test_admin_fence_transactional_id_aborts_an_open_transaction(txn_broker):
    t = topic(txn_broker, 2)
    tid = unique_name("tid")
    p = txn_producer(txn_broker, tid)
    try:
        p.init_transactions()
        p.begin_transaction()
        vals = values_of(b"fenced", 6)
        for f in send_all(p, (t, 2), vals):
            f.get(timeout=30)
        with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
            ident = admin.fence_transactional_id(tid)
        assert ident.transactional_id == tid and ident.producer_id >= 0
        with pytest.raises(ProducerFencedError):
            p.commit_transaction()
        with pytest.raises(ProducerFencedError):
            p.send(t, value=b"x", partition=0)
    finally:
        p.close(10)
    write_marker(txn_broker, [(t, 2)])
    assert read_all(txn_broker.bootstrap, t, 2) == [b"after", b"after"]
    assert sorted(read_all(txn_broker.bootstrap, t, 2, "read_uncommitted")) == sorted(vals + [b"after"] * 2)


def test_prepare_empty_transaction_returns_none(txn_broker):
    t = topic(txn_broker, 1)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        assert p.prepare_transaction() is None
        assert p.transaction_state == "READY"
        p.begin_transaction()          # usable for the next one
        p.send(t, value=b"v", partition=0)
        p.commit_transaction()
        # An empty commit and an empty abort end locally.
        p.begin_transaction()
        p.commit_transaction()
        p.begin_transaction()
        p.abort_transaction()
    assert read_all(txn_broker.bootstrap, t, 1) == [b"v"]


def test_transactional_send_batch_with_arrow(txn_broker):
    import pyarrow as pa
    t = topic(txn_broker, 3)
    with txn_producer(txn_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        committed = [b"arrow-%05d" % i for i in range(3000)]
        keys = pa.array([b"k%03d" % (i % 50) for i in range(3000)], pa.binary())
        assert p.send_batch(t, pa.array(committed, pa.binary()), keys=keys).get(timeout=30) == 3000
        p.commit_transaction()

        p.begin_transaction()
        aborted = ["ab-%05d" % i for i in range(500)]
        assert p.send_batch(t, pa.array(aborted, pa.string()), partition=1).get(timeout=30) == 500
        p.abort_transaction()      # written, then aborted
    assert sorted(read_all(txn_broker.bootstrap, t, 3)) == sorted(committed)
    everything = read_all(txn_broker.bootstrap, t, 3, "read_uncommitted")
    assert sorted(everything) == sorted(committed + [v.encode() for v in aborted])


def test_records_queued_when_aborting_fail_with_transaction_aborted(txn_broker):
    t = topic(txn_broker, 1)
    with txn_producer(txn_broker, linger_ms=20_000, delivery_timeout_ms=60_000, batch_size=1 << 20) as p:
        p.init_transactions()
        p.begin_transaction()
        futs = [p.send(t, value=b"lingering-%d" % i, partition=0) for i in range(5)]
        p.abort_transaction()
        for f in futs:
            with pytest.raises(TransactionAbortedError):
                f.get(timeout=10)
        p.begin_transaction()
        p.send(t, value=b"kept", partition=0)
        p.commit_transaction()
    assert read_all(txn_broker.bootstrap, t, 1, "read_uncommitted") == [b"kept"]


def test_transaction_timeout_above_the_broker_cap_is_fatal(txn_broker):
    # Kafka's transaction.max.timeout.ms defaults to 15 minutes: a longer timeout is refused at
    # init (INVALID_TRANSACTION_TIMEOUT), and the producer cannot go on.
    with txn_producer(txn_broker, transaction_timeout_ms=3_600_000) as p:
        started = time.monotonic()
        with pytest.raises(KafkaError) as ei:
            p.init_transactions(timeout=20)
        assert ei.value.code == 50, ei.value
        assert time.monotonic() - started < 15
        with pytest.raises(KafkaError) as ei:
            p.begin_transaction()
        assert ei.value.code == 50


def test_prepared_transaction_of_a_fenced_id_cannot_be_committed(txn_broker):
    # A zombie's prepared transaction: once a newer producer took the id over, committing it
    # fails and its records never become visible.
    t = topic(txn_broker, 2)
    tid = unique_name("tid")
    with txn_producer(txn_broker, tid) as p:
        p.init_transactions()
        p.begin_transaction()
        vals = values_of(b"zombie-prep", 6)
        send_all(p, (t, 2), vals)
        prepared = p.prepare_transaction()
    with txn_producer(txn_broker, tid) as newer:
        newer.init_transactions()          # aborts the prepared transaction, bumps the epoch
        with Admin(bootstrap_servers=txn_broker.bootstrap) as admin:
            with pytest.raises((ProducerFencedError, InvalidProducerEpochError)):
                admin.commit_transaction(prepared)
        newer.begin_transaction()
        newer.send(t, value=b"newer", partition=0)
        newer.commit_transaction()
    assert read_all(txn_broker.bootstrap, t, 2) == [b"newer"]
    assert sorted(read_all(txn_broker.bootstrap, t, 2, "read_uncommitted")) == sorted(vals + [b"newer"])


def test_list_transactions_finds_an_open_one_until_it_is_fenced(kafka_broker):
    """Admin.list_transactions (ListTransactions, every broker) on Apache Kafka: a prepared,
    uncommitted transaction is listed Ongoing with its producer id; once its id is taken over
    (fence_transactional_id) it is no longer Ongoing, and read_committed readers pass it."""
    t = topic(kafka_broker, 2)
    with txn_producer(kafka_broker) as p:
        p.init_transactions()
        p.begin_transaction()
        send_all(p, (t, 2), values_of(b"listed", 4))
        prepared = p.prepare_transaction()
    tid = prepared.transactional_id
    with Admin(bootstrap_servers=kafka_broker.bootstrap) as admin:
        ongoing = [x for x in admin.list_transactions(states=["Ongoing"]) if x.transactional_id == tid]
        assert ongoing == [(tid, prepared.producer_id, "Ongoing")]
        by_pid = admin.list_transactions(producer_ids=[prepared.producer_id])
        assert [x.transactional_id for x in by_pid] == [tid]
        admin.fence_transactional_id(tid)
        assert tid not in {x.transactional_id for x in admin.list_transactions(states=["Ongoing"])}
        assert {x.state for x in admin.list_transactions() if x.transactional_id == tid} <= {
            "PrepareAbort", "CompleteAbort", "Empty"}
    write_marker(kafka_broker, [(t, 2)])
    assert read_all(kafka_broker.bootstrap, t, 2) == [b"after", b"after"]


def test_list_transactions_refused_by_a_broker_without_it(tansu_broker):
    """tansu has no ListTransactions: a typed UnsupportedVersionError naming the API, not a hang
    or an empty list (an empty list would say "nothing open")."""
    from fastkafka.errors import UnsupportedVersionError

    with Admin(bootstrap_servers=tansu_broker.bootstrap) as admin:
        with pytest.raises(UnsupportedVersionError, match="LIST_TRANSACTIONS"):
            admin.list_transactions(states=["Ongoing"], timeout_ms=10_000)
