"""A small admin client: create/delete topics, describe partitions and leaders, list offsets.

Built on composable request futures (seed 000): ``_send`` only queues a request and returns a
:class:`RequestFuture` of the raw response; ``compose`` adapts it into a future of the value the
caller wants (an offset, a cluster view), recording on failure whether the error is retriable and
whether metadata must be refreshed before retrying. ``_poll(future)`` drives the network client on
the calling thread until the future is done. No background thread.

Example::

    from fastkafka.admin import Admin
    with Admin(bootstrap_servers="127.0.0.1:9092") as admin:
        admin.create_topic("events", partitions=6)
        print(admin.describe_topic("events"))
        print(admin.list_offsets("events", 0, "latest"))
"""

from __future__ import annotations

import copy
import threading
import time
from typing import Any, Callable, NamedTuple

from fastkafka._net.backoff import Backoff
from fastkafka._net.cluster import Cluster, Metadata, PartitionInfo, cluster_from_response
from fastkafka.config import ProducerConfig, canonical_name
from fastkafka.errors import (ConfigError, KafkaError, KafkaTimeoutError, NetworkError, error_class_for_code,
                     error_for_code)
from fastkafka._net.network import NetworkClient, now_ms
from fastkafka._net.connection import State as ConnState
from fastkafka.protocol import ApiKey

EARLIEST = -2
LATEST = -1
TOPIC_ALREADY_EXISTS = 36
UNKNOWN_TOPIC_OR_PARTITION = 3
_UNKNOWN_TOPIC = error_class_for_code(UNKNOWN_TOPIC_OR_PARTITION)

_ADMIN_KEYS = {"bootstrap_servers", "client_id", "request_timeout_ms", "reconnect_backoff_ms",
               "reconnect_backoff_max_ms", "retry_backoff_ms", "retry_backoff_max_ms", "connections_max_idle_ms",
               "socket_connection_setup_timeout_ms", "max_response_size", "metadata_max_age_ms",
               "metadata_recovery_strategy", "metadata_recovery_rebootstrap_trigger_ms"}
_ADMIN_KEYS |= {"security_protocol", "ssl_cafile", "ssl_certfile", "ssl_keyfile", "ssl_password",
                "ssl_check_hostname", "ssl_context"}  # TLS
_ADMIN_KEYS |= {"sasl_mechanism", "sasl_plain_username", "sasl_plain_password",
                "sasl_oauth_token_provider"}  # SASL


class RequestFuture:
    """The eventual result of one request: a value or an exception, set once.

    ``add_listener(on_success, on_failure)`` runs a listener at completion (or at once if done);
    ``compose(fn)`` returns a new future of ``fn(value)`` (an exception raised by ``fn`` fails it);
    ``is_retriable()`` / ``needs_metadata_refresh()`` describe a failure.
    """

    __slots__ = ("_done", "_value", "_exception", "_listeners", "_lock")

    def __init__(self):
        self._done = threading.Event()
        self._value: Any = None
        self._exception: BaseException | None = None
        self._listeners: list = []
        self._lock = threading.Lock()

    def is_done(self) -> bool:
        return self._done.is_set()

    def succeeded(self) -> bool:
        return self._done.is_set() and self._exception is None

    def failed(self) -> bool:
        return self._done.is_set() and self._exception is not None

    @property
    def value(self) -> Any:
        if not self.succeeded():
            raise KafkaError("the request future has not succeeded")
        return self._value

    @property
    def exception(self) -> BaseException | None:
        return self._exception

    def is_retriable(self) -> bool:
        return bool(getattr(self._exception, "retriable", False))

    def needs_metadata_refresh(self) -> bool:
        return bool(getattr(self._exception, "invalid_metadata", False))

    def _set(self, value, exception) -> None:
        with self._lock:
            if self._done.is_set():
                raise KafkaError("request future completed twice")
            self._value, self._exception = value, exception
            self._done.set()
            listeners, self._listeners = self._listeners, []
        for on_success, on_failure in listeners:
            if exception is None:
                on_success(value)
            else:
                on_failure(exception)

    def complete(self, value: Any) -> None:
        self._set(value, None)

    def fail(self, exception: BaseException) -> None:
        self._set(None, exception)

    def add_listener(self, on_success: Callable, on_failure: Callable) -> None:
        with self._lock:
            if not self._done.is_set():
                self._listeners.append((on_success, on_failure))
                return
        if self._exception is None:
            on_success(self._value)
        else:
            on_failure(self._exception)

    def compose(self, fn: Callable[[Any], Any]) -> "RequestFuture":
        out = RequestFuture()

        def on_success(value):
            try:
                result = fn(value)
            except BaseException as e:  # noqa: BLE001 - the adapter's failure is the future's
                out.fail(e)
                return
            out.complete(result)

        self.add_listener(on_success, out.fail)
        return out


