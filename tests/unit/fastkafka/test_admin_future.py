"""RequestFuture composition and the Admin retry loop, without a broker."""
from __future__ import annotations

import pytest

from fastkafka.admin import Admin, RequestFuture
from fastkafka.errors import (KafkaError, KafkaTimeoutError, NotLeaderOrFollowerError, RequestTimedOutError,
                              TopicAlreadyExistsError, UnknownTopicOrPartitionError, error_for_code)
from fastkafka._net.network import now_ms


def test_complete_and_listeners():
    f = RequestFuture()
    seen = []
    f.add_listener(lambda v: seen.append(("ok", v)), lambda e: seen.append(("err", e)))
    assert not f.is_done() and not f.succeeded() and not f.failed()
    with pytest.raises(KafkaError, match="has not succeeded"):
        f.value
    f.complete(41)
    assert f.is_done() and f.succeeded() and not f.failed()
    assert f.value == 41 and f.exception is None
    assert seen == [("ok", 41)]
    # A listener added after completion runs at once.
    f.add_listener(lambda v: seen.append(("late", v)), lambda e: seen.append(("bad", e)))
    assert seen[-1] == ("late", 41)
    with pytest.raises(KafkaError, match="twice"):
        f.complete(1)
    with pytest.raises(KafkaError, match="twice"):
        f.fail(RuntimeError())
    assert f.value == 41


def test_compose_chain():
    f = RequestFuture()
    g = f.compose(lambda v: v + 1).compose(lambda v: v * 10)
    assert not g.is_done()
    f.complete(4)
    assert g.succeeded() and g.value == 50
    # Composing a done future completes at once.
    h = f.compose(str)
    assert h.value == "4"


def test_failure_propagates_through_compose_without_calling_adapters():
    calls = []
    f = RequestFuture()
    g = f.compose(lambda v: calls.append(v)).compose(lambda v: calls.append(v))
    err = NotLeaderOrFollowerError("moved")
    f.fail(err)
    assert g.failed() and g.exception is err and calls == []
    with pytest.raises(KafkaError, match="has not succeeded"):
        g.value
    assert g.is_retriable() and g.needs_metadata_refresh()


def test_adapter_exception_fails_composed_future():
    f = RequestFuture()

    def check(resp):
        raise error_for_code(resp["error_code"], "from the adapter")
    g = f.compose(check)
    f.complete({"error_code": 36})
    assert f.succeeded()                                    # the raw response was fine
    assert g.failed() and isinstance(g.exception, TopicAlreadyExistsError)
    assert not g.is_retriable() and not g.needs_metadata_refresh()


@pytest.mark.parametrize("exc,retriable,refresh", [
    (RequestTimedOutError(), True, False),
    (UnknownTopicOrPartitionError(), True, True),
    (NotLeaderOrFollowerError(), True, True),
    (TopicAlreadyExistsError(), False, False),
    (ValueError("not a kafka error"), False, False),
])
def test_retriable_flags(exc, retriable, refresh):
    f = RequestFuture()
    f.fail(exc)
    assert f.is_retriable() is retriable and f.needs_metadata_refresh() is refresh


def test_success_has_no_retry_flags():
    f = RequestFuture()
    f.complete(None)
    assert f.succeeded() and f.value is None
    assert not f.is_retriable() and not f.needs_metadata_refresh()


# -- the Admin retry loop, with the network replaced ------------------------------------------

def _admin(**kw):
    # Nothing connects until a request is made; port 9 is never reached by these tests.
    return Admin(bootstrap_servers="127.0.0.1:9", **kw)


def _failed(exc):
    f = RequestFuture()
    f.fail(exc)
    return f


def _done(value):
    f = RequestFuture()
    f.complete(value)
    return f


def test_run_retries_retriable_then_succeeds():
    admin = _admin(retry_backoff_ms=1)
    attempts = []

    def make(deadline):
        attempts.append(deadline)
        return _failed(RequestTimedOutError()) if len(attempts) < 3 else _done("ok")
    assert admin._run(make, 5000) == "ok"
    assert len(attempts) == 3 and len(set(attempts)) == 1   # one deadline for the whole call
    admin.close()


def test_run_raises_non_retriable_at_once():
    admin = _admin()
    attempts = []

    def make(deadline):
        attempts.append(1)
        return _failed(TopicAlreadyExistsError("exists"))
    with pytest.raises(TopicAlreadyExistsError):
        admin._run(make, 5000)
    assert attempts == [1]
    admin.close()


def test_run_fatal_classes_are_not_retried():
    admin = _admin()
    attempts = []

    def make(deadline):
        attempts.append(1)
        return _failed(UnknownTopicOrPartitionError("gone"))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin._run(make, 5000, fatal=(UnknownTopicOrPartitionError,))
    assert attempts == [1]
    admin.close()


def test_run_refreshes_metadata_and_backs_off_between_retries():
    """Regression: after a metadata refresh the loop retried at once, without backoff: thousands of
    requests per second against a broker that keeps answering UNKNOWN_TOPIC_OR_PARTITION."""
    admin = _admin(retry_backoff_ms=100)
    attempts, refreshes = [], []
    admin._refresh = lambda topics, deadline: refreshes.append(topics)

    def make(deadline):
        attempts.append(1)
        return _failed(UnknownTopicOrPartitionError("no such topic"))
    with pytest.raises(UnknownTopicOrPartitionError):
        admin._run(make, 300)
    # Each retry sleeps >= 100 ms, so a 300 ms budget allows at most 4 attempts.
    assert 2 <= len(attempts) <= 4
    assert len(refreshes) == len(attempts) - 1
    admin.close()


class _NoPoll:
    """The admin's network client with a poll() that does nothing (no broker is needed)."""

    def __init__(self, client):
        self._client = client

    def poll(self, timeout, now):
        return None

    def __getattr__(self, name):
        return getattr(self._client, name)


def test_run_reports_last_broker_error_at_deadline_not_a_timeout():
    """Regression: a call retried until its deadline raised KafkaTimeoutError and hid the broker's
    error (e.g. list_offsets of a missing partition)."""
    admin = _admin(retry_backoff_ms=10)
    state = {"n": 0}
    pending = RequestFuture()                               # never completes

    def make(deadline):
        state["n"] += 1
        return _failed(UnknownTopicOrPartitionError("p7")) if state["n"] == 1 else pending
    admin._refresh = lambda topics, deadline: None
    admin._client = _NoPoll(admin._client)
    with pytest.raises(UnknownTopicOrPartitionError) as ei:
        admin._run(make, 200)
    assert isinstance(ei.value.__cause__, KafkaTimeoutError)
    # With no broker error at all, the timeout itself is raised.
    with pytest.raises(KafkaTimeoutError, match="request timed out after 50 ms") as ei:
        admin._run(lambda d: pending, 50)
    assert type(ei.value) is KafkaTimeoutError
    admin.close()


def test_poll_at_deadline_leaves_future_pending_so_a_late_response_is_harmless():
    """Regression: _poll failed a composed future at the deadline; the late response then completed
    it a second time ("request future completed twice") inside the network client's callback."""
    admin = _admin()
    raw = RequestFuture()
    composed = raw.compose(lambda v: v["x"])
    assert admin._poll(composed, now_ms() - 1) is False
    assert not composed.is_done()
    raw.complete({"x": 5})                                  # the late answer: no exception
    assert composed.value == 5
    assert admin._poll(composed, now_ms() - 1) is True
    admin.close()
