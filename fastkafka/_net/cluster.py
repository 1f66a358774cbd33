"""Cluster view (brokers, topics, partition leaders) and the thread-safe metadata holder.

``Cluster`` is immutable: a metadata update builds a new one and swaps it in, so the sender thread and
user threads read a consistent view without a lock. ``Metadata`` carries the version counter that
``send`` waits on (bounded by ``max_block_ms``) and the bookkeeping for when to refresh.
"""

from __future__ import annotations

import copy
import logging
import math
import socket
import threading
from dataclasses import dataclass

from fastkafka._net.cells import DueCell, VersionCell
from fastkafka._net.cells import monotonic_ms as now_ms
from fastkafka._net.backoff import Backoff
from fastkafka.errors import (InvalidBrokerResponseError, KafkaTimeoutError,
                              UnknownTopicOrPartitionError, error_for_code)

log = logging.getLogger("fastkafka")

INVALID_BROKER_RESPONSE = InvalidBrokerResponseError.code
UNKNOWN_TOPIC_OR_PARTITION = UnknownTopicOrPartitionError.code


@dataclass(frozen=True, slots=True)
class BrokerInfo:
    node_id: int
    host: str
    port: int
    rack: str | None = None


@dataclass(frozen=True, slots=True)
class PartitionInfo:
    topic: str
    partition: int
    leader: int  # -1 when there is none
    leader_epoch: int = -1
    replicas: tuple = ()
    isr: tuple = ()
    error_code: int = 0


@dataclass(frozen=True, slots=True)
class TopicInfo:
    name: str
    error_code: int
    partitions: tuple  # PartitionInfo, indexed by partition number
    topic_id: bytes | None = None
    error_message: str | None = None   # the client's reason, for a client-side error code


class Cluster:
    """An immutable snapshot of the brokers and the topics the producer has asked about."""

    __slots__ = ("brokers", "topics", "controller_id", "_leaders", "_available")

    def __init__(self, brokers=(), topics=(), controller_id=-1):
        self.brokers: dict[int, BrokerInfo] = {b.node_id: b for b in brokers}
        self.topics: dict[str, TopicInfo] = {t.name: t for t in topics}
        self.controller_id = controller_id
        leaders: dict[str, list] = {}
        available: dict[str, list] = {}
        for t in self.topics.values():
            ls = [-1] * len(t.partitions)
            for p in t.partitions:
                ls[p.partition] = p.leader
            leaders[t.name] = ls
            available[t.name] = [i for i, leader in enumerate(ls) if leader >= 0 and leader in self.brokers]
        self._leaders = leaders
        self._available = available

    @classmethod
    def bootstrap(cls, servers):
        """A cluster of the bootstrap addresses only, with negative placeholder node ids."""
        return cls([BrokerInfo(-(i + 1), h, p) for i, (h, p) in enumerate(servers)])

    def leader_for(self, topic: str, partition: int) -> int:
        ls = self._leaders.get(topic)
        if ls is None or not 0 <= partition < len(ls):
            return -1
        leader = ls[partition]
        return leader if leader in self.brokers else -1

    def partition_count(self, topic: str) -> int:
        ls = self._leaders.get(topic)
        return -1 if ls is None else len(ls)

    def available_partitions(self, topic: str) -> list:
        return self._available.get(topic, [])

    def broker(self, node_id: int) -> BrokerInfo | None:
        return self.brokers.get(node_id)

    def topic_error(self, topic: str) -> int:
        t = self.topics.get(topic)
        return 0 if t is None else t.error_code

    def __repr__(self):
        return f"Cluster(brokers={sorted(self.brokers)}, topics={sorted(self.topics)})"

    def with_leaders(self, moves: dict, new_brokers=()) -> "Cluster":
        """A copy with the leader and leader epoch of each ``(topic, partition)`` in ``moves``
        (``{(topic, partition): (leader_id, leader_epoch)}``) replaced and ``new_brokers``
        (BrokerInfo) added to the brokers. Only the topics moved are rebuilt; the others are
        shared with this snapshot."""
        brokers = dict(self.brokers)
        for b in new_brokers:
            brokers[b.node_id] = b
        by_topic: dict[str, dict] = {}
        for (topic, partition), leader in moves.items():
            by_topic.setdefault(topic, {})[partition] = leader
        topics = dict(self.topics)
        for name, changed in by_topic.items():
            t = topics[name]
            parts = list(t.partitions)
            for partition, (leader, epoch) in changed.items():
                old = parts[partition]
                parts[partition] = PartitionInfo(old.topic, partition, leader, epoch, old.replicas,
                                                 old.isr, 0)
            topics[name] = TopicInfo(t.name, t.error_code, tuple(parts), t.topic_id, t.error_message)
        c = Cluster.__new__(Cluster)
        c.brokers = brokers
        c.topics = topics
        c.controller_id = self.controller_id
        c._leaders = dict(self._leaders)
        c._available = dict(self._available)
        for name in by_topic:
            t = topics[name]
            ls = [p.leader for p in t.partitions]
            c._leaders[name] = ls
            c._available[name] = [i for i, leader in enumerate(ls) if leader >= 0 and leader in brokers]
        return c

    def leader_epoch(self, topic: str, partition: int) -> int:
        """The leader epoch known for ``topic``-``partition`` (-1 when unknown)."""
        t = self.topics.get(topic)
        if t is None or not 0 <= partition < len(t.partitions):
            return -1
        return t.partitions[partition].leader_epoch


