"""Transactions: the state machine of a transactional producer.

A producer with ``transactional_id`` writes its records inside transactions: ``init_transactions()``
gets the producer id and epoch from the transaction coordinator (fencing any older producer with the
same id, and aborting the transaction it left open), ``begin_transaction()`` opens one locally, every
partition a record goes to is added to the transaction (AddPartitionsToTxn) before its first batch
leaves, ``send_offsets_to_transaction()`` makes consumer offsets part of it (AddOffsetsToTxn, then
TxnOffsetCommit to the group's coordinator), and ``commit_transaction()`` / ``abort_transaction()``
end it (EndTxn), after which the brokers write the commit or abort markers. ``read_committed``
consumers see the records of committed transactions only.

States (``TransactionManager.state``)::

    UNINITIALIZED -> INITIALIZING -> READY -> IN_TRANSACTION -> COMMITTING -> READY
                                                             -> ABORTING  -> READY
                                                             -> PREPARED  (prepare_transaction)
    IN_TRANSACTION / COMMITTING -> ABORTABLE_ERROR -> ABORTING -> READY
    any -> FATAL_ERROR

Errors come in two kinds, as in the Java client:

* *abortable* -- a record of the transaction failed, a partition could not be added, the broker
  refused a step: the transaction cannot commit; ``commit_transaction()`` raises
  :class:`TransactionAbortableError` and the application calls ``abort_transaction()``; the
  producer stays usable. Records still queued fail with :class:`TransactionAbortedError`.
* *fatal* -- another producer with the same transactional id took over (ProducerFencedError,
  INVALID_PRODUCER_EPOCH), the id is not authorised, the broker lost track of the transaction:
  every later call raises that error; only ``close()`` is left.

Coordinator moves (NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE, a lost connection) look the
coordinator up again; COORDINATOR_LOAD_IN_PROGRESS and CONCURRENT_TRANSACTIONS are retried after a
short backoff. All requests run on the producer's I/O thread, one at a time; application threads
queue them and wait on a :class:`TxnResult`.

A transaction can also be *prepared* (``prepare_transaction()``: flushed, every record acknowledged,
left open) and finished later from another process that knows its transactional id, producer id and
epoch (:class:`PreparedTransaction`): ``Admin.commit_transaction`` / ``Admin.abort_transaction``.
This is the two-phase commit the Spark sink's exactly-once mode uses.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from dataclasses import dataclass
from enum import Enum

from fastkafka._net.backoff import Backoff
import fastkafka.errors as _errors
from fastkafka.errors import (InvalidBrokerResponseError, KafkaError, KafkaTimeoutError,
                     ProducerClosedError, TransactionAbortableError, TransactionAbortedError,
                     error_for_code)
from fastkafka._net.connection import State as ConnState
from fastkafka.protocol import ApiKey

log = logging.getLogger("fastkafka")

# Error codes the transaction steps treat specially, from fastkafka.errors' table (one source of
# truth: the generated class of each broker code carries it).
COORDINATOR_LOAD_IN_PROGRESS = _errors.CoordinatorLoadInProgressError.code
COORDINATOR_NOT_AVAILABLE = _errors.CoordinatorNotAvailableError.code
NOT_COORDINATOR = _errors.NotCoordinatorError.code
CONCURRENT_TRANSACTIONS = _errors.ConcurrentTransactionsError.code
OPERATION_NOT_ATTEMPTED = _errors.OperationNotAttemptedError.code
UNKNOWN_TOPIC_OR_PARTITION = _errors.UnknownTopicOrPartitionError.code
REQUEST_TIMED_OUT = _errors.RequestTimedOutError.code
INVALID_PRODUCER_EPOCH = _errors.InvalidProducerEpochError.code
INVALID_TXN_STATE = _errors.InvalidTxnStateError.code
INVALID_TRANSACTION_TIMEOUT = _errors.InvalidTransactionTimeoutError.code
TRANSACTIONAL_ID_AUTHORIZATION_FAILED = _errors.TransactionalIdAuthorizationFailedError.code
GROUP_AUTHORIZATION_FAILED = _errors.GroupAuthorizationFailedError.code
PRODUCER_FENCED = _errors.ProducerFencedError.code
UNSUPPORTED_VERSION = _errors.UnsupportedVersionError.code
UNSUPPORTED_FOR_MESSAGE_FORMAT = _errors.UnsupportedForMessageFormatError.code
#: The producer cannot go on: every later call raises the error.
FATAL_CODES = frozenset({INVALID_PRODUCER_EPOCH, PRODUCER_FENCED, TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
                         INVALID_TXN_STATE, INVALID_TRANSACTION_TIMEOUT, UNSUPPORTED_VERSION,
                         UNSUPPORTED_FOR_MESSAGE_FORMAT})
#: The coordinator moved or is unknown: look it up again, then retry.
RELOOKUP_CODES = frozenset({NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE})
#: Retried as they are after a short backoff.
RETRY_CODES = frozenset({COORDINATOR_LOAD_IN_PROGRESS, CONCURRENT_TRANSACTIONS, REQUEST_TIMED_OUT,
                         UNKNOWN_TOPIC_OR_PARTITION, OPERATION_NOT_ATTEMPTED})

#: FindCoordinator key types
GROUP, TRANSACTION = 0, 1
#: CONCURRENT_TRANSACTIONS means the previous transaction's markers are still being written: that
#: takes milliseconds, so it is retried sooner than retry_backoff_ms: after 2 ms, doubling up to 20 ms
#: (measured on Apache Kafka: the first AddPartitionsToTxn after a commit is often refused once).
CONCURRENT_RETRY_MS = 20
CONCURRENT_FIRST_RETRY_MS = 2
NO_WAIT = 1 << 30


class State(Enum):
    UNINITIALIZED = "UNINITIALIZED"
    INITIALIZING = "INITIALIZING"
    READY = "READY"
    IN_TRANSACTION = "IN_TRANSACTION"
    COMMITTING = "COMMITTING"
    ABORTING = "ABORTING"
    PREPARED = "PREPARED"
    ABORTABLE_ERROR = "ABORTABLE_ERROR"
    FATAL_ERROR = "FATAL_ERROR"


@dataclass(frozen=True)
class PreparedTransaction:
    """The identity of an open transaction whose records are all written: enough for any process
    to commit or abort it (``Admin.commit_transaction`` / ``Admin.abort_transaction``). Picklable."""

    transactional_id: str
    producer_id: int
    producer_epoch: int


@dataclass(frozen=True)
class GroupMetadata:
    """The consumer group whose offsets ``send_offsets_to_transaction`` commits. A plain group id
    is enough for a consumer that is not in a group generation (``generation_id=-1``); a group
    member passes its generation and member id so the coordinator can fence a stale member."""

    group_id: str
    generation_id: int = -1
    member_id: str = ""
    group_instance_id: str | None = None

    @classmethod
    def of(cls, value) -> "GroupMetadata":
        """From a GroupMetadata, a group id string, a mapping with ``group_id`` (and optionally
        ``generation_id``, ``member_id``, ``group_instance_id``), or any object with those
        attributes (consumers of other libraries)."""
        if isinstance(value, GroupMetadata):
            return value
        if isinstance(value, str):
            if not value:
                raise TypeError("group metadata: the group id must be a non-empty string")
            return cls(value)
        get = value.get if isinstance(value, dict) else (lambda k, d=None: getattr(value, k, d))
        group_id = get("group_id")
        if not isinstance(group_id, str) or not group_id:
            raise TypeError(f"group metadata must be a group id, a mapping or an object with a "
                            f"non-empty 'group_id', got {value!r}")
        generation = get("generation_id", -1)
        member = get("member_id", "") or ""
        instance = get("group_instance_id", None)
        if not isinstance(generation, int) or isinstance(generation, bool):
            raise TypeError(f"generation_id must be an int, got {generation!r}")
        return cls(group_id, generation, str(member), None if instance is None else str(instance))


def offsets_by_topic(offsets) -> dict:
    """``{topic: [(partition, offset, metadata, leader_epoch)]}`` from a mapping ``{(topic,
    partition): offset}`` (or ``offset`` replaced by ``(offset, metadata)`` or ``(offset, metadata,
    leader_epoch)``), or an iterable of objects with ``topic``, ``partition`` and ``offset`` (and
    optionally ``metadata``, ``leader_epoch``) attributes (e.g. other libraries' TopicPartition).
    The offset is the next one to consume, as every Kafka client commits it; the leader epoch is
    the one of the last consumed record, -1 (or None) when unknown (TxnOffsetCommit v2+)."""
    out: dict = {}
    if isinstance(offsets, dict):
        items = []
        for key, value in offsets.items():
            if not (isinstance(key, tuple) and len(key) == 2):
                raise TypeError(f"offsets keys must be (topic, partition) pairs, got {key!r}")
            meta, epoch = None, -1
            if isinstance(value, tuple):
                if len(value) == 3:
                    value, meta, epoch = value
                else:
                    value, meta = value
            items.append((key[0], key[1], value, meta, epoch))
    else:
        items = [(tp.topic, tp.partition, tp.offset, getattr(tp, "metadata", None),
                  getattr(tp, "leader_epoch", -1)) for tp in offsets]
    for topic, partition, offset, meta, epoch in items:
        if not isinstance(topic, str) or not topic:
            raise TypeError(f"offsets: topic must be a non-empty string, got {topic!r}")
        for name, v in (("partition", partition), ("offset", offset)):
            if isinstance(v, bool) or not isinstance(v, int) or v < 0:
                raise TypeError(f"offsets: {name} of {topic!r} must be an int >= 0, got {v!r}")
        if epoch is None:
            epoch = -1
        if isinstance(epoch, bool) or not isinstance(epoch, int) or epoch < -1:
            raise TypeError(f"offsets: leader_epoch of {topic!r} must be an int >= -1 or None, "
                            f"got {epoch!r}")
        out.setdefault(topic, []).append((partition, offset, meta, epoch))
    if not out:
        raise TypeError("offsets is empty: nothing to commit")
    return out


# Guards TxnResult's outcome and callbacks (set by the I/O thread, callbacks added by an event loop).
_RESULT_LOCK = threading.Lock()


class TxnResult:
    """The outcome of one transactional operation, set once by the I/O thread."""

    __slots__ = ("_event", "error", "value", "_callbacks")

    def __init__(self):
        self._event = threading.Event()
        self.error: BaseException | None = None
        self.value = None
        self._callbacks: list | None = None

    def done(self) -> bool:
        return self._event.is_set()

    def set(self, error: BaseException | None = None, value=None) -> None:
        with _RESULT_LOCK:
            if self._event.is_set():
                return
            self.error = error
            self.value = value
            self._event.set()
            callbacks, self._callbacks = self._callbacks, None
        for fn in callbacks or ():
            try:
                fn(self)
            except Exception:
                log.exception("transaction result callback %r raised", fn)

    def add_done_callback(self, fn) -> None:
        """Call ``fn(result)`` once it is set (at once if it is), on the thread that sets it
        (fastkafka.aio hands it to its event loop)."""
        with _RESULT_LOCK:
            if not self._event.is_set():
                if self._callbacks is None:
                    self._callbacks = []
                self._callbacks.append(fn)
                return
        fn(self)

    def wait(self, timeout: float | None, what: str):
        if not self._event.wait(timeout):
            raise KafkaTimeoutError(
                f"{what} did not finish within {timeout} s; it goes on in the background: call "
                f"{what} again to wait for it")
        if self.error is not None:
            raise self.error
        return self.value


class _Request:
    """One queued transactional request: what to send, to which coordinator, and its result."""

    __slots__ = ("kind", "api_key", "coordinator", "result", "data", "prepared")

    def __init__(self, kind: str, api_key: int, coordinator: tuple, result: TxnResult | None, data=None):
        self.kind = kind
        self.api_key = api_key
        self.coordinator = coordinator   # (key type, key)
        self.result = result
        self.data = data
        self.prepared = False            # EndTxn: undrained batches already failed (abort)


class TransactionManager:
    """Owned by the :class:`~fastkafka._producer.sender.Sender`; ``poll`` runs on the I/O thread, the public
    methods of the producer call ``begin``, ``enqueue_*`` and read ``state`` from application
    threads (under ``lock``)."""

    def __init__(self, config, sender):
        self.transactional_id: str = config.transactional_id
        self.timeout_ms: int = config.transaction_timeout_ms
        self.config = config
        self.sender = sender
        self.lock = threading.RLock()
        self.state = State.UNINITIALIZED
        self.error: KafkaError | None = None        # the abortable or fatal error
        self.on_state_change = None                 # callable(state): the producer's send gate
        self._queue: deque[_Request] = deque()
        self._in_flight: _Request | None = None
        self._retry_at = 0
        self._backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._concurrent = Backoff(CONCURRENT_FIRST_RETRY_MS, CONCURRENT_RETRY_MS)
        self._coordinators: dict[tuple, int] = {}
        self._lookup_in_flight = False
        self._adding: list = []                     # partitions in the AddPartitionsToTxn in flight
        self.partitions: set = set()                # partitions of the current transaction
        self.started = False                        # the coordinator knows the transaction
        self.pending_result: dict[str, TxnResult] = {}   # operation -> result being waited on
        self.stats = {"txn_commits": 0, "txn_aborts": 0, "txn_add_partitions": 0,
                      "txn_coordinator_lookups": 0, "txn_retries": 0}

    # -- state (any thread, under lock) --------------------------------------------------------
    def _set_state(self, state: State) -> None:
        self.state = state
        if self.on_state_change is not None:
            self.on_state_change(state)

    def check_not_fatal(self) -> None:
        if self.state is State.FATAL_ERROR:
            raise self.error

    def fatal(self, error: KafkaError) -> None:
        with self.lock:
            if self.state is State.FATAL_ERROR:
                return
            log.error("transactional producer %r cannot continue: %s", self.transactional_id, error)
            self.error = error
            self._set_state(State.FATAL_ERROR)
            queued = list(self._queue)
            self._queue.clear()
        for req in queued:
            if req.result is not None:
                req.result.set(error)
        for res in list(self.pending_result.values()):
            res.set(error)
        self._report(error)   # once: the state is final

    def _report(self, error: KafkaError) -> None:
        """Tell the application's on_error hook (the sender's rate-limited report, I/O thread)."""
        report = getattr(self.sender, "report_error", None)
        if report is not None:
            report(error)

    def abortable(self, error: BaseException) -> None:
        """A record or a step of the current transaction failed: it can only be aborted."""
        with self.lock:
            if self.state not in (State.IN_TRANSACTION, State.COMMITTING):
                return
            log.warning("transaction of %r must be aborted: %s", self.transactional_id, error)
            self.error = error if isinstance(error, KafkaError) else KafkaError(str(error))
            self._set_state(State.ABORTABLE_ERROR)
        if not isinstance(error, ProducerClosedError):   # (closing aborts it anyway)
            self._report(error if isinstance(error, TransactionAbortableError) else
                         TransactionAbortableError(
                             f"the transaction of {self.transactional_id!r} must be aborted "
                             f"(abort_transaction()): {error}", cause=error))

    def batch_failed(self, error: BaseException) -> None:
        """A batch of this producer failed for good (the sender's one place of failure)."""
        code = getattr(error, "code", None)
        if code in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED):
            self.fatal(error_for_code(PRODUCER_FENCED, (
                f"another producer with transactional id {self.transactional_id!r} took over "
                f"(the broker answered {getattr(error, 'name', code)} to a Produce request)")))
        elif not isinstance(error, TransactionAbortedError):
            self.abortable(error)

    def has_ongoing(self) -> bool:
        """A transaction is open and not prepared (close() aborts it)."""
        return self.state in (State.IN_TRANSACTION, State.ABORTABLE_ERROR, State.COMMITTING)

    def enqueue(self, kind: str, api_key: int, coordinator: tuple, data=None,
                front: bool = False) -> TxnResult:
        result = TxnResult()
        req = _Request(kind, api_key, coordinator, result, data)
        if front:
            self._queue.appendleft(req)
        else:
            self._queue.append(req)
        self.sender.wakeup()
        return result

    def idle(self) -> bool:
        """No transaction end queued or in flight (what closing waits for)."""
        reqs = list(self._queue) + ([self._in_flight] if self._in_flight is not None else [])
        return not any(r.kind == "end" for r in reqs) or self.state is State.FATAL_ERROR

    def begin_close_abort(self) -> None:
        """Closing: an open transaction (not a prepared one) is aborted, so it does not hold back
        ``read_committed`` consumers until ``transaction_timeout_ms``."""
        with self.lock:
            if not self.has_ongoing() or any(r.kind == "end" for r in self._queue):
                return
            if self.sender.idem.producer_id < 0:
                return
            log.info("closing: aborting the open transaction of %r", self.transactional_id)
            self._set_state(State.ABORTING)
            self.enqueue("end", ApiKey.END_TXN, (TRANSACTION, self.transactional_id),
                         {"committed": False})

    # -- I/O thread ----------------------------------------------------------------------------
    def poll(self, now: int) -> int:
        """Send the next transactional request if one is due; returns how long the I/O loop may
        sleep as far as transactions are concerned (ms)."""
        if self.state in (State.ABORTABLE_ERROR, State.FATAL_ERROR, State.ABORTING):
            self._abort_undrained()
        if self._in_flight is not None or self._lookup_in_flight:
            return NO_WAIT
        if now < self._retry_at:
            return self._retry_at - now
        req = self._next_request(now)
        if req is None:
            return NO_WAIT
        node = self._coordinators.get(req.coordinator)
        if node is None:
            return self._lookup(req.coordinator, now)
        client = self.sender.client
        if not client.ready(node, now):
            auth_error = client.authentication_error(node)
            if auth_error is not None:
                self._failed(req, auth_error, now)
                return 0
            conn = client.connections.get(node)
            if conn is None:   # not in the metadata (any more)
                self._coordinators.pop(req.coordinator, None)
                self.sender.metadata.request_update()
                return self.config.retry_backoff_ms
            if conn.state is ConnState.DISCONNECTED and conn.failures > 0:
                # The coordinator cannot be reached (its node died): look it up again, after a
                # backoff, as the Java client does. Without this every attempt went to the dead
                # node until its metadata entry vanished -- which never happens while the
                # connection object exists, so the transaction could never end.
                log.debug("coordinator %s of %s unreachable: looking it up again", node, req.coordinator)
                self._coordinators.pop(req.coordinator, None)
                self.sender.metadata.request_update()
                self.stats["txn_retries"] += 1
                delay = self._backoff.failed()
                self._retry_at = now + delay
                return delay
            return max(client.connection_delay(node, now), 1)
        try:
            client.send(node, req.api_key, self._body(req), now,
                        lambda body, error: self._on_response(req, node, body, error))
        except KafkaError as e:  # UnsupportedVersionError: the broker cannot do transactions
            self._failed(req, e, now)
            return 0
        self._in_flight = req
        return NO_WAIT

    def _abort_undrained(self) -> None:
        acc = self.sender.acc
        if acc.has_undrained():
            cause = self.error
            err = TransactionAbortedError(
                f"the transaction of {self.transactional_id!r} was aborted before this record was "
                f"sent" + (f" (cause: {cause})" if cause is not None else ""))
            for b in acc.abort_undrained():
                self.sender.unmute_and_fail(b, err)

    def _next_request(self, now: int) -> _Request | None:
        sender = self.sender
        idem = sender.idem
        head = self._queue[0] if self._queue else None
        if head is not None and head.kind == "init":
            return head
        if head is not None and head.kind == "end":
            if not self.started and sender.in_flight_batches == 0:
                # Nothing reached the coordinator (no partition, no offsets): the transaction
                # exists only here, and ends here (EndTxn would be refused INVALID_TXN_STATE).
                self._abort_undrained()
                self._finish(head)
                return None
            if head.data["committed"]:
                # Every record is delivered before EndTxn(commit): commit_transaction flushed.
                if sender.in_flight_batches > 0 or sender.acc.has_undrained():
                    return None
            elif sender.in_flight_batches > 0:
                return None   # in-flight batches complete (the abort markers cover them)
            if not head.prepared:
                head.prepared = True
                sender.acc.txn_reset()   # nothing more joins the ending transaction
            return head
        if self.state in (State.READY, State.IN_TRANSACTION) and idem.producer_id >= 0 \
                and idem.bump_required and not self.partitions and sender.in_flight_batches == 0:
            # A sequence broke between transactions: a new epoch before the next records leave.
            req = _Request("init", ApiKey.INIT_PRODUCER_ID, (TRANSACTION, self.transactional_id), None)
            self._queue.appendleft(req)
            return req
        if not idem.has_producer_id():
            return None
        if head is not None:
            return head
        if self.state in (State.IN_TRANSACTION, State.COMMITTING):
            pending = sender.acc.txn_pending_partitions()
            if pending:
                with self.lock:
                    # Application threads queue under the lock: an abort_transaction() queued
                    # since the head was read must stay ahead of (and not be followed by) an
                    # AddPartitionsToTxn, which would open a transaction after the abort.
                    if self._queue or self.state not in (State.IN_TRANSACTION, State.COMMITTING):
                        return None
                    req = _Request("add_partitions", ApiKey.ADD_PARTITIONS_TO_TXN,
                                   (TRANSACTION, self.transactional_id), None, sorted(pending))
                    self._queue.append(req)
                return req
        return None

    def _body(self, req: _Request) -> dict:
        idem = self.sender.idem
        tid = self.transactional_id
        if req.kind == "init":
            return {"transactional_id": tid, "transaction_timeout_ms": self.timeout_ms,
                    "producer_id": idem.producer_id, "producer_epoch": idem.producer_epoch}
        base = {"transactional_id": tid, "producer_id": idem.producer_id,
                "producer_epoch": idem.producer_epoch}
        if req.kind == "add_partitions":
            topics: dict = {}
            for t, p in req.data:
                topics.setdefault(t, []).append(p)
            return {"v3_and_below_transactional_id": tid,
                    "v3_and_below_producer_id": idem.producer_id,
                    "v3_and_below_producer_epoch": idem.producer_epoch,
                    "v3_and_below_topics": [{"name": t, "partitions": ps} for t, ps in topics.items()]}
        if req.kind == "end":
            return {**base, "committed": req.data["committed"]}
        if req.kind == "add_offsets":
            return {**base, "group_id": req.data["group"].group_id}
        if req.kind == "offset_commit":
            g = req.data["group"]
            return {**base, "group_id": g.group_id, "generation_id": g.generation_id,
                    "member_id": g.member_id, "group_instance_id": g.group_instance_id,
                    "topics": [{"name": t, "partitions": [
                        {"partition_index": p, "committed_offset": o, "committed_leader_epoch": e,
                         "committed_metadata": m} for p, o, m, e in parts]}
                        for t, parts in req.data["offsets"].items()]}
        raise AssertionError(req.kind)

    # -- coordinator lookup --------------------------------------------------------------------
    def _lookup(self, coordinator: tuple, now: int) -> int:
        client = self.sender.client
        node = client.least_loaded_node(now)
        if node is None or not client.ready(node, now):
            return self.config.retry_backoff_ms if node is None else max(client.connection_delay(node, now), 1)
        key_type, key = coordinator
        self._lookup_in_flight = True
        self.stats["txn_coordinator_lookups"] += 1
        try:
            client.send(node, ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, now,
                        lambda body, error: self._on_coordinator(coordinator, body, error))
        except KafkaError as e:
            self._lookup_in_flight = False
            self.fatal(e)
        return NO_WAIT

    def _on_coordinator(self, coordinator: tuple, body, error) -> None:
        self._lookup_in_flight = False
        now = self.sender.clock()
        if error is None and body["error_code"]:
            error = error_for_code(body["error_code"], body.get("error_message"))
        if error is None and body["node_id"] < 0:
            error = InvalidBrokerResponseError(f"FindCoordinator answered node {body['node_id']}")
        if error is not None:
            code = getattr(error, "code", None)
            if code == TRANSACTIONAL_ID_AUTHORIZATION_FAILED or code == GROUP_AUTHORIZATION_FAILED:
                self.fatal(error)
                return
            self.stats["txn_retries"] += 1
            self._retry_at = now + self._backoff.failed()
            log.debug("FindCoordinator for %s failed: %s", coordinator, error)
            return
        node = body["node_id"]
        if self.sender.metadata.cluster.broker(node) is None:
            self.sender.metadata.request_update()   # connect once the metadata names it
        self._coordinators[coordinator] = node

    # -- responses -----------------------------------------------------------------------------
    def _on_response(self, req: _Request, node: int, body, error) -> None:
        self._in_flight = None
        now = self.sender.clock()
        try:
            if error is None:
                error = self._handle(req, body, now)
        except Exception as e:   # a bug or an answer that cannot be used: retried like an error
            log.exception("handling the %s answer failed", req.kind)
            error = InvalidBrokerResponseError(f"handling the {req.kind} answer failed: {e!r}")
        if error is not None:
            if getattr(error, "retriable", False) and getattr(error, "code", None) not in RETRY_CODES:
                self._coordinators.pop(req.coordinator, None)   # a lost connection: look again
            self._failed(req, error, now)

    def _failed(self, req: _Request, error: BaseException, now: int) -> None:
        """A request failed: retried (after a relookup or a backoff), or its operation fails."""
        code = getattr(error, "code", None)
        if code in RELOOKUP_CODES:
            self._coordinators.pop(req.coordinator, None)
        if code in RELOOKUP_CODES or code in RETRY_CODES or (
                getattr(error, "retriable", False) and code not in FATAL_CODES):
            self.stats["txn_retries"] += 1
            delay = (self._concurrent.failed() if code == CONCURRENT_TRANSACTIONS
                     else self._backoff.failed())
            self._retry_at = now + delay
            log.debug("%s for %r retried in %d ms: %s", req.kind, self.transactional_id, delay, error)
            return
        if self._queue and self._queue[0] is req:
            self._queue.popleft()
        if code in FATAL_CODES or (req.kind in ("init", "end") and not isinstance(error, KafkaError)):
            if code in (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED):
                error = error_for_code(PRODUCER_FENCED, (
                    f"another producer with transactional id {self.transactional_id!r} took over "
                    f"({getattr(error, 'name', code)} answered to {req.kind})"))
            self.fatal(error)
            return
        if req.kind == "init":
            with self.lock:
                if self.state is State.INITIALIZING:
                    self._set_state(State.UNINITIALIZED)
            if req.result is not None:
                req.result.set(error)
            return
        wrapped = TransactionAbortableError(
            f"{req.kind} for transactional id {self.transactional_id!r} failed: {error}", cause=error)
        if req.kind == "end":
            # The coordinator refused to end the transaction in a way that is neither a retry nor
            # a fencing: the transaction is in an unknown state.
            self.fatal(error)
            return
        self.abortable(error)
        if req.result is not None:
            req.result.set(wrapped)

    def _handle(self, req: _Request, body, now: int):
        """Apply a response; returns an error to retry/fail with, or None when done."""
        kind = req.kind
        if kind == "add_partitions":
            failed = {}
            for t in body["results_by_topic_v3_and_below"]:
                for p in t["results_by_partition"]:
                    if p["partition_error_code"]:
                        failed[(t["name"], p["partition_index"])] = p["partition_error_code"]
            if failed:
                codes = set(failed.values())
                worst = next((c for c in codes if c in FATAL_CODES), None) or next(
                    (c for c in codes if c in RELOOKUP_CODES), None) or next(
                    (c for c in codes if c not in RETRY_CODES), None) or min(codes)
                return error_for_code(worst, "AddPartitionsToTxn: " + ", ".join(
                    f"{t}-{p}: {error_for_code(c).name}" for (t, p), c in sorted(failed.items())))
            self._done_request(req)
            self.stats["txn_add_partitions"] += len(req.data)
            self.partitions.update(req.data)
            self.started = True
            self.sender.acc.txn_mark_added(req.data)
            return None
        if kind == "offset_commit":
            failed = [(t["name"], p["partition_index"], p["error_code"])
                      for t in body["topics"] for p in t["partitions"] if p["error_code"]]
            if failed:
                worst = failed[0][2]
                return error_for_code(worst, "TxnOffsetCommit: " + ", ".join(
                    f"{t}-{p}: {error_for_code(c).name}" for t, p, c in failed))
            self._done_request(req)
            return None
        code = body["error_code"]
        if code:
            return error_for_code(code, f"{kind} for transactional id {self.transactional_id!r}")
        if kind == "init":
            if body["producer_id"] < 0 or body["producer_epoch"] < 0:
                return InvalidBrokerResponseError(
                    f"InitProducerId answered producer id {body['producer_id']} epoch "
                    f"{body['producer_epoch']} without an error")
            self.sender.idem.set_producer_id(body["producer_id"], body["producer_epoch"])
            with self.lock:   # the state first: init_transactions() returns once the result is set
                if self.state is State.INITIALIZING:
                    self._set_state(State.READY)
            self._done_request(req)
            return None
        if kind == "add_offsets":
            self.started = True
            self._done_request(req, keep_result=True)
            # The offsets go to the group's coordinator next, ahead of anything else queued.
            follow = _Request("offset_commit", ApiKey.TXN_OFFSET_COMMIT, (GROUP, req.data["group"].group_id),
                              req.result, req.data)
            self._queue.appendleft(follow)
            return None
        if kind == "end":
            self._finish(req)
            return None
        raise AssertionError(kind)

    def _finish(self, req: _Request) -> None:
        """The transaction ended (committed or aborted): ready for the next one."""
        self.partitions.clear()
        self.started = False
        self.sender.acc.txn_reset()
        self.stats["txn_commits" if req.data["committed"] else "txn_aborts"] += 1
        with self.lock:
            if self.state is not State.FATAL_ERROR:
                self.error = None
                self._set_state(State.READY)
        self._done_request(req)

    def _done_request(self, req: _Request, keep_result: bool = False) -> None:
        self._backoff.succeeded()
        self._concurrent.succeeded()
        if self._queue and self._queue[0] is req:
            self._queue.popleft()
        if req.result is not None and not keep_result:
            req.result.set(None, req)
