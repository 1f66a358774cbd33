# cython: language_level=3, annotation_typing=False
"""The sender: the producer's background I/O thread.

Each turn of the loop (``run_once``): make sure an idempotent producer has its id, ask the accumulator
which leaders have sendable data, keep only the nodes the network client can send to now (connecting
the others), drain at most one batch per partition per node under ``max_request_size``, expire
batches that waited longer than ``delivery_timeout_ms``, queue one Produce request per node, and poll
the network. Produce requests are written, and their answers read, by the compiled codec
(:mod:`fastkafka.protocol.produce_codec`): no nested dicts per request or partition on this thread. Responses come back through :meth:`Sender._on_produce_response`, which completes,
retries or fails each batch; batch completion (futures, user callbacks) runs on this thread with no
lock held.
"""

import logging
import threading

cimport cython
from libc.stdint cimport int32_t, int64_t

from fastkafka._net.clock cimport monotonic_ms as c_monotonic_ms
from fastkafka._producer.accumulator cimport RecordAccumulator, stamp_batch_for_send
from fastkafka._producer.batch cimport ProducerBatch
from fastkafka._producer.gil_free_turn cimport GilFreeTurn, gil_free_turn
from fastkafka._producer.produce_request cimport ProduceRequestBuilder
from fastkafka._net.network cimport NetworkClient
from fastkafka._net.sampled cimport SampledRegistry, sampled_record_c

from fastkafka._producer.batch import register_io_thread, unregister_io_thread
from fastkafka._net.cells import monotonic_ms as now_ms
from fastkafka._net.backoff import Backoff
from fastkafka.errors import (BrokerDataLossError, DeliveryTimeoutError, InvalidBrokerResponseError, KafkaError,
                     MessageTooLargeError, ProducerClosedError, ProducerFencedError, RecordListTooLargeError,
                     UnsupportedVersionError, error_for_code)
from fastkafka.errors import (DuplicateSequenceNumberError, FencedLeaderEpochError,
                              InvalidProducerEpochError, NotLeaderOrFollowerError,
                              OutOfOrderSequenceNumberError, UnknownProducerIdError)
from fastkafka._producer.accumulator import IdempotenceState
from fastkafka._producer.error_reports import ErrorReporter
from fastkafka._wire.compression import CODEC_SPECS, in_c as codec_in_c
from fastkafka.protocol import ApiKey

log = logging.getLogger("fastkafka")

OUT_OF_ORDER_SEQUENCE_NUMBER = OutOfOrderSequenceNumberError.code
DUPLICATE_SEQUENCE_NUMBER = DuplicateSequenceNumberError.code
UNKNOWN_PRODUCER_ID = UnknownProducerIdError.code
INVALID_PRODUCER_EPOCH = InvalidProducerEpochError.code
SEQUENCE_ERRORS = (OUT_OF_ORDER_SEQUENCE_NUMBER, UNKNOWN_PRODUCER_ID, INVALID_PRODUCER_EPOCH)
# Broker codes from fastkafka.errors' table (one source of truth).
MESSAGE_TOO_LARGE = MessageTooLargeError.code
RECORD_LIST_TOO_LARGE = RecordListTooLargeError.code
SPLIT_ERRORS = (MESSAGE_TOO_LARGE, RECORD_LIST_TOO_LARGE)  # a batch of several records is split
PRODUCER_FENCED = ProducerFencedError.code
TXN_FENCED = (INVALID_PRODUCER_EPOCH, PRODUCER_FENCED)   # a transactional producer was fenced
# Produce errors whose partition answer may carry the current leader (KIP-951's CurrentLeader).
LEADER_HINT_CODES = (NotLeaderOrFollowerError.code, FencedLeaderEpochError.code)
cdef int API_PRODUCE = int(ApiKey.PRODUCE)
cdef int API_INIT_PRODUCER_ID = int(ApiKey.INIT_PRODUCER_ID)
cdef int DUP_SEQ = DUPLICATE_SEQUENCE_NUMBER
cdef int64_t _NO_TIMEOUT = 1 << 40

# Tests make a stage fail to prove the failure is contained: a callable ``(stage, sender)`` that
# may raise (stages: ``"run_once"``, ``"produce_response"``), None normally. Set only through
# set_failpoint_c (fastkafka._producer.testing.set_sender_failpoint).
cdef object _failpoint = None