def keep_newer_leaders(old: Cluster, new: Cluster) -> tuple[Cluster, int]:
    """``new`` with each partition whose leader epoch is older than ``old``'s for it (a Metadata
    answer from a broker that has not yet learnt of a leader move, or one older than a leader
    hint of a Produce answer) given ``old``'s leader and epoch back: a partition's leader never
    moves backwards by epoch. Only when that leader is still among ``new``'s brokers (or was
    known to ``old``, whose entry is then kept). Returns the cluster and how many partitions
    were kept."""
    moves = {}
    keep_brokers = {}
    for name, t in new.topics.items():
        was = old.topics.get(name)
        if was is None or not was.partitions or len(was.partitions) != len(t.partitions):
            continue
        for p, q in zip(t.partitions, was.partitions):
            if q.leader_epoch > p.leader_epoch >= 0 and q.leader >= 0:
                if q.leader not in new.brokers:
                    b = old.brokers.get(q.leader)
                    if b is None:
                        continue
                    keep_brokers[b.node_id] = b
                moves[(name, p.partition)] = (q.leader, q.leader_epoch)
    if not moves:
        return new, 0
    return new.with_leaders(moves, keep_brokers.values()), len(moves)


# A broker-chosen number never sizes an allocation: a topic's partitions must be numbered 0..n-1,
# each once, where n is the number of entries the response carried.
def cluster_from_response(body: dict, problems: list | None = None, check=None) -> Cluster:
    """Build a Cluster from a decoded Metadata response body, validating it first.

    Brokers with an unusable address (no host, a host no resolver can take, a port outside
    1..65535, a negative or repeated node id) are left out. A topic whose partition numbers are
    not exactly 0..n-1 is kept with no partitions and the client-side error
    INVALID_BROKER_RESPONSE (retried: the next Metadata answer may be right). A leader that is
    not among the listed brokers counts as no leader. Each problem found is appended to
    ``problems`` as a sentence. ``check()``, when given, is called between topics and every 4,096
    partitions (it raises to stop a build that is no longer wanted)."""
    if problems is None:
        problems = []
    brokers = []
    seen_ids = set()
    for b in body["brokers"]:
        node_id, host, port = b["node_id"], b["host"], b["port"]
        reason = broker_address_problem(host, port)
        if node_id < 0 or node_id in seen_ids:
            reason = f"node id {node_id} is {'negative' if node_id < 0 else 'listed twice'}"
        if reason is not None:
            problems.append(f"broker {node_id} ({_shorten(host)}:{port}) left out: {reason}")
            continue
        seen_ids.add(node_id)
        brokers.append(BrokerInfo(node_id, host, port, b.get("rack")))
    topics = []
    shared: dict[tuple, tuple] = {}
    for t in body["topics"]:
        name = t.get("name")
        if name is None:
            continue
        parts = t.get("partitions") or []
        n = len(parts)
        indexes = {p["partition_index"] for p in parts}
        if len(indexes) != n or (n and (min(indexes) != 0 or max(indexes) != n - 1)):
            reason = (f"metadata for topic {name!r} lists {n} partitions numbered "
                      f"{_describe_indexes(indexes)}, not 0..{n - 1}")
            problems.append(reason)
            topics.append(TopicInfo(name, INVALID_BROKER_RESPONSE, (), t.get("topic_id"), reason))
            continue
        infos = [None] * n
        for count, p in enumerate(parts):
            if check is not None and not count & 4095:
                check()
            i = p["partition_index"]
            leader = p["leader_id"]
            if leader >= 0 and leader not in seen_ids:
                leader = -1   # not among the listed brokers: no leader this client can reach
            # Replica sets repeat across partitions: one tuple per distinct set keeps the memory
            # per partition small (a topic can have a million partitions).
            replicas = tuple(p.get("replica_nodes") or ())
            isr = tuple(p.get("isr_nodes") or ())
            infos[i] = PartitionInfo(name, i, leader, p.get("leader_epoch", -1),
                                     shared.setdefault(replicas, replicas), shared.setdefault(isr, isr),
                                     p.get("error_code", 0))
        topics.append(TopicInfo(name, t.get("error_code", 0), tuple(infos), t.get("topic_id")))
    return Cluster(brokers, topics, body.get("controller_id", -1))


