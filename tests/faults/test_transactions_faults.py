"""Transactional producer fault paths against librdkafka's mock cluster (3 brokers), which has a
transaction coordinator: injected error codes on FindCoordinator, InitProducerId,
AddPartitionsToTxn, AddOffsetsToTxn, EndTxn and TxnOffsetCommit, a coordinator that moves, and a
coordinator that does not answer in time. Each test checks what the application sees (which call
raises what, and that the producer goes on or does not) and, through the mock's request log, what
went on the wire (retries, coordinator lookups, where the requests went)."""
from __future__ import annotations

import time

import pytest

from fastkafka import Producer
from fastkafka.errors import (IllegalStateError, KafkaTimeoutError, ProducerFencedError, TransactionAbortableError,
                              TransactionAbortedError, TransactionalIdAuthorizationFailedError)
from mockcluster import ApiKeys

pytestmark = pytest.mark.mock

COORDINATOR_LOAD_IN_PROGRESS = 14
COORDINATOR_NOT_AVAILABLE = 15
NOT_COORDINATOR = 16
TOPIC_AUTHORIZATION_FAILED = 29
CONCURRENT_TRANSACTIONS = 51
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = 53
PRODUCER_FENCED = 90
INVALID_PRODUCER_EPOCH = 47

FAST = dict(request_timeout_ms=3000, delivery_timeout_ms=20000, retry_backoff_ms=20,
            retry_backoff_max_ms=200, reconnect_backoff_ms=20, reconnect_backoff_max_ms=200,
            linger_ms=2, max_block_ms=10000)


@pytest.fixture
def mc(mock_cluster):
    mock_cluster.create_topic("t", 3)      # leaders 1, 2, 3
    mock_cluster.create_topic("u", 1)
    return mock_cluster


@pytest.fixture
def make(mc, no_leaks):
    made = []

    def make_producer(tid="txn-1", **kw):
        p = Producer(bootstrap_servers=mc.bootstraps, transactional_id=tid, **{**FAST, **kw})
        made.append(p)
        return p

    yield make_producer
    for p in made:
        p.close(10)


def count(mc, api_key, broker=None):
    return sum(1 for b, k, _ts in mc.requests() if k == api_key and (broker is None or b == broker))


def brokers_of(mc, api_key):
    return [b for b, k, _ts in mc.requests() if k == api_key]


def one_transaction(p, n=30, topic="t", partitions=3, prefix=b"v"):
    futs = [p.send(topic, value=b"%s-%d" % (prefix, i), partition=i % partitions) for i in range(n)]
    return futs


def in_transaction(make):
    """A new producer with its transaction begun and ``one_transaction``'s records sent."""
    p = make()
    p.init_transactions()
    p.begin_transaction()
    one_transaction(p)
    return p


def test_commit_happy_path_on_the_mock(mc, make):
    p = make()
    p.init_transactions()
    p.begin_transaction()
    futs = one_transaction(p)
    p.commit_transaction()
    assert all(f.get(timeout=0).offset >= 0 for f in futs)
    assert count(mc, ApiKeys.INIT_PRODUCER_ID) == 1
    assert count(mc, ApiKeys.ADD_PARTITIONS_TO_TXN) >= 1
    assert count(mc, ApiKeys.END_TXN) == 1
    # AddPartitionsToTxn before the first Produce of the transaction.
    reqs = [k for _b, k, _ts in mc.requests()]
    assert reqs.index(ApiKeys.ADD_PARTITIONS_TO_TXN) < reqs.index(ApiKeys.PRODUCE)


def test_concurrent_transactions_on_add_partitions_and_end_txn_retried(mc, make):
    p = make()
    p.init_transactions()
    mc.clear_requests()
    mc.push_request_errors(ApiKeys.ADD_PARTITIONS_TO_TXN, [CONCURRENT_TRANSACTIONS] * 3)
    mc.push_request_errors(ApiKeys.END_TXN, [CONCURRENT_TRANSACTIONS] * 3)
    p.begin_transaction()
    futs = one_transaction(p)
    p.commit_transaction()
    for f in futs:
        f.get(timeout=0)
    assert count(mc, ApiKeys.ADD_PARTITIONS_TO_TXN) >= 4
    assert count(mc, ApiKeys.END_TXN) == 4
    assert p.metrics()["txn_retries"] >= 6
    assert p.transaction_state == "READY"
    # and the next transaction goes on normally
    p.begin_transaction()
    one_transaction(p, 3)
    p.commit_transaction()


