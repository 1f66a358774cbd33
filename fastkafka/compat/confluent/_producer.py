"""The confluent-kafka ``Producer`` of :mod:`fastkafka.compat.confluent` (the package says what it
keeps and what it costs): the configuration read, ``produce()`` held until a topic has metadata,
the report queue served by ``poll()``/``flush()``, ``purge()``, ``list_topics()``, transactions.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from typing import Any, Callable

from fastkafka import errors as fk
from fastkafka.compat.confluent._logging import LogRoute
from fastkafka.compat.confluent._stats import stats_document
from fastkafka.compat.confluent._types import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                               TIMESTAMP_NOT_AVAILABLE, BrokerMetadata,
                                               ClusterMetadata, KafkaError, KafkaException, Message,
                                               PartitionMetadata, ThrottleEvent, TopicMetadata,
                                               _Purged,
                                               cluster_metadata, group_metadata, to_kafka_error,
                                               to_kafka_exception)
from fastkafka.compat.confluent._config import config_error, translate
from fastkafka.compat.confluent._fast import PollCore
from fastkafka.config import canonical_name
from fastkafka._net.cluster import topic_error
from fastkafka.errors import KafkaTimeoutError as _MetadataMissing
from fastkafka.producer import Producer as _FastProducer, _weak_method

#: confluent-kafka's offset of a record that has none (failed, or acks=0).
OFFSET_INVALID = -1001

#: librdkafka's default queue.buffering.max.messages.
DEFAULT_MAX_MESSAGES = 100_000
_INFINITE_S = 10_000_000.0   # a timeout of -1 (confluent-kafka: wait forever), in seconds


def _seconds(timeout, what: str) -> float:
    """confluent-kafka's timeout in seconds (None or negative: forever)."""
    if timeout is None:
        return _INFINITE_S
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)):
        raise TypeError(f"{what}: timeout must be a number of seconds, got {type(timeout).__name__}")
    return _INFINITE_S if timeout < 0 else float(timeout)


def _int_setting(name: str, value: Any, minimum: int) -> int:
    if isinstance(value, str):
        value = value.strip()
        if value.lstrip("-").isdigit():
            value = int(value)
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise config_error(f'Invalid value for configuration property "{name}": an integer '
                           f'>= {minimum} is expected, got {value!r}')
    return value


def _callable_setting(name: str, value: Any):
    if value is not None and not callable(value):
        # confluent-kafka's own error for these (a TypeError, not a KafkaException)
        raise TypeError(f"expected {name} property as a callable function")
    return value


#: where a producer configured without bootstrap.servers points its core: nothing listens
#: there (a closed port of this host), so, as with librdkafka, records wait for metadata and
#: fail with _MSG_TIMED_OUT; its connection errors are not reported to error_cb
_NO_BROKERS = "127.0.0.1:1"
_CLOSED = "Producer has been closed"
_HANDLE_CLOSED = "Handle has been closed"