def broker_address_problem(host, port) -> str | None:
    """Why ``host:port`` cannot be connected to, or None. The host must be a name or address a
    resolver accepts: at most 253 characters, dot-separated labels of 1..63 characters that encode
    (IDNA); the port 1..65535."""
    if not isinstance(port, int) or not 0 < port < 65536:
        return f"port {port} is outside 1..65535"
    if not isinstance(host, str) or not host:
        return "no host name"
    if ":" in host:                      # an IPv6 literal
        try:
            socket.inet_pton(socket.AF_INET6, host.strip("[]"))
            return None
        except (OSError, ValueError):
            return "host is not a valid IPv6 address"
    if len(host) > 253:
        return f"host name of {len(host)} characters (at most 253)"
    for label in host.rstrip(".").split("."):
        if not label:
            return "host name has an empty label"
        if len(label) > 63:
            return f"host name label of {len(label)} characters (at most 63)"
        try:
            encoded = label.encode("idna")
        except UnicodeError:
            return f"host name label {_shorten(label)!r} cannot be encoded (IDNA)"
        if len(encoded) > 63:
            return f"host name label of {len(encoded)} characters (at most 63)"
    return None


def _shorten(text, limit: int = 80) -> str:
    text = str(text)
    return text if len(text) <= limit else text[:limit] + f"...({len(text)} characters)"


def _describe_indexes(indexes) -> str:
    if not indexes:
        return "nothing"
    ordered = sorted(indexes)
    shown = ", ".join(str(i) for i in ordered[:5])
    return f"{shown}{', ...' if len(ordered) > 5 else ''} (lowest {ordered[0]}, highest {ordered[-1]})"