@pytest.mark.parametrize("code", [NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE])
def test_coordinator_errors_look_the_coordinator_up_again(mc, make, code):
    p = in_transaction(make)
    p.flush(10)
    lookups = count(mc, ApiKeys.FIND_COORDINATOR)
    mc.push_request_errors(ApiKeys.END_TXN, [code, code])
    p.commit_transaction()
    assert count(mc, ApiKeys.END_TXN) == 3
    assert count(mc, ApiKeys.FIND_COORDINATOR) >= lookups + 2


def test_coordinator_moves_mid_transaction(mc, make):
    mc.set_coordinator("transaction", "txn-move", 1)
    p = make("txn-move")
    p.init_transactions()
    assert brokers_of(mc, ApiKeys.INIT_PRODUCER_ID) == [1]
    p.begin_transaction()
    one_transaction(p)
    p.flush(10)
    mc.set_coordinator("transaction", "txn-move", 3)
    mc.clear_requests()
    p.commit_transaction()
    ends = brokers_of(mc, ApiKeys.END_TXN)
    assert ends[-1] == 3 and ends[0] == 1, ends    # refused NOT_COORDINATOR by 1, done on 3
    assert count(mc, ApiKeys.FIND_COORDINATOR) >= 1
    # The next transaction's AddPartitionsToTxn goes to the new coordinator straight away.
    mc.clear_requests()
    p.begin_transaction()
    one_transaction(p, 3)
    p.commit_transaction()
    assert set(brokers_of(mc, ApiKeys.ADD_PARTITIONS_TO_TXN)) == {3}
    assert brokers_of(mc, ApiKeys.END_TXN) == [3]


def test_unreadable_find_coordinator_answer_retried(mc, make):
    # The mock answers a FindCoordinator it fails with a null host, which Kafka's schema does not
    # allow (a real broker sends ""): the client cannot decode it, drops the connection and looks
    # the coordinator up again.
    mc.push_request_errors(ApiKeys.FIND_COORDINATOR, [COORDINATOR_NOT_AVAILABLE] * 3)
    p = make()
    p.init_transactions()
    # Three refused lookups and the one that succeeds; under load a lookup can be sent again
    # while the dropped connection's retry is pending, so allow one or two more, never a loop.
    assert 4 <= count(mc, ApiKeys.FIND_COORDINATOR) <= 6
    assert count(mc, ApiKeys.INIT_PRODUCER_ID) == 1
    assert p.transaction_state == "READY"


def test_coordinator_load_in_progress_on_init_producer_id_retried(mc, make):
    mc.push_request_errors(ApiKeys.INIT_PRODUCER_ID, [COORDINATOR_LOAD_IN_PROGRESS] * 3)
    p = make()
    p.init_transactions()
    assert count(mc, ApiKeys.INIT_PRODUCER_ID) == 4
    assert p.transaction_state == "READY"
    p.begin_transaction()
    one_transaction(p, 3)
    p.commit_transaction()


def send_while_allowed(p, n, refused):
    """Send up to ``n`` records; the transaction's error may arrive (from the I/O thread) while
    they are being sent, after which send() raises ``refused``: the futures of the records sent."""
    futs = []
    for i in range(n):
        try:
            futs.append(p.send("t", value=b"v-%d" % i, partition=i % 3))
        except refused:
            break
    assert futs, "not even the first record was accepted"
    return futs


def assert_fatal(p, error_type):
    assert p.transaction_state == "FATAL_ERROR"
    for call in (p.begin_transaction, p.commit_transaction, p.abort_transaction,
                 lambda: p.send("t", value=b"x", partition=0),
                 lambda: p.send_offsets_to_transaction({("t", 0): 1}, "g")):
        with pytest.raises(error_type):
            call()


@pytest.mark.parametrize("code", [PRODUCER_FENCED, INVALID_PRODUCER_EPOCH])
def test_fenced_on_end_txn_is_fatal(mc, make, code):
    p = in_transaction(make)
    mc.push_request_errors(ApiKeys.END_TXN, [code])
    with pytest.raises(ProducerFencedError):
        p.commit_transaction()
    assert_fatal(p, ProducerFencedError)