class Producer(PollCore):
    """confluent-kafka's ``Producer(conf)`` on :class:`fastkafka.Producer` (see the module
    docstring). ``conf`` is confluent-kafka's configuration dict, read as librdkafka reads it
    (fastkafka/compat/confluent/_config.py; every property: docs/migration.md); keyword
    arguments are merged into it (``logger=`` is commonly passed so). A bad key or value raises
    :class:`KafkaException` with a :class:`KafkaError` of code ``_INVALID_ARG``, naming what to
    use where a setting has no equivalent.

    Used as a context manager (``with Producer(conf) as p:``) it is flushed and closed at the
    end of the block."""

    def __init__(self, conf: dict | None = None, **kwargs: Any):
        if conf is not None and not isinstance(conf, dict):
            raise TypeError(f"expected configuration dict, got {type(conf).__name__}")
        merged = dict(conf or {})
        for k, v in kwargs.items():
            if k in merged:
                raise config_error(f"{k!r} given both in the config dict and as a keyword argument")
            merged[k] = v
        settings, own, self._ignored = translate(merged)
        self._own_settings(own)
        self._no_brokers = "bootstrap_servers" not in settings or not settings["bootstrap_servers"]
        if self._no_brokers:
            settings["bootstrap_servers"] = _NO_BROKERS
        settings.setdefault("partitioner", "consistent_random")
        settings["max_block_ms"] = 0      # produce() never waits: see _hold
        if own.get("oauth_cb") is not None:
            if "sasl_oauth_token_provider" in settings:
                raise config_error("oauth_cb and sasl_oauth_token_provider are the same setting: "
                                   "give one")
            settings["sasl_oauth_token_provider"] = _oauth_provider(
                own["oauth_cb"], own.get("sasl.oauthbearer.config"))
        # the connection settings list_topics() needs (an Admin client, made on first use)
        self._admin_conf = {k: v for k, v in settings.items() if _is_admin_key(k)}
        self._admin = None
        self._admin_lock = threading.Lock()
        self._started = time.monotonic()      # the stats document's age
        self._events: deque = deque()         # error_cb events (KafkaError)
        self._wake = threading.Event()
        self._next_drain = 0.0
        self._propagation_s = own.get("topic.metadata.propagation.max.ms", 30000) / 1000.0
        self._first_held: dict = {}         # topic -> when a record of it was first held
        self._nonexistent: set = set()      # topics the brokers say do not exist, past that
        self._listening = [False]           # a metadata listener is registered (_listen)
        self._user_on_error = _callable_setting("on_error", settings.pop("on_error", None))
        try:
            # held weakly by the I/O thread's config: a dropped compat producer is collected
            # (and closed)
            self._p = _FastProducer(settings, on_error=_weak_method(self._on_error))
        except fk.ConfigError as e:
            raise config_error(getattr(e, "message", None) or str(e)) from e
        self._route = LogRoute(self._p._name, own["logger"]) if own["logger"] is not None else None
        self._next_stats = (time.monotonic() + self._stats_interval
                            if self._stats_cb is not None and self._stats_interval else None)
        cfg = self._p.config
        self._message_timeout_s = cfg.delivery_timeout_ms / 1000.0
        to_error = to_kafka_error
        if cfg.request_timeout_ms + cfg.linger_ms >= cfg.delivery_timeout_ms:
            # a request bounded by the messages' deadline (message.timeout.ms below
            # request.timeout.ms + linger.ms): its timeout is theirs, _MSG_TIMED_OUT as librdkafka
            to_error = _deadline_bound_error
        self._throttle_seen = (0, 0, {})    # throttled answers, their ms, node -> until
        self._init_poll(self._p, self._wake, self._default_cb, self._only_error,
                        self._max_messages, self._events, to_error,
                        self._next_stats is None and self._throttle_cb is None)
        self._metadata_first = self._p._interceptors is not None

    def _own_settings(self, own: dict) -> None:
        """Check the keys this layer implements (any spelling)."""
        get = own.get
        self._error_cb = _callable_setting("error_cb", get("error_cb"))
        self._stats_cb = _callable_setting("stats_cb", get("stats_cb"))
        throttle_cb = get("throttle_cb")
        if throttle_cb is not None and not callable(throttle_cb):
            raise ValueError("expected throttle_cb property as a callable function")
        self._throttle_cb = throttle_cb
        _callable_setting("oauth_cb", get("oauth_cb"))
        self._default_cb = get("on_delivery")
        if self._default_cb is not None and not callable(self._default_cb):
            raise config_error("on_delivery requires a callable object")
        self._stats_interval = _int_setting("statistics.interval.ms",
                                            get("statistics.interval.ms", 0), 0) / 1000.0
        self._max_messages = _int_setting("queue.buffering.max.messages",
                                          get("queue.buffering.max.messages",
                                              DEFAULT_MAX_MESSAGES), 0)
        only = get("delivery.report.only.error", False)
        if isinstance(only, str) and only.strip().lower() in ("true", "false"):
            only = only.strip().lower() == "true"
        if not isinstance(only, bool):
            raise TypeError(f"Expected delivery.report.only.error to be bool type, not "
                            f"{type(only).__name__}")
        self._only_error = only
        logger = get("logger")
        if logger is not None and not isinstance(logger, logging.Logger):
            raise TypeError(f"logger must be a logging.Logger, got {type(logger).__name__}")
        own.setdefault("logger", None)

    def __repr__(self) -> str:
        return f"<fastkafka.compat.confluent.Producer {self._p._name}>"

    # -- producing -------------------------------------------------------------------------
    # produce(), len() and poll(0) are PollCore's (compiled): see _fast.pyx
    def _produce_failed(self, e: BaseException, msg, record: tuple) -> None:
        """produce()'s record was refused by fastkafka with ``e``: raise confluent-kafka's
        error for it, hold it (its topic has no metadata yet: produce() does not wait), or
        queue its failure report (the topic's error)."""
        topic = record[0]
        if isinstance(e, (fk.RecordTooLargeError, fk.UnknownPartitionError, fk.ProducerClosedError,
                          fk.IllegalStateError, fk.TransactionAbortableError)):
            raise to_kafka_exception(e) from e
        if isinstance(e, fk.BufferExhaustedError):
            raise BufferError(f"Local: Queue full ({e.message})") from e
        # (UnknownTopicOrPartitionError: the core's bound, topic_metadata_propagation_max_ms)
        if isinstance(e, (_MetadataMissing, fk.UnknownTopicOrPartitionError)) and \
                not isinstance(e, fk.DeliveryTimeoutError):
            cluster = self._p._metadata.cluster
            n = cluster.partition_count(topic)
            if topic in self._nonexistent:
                if _unknown_topic(cluster, topic):
                    raise KafkaException(KafkaError(
                        KafkaError._UNKNOWN_TOPIC, "Unable to produce message: Local: Unknown "
                        f"topic ({topic!r}: the brokers say it does not exist)")) from e
                self._nonexistent.discard(topic)
            if n > 0:       # the topic is known, the partition asked for is past its partitions
                raise KafkaException(KafkaError(
                    KafkaError._UNKNOWN_PARTITION,
                    f"Local: Unknown partition (topic {topic!r} has {n} partitions, "
                    f"partition={record[3]})")) from e
            self._hold(*record, msg)
            self._produced += 1
            return
        if isinstance(e, fk.KafkaError) and not isinstance(e, fk.InvalidRecordError):
            # the broker's error for the topic (e.g. not authorized): confluent-kafka queues the
            # record and fails it through its delivery report
            self._queue_failed(msg, topic, e)
            return
        raise e

    # -- records waiting for their topic's metadata -------------------------------------------
    def _hold(self, topic, value, key, partition, timestamp, headers, msg) -> None:
        """Keep a record (counted as produced by the caller) until its topic's metadata is
        known, or raise KafkaException for one too large to be sent at all: sent by
        :meth:`_drain_held` (the next poll()/flush(), woken by the metadata update), failed
        with ``_MSG_TIMED_OUT`` once message.timeout.ms passed since produce()."""
        for x in (value, key):      # what the core checks after the metadata: at once here
            if x is not None and not isinstance(x, (bytes, bytearray, memoryview, str)):
                raise TypeError(f"a bytes-like object is required, not '{type(x).__name__}'")
        _check_headers(headers)
        size = sum(len(x) for x in (value, key) if isinstance(x, (bytes, bytearray, str)))
        if size > self._p.config.max_request_size:
            # refused at once, as librdkafka refuses it (message.max.bytes)
            raise KafkaException(KafkaError(
                KafkaError.MSG_SIZE_TOO_LARGE,
                f"Broker: Message size too large ({size} bytes > message.max.bytes "
                f"{self._p.config.max_request_size})"))
        deadline = self._message_deadline_ns(msg) / 1e9 + self._message_timeout_s
        q = self._held.get(topic)
        if q is None:
            q = self._held[topic] = deque()
            self._first_held.setdefault(topic, time.monotonic())
            self._listen()
        q.append((value, key, partition, timestamp, headers, msg, deadline))
        self._holding = True

    def _metadata_known(self, topic) -> bool:
        """Whether ``topic``'s metadata is known; when not, it is asked for (a producer with
        interceptors holds the record before they see it)."""
        if not isinstance(topic, str) or self._p._metadata.cluster.partition_count(topic) > 0:
            return True     # (a bad topic: the core refuses it)
        self._p._metadata.add_topic(topic)
        self._p._metadata.request_update()
        self._p._sender.wakeup()
        return False

    def _listen(self) -> None:
        """Have the next metadata update wake a poll()/flush() that sleeps (one listener at a
        time; it holds the waker, not this producer)."""
        pending = self._listening
        if pending[0]:
            return
        pending[0] = True
        waker = self._waker

        def updated():
            pending[0] = False
            waker.wake()
        self._p._metadata.add_listener(updated)

    def _drain_held(self, force: bool = False) -> None:
        """Send the held records whose topic's metadata is known now, in order; fail those past
        their deadline. At most every 5 ms unless ``force`` (a poll(0) loop stays cheap)."""
        now = time.monotonic()
        if not force and now < self._next_drain:
            return
        self._next_drain = now + 0.005
        cluster = self._p._metadata.cluster
        sent = 0
        for topic in list(self._held):
            q = self._held[topic]
            known = cluster.partition_count(topic) > 0
            if not known and _unknown_topic(cluster, topic) and \
                    now - self._first_held.get(topic, now) >= self._propagation_s:
                # librdkafka: past topic.metadata.propagation.max.ms the topic does not exist
                self._nonexistent.add(topic)
                while q:
                    self._queue_failed(q.popleft()[5], topic, KafkaError(
                        KafkaError.UNKNOWN_TOPIC_OR_PART,
                        f"Broker: Unknown topic or partition ({topic!r} still unknown after "
                        f"topic.metadata.propagation.max.ms)"), True)
            while q:
                value, key, partition, timestamp, headers, msg, deadline = q[0]
                if now >= deadline:
                    q.popleft()
                    self._queue_failed(msg, topic, KafkaError(
                        KafkaError._MSG_TIMED_OUT,
                        f"Local: Message timed out (no metadata for topic {topic!r} within "
                        f"message.timeout.ms)"), True)
                    continue
                if not known:
                    break
                try:
                    self._send_held(topic, value, key, partition, timestamp, headers, msg)
                except _MetadataMissing as e:
                    if isinstance(e, fk.BufferExhaustedError):
                        break           # room comes as batches complete: try again later
                    if cluster.partition_count(topic) > 0:
                        q.popleft()     # the partition asked for does not exist
                        self._queue_failed(msg, topic, KafkaError(
                            KafkaError._UNKNOWN_PARTITION, "Local: Unknown partition"), True)
                        continue
                    break
                except fk.KafkaError as e:
                    q.popleft()
                    self._queue_failed(msg, topic, e, True)
                    continue
                q.popleft()
                sent += 1
            if not q:
                del self._held[topic]
                self._first_held.pop(topic, None)
            else:
                self._listen()
        self._holding = bool(self._held)
        if sent:
            self._p._sender.wakeup()    # a flush() in progress sends them at once

    def _fail_held(self, code: int, reason: str) -> None:
        """Fail every held record with ``code`` (purge, close)."""
        for topic, q in list(self._held.items()):
            while q:
                msg = q.popleft()[5]
                self._queue_failed(msg, topic, KafkaError(code, reason), True)
        self._held.clear()
        self._holding = False

    def _on_error(self, error) -> None:
        """fastkafka's on_error (I/O thread): queued for error_cb, served by poll()."""
        if self._no_brokers:
            return      # the stand-in address of a producer without bootstrap.servers
        if self._user_on_error is not None:
            self._user_on_error(error)
        if self._error_cb is not None and not isinstance(error, fk.BrokersRecovered):
            # (librdkafka's error_cb has no recovery event: the notice goes to on_error only)
            self._events.append(to_kafka_error(error))
            self._waker.wake()

    # -- serving events --------------------------------------------------------------------
    def _serve(self) -> int:
        """Serve what is queued now (error_cb events, delivery reports, stats when due); an
        exception of a callback propagates, the events after it stay queued."""
        if self._holding:
            self._drain_held()
        served = 0
        while self._events:
            err = self._events.popleft()
            served += 1
            self._error_cb(err)
        served += self._serve_reports()
        if self._throttle_cb is not None:
            served += self._serve_throttle()
        if self._next_stats is not None and time.monotonic() >= self._next_stats:
            self._next_stats = time.monotonic() + self._stats_interval
            served += 1
            self._stats_cb(self._stats_json())
        return served

    def _serve_throttle(self) -> int:
        """throttle_cb: one ThrottleEvent per broker whose answers carried a throttle time since
        the last poll (its ``throttle_time``: theirs summed when one broker did, else what is
        left of the broker's throttle)."""
        client = self._p._client
        n, total = client.stats["throttled_responses"], client.stats["throttle_time_ms_total"]
        seen_n, seen_total, seen_until = self._throttle_seen
        if n == seen_n:
            return 0
        now = client.clock()                # (the clock of throttle_until_ms)
        changed = []
        until_now = dict(seen_until)
        for node, conn in list(client.connections.items()):
            until = conn.throttle_until_ms
            if until and until != seen_until.get(node):
                changed.append((node, conn, until))
                until_now[node] = until
        self._throttle_seen = (n, total, until_now)
        for node, conn, until in changed:
            ms = total - seen_total if len(changed) == 1 else max(0, until - now)
            self._throttle_cb(ThrottleEvent(f"{conn.host}:{conn.port}", node, ms / 1000.0))
        return len(changed)

    def _pending_events(self) -> bool:
        return bool(self._events) or self._has_reports()

    def _wait(self, deadline: float) -> None:
        """Sleep until an event is queued, the next stats are due or ``deadline``."""
        until = deadline if self._next_stats is None else min(deadline, self._next_stats)
        waker = self._waker
        self._wake.clear()
        waker.sleeping = True
        try:
            if not self._pending_events():
                # records held for metadata: look again soon (their deadlines, a missed wake-up)
                cap = 0.05 if self._holding else 0.5
                self._wake.wait(max(0.0, min(until - time.monotonic(), cap)))
        finally:
            waker.sleeping = False

    def _poll(self, timeout: float | None) -> int:
        """poll() beyond poll(0) of reports alone (PollCore.poll): waits, error_cb, stats_cb."""
        if self._holding:
            self._drain_held(force=True)
        deadline = time.monotonic() + _seconds(timeout, "poll()")
        while True:
            n = self._serve()
            if n or time.monotonic() >= deadline:
                return n
            self._wait(deadline)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now (linger is not waited for) and serve reports until every
        record has been delivered and reported, or ``timeout`` seconds passed (None or -1:
        forever); returns the number of records still waiting (``len(self)``). Raises
        ``RuntimeError`` after close()."""
        if self._closed:
            raise RuntimeError(_CLOSED)
        deadline = time.monotonic() + _seconds(timeout, "flush()")
        acc = self._p._acc
        acc.begin_flush()
        self._p._sender.wakeup()
        try:
            while True:
                self._serve()
                left = len(self)
                if left == 0 or time.monotonic() >= deadline:
                    return left
                self._wait(deadline)
        finally:
            acc.end_flush()

    def __bool__(self) -> bool:
        return True   # an empty producer is not false (confluent-kafka's is always true)

    # -- purge -----------------------------------------------------------------------------
    def purge(self, in_queue: bool = True, in_flight: bool = True, blocking: bool = True) -> None:
        """Fail the records still queued (not yet in a request) with ``_PURGE_QUEUE``; their
        reports come with the next poll()/flush(). Records already in a request to a broker
        (``in_flight``) are not recalled: each keeps its real outcome (delivered, or failed
        with the broker's error) and gets its report when the broker answers -- no record is
        reported purged that may have been written, and none is left without a report.
        ``blocking=False`` returns before the I/O thread has taken the records out.

        A queued record that was sent before and waits for a retry is purged too; the broker
        may have written it (as with librdkafka). In a transaction, a purged record makes the
        transaction abortable, like any failed record."""
        if self._closed:
            raise RuntimeError(_CLOSED)
        if not in_queue:
            return
        if self._holding:       # records waiting for metadata are in librdkafka's queue too
            self._fail_held(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        p = self._p
        if p._closed:
            return
        done = threading.Event()
        sender = p._sender

        def purge_queue():
            try:
                err = _Purged("purged from the queue by purge() before it was sent")
                for b in p._acc.abort_undrained():
                    sender.unmute_and_fail(b, err)
            finally:
                done.set()
        sender.call_soon(purge_queue)
        while blocking and not done.wait(0.1):
            thread = sender._thread
            if thread is None or not thread.is_alive():
                break

    # -- metadata --------------------------------------------------------------------------
    def list_topics(self, topic: str | None = None, timeout: float = -1) -> ClusterMetadata:
        """The cluster's brokers and topics (only ``topic`` when given), as confluent-kafka's
        ``ClusterMetadata``. Asks the cluster (a Metadata request on a connection of its own,
        made on first use); raises KafkaException (``_TIMED_OUT``) after ``timeout`` seconds
        (-1: forever). An unknown topic is listed with its error (``UNKNOWN_TOPIC_OR_PART``);
        a broker that creates topics on first use creates it, as with confluent-kafka."""
        if self._closed:
            raise RuntimeError(_HANDLE_CLOSED)
        if topic is not None and (not isinstance(topic, str) or not topic):
            raise TypeError(f"list_topics(topic): expected a topic name or None, got {topic!r}")
        seconds = _seconds(timeout, "list_topics()")
        with self._admin_lock:
            if self._admin is None:
                from fastkafka.admin import Admin
                self._admin = Admin(self._admin_conf)
            admin = self._admin
        try:
            return _fetch_metadata(admin, topic, int(seconds * 1000))
        except fk.KafkaError as e:
            raise to_kafka_exception(e) from e

    def cluster_id(self, timeout: float = -1) -> str | None:
        """The cluster's id (a Metadata request, as list_topics()); KafkaException
        (``_TIMED_OUT``) after ``timeout`` seconds (-1: forever)."""
        return self.list_topics(timeout=timeout).cluster_id

    # -- transactions ----------------------------------------------------------------------
    def _txn(self, fn: Callable, *args):
        if self._p.config.transactional_id is None:
            raise KafkaException(KafkaError(
                KafkaError._NOT_CONFIGURED,
                "The Transactional API requires transactional.id to be configured"))
        try:
            return fn(*args)
        except fk.KafkaError as e:
            fatal = getattr(self._p._sender.txn, "state", None) is not None and \
                self._p.transaction_state == "FATAL_ERROR"
            raise to_kafka_exception(e, fatal) from e

    def init_transactions(self, timeout: float = -1) -> None:
        """Register ``transactional.id`` (see :meth:`fastkafka.Producer.init_transactions`);
        errors raise KafkaException."""
        self._txn(self._p.init_transactions, _seconds(timeout, "init_transactions()"))

    def begin_transaction(self) -> None:
        self._txn(self._p.begin_transaction)

    def send_offsets_to_transaction(self, positions, group_metadata_, timeout: float = -1) -> None:
        """``positions``: confluent-kafka TopicPartitions with the next offsets to consume;
        ``group_metadata_``: ``consumer.consumer_group_metadata()``."""
        self._txn(self._p.send_offsets_to_transaction, positions, group_metadata(group_metadata_),
                  _seconds(timeout, "send_offsets_to_transaction()"))

    def commit_transaction(self, timeout: float = -1) -> None:
        """Deliver (serving the delivery reports, as flush() does) and commit."""
        seconds = _seconds(timeout, "commit_transaction()")
        start = time.monotonic()
        if self._p.transaction_state == "IN_TRANSACTION":
            self.flush(seconds)
        self._txn(self._p.commit_transaction, max(0.0, seconds - (time.monotonic() - start)))
        self._serve()

    def abort_transaction(self, timeout: float = -1) -> None:
        """Abort: records not yet sent fail (``_PURGE_QUEUE``), reported by the next poll()."""
        if self._holding:       # librdkafka purges its queue: those waiting for metadata too
            self._fail_held(KafkaError._PURGE_QUEUE, "Local: Purged in queue")
        self._txn(self._p.abort_transaction, _seconds(timeout, "abort_transaction()"))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> bool:
        """Abort a transaction in progress, flush what is queued (serving its reports; up to
        ``timeout`` seconds, None: forever) and stop; returns True, as confluent-kafka's (also
        when closed already). After it, produce(), poll(), flush() and purge() raise
        ``RuntimeError("Producer has been closed")`` and ``len()`` is 0. Records not delivered
        in time fail (``_DESTROY``); their reports are not served."""
        if self._closed:
            return True
        seconds = None if timeout is None or timeout < 0 else timeout
        try:
            if self._p.transaction_state == "IN_TRANSACTION":
                try:
                    self.abort_transaction(_INFINITE_S if seconds is None else seconds)
                except KafkaException:
                    pass        # close() goes on, as confluent-kafka's
            self.flush(_INFINITE_S if seconds is None else seconds)
            self._fail_held(KafkaError._DESTROY, "Local: Broker handle destroyed for termination")
            self._p.close(0 if seconds is not None else None)
            self._serve()
        finally:
            self._closed = True
            self._detach()
            if self._route is not None:
                self._route.close()
            if self._admin is not None:
                self._admin.close()
        return True

    def __enter__(self) -> "Producer":
        if self._closed:
            raise RuntimeError(_CLOSED)
        return self

    def __exit__(self, *exc) -> bool:
        """Flush (serving the reports) and close, as confluent-kafka's context manager."""
        self.close()
        return False

    def set_sasl_credentials(self, username: str, password: str) -> None:
        """The SASL PLAIN/SCRAM user name and password of the next authentication (a connection
        already authenticated stays), as confluent-kafka's."""
        if self._closed:
            raise RuntimeError(_HANDLE_CLOSED)
        if not isinstance(username, str) or not isinstance(password, str):
            raise TypeError("set_sasl_credentials(username, password): expected two strings")
        clients = [self._p._client]
        if self._admin is not None:
            clients.append(self._admin._client)
        for client in clients:
            if client.sasl is not None:
                client.sasl.set_credentials(username, password)
        if "sasl_plain_username" in self._admin_conf or "sasl_plain_password" in self._admin_conf \
                or self._admin is None:
            self._admin_conf["sasl_plain_username"] = username
            self._admin_conf["sasl_plain_password"] = password

    # -- produce_batch (confluent-kafka 2.12+) ------------------------------------------------
    def produce_batch(self, topic, messages, partition: int = -1, on_delivery=None,
                      callback=None) -> int:
        """produce_batch(topic, messages, [partition], [on_delivery]) -> int

        Queue the records of ``messages`` (a list of dicts with ``value``, ``key``,
        ``partition``, ``callback``/``on_delivery``; ``headers`` are ignored and a
        ``timestamp`` raises NotImplementedError, as in confluent-kafka) to ``topic``; returns
        how many were queued. A record that cannot be
        queued gets an ``_error`` entry in its dict (a :class:`KafkaError`) and no delivery
        report, as in confluent-kafka; the others are reported by poll()/flush()."""
        if self._closed:
            raise RuntimeError(_CLOSED)
        if not isinstance(topic, str):
            raise TypeError("topic must be a string")
        if not isinstance(messages, list):
            raise TypeError("messages must be a list")
        default_cb = on_delivery if on_delivery is not None else callback
        if default_cb is not None and not callable(default_cb):
            raise TypeError("on_delivery must be callable")
        for i, m in enumerate(messages):
            if not isinstance(m, dict):
                raise TypeError(f"Message at index {i} must be a dict")
            if m.get("timestamp"):
                raise NotImplementedError("Message timestamps are not currently supported in "
                                          "batch mode")
        queued = 0
        for m in messages:
            cb = m.get("callback", m.get("on_delivery"))
            if cb is None:
                cb = default_cb
            part = m.get("partition", partition)
            try:
                self.produce(topic, m.get("value"), m.get("key"), -1 if part is None else part,
                             cb, None, 0, None)
            except KafkaException as e:
                m["_error"] = e.args[0]
                continue
            except BufferError as e:
                m["_error"] = KafkaError(KafkaError._QUEUE_FULL, str(e))
                continue
            queued += 1
        return queued

    def __del__(self):
        self._detach()      # the reports nobody will serve (their futures refer to the sink)
        route = getattr(self, "_route", None)
        if route is not None:
            route.close()

    def metrics(self) -> dict:
        """fastkafka's counters of the underlying producer (:meth:`fastkafka.Producer.metrics`)."""
        return self._p.metrics()

    def _stats_json(self) -> str:
        """The stats_cb document: librdkafka's statistics schema, for the fields fastkafka
        measures (fastkafka/compat/confluent/_stats.py)."""
        doc = stats_document(self._p, msg_cnt=len(self), msg_max=self._max_messages,
                             started=self._started)
        return json.dumps(doc, default=str)