class Metadata:
    """The current Cluster plus refresh bookkeeping, shared by user threads and the sender.

    User threads call :meth:`add_topic` / :meth:`request_update` and :meth:`await_update`; the
    sender thread calls :meth:`update` / :meth:`failed_update` and reads ``refresh_due`` (when the
    next refresh is due, from C; :meth:`time_to_next_update` is the same from Python).
    """

    def __init__(self, bootstrap_servers, metadata_max_age_ms=300_000, refresh_backoff_ms=100,
                 refresh_backoff_max_ms=1000, topic_metadata_propagation_max_ms=30_000):
        self.cluster = Cluster.bootstrap(bootstrap_servers)
        self.bootstrap_servers = list(bootstrap_servers)
        self.version = 0
        self.version_cell = VersionCell()  # the same number, read from C by Producer.send()
        self.max_age_ms = metadata_max_age_ms
        self.refresh_backoff_ms = refresh_backoff_ms
        # Failed refreshes, and refreshes that still lack a topic asked for, back off exponentially.
        self.backoff = Backoff(refresh_backoff_ms, refresh_backoff_max_ms)
        self._refresh_gap_ms = refresh_backoff_ms
        self.last_refresh_ms = 0
        self.last_successful_refresh_ms = 0
        self.need_update = True
        self.topics: dict[str, None] = {}
        # A topic the brokers report unknown (UNKNOWN_TOPIC_OR_PARTITION) is warned about once and
        # asked for again (it may be being created) until topic_metadata_propagation_max_ms after
        # it was first tracked; sends waiting for it then fail with UnknownTopicOrPartitionError.
        self.propagation_max_ms = topic_metadata_propagation_max_ms
        self._tracked_at: dict[str, int] = {}
        self._warned_unknown: set = set()
        self._next_bound = float("inf")   # the next such bound: a refresh is due then, to decide
        # Topics tracked since the last Metadata request was built (a refresh for them is due at
        # once, not after the backoff: each first send to a new topic would otherwise wait for
        # it), and the topics that request asked for.
        self._fresh_topics = 0
        self._asked: frozenset = frozenset()
        self._failing = False             # the last refresh failed (the backoff holds for all)
        self.last_error: Exception | None = None
        # A connection failure that retrying does not fix (a TLS certificate not accepted): sends
        # waiting for metadata raise it at once instead of waiting max_block_ms. Cleared by the
        # next ready connection or metadata answer.
        self.fatal_error: Exception | None = None
        # Per broker address the network client tried: the last connection failure's text, None
        # while the first attempt is under way, or CONNECTED once a connection became ready.
        self._connections: dict[tuple[str, int], object] = {}
        self._cond = threading.Condition()
        self._closed = False
        # One-shot callables run after the next update, fatal error or close (fastkafka.aio awaits
        # metadata with them instead of blocking in await_update).
        self._listeners: list = []
        # When the next refresh is due, readable from C (the network client's every turn).
        self.refresh_due = DueCell()
        self._set_due()

    # -- user side -------------------------------------------------------------------------
    def add_topic(self, topic: str) -> bool:
        """Track a topic; returns True (and requests an update) when it was new."""
        with self._cond:
            if topic in self.topics:
                return False
            self.topics[topic] = None
            self._tracked_at[topic] = now_ms()
            self._fresh_topics += 1
            self.need_update = True
            self._set_due()
            return True

    def request_topics(self) -> list:
        """The topics a Metadata request being built asks for (every tracked topic); the sender
        calls it as it builds the request."""
        with self._cond:
            self._fresh_topics = 0
            self._asked = frozenset(self.topics)
            self._set_due()
            return list(self._asked)

    def request_update(self) -> int:
        with self._cond:
            self.need_update = True
            self._set_due()
            return self.version

    def await_update(self, last_version: int, timeout_s: float, stale=None, topic=None) -> None:
        """Block until the version moves past ``last_version``; KafkaTimeoutError after timeout.
        A fatal connection error raises at once, unless it is ``stale`` (the one already there
        when the caller began waiting: the caller then waits for the next attempt's outcome).
        With ``topic``: UnknownTopicOrPartitionError when the update that came reports it unknown
        past topic_metadata_propagation_max_ms (:meth:`unknown_topic_error`; a refresh is due at
        that bound, so the update comes then)."""
        deadline = now_ms() + timeout_s * 1000.0
        with self._cond:
            while self.version <= last_version and not self._closed:
                if self.fatal_error is not None and self.fatal_error is not stale:
                    # a fresh instance per waiting thread (tracebacks are per raise)
                    # (copy.copy keeps the error's attributes: node, mechanism, ...)
                    raise copy.copy(self.fatal_error)
                remaining = (deadline - now_ms()) / 1000.0
                if remaining <= 0:
                    raise KafkaTimeoutError(f"metadata was not updated within {timeout_s * 1000:.0f} ms"
                                            + (f" (last error: {self.last_error})" if self.last_error else ""))
                self._cond.wait(remaining)
            unknown = self.unknown_topic_error(topic) if topic is not None else None
            if unknown is not None and self.version > last_version:   # (an answer of this wait)
                raise unknown

    def unknown_topic_deadline_ms(self, topic: str) -> float:
        """When a send waiting for ``topic`` fails if the brokers still report it unknown: its
        first tracking plus topic_metadata_propagation_max_ms (infinity when not tracked)."""
        at = self._tracked_at.get(topic)
        return float("inf") if at is None else at + self.propagation_max_ms

    def unknown_topic_error(self, topic: str, now: float | None = None):
        """The UnknownTopicOrPartitionError a send waiting for ``topic`` fails with, when the
        last metadata answer reports it unknown and topic_metadata_propagation_max_ms has passed
        since it was first tracked; else None."""
        if self.cluster.topic_error(topic) != UNKNOWN_TOPIC_OR_PARTITION:
            return None
        bound = self.unknown_topic_deadline_ms(topic)
        # an answer from the bound on (one from before may be older than the topic's creation)
        if (now_ms() if now is None else now) < bound or self.last_successful_refresh_ms < bound:
            return None
        return UnknownTopicOrPartitionError(
            f"topic {topic!r} does not exist: the brokers still report it unknown "
            f"{self.propagation_max_ms} ms after the first send to it "
            f"(topic_metadata_propagation_max_ms); create it, or check its name")

    def add_listener(self, fn, after: int = -1) -> None:
        """Call ``fn()`` once, on the I/O thread, after the next metadata update, fatal connection
        error or close: what ``await_update`` wakes for, for callers that cannot block. At once
        when closed already, or when the version is past ``after`` (an update came since)."""
        with self._cond:
            if not self._closed and not 0 <= after < self.version:
                self._listeners.append(fn)
                return
        fn()

    def _run_listeners(self) -> None:
        with self._cond:
            listeners, self._listeners = self._listeners, []
        for fn in listeners:
            try:
                fn()
            except Exception:
                log.exception("metadata listener %r raised", fn)

    # -- sender side -----------------------------------------------------------------------
    def time_to_next_update(self, now_ms: int) -> int:
        """Milliseconds until an update is due (0 = now), honouring the refresh backoff."""
        return max(self.refresh_due.at_ms - now_ms, 0)

    def _set_due(self) -> None:
        """Recompute ``refresh_due`` (lock held, or during __init__): asked for, an update is due
        once the refresh backoff since the last attempt has passed; otherwise also not before the
        metadata is ``max_age_ms`` old."""
        at = self.last_refresh_ms + self._refresh_gap_ms
        if self._fresh_topics and not self._failing:
            at = self.last_refresh_ms     # a topic not asked for yet: no backoff to wait out
        if not self.need_update:
            at = max(at, self.last_successful_refresh_ms + self.max_age_ms)
        elif self._next_bound < at:
            at = math.ceil(self._next_bound)  # an unknown topic's bound: the answer then decides
        self.refresh_due.at_ms = at

    def update(self, cluster: Cluster, now_ms: int) -> None:
        with self._cond:
            cluster, kept = keep_newer_leaders(self.cluster, cluster)
            if kept:
                log.debug("metadata answer older than the leaders known for %d partition(s): "
                          "their newer leaders kept", kept)
            self.cluster = cluster
            self.version += 1
            self.version_cell.value = self.version
            self.last_refresh_ms = now_ms
            self.last_successful_refresh_ms = now_ms
            # A tracked topic the broker does not know yet (being auto-created) keeps us asking;
            # one the request did not ask for (tracked while it was under way) is asked at once.
            lacking = [t for t in self.topics
                       if t not in cluster.topics or cluster.topic_error(t) != 0 or
                       any(p.leader < 0 for p in cluster.topics[t].partitions)]
            self.need_update = bool(lacking)
            reported = [t for t in lacking if cluster.topic_error(t) == UNKNOWN_TOPIC_OR_PARTITION]
            unknown = [t for t in reported if t not in self._warned_unknown]
            self._warned_unknown.update(unknown)
            self._next_bound = min((b for b in map(self.unknown_topic_deadline_ms, reported)
                                    if b > now_ms), default=float("inf"))
            if self._warned_unknown and len(lacking) < len(self.topics):
                self._warned_unknown.difference_update(
                    [t for t in self._warned_unknown if t not in lacking])
            self.last_error = None
            self.fatal_error = None
            self._failing = False
            if lacking and (not self._asked or any(t in self._asked for t in lacking)):
                self._refresh_gap_ms = max(self.refresh_backoff_ms, self.backoff.failed())
            else:
                self.backoff.succeeded()
                self._refresh_gap_ms = self.refresh_backoff_ms
            self._set_due()
            self._cond.notify_all()
        for topic in unknown:
            log.warning("topic %r is unknown to the cluster (UNKNOWN_TOPIC_OR_PARTITION): it does not "
                        "exist and is not created automatically (auto.create.topics.enable=false "
                        "on the brokers?), or its name is misspelt. Metadata is asked again in case "
                        "it is being created; sends to it fail with UnknownTopicOrPartitionError "
                        "after topic_metadata_propagation_max_ms=%d (or max_block_ms, if sooner)",
                        topic, self.propagation_max_ms)
        if self._listeners:
            self._run_listeners()

    def apply_leader_hints(self, hints: dict, endpoints=()) -> list:
        """Leader hints of a Produce answer (KIP-951): ``hints`` maps ``(topic, partition)`` to
        the ``(leader_id, leader_epoch)`` the broker named in the partition's CurrentLeader;
        ``endpoints`` are the answer's NodeEndpoints ``(node_id, host, port, rack)``. A hint is
        taken when its epoch is newer than the one known for the partition and its leader is a
        known broker or one of ``endpoints`` (then added to the cluster view); an older or equal
        epoch, a partition not known, or a leader with no address is ignored. The cluster view is
        swapped at once (the sender's next drain goes to the new leader) without changing the
        version ``send`` waits on, and a refresh is asked for (it runs in the background: nothing
        waits for it). Returns the ``(topic, partition)`` keys taken."""
        with self._cond:
            cluster = self.cluster
            moves = {}
            added = {}
            for (topic, partition), (leader, epoch) in hints.items():
                if leader < 0 or epoch < 0 or cluster.partition_count(topic) <= partition:
                    continue
                if epoch <= cluster.leader_epoch(topic, partition):
                    continue
                if leader not in cluster.brokers and leader not in added:
                    b = _endpoint(endpoints, leader)
                    if b is None:
                        continue
                    added[leader] = b
                moves[(topic, partition)] = (leader, epoch)
            if moves:
                self.cluster = cluster.with_leaders(moves, added.values())
            if hints:
                self.need_update = True
                self._set_due()
            return list(moves)

    def rebootstrap(self) -> None:
        """Forget the brokers known from metadata and ask the bootstrap addresses again (every
        known broker stayed unreachable: metadata_recovery_strategy=rebootstrap)."""
        with self._cond:
            self.cluster = Cluster.bootstrap(self.bootstrap_servers)
            self.need_update = True
            self.last_refresh_ms = 0
            self._set_due()

    def failed_update(self, now_ms: int, error: Exception | None = None) -> None:
        with self._cond:
            self.last_refresh_ms = now_ms
            self._failing = True
            self._refresh_gap_ms = max(self.refresh_backoff_ms, self.backoff.failed())
            self._set_due()
            if error is not None:
                self.last_error = error

    def close(self) -> None:
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._run_listeners()

    # -- connection outcomes (sender thread writes, user threads read for error messages) ----
    def connection_attempt(self, host: str, port: int) -> None:
        """A connection to ``host:port`` is being tried (a failure recorded before is kept)."""
        with self._cond:
            self._connections.setdefault((host, port), None)

    def connection_failed(self, host: str, port: int, reason: str) -> None:
        """The last attempt to connect to ``host:port`` failed for ``reason``."""
        with self._cond:
            self._connections[(host, port)] = reason

    def connection_ready(self, host: str, port: int) -> None:
        with self._cond:
            self._connections[(host, port)] = CONNECTED
            self.fatal_error = None

    def fatal_connection_error(self, error: Exception) -> None:
        """A connection failed in a way retrying does not fix: waiting sends raise ``error``."""
        with self._cond:
            self.fatal_error = error
            self.last_error = error
            self._cond.notify_all()
        if self._listeners:
            self._run_listeners()

    def connection_errors(self) -> dict[str, str]:
        """``{"host:port": last connection error}`` of every address tried whose last attempt did not
        end in a ready connection (``"no answer yet"`` while the first attempt is under way), in the
        order they were first tried. Empty when every address tried was reached."""
        with self._cond:
            items = list(self._connections.items())
        order = {addr: i for i, addr in enumerate(self.bootstrap_servers)}
        items.sort(key=lambda item: order.get(item[0], len(order)))  # bootstrap order, then the rest
        return {format_address(h, p): (reason or "no answer yet")
                for (h, p), reason in items if reason is not CONNECTED}

    def describe_connection_errors(self) -> str | None:
        """One line naming every broker address that could not be reached and why, or None."""
        errors = self.connection_errors()
        if not errors:
            return None
        with self._cond:
            any_ready = any(r is CONNECTED for r in self._connections.values())
        what = "could not connect to" if any_ready else "could not connect to any broker; tried"
        return f"{what} " + ", ".join(f"{addr} ({reason})" for addr, reason in errors.items())


CONNECTED = object()  # the marker of an address whose last connection became ready


def _endpoint(endpoints, node_id: int) -> BrokerInfo | None:
    """The BrokerInfo of ``node_id`` among a Produce answer's NodeEndpoints, None when it is not
    there or its address is unusable."""
    for e in endpoints:
        if e[0] == node_id:
            if broker_address_problem(e[1], e[2]) is not None:
                return None
            return BrokerInfo(e[0], e[1], e[2], e[3] if len(e) > 3 else None)
    return None


def format_address(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def topic_error(cluster: Cluster, topic: str):
    """The KafkaError for a topic-level metadata error, or None."""
    code = cluster.topic_error(topic)
    if code == 0:
        return None
    info = cluster.topics.get(topic)
    return error_for_code(code, info.error_message if info is not None else None)


__all__ = ["BrokerInfo", "PartitionInfo", "TopicInfo", "Cluster", "Metadata", "cluster_from_response"]