@pytest.mark.parametrize("code,error_type", [(PRODUCER_FENCED, ProducerFencedError),
                                             (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                              TransactionalIdAuthorizationFailedError)])
def test_fatal_error_on_add_partitions(mc, make, code, error_type):
    p = make()
    p.init_transactions()
    mc.push_request_errors(ApiKeys.ADD_PARTITIONS_TO_TXN, [code])
    p.begin_transaction()
    futs = send_while_allowed(p, 30, error_type)
    for f in futs:       # never sent
        with pytest.raises((error_type, TransactionAbortedError)):
            f.get(timeout=10)
    with pytest.raises(error_type):
        p.commit_transaction()
    assert_fatal(p, error_type)
    assert count(mc, ApiKeys.PRODUCE) == 0
    assert count(mc, ApiKeys.END_TXN) == 0


def test_fenced_on_produce_is_fatal(mc, make):
    p = make()
    p.init_transactions()
    p.begin_transaction()
    mc.push_request_errors(ApiKeys.PRODUCE, [INVALID_PRODUCER_EPOCH])
    f = p.send("u", value=b"x", partition=0)
    with pytest.raises(ProducerFencedError):
        f.get(timeout=10)
    assert_fatal(p, ProducerFencedError)


def test_transactional_id_authorization_failed_is_fatal(mc, make):
    mc.push_request_errors(ApiKeys.INIT_PRODUCER_ID, [TRANSACTIONAL_ID_AUTHORIZATION_FAILED])
    p = make()
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        p.init_transactions()
    with pytest.raises(TransactionalIdAuthorizationFailedError):
        p.init_transactions()
    assert_fatal(p, TransactionalIdAuthorizationFailedError)


def test_abortable_error_on_add_partitions(mc, make):
    p = make()
    p.init_transactions()
    mc.push_request_errors(ApiKeys.ADD_PARTITIONS_TO_TXN, [TOPIC_AUTHORIZATION_FAILED])
    p.begin_transaction()
    futs = send_while_allowed(p, 30, TransactionAbortableError)
    for f in futs:
        with pytest.raises(TransactionAbortedError):
            f.get(timeout=10)
    assert p.transaction_state == "ABORTABLE_ERROR"
    with pytest.raises(TransactionAbortableError) as ei:
        p.commit_transaction()
    assert getattr(ei.value, "cause", None) is not None and ei.value.cause.code == TOPIC_AUTHORIZATION_FAILED
    with pytest.raises(TransactionAbortableError):
        p.send("t", value=b"x", partition=0)
    assert count(mc, ApiKeys.PRODUCE) == 0
    p.abort_transaction()
    assert p.transaction_state == "READY"
    # The producer lives on: the next transaction commits.
    p.begin_transaction()
    futs = one_transaction(p, 6, prefix=b"next")
    p.commit_transaction()
    assert all(f.get(timeout=0).offset >= 0 for f in futs)
    assert count(mc, ApiKeys.END_TXN) == 1   # the failed one ended locally: nothing reached the coordinator


def test_abortable_error_on_txn_offset_commit(mc, make):
    p = make()
    p.init_transactions()
    p.begin_transaction()
    one_transaction(p, 3)
    mc.push_request_errors(ApiKeys.TXN_OFFSET_COMMIT, [TOPIC_AUTHORIZATION_FAILED])
    with pytest.raises(TransactionAbortableError):
        p.send_offsets_to_transaction({("t", 0): 5}, "group-a")
    with pytest.raises(TransactionAbortableError):
        p.commit_transaction()
    p.abort_transaction()
    p.begin_transaction()
    one_transaction(p, 3)
    p.send_offsets_to_transaction({("t", 0): 5}, "group-a")
    p.commit_transaction()
    # each transaction sent its offsets (a retry of the mock's own CONCURRENT_TRANSACTIONS may add one)
    assert count(mc, ApiKeys.ADD_OFFSETS_TO_TXN) >= 2
    assert count(mc, ApiKeys.TXN_OFFSET_COMMIT) >= 2
    assert p.metrics()["txn_commits"] == 1 and p.metrics()["txn_aborts"] == 1