def _check_headers(headers) -> None:
    """confluent-kafka's checks of produce()'s headers, with its TypeErrors."""
    if headers is None:
        return
    if isinstance(headers, dict):
        items = list(headers.items())
    elif isinstance(headers, list):
        items = headers
        for h in items:
            if not isinstance(h, tuple) or len(h) != 2:
                raise TypeError("Headers are expected to be a list of (key, value) tuples")
    else:
        raise TypeError(f"expected headers to be dict or list of (key, value) tuples, not "
                        f"{type(headers).__name__}")
    for k, v in items:
        if not isinstance(k, str):
            raise TypeError(f"expected header key to be unicode string, not {type(k).__name__}")
        if v is not None and not isinstance(v, (bytes, bytearray, memoryview, str)):
            raise TypeError(f"expected header value to be None, binary, or unicode string, not "
                            f"{type(v).__name__}")


def _unknown_topic(cluster, topic: str) -> bool:
    """Whether the last metadata says ``topic`` does not exist (UNKNOWN_TOPIC_OR_PART)."""
    err = topic_error(cluster, topic)
    return err is not None and getattr(err, "code", None) == 3


def _deadline_bound_error(exc):
    """to_kafka_error, where a request timed out by the client is the messages' timeout."""
    if isinstance(exc, fk.RequestTimedOutError) and not getattr(exc, "from_broker", False):
        err = KafkaError(KafkaError._MSG_TIMED_OUT, f"Local: Message timed out ({exc})")
        err.cause = exc
        return err
    return to_kafka_error(exc)