cdef int set_failpoint_c(object fn) except -1:
    global _failpoint
    _failpoint = fn
    return 0


@cython.final
cdef class Sender:
    def __init__(self, config, accumulator, metadata, client, clock=now_ms):
        self.config = config
        self.acc = accumulator
        self.metadata = metadata
        self.client = client
        self.clock = clock
        self._default_clock = clock is now_ms
        self._max_request_size = config.max_request_size
        self._delivery_timeout_ms = config.delivery_timeout_ms
        self._retry_backoff_ms = config.retry_backoff_ms
        self._request_timeout_ms = config.request_timeout_ms
        self._retries = min(config.retries, 2**31 - 1)
        # The idempotence state lives in the accumulator's partitions (the drain stamps with it).
        self.idem = IdempotenceState(accumulator, config.transactional_id is not None) \
            if config.enable_idempotence else None
        self.transactional_id = config.transactional_id
        self.txn = None
        if self.transactional_id is not None:
            from fastkafka._producer.transactions import TransactionManager
            self.txn = TransactionManager(config, self)
            accumulator.transactional = True
        self.acks = config.acks
        self.min_produce_version = CODEC_SPECS[config.compression_code].min_produce_version
        self.running = True
        self.force_close = False
        self.in_flight_batches = 0
        self._init_retry_ms = 0
        self._init_backoff = Backoff(config.retry_backoff_ms, config.retry_backoff_max_ms)
        self._thread = None
        self.fatal_error = None
        self.on_error = config.on_error
        # Errors of no single record (on_error): rate-limited per kind and broker; the network
        # client's (brokers down and back, authentication, unusable brokers) come through
        # _network_error with the other completions of its poll.
        self.stats = {}
        self.reporter = ErrorReporter(config.on_error,
                                      getattr(config, "error_report_interval_ms", 60_000), self.stats)
        client.error_hook = self._network_error
        self.on_fatal = None   # told when this thread dies of a bug
        self._io_calls = []
        # The Produce requests of both turns are built by fastkafka._producer.produce_request
        # (produce_request_c) and sit in the connections' in-flight rings, which are the one record
        # of what is in flight (fail_everything reads them). The GIL-free turn
        # (fastkafka._producer.gil_free_turn) runs inside the network's wait for the steady
        # state's batches: plaintext, acknowledged, uncompressed or of a codec compressed in C
        # (fastkafka._wire.ccodecs).
        self._requests = ProduceRequestBuilder.__new__(ProduceRequestBuilder)
        self._requests.init_c(<RecordAccumulator?>accumulator, <NetworkClient?>client, config,
                              self.min_produce_version, &self.in_flight_batches)
        self._gil_free = GilFreeTurn.__new__(GilFreeTurn)
        self._gil_free.init_c(<RecordAccumulator>accumulator, <NetworkClient>client, config,
                              self._requests)
        client.produce_handler = self._on_produce_response
        self._gil_free_wait = (config.gil_free_io and self.acks != 0
                               and codec_in_c(config.compression_code))
        self._other_timeout = 0
        self.stats.update({"batches_sent": 0, "records_sent": 0, "retries": 0, "errors": 0,
                           "batches_split": 0,
                           "batches_expired": 0, "produce_requests": 0, "init_producer_id_failures": 0,
                           "broker_data_loss": 0, "leader_hints_applied": 0,
                           "leader_hints_ignored": 0})
        # the windowed statistics live in the network client (a test's stand-in has none)
        self.sampled = (<NetworkClient>client).sampled if isinstance(client, NetworkClient) else None
        self._io_wait_seen = 0
        self._stats_cb = getattr(config, "stats_cb", None)
        self._stats_interval = getattr(config, "statistics_interval_ms", 0) or 0
        if self._stats_cb is None:
            self._stats_interval = 0
        self._stats_next = 0
        self.stats_source = None

    @property
    def gil_free_requests(self):
        """Produce requests the GIL-free turn sent (0 where it does not apply: gil_free_io=False,
        TLS connections, a codec not compressed in C, acks=0)."""
        return self._gil_free.turns_sent if self._gil_free_wait else 0

    @property
    def gil_free_answers(self):
        """Answers read, decoded and matched to their batches by the GIL-free turn (all success:
        the GIL turn only completes them)."""
        return self._gil_free.answers_read

    cdef int64_t now_c(self) except? -1:
        if self._default_clock:
            return c_monotonic_ms()
        return self.clock()

    # -- thread ----------------------------------------------------------------------------
    def start(self, name: str) -> None:
        self._thread = threading.Thread(target=self.run, name=name, daemon=True)
        self._thread.start()

    def wakeup(self) -> None:
        self.client.wakeup()

    def call_soon(self, fn) -> None:
        """Run ``fn()`` on this thread at the start of its next turn (for work that must not race
        with the drain, e.g. failing queued batches of an idempotent producer); wakes the thread.
        An exception of ``fn`` is logged. Calls still pending when the thread stops are not run:
        the caller waits with a bound and checks the thread is alive."""
        self._io_calls.append(fn)
        self.client.wakeup()

    def join(self, timeout: float | None = None) -> bool:
        if self._thread is not None:
            self._thread.join(timeout)
            return not self._thread.is_alive()
        return True

    def run(self) -> None:
        ident = threading.get_ident()
        register_io_thread(ident)
        try:
            while self.running:
                self.run_once()
            # Closing: keep sending until everything queued and in flight is done.
            if self.txn is not None and not self.force_close:
                self.txn.begin_close_abort()   # an open (not prepared) transaction is aborted
            while not self.force_close and (self.acc.has_undrained() or self.in_flight_batches > 0
                                            or (self.txn is not None and not self.txn.idle())):
                self.run_once()
            if not self.force_close:
                self._confirm_unacknowledged_writes()
        except BaseException as e:  # a bug: fail loudly, but give every record an outcome
            log.exception("the producer's I/O thread failed; every record not yet delivered fails")
            self.fatal_error = ProducerClosedError(f"the producer's I/O thread failed: {e!r}")
            self.force_close = True
            self.acc.close()
            if self.on_fatal is not None:
                self.on_fatal()
        finally:
            # In-flight requests fail through their callbacks when the connections close; whatever
            # is still queued fails here, and later sends are refused. Nothing is left without an
            # outcome.
            self.force_close = True
            error = self.fatal_error or ProducerClosedError("producer closed before these records were delivered")
            try:
                self.client.close()
            except Exception:  # pragma: no cover - the last resort below still runs
                log.exception("closing the connections failed")
            self.fail_everything(error)
            unregister_io_thread(ident)

    def fail_everything(self, error: KafkaError) -> None:
        """The last resort: every queued and in-flight batch completes with ``error`` (a batch that
        already has its outcome is left alone). Safe from another thread while the I/O thread is
        stuck: completion is once-only."""
        for b in self.acc.abort_undrained():
            self._fail(b, error)
        in_flight = []
        for conn in list(self.client.connections.values()):   # their in-flight rings
            in_flight.extend(conn.produce_batches())
        for b in in_flight:
            if b.complete(-1, -1, error):
                self.stats["errors"] += 1

    def _confirm_unacknowledged_writes(self) -> None:
        """Before closing, wait (up to request_timeout_ms, or until close's deadline forces it)
        until every broker that got acks=0 Produce requests has answered a request sent after
        them: closing right after the write can make a broker drop requests it had not handled."""
        now = self.now_c()
        waiting = self.client.confirm_writes(now)
        deadline = now + self.config.request_timeout_ms
        while waiting and not self.force_close and now < deadline:
            self.client.poll(min(deadline - now, 100), now)
            now = self.now_c()

    # -- one turn of the loop --------------------------------------------------------------
    def run_once(self) -> None:
        cdef int64_t now = self.now_c(), timeout, txn_timeout
        cdef bint gil_free = True
        if _failpoint is not None:
            _failpoint("run_once", self)
        if self._io_calls:
            calls, self._io_calls = self._io_calls, []
            for fn in calls:
                try:
                    fn()
                except Exception:
                    log.exception("a call made on the I/O thread (call_soon) raised")
        # A metadata refresh that is due goes out before the batches: a retry after a stale-leader
        # error that comes due in the same turn as the refresh it asked for follows the refresh
        # (the network's poll would send the refresh only after them).
        (<NetworkClient>self.client).maybe_update_metadata_c(now)
        if self.txn is not None:
            # The transaction manager gets the producer id (init_transactions) and adds partitions
            # to the transaction before their batches can be drained.
            txn_timeout = self.txn.poll(now)
            timeout = min(txn_timeout, self._send_producer_data(now))
            if txn_timeout < self._other_timeout:
                self._other_timeout = txn_timeout   # a deadline of the GIL turn's own
        elif self.idem is not None and not self.idem.has_producer_id():
            # Works towards the id (or the bumped epoch); meanwhile nothing is drained, but queued
            # batches still expire after delivery_timeout_ms.
            self._maybe_init_producer_id(now)
            timeout = min(self._send_producer_data(now), self.config.retry_backoff_ms)
            gil_free = False
        else:
            timeout = self._send_producer_data(now)
        if self._stats_interval > 0:
            timeout = min(timeout, self._stats_due(now))
        if gil_free and timeout and self._gil_free_wait and self._gil_free.prepare_c(now):
            (<NetworkClient>self.client).set_gil_free_c(
                gil_free_turn, self._gil_free.ctx_c(), self._gil_free.gil_deadline_c(),
                self._other_timeout)
        self.client.poll(timeout, now)
        if self.sampled is not None:
            self._record_io_wait()
        if self._gil_free_wait:
            stranded = self._gil_free.collect_c(self.stats)
            if stranded is not None:
                # taken out and stamped by the GIL-free turn, which could not queue them
                now = self.now_c()
                for node, batches in stranded:
                    self._send_produce(node, batches, now)

    cdef int64_t _stats_due(self, int64_t now) except? -1:
        """Run stats_cb when its interval has passed (on this thread; one that raises is logged
        and the next ones still run); the time until it is due next, which bounds this turn's
        wait (the GIL-free turn's too)."""
        cdef int64_t left
        if self._stats_next == 0:
            self._stats_next = now + self._stats_interval
        if now >= self._stats_next:
            self._stats_next = now + self._stats_interval
            try:
                doc = self.stats_source() if self.stats_source is not None else None
                if doc is not None:
                    self._stats_cb(doc)
            except Exception:
                log.exception("stats_cb raised")
        left = self._stats_next - now
        if left < self._other_timeout:
            self._other_timeout = left
        return left

    cdef int _record_io_wait(self) except -1:
        """The I/O thread's time in epoll_wait since the last turn (io-wait-ratio)."""
        cdef long long waited = (<NetworkClient>self.client).poller.io_wait_ns
        cdef SampledRegistry r = <SampledRegistry>self.sampled
        if waited != self._io_wait_seen:
            sampled_record_c(&r.g.io_wait, &r.g.conf, waited - self._io_wait_seen, self.now_c())
            self._io_wait_seen = waited
        return 0

    def _maybe_init_producer_id(self, now: int) -> bool:
        """Returns True when the producer id is known; otherwise works towards getting it."""
        idem = self.idem
        if idem.init_in_flight or now < self._init_retry_ms:
            return False
        if idem.bump_required and self.in_flight_batches > 0:
            return False  # wait until every in-flight batch is resolved before changing epoch
        node = self.client.least_loaded_node(now)
        if node is None or not self.client.ready(node, now):
            return False
        body = idem.init_request_body() if idem.bump_required else {
            "transactional_id": None, "transaction_timeout_ms": 2**31 - 1,
            "producer_id": -1, "producer_epoch": -1}
        idem.init_in_flight = True
        try:
            self.client.send(node, ApiKey.INIT_PRODUCER_ID, body, now, self._on_init_producer_id,
                             min_version=3 if idem.bump_required else 0)
        except UnsupportedVersionError as e:
            idem.init_in_flight = False
            self._init_retry_ms = now + self._init_backoff.failed()
            if idem.bump_required:
                # The broker cannot bump an epoch: start over with a fresh producer id.
                log.warning("epoch bump not supported (%s); asking for a new producer id", e)
                idem.bump_required = False
                idem.producer_id = -1
                idem.producer_epoch = -1
            else:
                log.warning("InitProducerId not possible on node %s: %s", node, e)
                e.node = node
                self.report_error(e, now)   # nothing can be sent until a broker can do it
        return False

    def _on_init_producer_id(self, body, error) -> None:
        idem = self.idem
        idem.init_in_flight = False
        now = self.now_c()
        if error is None and body["error_code"] != 0:
            error = error_for_code(body["error_code"], "InitProducerId failed")
        if error is None and (body["producer_id"] < 0 or body["producer_epoch"] < 0):
            # No error, yet nothing usable: retried with the backoff like an error.
            error = InvalidBrokerResponseError(
                f"InitProducerId answered producer id {body['producer_id']} epoch "
                f"{body['producer_epoch']} without an error")
        if error is not None:
            self.stats["init_producer_id_failures"] += 1
            delay = self._init_backoff.failed()
            # The first failure at INFO (a coordinator loading is normal); repeats at DEBUG.
            log.log(logging.INFO if self._init_backoff.failures == 1 else logging.DEBUG,
                    "InitProducerId failed (%d in a row; next try in %d ms): %s",
                    self._init_backoff.failures, delay, error)
            if not getattr(error, "retriable", False):
                if idem.bump_required:
                    idem.bump_required = False  # fall back to a new id
                    idem.producer_id = -1
                    idem.producer_epoch = -1
                else:
                    # No producer id to be had (an authorization error, say): nothing is sent
                    # until the broker gives one; the application hears it now, not at the
                    # records' delivery timeout.
                    self.report_error(error, now)
            self._init_retry_ms = now + delay
            return
        self._init_backoff.succeeded()
        idem.set_producer_id(body["producer_id"], body["producer_epoch"])

    cdef int64_t _send_producer_data(self, int64_t now) except? -1:
        cdef int64_t timeout, next_check
        cdef list sendable
        cdef dict by_node
        cluster = self.metadata.cluster
        ready_nodes, next_check, unknown_topics = self.acc.ready(cluster, now)
        if unknown_topics:
            for t in unknown_topics:
                self.metadata.add_topic(t)
            self.metadata.request_update()
        timeout = next_check
        # the timeout apart from linger deadlines (the GIL-free turn meets those itself)
        other = _NO_TIMEOUT
        sendable = []
        client = self.client
        for node in ready_nodes:
            if client.ready(node, now):
                sendable.append(node)
            else:
                delay = max(client.connection_delay(node, now), 1)
                timeout = min(timeout, delay)
                other = min(other, delay)
                auth_error = self.client.authentication_error(node)
                if auth_error is not None:
                    self._fail_unauthenticated(cluster, node, auth_error, now)
        if self.idem is not None and not self.idem.has_producer_id():
            sendable = []  # drain nothing until the producer id is known / the epoch is bumped
        if sendable:
            by_node = self.acc.drain(cluster, sendable, self._max_request_size, now)
            self._fail_unclosable()
            for node, batches in by_node.items():
                if batches:
                    self._send_produce(node, batches, now)
        for batch in self.acc.expired_batches(now):
            self.stats["batches_expired"] += 1
            self._unresolved(batch)
            self._fail(batch, DeliveryTimeoutError(
                f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} expired after "
                f"{now - batch.created_ms} ms waiting to be sent (delivery_timeout_ms="
                f"{self.config.delivery_timeout_ms})"))
        if sendable and self.acc.has_undrained():
            timeout = 0
        self._other_timeout = other
        return max(timeout, 0)

    cdef int _fail_unclosable(self) except -1:
        """Batches drained but not closable (encoding or compressing raised): each fails with
        its error; nothing of them was sent or sequenced."""
        for b, error in self.acc.take_failed():
            self._unmute(b)
            self._fail(b, error)
        return 0

    def _fail_unauthenticated(self, cluster, node: int, error: KafkaError, now: int) -> None:
        """The node's last authentication failed (not retriable; it is tried again after
        reconnect_backoff_max_ms): the records queued for the partitions it leads fail with that
        error now instead of waiting for delivery_timeout_ms."""
        while True:
            batches = self.acc.drain(cluster, [node], self.config.max_request_size, now).get(node)
            self._fail_unclosable()
            if not batches:
                return
            for b in batches:
                self._unmute(b)
                self._unresolved(b)
                self._fail(b, error)

    cpdef int _send_produce(self, int32_t node, list batches, int64_t now) except -1:
        """One Produce request to ``node`` with ``batches`` (drained and closed), built and queued
        by the one request builder of both turns (ProduceRequestBuilder.send_c ->
        produce_request_c)."""
        cdef RecordAccumulator acc = <RecordAccumulator?>self.acc
        for b in batches:
            # The drain's own stamp rule (stamp_for_send_c): with idempotence, a resend under an
            # older epoch, or the partition's first batch of this epoch, mutes the partition:
            # nothing else of it may go out until it is resolved (see
            # IdempotenceState.awaiting_first_ack); completion unmutes it. Without idempotence:
            # header fields and CRC, no sequence.
            stamp_batch_for_send(acc, b)
        try:
            self._requests.send_c(node, batches, now)
        except KafkaError as e:
            for b in batches:
                self._unresolved(b)
                self._fail(b, e)
                self._unmute(b)
            return 0
        self.stats["produce_requests"] += 1
        self.stats["batches_sent"] += len(batches)
        return 0

    # -- responses -------------------------------------------------------------------------
    def _on_produce_response(self, int32_t node, list batches, body, error):
        cdef int64_t now = self.now_c()
        self.in_flight_batches -= len(batches)
        try:
            self._handle_produce_response(node, batches, body, error, now)
        except Exception as e:
            # A bug or an answer that passed decoding yet breaks the handling: every batch of the
            # request that has no outcome yet is retried (or failed) as after a disconnect.
            log.exception("handling a Produce answer from node %s failed", node)
            err = InvalidBrokerResponseError(f"handling the Produce answer of node {node} failed: {e!r}")
            for b in batches:
                if not b.is_done:
                    self._retry_or_fail(b, err, now)

    cdef int _handle_produce_response(self, int32_t node, list batches, body, error,
                                      int64_t now) except -1:
        if _failpoint is not None:
            _failpoint("produce_response", self)
        if error is not None:
            for b in batches:
                self._retry_or_fail(b, error, now)
            return 0
        if body is None:  # acks=0: complete once written
            for b in batches:
                self._succeed(b, -1, -1)
            return 0
        if type(body) is list:
            # read by the GIL-free turn: every partition succeeded, (base offset, log append
            # time) per batch in request order
            for b, (base_offset, log_append_time) in zip(batches, body):
                self._succeed(b, base_offset, log_append_time)
            return 0
        # ``body`` is the codec's ProduceResult: get() looks a partition up by its (topic,
        # partition) key (the batch keeps that tuple); a partition answered twice counts once, by
        # its last entry.
        get = body.get
        failed = None
        for b in batches:
            p = get(b.topic_partition)
            if p is None:
                self._retry_or_fail(b, KafkaError(
                    f"produce response from node {node} has no result for {b.topic}-{b.partition}"), now)
                continue
            code = p.error_code
            if code == 0 or code == DUP_SEQ:
                # DUPLICATE_SEQUENCE_NUMBER: an earlier attempt of this batch was written.
                self._succeed(b, p.base_offset, p.log_append_time_ms)
            else:
                if failed is None:
                    failed = []
                failed.append((b, p))
        if failed is None:
            return 0
        # The leader hints (KIP-951, Produce v10+) are taken before the refused batches are
        # retried, so that their retries go to the new leader at once.
        self._take_leader_hints(node, failed, body)
        for b, p in failed:
            msg = p.error_message
            rec_errs = p.record_errors
            if rec_errs:
                msg = (msg or "") + " " + "; ".join(
                    f"record {index}: {message}" for index, message in rec_errs)
            self._retry_or_fail(b, error_for_code(p.error_code, msg), now, node)
        return 0

    def _take_leader_hints(self, int32_t node, list failed, body) -> None:
        """KIP-951: a partition refused as NOT_LEADER_OR_FOLLOWER or FENCED_LEADER_EPOCH may name
        its current leader and leader epoch (CurrentLeader), with the new leader's address among
        the answer's NodeEndpoints. Hints newer than the epoch known move the partition's leader
        in the cluster view now (Metadata.apply_leader_hints: epoch-checked, never backwards),
        without waiting for a Metadata answer; a refresh is still asked for, in the background."""
        hints = None
        for b, p in failed:
            if p.leader_id >= 0 and p.leader_epoch >= 0 and p.error_code in LEADER_HINT_CODES:
                if hints is None:
                    hints = {}
                hints[b.topic_partition] = (p.leader_id, p.leader_epoch)
        if hints is None:
            return
        taken = self.metadata.apply_leader_hints(hints, body.node_endpoints)
        self.stats["leader_hints_applied"] += len(taken)
        self.stats["leader_hints_ignored"] += len(hints) - len(taken)
        if taken:
            log.debug("node %s named new leaders (KIP-951) for %d partition(s): %s", node, len(taken),
                      ", ".join(f"{t}-{q} -> {hints[(t, q)][0]} (epoch {hints[(t, q)][1]})"
                                for t, q in taken[:5]) + (" ..." if len(taken) > 5 else ""))

    cdef int _succeed(self, batch, int64_t base_offset, int64_t log_append_time) except -1:
        if self.idem is not None:
            self.idem.acked(batch, base_offset)
        self.stats["records_sent"] += batch.record_count
        self._unmute(batch)
        self.acc.deallocate(batch)
        batch.complete(base_offset, log_append_time, None)
        return 0

    cdef int _fail(self, batch, error) except -1:
        self.stats["errors"] += 1
        if self.sampled is not None:
            self._record_records("errors", batch)
        if self.txn is not None:
            # Before the completion: a flush() that the completion ends sees the transaction's
            # state already changed.
            self.txn.batch_failed(error)   # the transaction can no longer commit
        self.acc.deallocate(batch)
        batch.complete(-1, -1, error)
        return 0

    def _record_records(self, str name, batch) -> None:
        """A batch failed or retried: its records in the windowed statistics, overall and of
        its topic (record-error-*, record-retry-*)."""
        now = self.now_c()
        n = batch.record_count
        self.sampled.record(name, n, now)
        self.sampled.record_topic(batch.topic, name, n, now)

    def unmute_and_fail(self, batch, error: Exception) -> None:
        """Fail a batch taken out of the accumulator without being sent (an aborted transaction)."""
        self._unmute(batch)
        self._unresolved(batch)
        self._fail(batch, error)

    def _split(self, batch, error: Exception, now: int) -> bool:
        """The broker refused ``batch`` as too large and wrote none of it: when it holds several
        records, its records go back to the head of the partition's queue as two smaller batches
        (re-encoded and compressed again), and so on until they fit; a record too large on its own
        fails with the error. The pieces keep the batch's sequence range (piece k starts at the
        batch's base sequence + the index of its first record), so the batches sequenced after it
        stay valid: those already in flight are refused OUT_OF_ORDER_SEQUENCE_NUMBER (a gap, not
        the batch that should be next: no epoch bump) and retried behind the pieces. False when
        the batch is not split (then it fails as before)."""
        if self.force_close or batch.record_count < 2:
            return False
        try:
            pieces = self.acc.split_and_reenqueue(batch, now)
        except Exception:
            log.exception("splitting %r failed", batch)
            return False
        if not pieces:
            return False
        self.stats["batches_split"] += 1
        if self.sampled is not None:
            self.sampled.record("splits", 1, self.now_c())
        log.info("%s for %d records of %s-%d: split into batches of %s records", type(error).__name__,
                 batch.record_count, batch.topic, batch.partition,
                 "/".join(str(p.record_count) for p in pieces))
        self._unmute(batch)
        return True

    cdef int _unmute(self, batch) except -1:
        """A drained batch landed (every outcome of an attempt passes here once): its partition
        is unmuted and no longer has it in flight (RecordAccumulator.landed)."""
        (<RecordAccumulator?>self.acc).landed(batch)
        return 0

    def _retry_or_fail(self, batch, error: Exception, now: int, node: int | None = None) -> None:
        code = getattr(error, "code", None)
        if code in SPLIT_ERRORS and self._split(batch, error, now):
            return
        retriable = getattr(error, "retriable", False)
        if self.idem is not None and code in SEQUENCE_ERRORS and self.idem.overtaken(batch, code):
            self._fail_overtaken(batch, error)
            return
        if self.txn is not None and code in TXN_FENCED:
            retriable = False   # another producer took over the transactional id: fatal
            if code != PRODUCER_FENCED:
                # The record fails with the error every later call raises (ProducerFencedError),
                # the broker's answer kept as its cause.
                error = error_for_code(PRODUCER_FENCED, (
                    f"another producer with transactional id {self.transactional_id!r} took over "
                    f"(the broker answered {getattr(error, 'name', code)} to a Produce request)"))
        elif self.txn is not None and code in SEQUENCE_ERRORS:
            # In a transaction a broken sequence cannot be repaired by bumping the epoch under the
            # open transaction: the batch fails, the transaction must be aborted, and the epoch is
            # bumped before the next one.
            if self.idem.on_sequence_error(batch, code):
                self.idem.bump_required = True
                retriable = False
            else:
                retriable = True
        elif self.idem is not None and code in SEQUENCE_ERRORS:
            loss = self.idem.data_loss(batch, code)
            if self.idem.on_sequence_error(batch, code):
                if loss is not None:
                    self._report_data_loss(batch, node, *loss)
                else:
                    log.warning("%s for %s-%d (sequence %d): bumping the producer epoch",
                                error, batch.topic, batch.partition, batch.base_sequence)
                self.idem.bump_required = True
            retriable = True
        time_left = batch.created_ms + self._delivery_timeout_ms - now
        if retriable and not self.force_close and batch.attempts < self._retries and time_left > 0:
            backoff = True
            if getattr(error, "invalid_metadata", False):
                self.metadata.request_update()
                # The leader moved since the batch was sent (a leader hint of this answer, or
                # metadata learnt meanwhile): the new leader has not refused it, so it is retried
                # there without the retry backoff (as the Java client does). Its sequence stays.
                if node is not None:
                    leader = self.metadata.cluster.leader_for(batch.topic, batch.partition)
                    backoff = leader < 0 or leader == node
            self.stats["retries"] += 1
            if self.sampled is not None:
                self._record_records("retries", batch)
            log.debug("retrying %s-%d (attempt %d): %s", batch.topic, batch.partition, batch.attempts + 1, error)
            self.acc.reenqueue(batch, now, backoff)
            self._unmute(batch)
            return
        if retriable and self.force_close:
            # Would have been retried, but the producer is closing: report the close, not the
            # connection error that closing caused (in-flight requests fail with "client closed").
            error = ProducerClosedError(
                f"producer closed before {batch.record_count} record(s) for {batch.topic}-"
                f"{batch.partition} were delivered (last error: {error})")
        elif retriable and time_left <= 0:
            error = DeliveryTimeoutError(
                f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} not delivered within "
                f"delivery_timeout_ms={self.config.delivery_timeout_ms} (last error: {error})")
        self._unmute(batch)
        self._unresolved(batch)
        self._fail(batch, error)

    def _fail_overtaken(self, batch, error: Exception) -> None:
        """OUT_OF_ORDER_SEQUENCE_NUMBER for a batch behind the partition's last acknowledged
        sequence (IdempotenceState.overtaken): it fails at once, as not confirmed, instead of being
        retried until its delivery timeout. Its partition's sequence has no gap (the broker took
        the later batches in order), so no epoch bump."""
        err = error_for_code(OUT_OF_ORDER_SEQUENCE_NUMBER, (
            f"{batch.record_count} record(s) for {batch.topic}-{batch.partition} (sequence "
            f"{batch.base_sequence}) not confirmed: the broker already acknowledged later records of "
            f"this partition from this producer, which it accepts only in sequence order, so these "
            f"were most likely written, too long ago to be recognised as a duplicate; they are not "
            f"sent again, which could write them twice (last error: {error})"))
        log.error("%s", err)
        self._unmute(batch)
        self._fail(batch, err)

    def _report_data_loss(self, batch, node, acked_end: int, acked_offset: int) -> None:
        """The broker refused the batch that follows the last one it acknowledged: it no longer has
        records it acknowledged (a broker that lost its unflushed tail, an unclean leader
        election). Those records cannot be sent again; say so, then bump the epoch and go on."""
        self.stats["broker_data_loss"] += 1
        err = BrokerDataLossError(
            f"node {node} no longer has records of {batch.topic}-{batch.partition} it acknowledged: "
            f"it refused sequence {batch.base_sequence} (OUT_OF_ORDER_SEQUENCE_NUMBER), which follows "
            f"the last acknowledged batch (sequences up to {acked_end - 1}, last acknowledged offset "
            f"{acked_offset}); records acknowledged before may be lost and are not sent again. "
            f"The producer bumps its epoch and continues with the records not yet acknowledged",
            node=node, topic=batch.topic, partition=batch.partition, acked_sequence_end=acked_end,
            acked_offset=acked_offset)
        log.error("%s", err)
        self.report_error(err)

    def report_error(self, error: KafkaError, now=None) -> bool:
        """Hand an error that belongs to no single record to the application's ``on_error`` hook
        (on this thread), rate-limited per kind and broker (fastkafka._producer.error_reports); a
        hook that raises is logged and does not stop delivery. True when it was delivered."""
        return self.reporter.report(error, self.now_c() if now is None else now)

    def _network_error(self, now, error) -> None:
        """The network client's reports (run with its completions, as ``callback(now, error)``)."""
        self.report_error(error, now)

    def _unresolved(self, batch) -> None:
        """A batch that may have been sent fails for good: its partition's sequence has a gap."""
        if self.idem is not None and not self.force_close:
            self.idem.unresolved(batch)