def test_concurrent_transactions_on_add_offsets_retried(mc, make):
    p = make()
    p.init_transactions()
    p.begin_transaction()
    mc.push_request_errors(ApiKeys.ADD_OFFSETS_TO_TXN, [CONCURRENT_TRANSACTIONS] * 2)
    mc.push_request_errors(ApiKeys.TXN_OFFSET_COMMIT, [COORDINATOR_LOAD_IN_PROGRESS])
    p.send_offsets_to_transaction({("t", 1): 9}, {"group_id": "group-b", "generation_id": -1})
    p.commit_transaction()
    assert count(mc, ApiKeys.ADD_OFFSETS_TO_TXN) == 3
    assert count(mc, ApiKeys.TXN_OFFSET_COMMIT) == 2
    assert count(mc, ApiKeys.END_TXN) == 1


def test_coordinator_that_does_not_answer_is_bounded(mc, make):
    mc.set_coordinator("transaction", "txn-slow", 1)
    p = make("txn-slow", request_timeout_ms=500, delivery_timeout_ms=5000)
    p.init_transactions()
    p.begin_transaction()
    one_transaction(p, 6, topic="t")
    p.flush(10)
    mc.push_broker_errors_with_rtt(1, ApiKeys.END_TXN, [(0, 3000), (0, 3000)])
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        p.commit_transaction(timeout=1.0)
    assert time.monotonic() - started < 3
    # Not given up: called again, it waits for the same commit, which the retries then complete.
    p.commit_transaction(timeout=20)
    assert p.transaction_state == "READY"
    assert count(mc, ApiKeys.END_TXN) >= 2
    with pytest.raises(IllegalStateError):
        p.abort_transaction()


def test_init_with_no_coordinator_answering_is_bounded(mc, make):
    p = make(request_timeout_ms=500)
    for b in (1, 2, 3):
        mc.push_broker_errors_with_rtt(b, ApiKeys.FIND_COORDINATOR, [(0, 5000)] * 3)
    started = time.monotonic()
    with pytest.raises(KafkaTimeoutError):
        p.init_transactions(timeout=1.5)
    assert time.monotonic() - started < 4
    with pytest.raises(IllegalStateError):
        p.begin_transaction()
    p.init_transactions(timeout=30)   # goes on in the background; finishes once answered
    assert p.transaction_state == "READY"


def test_abort_waits_for_records_in_flight(mc, make):
    # Records in flight when abort_transaction() is called complete (they are in the log) before
    # EndTxn(abort) is sent, so the abort markers cover them.
    mc.set_coordinator("transaction", "txn-abort", 1)
    p = make("txn-abort")
    p.init_transactions()
    p.begin_transaction()
    mc.set_rtt(2, 800)
    futs = [p.send("t", value=b"x%d" % i, partition=1) for i in range(10)]   # leader 2
    deadline = time.monotonic() + 10
    while count(mc, ApiKeys.PRODUCE, broker=2) == 0:
        assert time.monotonic() < deadline, "no Produce sent"
        time.sleep(0.01)
    p.abort_transaction()
    mc.set_rtt(2, 0)
    assert all(f.get(timeout=0).offset >= 0 for f in futs)   # written before the abort
    end_at = [ts for b, k, ts in mc.requests() if k == ApiKeys.END_TXN]
    produce_at = [ts for b, k, ts in mc.requests() if k == ApiKeys.PRODUCE]
    assert len(end_at) == 1 and len(produce_at) == 1
    assert end_at[0] - produce_at[0] >= 700_000      # microseconds: after the Produce answer
    p.begin_transaction()
    one_transaction(p, 3)
    p.commit_transaction()


def test_fatal_error_fails_a_waiting_commit_promptly(mc, make):
    p = make()
    p.init_transactions()
    p.begin_transaction()
    one_transaction(p, 3)
    mc.push_request_errors(ApiKeys.END_TXN, [CONCURRENT_TRANSACTIONS, PRODUCER_FENCED])
    started = time.monotonic()
    with pytest.raises(ProducerFencedError):
        p.commit_transaction(timeout=10)
    assert time.monotonic() - started < 5
    assert count(mc, ApiKeys.END_TXN) == 2
    started = time.monotonic()
    p.close(5)      # nothing left to abort: the producer is fenced
    assert time.monotonic() - started < 5


