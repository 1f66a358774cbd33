"""confluent-kafka's ``Producer`` on fastkafka: code written for confluent-kafka runs with only
its import changed::

    from fastkafka.compat.confluent import Producer, KafkaException

    p = Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    def delivery_report(err, msg):
        if err is not None:
            print("failed:", err)
        else:
            print(msg.topic(), msg.partition(), msg.offset())
    for data in ["a", "b"]:
        p.poll(0)
        p.produce("events", data.encode("utf-8"), callback=delivery_report)
    p.flush()

What it keeps: the configuration dict (confluent-kafka's keys, read by fastkafka's own
:class:`~fastkafka.config.ProducerConfig`, plus ``error_cb``, ``stats_cb`` with
``statistics.interval.ms``, ``logger``, ``on_delivery``, ``queue.buffering.max.messages`` and
``delivery.report.only.error``, which this layer implements); librdkafka's default partitioner
``consistent_random`` (a key lands where confluent-kafka puts it); ``produce()`` with
confluent-kafka's arguments; delivery reports served by ``poll()``/``flush()`` on the caller's
thread as ``(err, msg)`` with a :class:`~fastkafka.compat._confluent_types.Message` and a
:class:`KafkaError`; ``len()``; ``BufferError`` once ``queue.buffering.max.messages`` records
wait (delivered or not, until their report is served); ``purge()``; ``list_topics()``;
transactions raising :class:`KafkaException`.

What it costs: little. ``produce()``, ``poll(0)`` and ``len()`` are compiled
(fastkafka/compat/_confluent_fast.pyx): per record one C :class:`Message` is made at produce
time, the I/O thread only appends the record's future to a list, and ``poll()`` takes that list
in one go, filling each Message from its batch before calling the callback on the caller's
thread. bench/compat.py measures it faster than confluent-kafka's own producer
(bench/results/compat.md). :class:`fastkafka.Producer` (callbacks on the I/O thread, no report
queue) is faster still.
docs/migration.md ("The compatibility layer") lists the differences that remain.
"""
from __future__ import annotations

import json
import logging
import threading
import time
from collections import deque
from typing import Any, Callable

from fastkafka import errors as fk
from fastkafka.compat._confluent_logging import LogRoute
from fastkafka.compat._confluent_stats import stats_document
from fastkafka.compat._confluent_types import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                               TIMESTAMP_NOT_AVAILABLE, BrokerMetadata,
                                               ClusterMetadata, KafkaError, KafkaException, Message,
                                               PartitionMetadata, TopicMetadata, _Purged,
                                               cluster_metadata, group_metadata, to_kafka_error,
                                               to_kafka_exception)
from fastkafka.compat._confluent_fast import PollCore
from fastkafka.config import canonical_name
from fastkafka.producer import Producer as _FastProducer, _weak_method

