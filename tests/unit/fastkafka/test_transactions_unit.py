"""Transactions without a broker: configuration checks, the typed errors of group metadata and
offsets, and the calls a transaction state does not allow (IllegalStateError), on a producer whose
bootstrap address has nothing listening (nothing here needs an answer)."""
from __future__ import annotations

import pickle
from types import SimpleNamespace

import pytest

from fastkafka import Producer
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, IllegalStateError, ProducerClosedError
from fastkafka._producer.transactions import GroupMetadata, PreparedTransaction, State, offsets_by_topic

NOWHERE = "127.0.0.1:1"


def cfg(**kw):
    return ProducerConfig(bootstrap_servers=NOWHERE, **kw)


# -- configuration -------------------------------------------------------------------------------
def test_transactional_config_accepted():
    c = cfg(transactional_id="tid", transaction_timeout_ms=30_000)
    assert c.transactional_id == "tid" and c.transaction_timeout_ms == 30_000
    assert c.enable_idempotence is True and c.acks == -1
    assert cfg().transactional_id is None
    assert ProducerConfig({"bootstrap.servers": NOWHERE, "transactional.id": "a"}).transactional_id == "a"


@pytest.mark.parametrize("kw, match", [
    (dict(enable_idempotence=False), "enable_idempotence"),
    (dict(acks=1), "acks"),
    (dict(acks=0), "acks"),
    (dict(retries=0), "retries"),
    (dict(max_in_flight_requests_per_connection=6), "max_in_flight"),
])
def test_transactional_id_with_settings_that_break_idempotence(kw, match):
    # Without a transactional id these settings silently turn the default idempotence off; with
    # one they are an error, never a silent non-transactional producer.
    cfg(**kw)
    with pytest.raises(ConfigError, match=match):
        cfg(transactional_id="tid", **kw)


@pytest.mark.parametrize("kw", [dict(transactional_id=""), dict(transactional_id="t", transaction_timeout_ms=0),
                                dict(transactional_id=5)])
def test_bad_transactional_values(kw):
    with pytest.raises(ConfigError):
        cfg(**kw)


# -- GroupMetadata / offsets -----------------------------------------------------------------------
def test_group_metadata_of():
    assert GroupMetadata.of("g") == GroupMetadata("g", -1, "", None)
    gm = GroupMetadata("g", 3, "m")
    assert GroupMetadata.of(gm) is gm
    assert GroupMetadata.of({"group_id": "g", "generation_id": 4, "member_id": "m-1",
                             "group_instance_id": "i"}) == GroupMetadata("g", 4, "m-1", "i")
    assert GroupMetadata.of({"group_id": "g"}) == GroupMetadata("g")
    other = SimpleNamespace(group_id="g", generation_id=7, member_id="m", group_instance_id=None)
    assert GroupMetadata.of(other) == GroupMetadata("g", 7, "m", None)
    assert GroupMetadata.of(SimpleNamespace(group_id="g")) == GroupMetadata("g")


@pytest.mark.parametrize("bad", ["", {}, {"group_id": ""}, {"group_id": 5}, {"generation_id": 1},
                                 {"group_id": "g", "generation_id": "1"},
                                 {"group_id": "g", "generation_id": True}, None, 42,
                                 SimpleNamespace(member_id="m")])
def test_group_metadata_of_rejects(bad):
    with pytest.raises(TypeError):
        GroupMetadata.of(bad)


def test_offsets_by_topic():
    assert offsets_by_topic({("a", 0): 5, ("a", 1): (7, "m"), ("b", 2): 0, ("b", 3): (9, "", 4)}) == {
        "a": [(0, 5, None, -1), (1, 7, "m", -1)], "b": [(2, 0, None, -1), (3, 9, "", 4)]}
    tps = [SimpleNamespace(topic="a", partition=1, offset=3),
           SimpleNamespace(topic="a", partition=2, offset=4, metadata="x"),
           SimpleNamespace(topic="a", partition=3, offset=5, metadata=None, leader_epoch=None),
           SimpleNamespace(topic="a", partition=4, offset=6, metadata=None, leader_epoch=7)]
    assert offsets_by_topic(tps) == {"a": [(1, 3, None, -1), (2, 4, "x", -1), (3, 5, None, -1),
                                           (4, 6, None, 7)]}


@pytest.mark.parametrize("bad", [{}, [], {"a": 1}, {("a",): 1}, {("", 0): 1}, {(5, 0): 1},
                                 {("a", -1): 1}, {("a", 0): -1}, {("a", 0): True},
                                 {("a", True): 1}, {("a", 0): 1.5}, {("a", "0"): 1},
                                 [SimpleNamespace(topic="a", partition=0, offset=None)],
                                 {("a", 0): (1, None, -2)}, {("a", 0): (1, None, "3")}])