def prepared_on(mc, make, tid):
    p = make(tid)
    p.init_transactions()
    p.begin_transaction()
    one_transaction(p, 6)
    prepared = p.prepare_transaction()
    assert prepared is not None and p.transaction_state == "PREPARED"
    return p, prepared


def test_admin_commit_retries_coordinator_errors(mc, make):
    from fastkafka.admin import Admin

    mc.set_coordinator("transaction", "txn-adm", 2)
    p, prepared = prepared_on(mc, make, "txn-adm")
    p.close(10)
    mc.clear_requests()
    mc.push_request_errors(ApiKeys.END_TXN, [CONCURRENT_TRANSACTIONS, NOT_COORDINATOR,
                                             COORDINATOR_LOAD_IN_PROGRESS])
    with Admin(bootstrap_servers=mc.bootstraps, retry_backoff_ms=20) as admin:
        admin.commit_transaction(prepared, timeout_ms=10_000)
    assert brokers_of(mc, ApiKeys.END_TXN) == [2, 2, 2, 2]
    assert count(mc, ApiKeys.FIND_COORDINATOR) >= 2      # looked up again after NOT_COORDINATOR


@pytest.mark.parametrize("code,error_type", [(PRODUCER_FENCED, ProducerFencedError),
                                             (TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                                              TransactionalIdAuthorizationFailedError)])
def test_admin_commit_fatal_errors_not_retried(mc, make, code, error_type):
    from fastkafka.admin import Admin

    p, prepared = prepared_on(mc, make, "txn-adm2")
    mc.clear_requests()
    mc.push_request_errors(ApiKeys.END_TXN, [code])
    with Admin(bootstrap_servers=mc.bootstraps, retry_backoff_ms=20) as admin:
        started = time.monotonic()
        with pytest.raises(error_type):
            admin.abort_transaction(prepared, timeout_ms=10_000)
        assert time.monotonic() - started < 5
        assert count(mc, ApiKeys.END_TXN) == 1
        admin.abort_transaction(prepared, timeout_ms=10_000)   # the next call goes through
    assert count(mc, ApiKeys.END_TXN) == 2


def test_admin_commit_with_no_coordinator_answering_is_bounded(mc, make):
    from fastkafka.admin import Admin
    from fastkafka.errors import RequestTimedOutError

    mc.set_coordinator("transaction", "txn-adm3", 3)
    p, prepared = prepared_on(mc, make, "txn-adm3")
    mc.push_broker_errors_with_rtt(3, ApiKeys.END_TXN, [(0, 5000)] * 4)
    with Admin(bootstrap_servers=mc.bootstraps, request_timeout_ms=500, retry_backoff_ms=20) as admin:
        started = time.monotonic()
        # At its deadline Admin raises the last error a request got (here the request timeout).
        with pytest.raises((KafkaTimeoutError, RequestTimedOutError)):
            admin.commit_transaction(prepared, timeout_ms=1500)
        assert time.monotonic() - started < 4


def test_record_timing_out_makes_the_transaction_abortable(mc, make):
    from fastkafka.errors import DeliveryTimeoutError

    mc.set_coordinator("transaction", "txn-dt", 1)
    p = make("txn-dt", request_timeout_ms=1000, delivery_timeout_ms=2500)
    p.init_transactions()
    p.begin_transaction()
    p.send("t", value=b"first", partition=1).get(timeout=10)     # leader 2
    mc.broker_down(2)
    f = p.send("t", value=b"lost", partition=1)
    with pytest.raises(DeliveryTimeoutError):
        f.get(timeout=15)
    assert p.transaction_state == "ABORTABLE_ERROR"
    with pytest.raises(TransactionAbortableError):
        p.commit_transaction()
    mc.broker_up(2)
    p.abort_transaction(timeout=20)
    # The next transaction writes to the same partition again (its sequence repaired first).
    p.begin_transaction()
    futs = [p.send("t", value=b"next-%d" % i, partition=1) for i in range(5)]
    p.commit_transaction(timeout=20)
    assert [f.get(timeout=0).offset for f in futs] == sorted(f.get(timeout=0).offset for f in futs)