def _oauth_provider(oauth_cb, oauth_config):
    """fastkafka's sasl_oauth_token_provider from confluent-kafka's ``oauth_cb(config_str) ->
    (token, expiry_epoch_seconds[, principal, extensions])``."""
    def provider():
        result = oauth_cb(oauth_config)
        if not isinstance(result, tuple) or len(result) < 2:
            raise TypeError("oauth_cb must return (token, expiry_epoch_seconds[, principal, "
                            "extensions])")
        return result[0], result[1]
    return provider


def _fetch_metadata(admin, topic: str | None, timeout_ms: int) -> ClusterMetadata:
    """One Metadata request (retried as fastkafka.admin retries) read into a ClusterMetadata."""
    from fastkafka._net.cluster import cluster_from_response
    from fastkafka._net.network import now_ms
    from fastkafka.protocol import ApiKey

    body = {"topics": None if topic is None else [{"name": topic}],
            "allow_auto_topic_creation": topic is not None}
    asked: list = []

    def make(deadline):
        node = admin._client.least_loaded_node(now_ms())
        if node is not None and not admin._client.ready(node, now_ms()):
            node = None
        asked[:] = [node]
        return admin._send(ApiKey.METADATA, body, node, deadline).compose(
            lambda resp: (cluster_from_response(resp), resp.get("cluster_id")))

    cluster, cluster_id = admin._run(make, timeout_ms)
    node = asked[0] if asked else None
    addr = admin._client._address(node) if node is not None else None
    host, port = addr if addr else admin.config.bootstrap_servers[0]
    node = -1 if node is None else node
    return cluster_metadata(cluster, cluster_id, node if node >= 0 else -1, host, port)


def _is_admin_key(key) -> bool:
    from fastkafka.admin import _ADMIN_KEYS
    try:
        return canonical_name(key) in _ADMIN_KEYS
    except fk.ConfigError:
        return False