class Admin:
    """Admin operations against a cluster. Accepts the connection settings of the Producer."""

    def __init__(self, config: dict | None = None, **kwargs: Any):
        merged = dict(config or {})
        merged.update(kwargs)
        cfg = ProducerConfig(merged)
        for key in merged:
            if canonical_name(key) not in _ADMIN_KEYS:
                raise ConfigError(f"{key!r} is not an admin client setting")
        self.config = cfg
        self._metadata = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms,
                                  cfg.retry_backoff_max_ms)
        self._client = NetworkClient(cfg, self._metadata, manage_metadata=False)
        self._lock = threading.Lock()  # one caller drives the client at a time

    def __enter__(self) -> "Admin":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def close(self) -> None:
        self._client.close()

    # -- request plumbing ------------------------------------------------------------------
    def _send(self, api_key: int, body_for_version, node: int | None, deadline: int) -> RequestFuture:
        """Queue a request once a node is ready (polling for the connection); a future of the body."""
        fut = RequestFuture()
        # An error left by an earlier call does not fail this one before it has tried to connect
        # (the cause may be fixed by now, e.g. a SASL user created); the next failure does.
        stale = self._metadata.fatal_error
        while True:
            now = now_ms()
            target = node if node is not None else self._client.least_loaded_node(now)
            if target is not None and self._client.ready(target, now):
                break
            fatal = self._metadata.fatal_error  # e.g. a TLS certificate not accepted: no retry fixes it
            if fatal is not None and fatal is not stale:
                fut.fail(copy.copy(fatal))   # a fresh instance with the error's attributes
                return fut
            if now >= deadline:
                fut.fail(KafkaTimeoutError(f"no broker connection for {ApiKey(api_key).name} "
                                           f"(last error: {self._metadata.last_error})"))
                return fut
            self._client.poll(min(50, deadline - now), now)
        version = self._client.api_version(target, api_key)
        body = body_for_version(version) if callable(body_for_version) else body_for_version

        def on_response(resp, err):
            if err is not None:
                fut.fail(err)
            else:
                fut.complete(resp)

        self._client.send(target, api_key, body, now_ms(), on_response)
        return fut

    def _poll(self, fut: RequestFuture, deadline: int) -> bool:
        """Drive the network client until ``fut`` is done or the deadline passes; True when done.
        The future is left alone at the deadline (its response may still arrive, and completing it
        from here as well would complete it twice)."""
        while not fut.is_done():
            now = now_ms()
            if now >= deadline:
                return False
            self._client.poll(min(100, deadline - now), now)
        return True

    def _run(self, make_future: Callable[[int], RequestFuture], timeout_ms: int | None,
             fatal: tuple = ()):
        """The retry loop of seed 000: send, poll, return on success, raise a non-retriable error
        (or one of the ``fatal`` classes), refresh metadata before retrying when the error says so,
        back off before every retry. At the deadline the last error the *broker* gave is raised
        (a KafkaTimeoutError only when there was none), so a retried-out UNKNOWN_TOPIC_OR_PARTITION
        is reported as that, not as a timeout."""
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        deadline = now_ms() + timeout_ms
        last_error: BaseException | None = None
        backoff = Backoff(self.config.retry_backoff_ms, self.config.retry_backoff_max_ms)
        with self._lock:
            while True:
                fut = make_future(deadline)
                if not self._poll(fut, deadline):
                    exc = KafkaTimeoutError(f"request timed out after {timeout_ms} ms")
                    if last_error is not None:
                        raise last_error from exc
                    raise exc
                if fut.succeeded():
                    return fut.value
                exc = fut.exception
                if not isinstance(exc, KafkaTimeoutError):
                    last_error = exc
                if not fut.is_retriable() or isinstance(exc, fatal):
                    raise exc
                if now_ms() >= deadline:
                    if last_error is not None and last_error is not exc:
                        raise last_error from exc
                    raise exc
                if fut.needs_metadata_refresh():
                    try:
                        self._refresh(None, deadline)
                    except KafkaError as e:
                        if now_ms() >= deadline:
                            raise (last_error or e) from e
                # Back off before every retry (also after a refresh), never past the deadline.
                time.sleep(max(0, min(backoff.failed(), deadline - now_ms())) / 1000.0)

    # -- metadata --------------------------------------------------------------------------
    def _metadata_future(self, topics, deadline, auto_create=False) -> RequestFuture:
        body = {"topics": None if topics is None else [{"name": t} for t in topics],
                "allow_auto_topic_creation": auto_create}
        return self._send(ApiKey.METADATA, body, None, deadline).compose(cluster_from_response)

    def _refresh(self, topics, deadline) -> Cluster:
        fut = self._metadata_future(topics, deadline)
        if not self._poll(fut, deadline):
            raise KafkaTimeoutError("metadata request timed out")
        if fut.succeeded():
            self._metadata.update(fut.value, now_ms())
            return fut.value
        raise fut.exception

    def describe_cluster(self, timeout_ms: int | None = None) -> Cluster:
        """Brokers and all topics."""
        cluster = self._run(lambda d: self._metadata_future(None, d), timeout_ms)
        self._metadata.update(cluster, now_ms())
        return cluster

    def describe_topic(self, topic: str, timeout_ms: int | None = None) -> list[PartitionInfo]:
        """Partitions of ``topic`` with their leaders; raises UnknownTopicOrPartitionError."""
        def check(cluster: Cluster):
            t = cluster.topics.get(topic)
            if t is None:
                raise error_for_code(UNKNOWN_TOPIC_OR_PARTITION, f"topic {topic!r} not in metadata")
            if t.error_code:
                raise error_for_code(t.error_code, f"topic {topic!r}")
            self._metadata.update(cluster, now_ms())
            return list(t.partitions)
        # Like Java's describeTopics: an unknown topic is reported at once, not retried.
        return self._run(lambda d: self._metadata_future([topic], d).compose(check), timeout_ms,
                         fatal=(_UNKNOWN_TOPIC,))

    def list_topics(self, timeout_ms: int | None = None) -> list[str]:
        return sorted(self.describe_cluster(timeout_ms).topics)

    # -- topics ----------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int = 1, replication_factor: int = 1,
                     config: dict | None = None, exist_ok: bool = False,
                     timeout_ms: int | None = None) -> None:
        self.create_topics({name: partitions}, replication_factor, config, exist_ok, timeout_ms)

    def create_topics(self, topics: dict, replication_factor: int = 1, config: dict | None = None,
                      exist_ok: bool = False, timeout_ms: int | None = None) -> None:
        """Create topics given as {name: partitions}; raises the first error (TopicAlreadyExists
        is ignored with ``exist_ok``)."""
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms
        body = {"topics": [{"name": n, "num_partitions": p, "replication_factor": replication_factor,
                            "assignments": [],
                            "configs": [{"name": k, "value": str(v)} for k, v in (config or {}).items()]}
                           for n, p in topics.items()],
                "timeout_ms": timeout_ms, "validate_only": False}

        def check(resp):
            for t in resp["topics"]:
                code = t["error_code"]
                if code and not (exist_ok and code == TOPIC_ALREADY_EXISTS):
                    raise error_for_code(code, f"create topic {t['name']!r}: {t.get('error_message') or ''}")
            return None
        self._run(lambda d: self._send(ApiKey.CREATE_TOPICS, body, self._controller(d), d).compose(check),
                  timeout_ms)

    def delete_topics(self, names: list[str], timeout_ms: int | None = None) -> None:
        timeout_ms = self.config.request_timeout_ms if timeout_ms is None else timeout_ms

        def body(version):
            if version is not None and version >= 6:
                return {"topics": [{"name": n} for n in names], "timeout_ms": timeout_ms}
            return {"topic_names": list(names), "timeout_ms": timeout_ms}

        def check(resp):
            for r in resp["responses"]:
                if r["error_code"]:
                    raise error_for_code(r["error_code"], f"delete topic {r.get('name')!r}")
        self._run(lambda d: self._send(ApiKey.DELETE_TOPICS, body, self._controller(d), d).compose(check),
                  timeout_ms, fatal=(_UNKNOWN_TOPIC,))

    def _controller(self, deadline) -> int | None:
        cluster = self._metadata.cluster
        if cluster.controller_id < 0 or cluster.controller_id not in cluster.brokers:
            try:
                cluster = self._refresh([], deadline)
            except KafkaError:
                return None
        c = cluster.controller_id
        return c if c in cluster.brokers else None

    # -- offsets ---------------------------------------------------------------------------
    def list_offsets(self, topic: str, partition: int, spec: str | int = "latest",
                     timeout_ms: int | None = None) -> int:
        """The offset of ``partition`` at ``spec``: "earliest", "latest", or a timestamp in ms (the
        first offset whose timestamp is >= it; -1 when there is none)."""
        if spec == "earliest":
            ts = EARLIEST
        elif spec == "latest":
            ts = LATEST
        elif isinstance(spec, int) and not isinstance(spec, bool) and spec >= 0:
            ts = spec
        else:
            raise ConfigError(f"list_offsets spec must be 'earliest', 'latest' or a timestamp >= 0, got {spec!r}")

        def make(deadline):
            leader = self._metadata.cluster.leader_for(topic, partition)
            if leader < 0:
                try:
                    self._refresh([topic], deadline)
                except KafkaError as e:
                    fut = RequestFuture()
                    fut.fail(e)
                    return fut
                leader = self._metadata.cluster.leader_for(topic, partition)
                if leader < 0:
                    fut = RequestFuture()
                    fut.fail(error_for_code(UNKNOWN_TOPIC_OR_PARTITION, f"{topic}-{partition} has no leader"))
                    return fut
            body = {"replica_id": -1, "isolation_level": 0,
                    "topics": [{"name": topic, "partitions": [
                        {"partition_index": partition, "current_leader_epoch": -1, "timestamp": ts}]}],
                    "timeout_ms": self.config.request_timeout_ms}

            def to_offset(resp):
                for t in resp["topics"]:
                    for p in t["partitions"]:
                        if t["name"] == topic and p["partition_index"] == partition:
                            if p["error_code"]:
                                raise error_for_code(p["error_code"], f"list offsets {topic}-{partition}")
                            return p["offset"]
                raise NetworkError(f"list offsets response has no entry for {topic}-{partition}")
            return self._send(ApiKey.LIST_OFFSETS, body, leader, deadline).compose(to_offset)
        return self._run(make, timeout_ms)

    # -- transactions ----------------------------------------------------------------------
    def _coordinator_future(self, key: str, key_type: int, deadline: int) -> RequestFuture:
        def node_of(resp):
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], resp.get("error_message"))
            if resp["node_id"] not in self._metadata.cluster.brokers:
                self._refresh([], deadline)
            return resp["node_id"]
        return self._send(ApiKey.FIND_COORDINATOR, {"key": key, "key_type": key_type}, None,
                          deadline).compose(node_of)

    def find_coordinator(self, key: str, key_type: int = 1, timeout_ms: int | None = None) -> int:
        """The node id of the coordinator of a transactional id (``key_type=1``) or of a consumer
        group (``key_type=0``)."""
        return self._run(lambda deadline: self._coordinator_future(key, key_type, deadline), timeout_ms)

    def _txn_call(self, transactional_id: str, api_key: int, body: dict, timeout_ms: int | None):
        """Send ``body`` to the transactional id's coordinator, looking it up again when it moved
        and retrying CONCURRENT_TRANSACTIONS and a loading coordinator until the deadline."""
        coordinator: dict = {}

        def forget(error):
            if isinstance(error, NetworkError) or getattr(error, "code", None) in (15, 16):
                coordinator.pop("node", None)   # the coordinator moved or is gone: look it up again

        def result(resp):
            if resp["error_code"]:
                raise error_for_code(resp["error_code"], f"{ApiKey(api_key).name} for "
                                     f"transactional id {transactional_id!r}")
            return resp

        def make(deadline):
            if "node" not in coordinator:
                lookup = self._coordinator_future(transactional_id, 1, deadline)
                if not self._poll(lookup, deadline) or lookup.failed():
                    return lookup if lookup.is_done() else _failed(KafkaTimeoutError(
                        f"no coordinator found for transactional id {transactional_id!r}"))
                coordinator["node"] = lookup.value
            if not self._reachable(coordinator["node"], deadline):
                # The coordinator's node does not take connections (it died, and FindCoordinator
                # still names it until the controller fences it): look it up again rather than
                # spend the whole deadline connecting to a dead node.
                node = coordinator.pop("node")
                return _failed(NetworkError(f"coordinator {node} of transactional id "
                                            f"{transactional_id!r} unreachable"))
            fut = self._send(api_key, body, coordinator["node"], deadline).compose(result)
            fut.add_listener(lambda _value: None, forget)
            return fut
        return self._run(make, timeout_ms, fatal=_TXN_FATAL)

    def _reachable(self, node: int, deadline: int) -> bool:
        """Poll until ``node`` is ready (True) or a connection attempt to it has failed (False);
        True at the deadline (``_send`` then reports the timeout)."""
        while True:
            now = now_ms()
            if self._client.ready(node, now):
                return True
            conn = self._client.connections.get(node)
            if conn is not None and conn.state is ConnState.DISCONNECTED and conn.failures > 0:
                return False
            if now >= deadline:
                return True
            self._client.poll(min(50, deadline - now), now)

    def _end_transaction(self, prepared, committed: bool, timeout_ms):
        body = {"transactional_id": prepared.transactional_id, "producer_id": prepared.producer_id,
                "producer_epoch": prepared.producer_epoch, "committed": committed}
        self._txn_call(prepared.transactional_id, ApiKey.END_TXN, body, timeout_ms)

    def commit_transaction(self, prepared, timeout_ms: int | None = None) -> None:
        """Commit a transaction another producer prepared (``Producer.prepare_transaction()``):
        ``prepared`` has ``transactional_id``, ``producer_id`` and ``producer_epoch``. Committing
        again a transaction already committed with that epoch succeeds (so a commit can be
        retried after a crash); ProducerFencedError / InvalidProducerEpochError when a newer
        producer took the id over (the transaction was then aborted, or a newer one is open)."""
        self._end_transaction(prepared, True, timeout_ms)

    def abort_transaction(self, prepared, timeout_ms: int | None = None) -> None:
        """Abort a prepared transaction (see :meth:`commit_transaction`)."""
        self._end_transaction(prepared, False, timeout_ms)

    def fence_transactional_id(self, transactional_id: str, transaction_timeout_ms: int = 60_000,
                               timeout_ms: int | None = None):
        """Take the transactional id over (InitProducerId): any producer still using it is fenced,
        and a transaction it left open is aborted (the coordinator writes the abort markers before
        answering; CONCURRENT_TRANSACTIONS until then is retried). Returns the new
        :class:`~fastkafka._producer.transactions.PreparedTransaction`-like identity (producer id, epoch)
        with no transaction open."""
        from fastkafka._producer.transactions import PreparedTransaction

        body = {"transactional_id": transactional_id, "transaction_timeout_ms": transaction_timeout_ms,
                "producer_id": -1, "producer_epoch": -1}
        resp = self._txn_call(transactional_id, ApiKey.INIT_PRODUCER_ID, body, timeout_ms)
        return PreparedTransaction(transactional_id, resp["producer_id"], resp["producer_epoch"])


    def list_transactions(self, states=(), producer_ids=(), timeout_ms: int | None = None) -> list:
        """The transactions the cluster's coordinators know (ListTransactions, asked of every
        broker: each coordinates the transactional ids of its partitions of the transaction log):
        a list of :class:`TransactionListing` ``(transactional_id, producer_id, state)``, the state
        as Kafka names it (``"Ongoing"``, ``"PrepareCommit"``, ``"CompleteCommit"``, ``"Empty"``,
        ...). ``states`` / ``producer_ids``: only those (empty: all). A broker that cannot answer
        fails the call: a partial list would hide transactions."""
        body = {"state_filters": list(states), "producer_id_filters": [int(p) for p in producer_ids],
                "duration_filter": -1}
        out: list = []
        for node in sorted(self.describe_cluster(timeout_ms).brokers):
            def make(deadline, node=node):
                def result(resp):
                    if resp["error_code"]:
                        raise error_for_code(resp["error_code"], f"LIST_TRANSACTIONS on node {node}")
                    return resp["transaction_states"]
                return self._send(ApiKey.LIST_TRANSACTIONS, body, node, deadline).compose(result)
            for t in self._run(make, timeout_ms):
                out.append(TransactionListing(t["transactional_id"], t["producer_id"],
                                              t["transaction_state"]))
        return out


class TransactionListing(NamedTuple):
    """One transaction of :meth:`Admin.list_transactions`."""
    transactional_id: str
    producer_id: int
    state: str


def _failed(error: BaseException) -> RequestFuture:
    fut = RequestFuture()
    fut.fail(error)
    return fut


#: Transaction errors no retry fixes (fenced, not authorised, bad state).
_TXN_FATAL = tuple(error_class_for_code(c) for c in (47, 48, 53, 90))

__all__ = ["Admin", "RequestFuture", "TransactionListing", "EARLIEST", "LATEST"]