__all__ = ["Producer", "KafkaError", "KafkaException", "Message", "ClusterMetadata",
           "TopicMetadata", "PartitionMetadata", "BrokerMetadata", "TIMESTAMP_NOT_AVAILABLE",
           "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "OFFSET_INVALID"]

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
        raise fk.ConfigError(f"{name} must be an integer >= {minimum}, got {value!r}")
    return value


def _callable_setting(name: str, value: Any):
    if value is not None and not callable(value):
        raise fk.ConfigError(f"{name} must be a callable or None, got {type(value).__name__}")
    return value


class Producer(PollCore):
    """confluent-kafka's ``Producer(conf)`` on :class:`fastkafka.Producer` (see the module
    docstring). ``conf`` is confluent-kafka's configuration dict; keyword arguments are merged
    into it (``logger=`` is commonly passed so). Unknown keys, or keys with no equivalent, raise
    :class:`fastkafka.errors.ConfigError` naming what to use instead."""

    def __init__(self, conf: dict | None = None, **kwargs: Any):
        if conf is not None and not isinstance(conf, dict):
            raise TypeError(f"Producer(conf): expected a dict of settings, got {type(conf).__name__}")
        merged = dict(conf or {})
        for k, v in kwargs.items():
            if k in merged:
                raise fk.ConfigError(f"{k!r} given both in the config dict and as a keyword argument")
            merged[k] = v
        own = self._own_settings(merged)
        merged.setdefault("partitioner", "consistent_random")
        # the connection settings list_topics() needs (an Admin client, made on first use)
        self._admin_conf = {k: v for k, v in merged.items() if _is_admin_key(k)}
        self._admin = None
        self._admin_lock = threading.Lock()
        self._started = time.monotonic()      # the stats document's age
        self._events: deque = deque()         # error_cb events (KafkaError)
        self._wake = threading.Event()
        user_on_error = merged.pop("on_error", None)
        self._user_on_error = _callable_setting("on_error", user_on_error)
        # held weakly by the I/O thread's config: a dropped compat producer is collected (and closed)
        self._p = _FastProducer(merged, on_error=_weak_method(self._on_error))
        self._route = LogRoute(self._p._name, own["logger"]) if own["logger"] is not None else None
        self._next_stats = (time.monotonic() + self._stats_interval
                            if self._stats_cb is not None and self._stats_interval else None)
        self._init_poll(self._p, self._wake, self._default_cb, self._only_error,
                        self._max_messages, self._events, to_kafka_error,
                        self._next_stats is None)

    def _own_settings(self, merged: dict) -> dict:
        """Take out the keys this layer implements (any spelling) and check them."""
        own = {"error_cb": None, "stats_cb": None, "statistics.interval.ms": 0, "logger": None,
               "on_delivery": None, "queue.buffering.max.messages": DEFAULT_MAX_MESSAGES,
               "delivery.report.only.error": False}
        aliases = {k.replace(".", "_"): k for k in own}
        aliases.update({"dr_cb": "on_delivery", "dr_msg_cb": "on_delivery"})
        for key in list(merged):
            name = key if key in own else aliases.get(key)
            if name is not None:
                own[name] = merged.pop(key)
        if "queue.buffering.max.kbytes" in merged or "queue_buffering_max_kbytes" in merged:
            key = "queue.buffering.max.kbytes" if "queue.buffering.max.kbytes" in merged else \
                "queue_buffering_max_kbytes"
            kb = _int_setting(key, merged.pop(key), 1)
            if any(canonical_name(k) == "buffer_memory" for k in merged if isinstance(k, str)):
                raise fk.ConfigError(f"{key} and buffer_memory both given: they are the same setting")
            merged["buffer_memory"] = kb * 1024
        self._error_cb = _callable_setting("error_cb", own["error_cb"])
        self._stats_cb = _callable_setting("stats_cb", own["stats_cb"])
        self._default_cb = _callable_setting("on_delivery", own["on_delivery"])
        self._stats_interval = _int_setting("statistics.interval.ms", own["statistics.interval.ms"],
                                            0) / 1000.0
        self._max_messages = _int_setting("queue.buffering.max.messages",
                                          own["queue.buffering.max.messages"], 0)
        only = own["delivery.report.only.error"]
        if isinstance(only, str) and only.strip().lower() in ("true", "false"):
            only = only.strip().lower() == "true"
        if not isinstance(only, bool):
            raise fk.ConfigError(f"delivery.report.only.error must be a boolean, got {only!r}")
        self._only_error = only
        logger = own["logger"]
        if logger is not None and not isinstance(logger, logging.Logger):
            raise fk.ConfigError(f"logger must be a logging.Logger, got {type(logger).__name__}")
        return own

    def __repr__(self) -> str:
        return f"<fastkafka.compat.confluent.Producer {self._p._name}>"

    # -- producing -------------------------------------------------------------------------
    # produce(), len() and poll(0) are PollCore's (compiled): see _confluent_fast.pyx
    def _produce_failed(self, e: BaseException, msg, topic) -> None:
        """produce()'s record was refused by fastkafka with ``e``: raise confluent-kafka's
        error for it, or (no metadata within max_block_ms) queue its failure report."""
        if isinstance(e, (fk.RecordTooLargeError, fk.UnknownPartitionError, fk.ProducerClosedError,
                          fk.IllegalStateError, fk.TransactionAbortableError)):
            raise to_kafka_exception(e) from e
        if isinstance(e, fk.BufferExhaustedError):
            raise BufferError(f"Local: Queue full ({e.message})") from e
        if isinstance(e, fk.KafkaError) and not isinstance(e, fk.InvalidRecordError):
            # metadata not to be had (timeout, the broker's topic error): confluent-kafka queues
            # the record and fails it through its delivery report
            self._queue_failed(msg, topic, e)
            return
        raise e

    def _on_error(self, error) -> None:
        """fastkafka's on_error (I/O thread): queued for error_cb, served by poll()."""
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
        served = 0
        while self._events:
            err = self._events.popleft()
            served += 1
            self._error_cb(err)
        served += self._serve_reports()
        if self._next_stats is not None and time.monotonic() >= self._next_stats:
            self._next_stats = time.monotonic() + self._stats_interval
            served += 1
            self._stats_cb(self._stats_json())
        return served

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
                self._wake.wait(max(0.0, min(until - time.monotonic(), 0.5)))
        finally:
            waker.sleeping = False

    def _poll(self, timeout: float | None) -> int:
        """poll() beyond poll(0) of reports alone (PollCore.poll): waits, error_cb, stats_cb."""
        deadline = time.monotonic() + _seconds(timeout, "poll()")
        while True:
            n = self._serve()
            if n or time.monotonic() >= deadline:
                return n
            self._wait(deadline)

    def flush(self, timeout: float | None = None) -> int:
        """Send everything queued now (linger is not waited for) and serve reports until every
        record has been delivered and reported, or ``timeout`` seconds passed (None or -1:
        forever); returns the number of records still waiting (``len(self)``)."""
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
        if not in_queue:
            return
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

    # -- transactions ----------------------------------------------------------------------
    def _txn(self, fn: Callable, *args):
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
        self._txn(self._p.abort_transaction, _seconds(timeout, "abort_transaction()"))

    # -- lifecycle -------------------------------------------------------------------------
    def close(self, timeout: float | None = None) -> None:
        """Deliver what is queued (up to ``timeout`` seconds, None: forever), serve the last
        reports, stop. Not needed by confluent-kafka code (a dropped producer is closed too)."""
        try:
            self._p.close(None if timeout is None or timeout < 0 else timeout)
            self._serve()
        finally:
            if self._route is not None:
                self._route.close()
            if self._admin is not None:
                self._admin.close()

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
        measures (fastkafka/compat/_confluent_stats.py)."""
        doc = stats_document(self._p, msg_cnt=len(self), msg_max=self._max_messages,
                             started=self._started)
        return json.dumps(doc, default=str)


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