def test_offsets_by_topic_rejects(bad):
    with pytest.raises(TypeError):
        offsets_by_topic(bad)


def test_prepared_transaction_pickles():
    pt = PreparedTransaction("tid", 12, 3)
    assert pickle.loads(pickle.dumps(pt)) == pt


# -- state errors --------------------------------------------------------------------------------
@pytest.fixture
def txn_producer():
    p = Producer(bootstrap_servers=NOWHERE, transactional_id="tid", max_block_ms=500,
                 reconnect_backoff_ms=50)
    yield p
    p.close(0)


def initialized(p):
    """As if init_transactions() had finished (no broker here: nothing asks for a producer id)."""
    txn = p._sender.txn
    with txn.lock:
        txn._set_state(State.READY)
    return p


def test_calls_before_init_transactions(txn_producer):
    p = txn_producer
    assert p.transaction_state == "UNINITIALIZED"
    for call in (p.begin_transaction, p.commit_transaction, p.abort_transaction, p.prepare_transaction,
                 lambda: p.send_offsets_to_transaction({("t", 0): 1}, "g"),
                 lambda: p.send("t", value=b"x"), lambda: p.send_batch("t", [b"x"])):
        with pytest.raises(IllegalStateError):
            call()


def test_state_errors(txn_producer):
    p = initialized(txn_producer)
    with pytest.raises(IllegalStateError, match="commit"):
        p.commit_transaction()                 # without begin
    with pytest.raises(IllegalStateError, match="abort"):
        p.abort_transaction()                  # no transaction
    with pytest.raises(IllegalStateError):
        p.prepare_transaction()
    with pytest.raises(IllegalStateError):
        p.send_offsets_to_transaction({("t", 0): 1}, "g")
    with pytest.raises(IllegalStateError, match="outside a transaction"):
        p.send("t", value=b"x")
    with pytest.raises(IllegalStateError, match="init_transactions"):
        p.init_transactions()                  # only once
    p.begin_transaction()
    assert p.transaction_state == "IN_TRANSACTION"
    with pytest.raises(IllegalStateError, match="begin_transaction"):
        p.begin_transaction()                  # twice
    # An empty transaction ends locally (nothing reached a coordinator): no broker needed.
    p.commit_transaction(timeout=5)
    assert p.transaction_state == "READY"
    with pytest.raises(IllegalStateError):
        p.commit_transaction()
    p.begin_transaction()
    p.abort_transaction(timeout=5)
    assert p.transaction_state == "READY"
    with pytest.raises(IllegalStateError):
        p.abort_transaction()
    p.begin_transaction()
    assert p.prepare_transaction(timeout=5) is None
    assert p.transaction_state == "READY"
    assert p.metrics()["txn_commits"] == 1 and p.metrics()["txn_aborts"] == 1


def test_bad_offsets_raise_before_the_state_is_looked_at(txn_producer):
    p = initialized(txn_producer)
    p.begin_transaction()
    with pytest.raises(TypeError):
        p.send_offsets_to_transaction({}, "g")
    with pytest.raises(TypeError):
        p.send_offsets_to_transaction({("t", 0): 1}, {"generation_id": 1})
    assert p.transaction_state == "IN_TRANSACTION"


def test_methods_on_a_non_transactional_producer():
    p = Producer(bootstrap_servers=NOWHERE, max_block_ms=500)
    try:
        assert p.transaction_state is None
        for call in (p.init_transactions, p.begin_transaction, p.commit_transaction,
                     p.abort_transaction, p.prepare_transaction,
                     lambda: p.send_offsets_to_transaction({("t", 0): 1}, "g")):
            with pytest.raises(IllegalStateError, match="transactional_id"):
                call()
    finally:
        p.close(0)


def test_calls_after_close(txn_producer):
    p = initialized(txn_producer)
    p.close(0)
    for call in (p.init_transactions, p.begin_transaction, p.commit_transaction, p.abort_transaction,
                 p.prepare_transaction, lambda: p.send("t", value=b"x")):
        with pytest.raises(ProducerClosedError):
            call()


def test_transaction_abortable_error_is_the_broker_class_and_pickles():
    from fastkafka.errors import TransactionAbortableError, error_for_code

    assert type(error_for_code(120)) is TransactionAbortableError
    cause = error_for_code(29, "topic t")
    e = TransactionAbortableError("abort it", cause=cause)
    back = pickle.loads(pickle.dumps(e))
    assert type(back) is TransactionAbortableError and back.code == 120
    assert back.message == "abort it" and type(back.cause) is type(cause) and back.cause.code == 29
