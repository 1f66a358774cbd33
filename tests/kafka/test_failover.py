"""Failover on a 3-node Apache Kafka cluster while an idempotent producer streams at a steady rate.

Each test runs a paced stream (a thread calling ``send`` about 2,000 times a second with default
settings: idempotence on, acks=all) into a fresh 6-partition topic with replication factor 3 and
min.insync.replicas=2, and applies one fault while it runs:

* the leader of a partition is SIGKILLed, then restarted and waited for until it is back in every ISR;
* a rolling restart: each node in turn is stopped (controlled shutdown), started, and every partition
  of the cluster is back to a full ISR before the next node;
* leadership of every partition moves: its replica order is changed with ReassignPartitionsCommand and
  a preferred leader election (LeaderElectionCommand) makes the new first replica the leader.

Every record's value carries its sequence number. After ``close(timeout)`` the test checks, against
the topic read back by an independent consumer (confluent-kafka, CRCs checked), that every record was
written exactly once (the partitions' high watermarks add up to the number sent, and the values read
are the values sent), in send order within each partition, at the partition and offset its
RecordMetadata named, with no error on any future or callback, and that ``close`` returned in time.
The producer's retries and epoch bumps, the longest gap between consecutive delivery completions and
the close time are printed (``-s``) and not asserted on.
"""
from __future__ import annotations

import json
import logging
import threading
import time

import pytest

from brokers import read_back, unique_name
from fastkafka import Producer

pytestmark = [pytest.mark.broker, pytest.mark.timeout(300)]

NPART = 6
RATE = 2000                 # records per second
TICK = 0.01                 # the pacing thread sends RATE * TICK records per tick
CLOSE_TIMEOUT = 10.0        # given to close()
CLOSE_BOUND = 15.0          # close() must have returned within this
ISR_TIMEOUT = 90.0
ELECTION = "org.apache.kafka.tools.LeaderElectionCommand"
REASSIGN = "org.apache.kafka.tools.reassign.ReassignPartitionsCommand"


def _value(seq: int) -> bytes:
    return b"seq=%09d|" % seq + b"x" * 50


def _seq(value: bytes) -> int:
    assert value is not None and value.startswith(b"seq=") and value[13:14] == b"|", value
    return int(value[4:13])


class _LogTail(logging.Handler):
    """Keeps the producer's log (logger "fastkafka", DEBUG) of one stream, as evidence on failure."""

    def __init__(self):
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record):
        self.lines.append(f"{record.created:.3f} {record.levelname} {record.getMessage()}")


class PacedStream:
    """A producer fed by a thread at a steady rate; delivery completions are timed on the I/O thread."""

    def __init__(self, bootstrap: str, topic: str, keyed: bool):
        self.topic = topic
        self.keyed = keyed
        self.sent: list[tuple[int, bytes | None]] = []         # (seq, key) in send order
        self.futures = []
        self.done: list[tuple[float, int, object, object]] = []  # (time, seq, err, md), completion order
        self.send_errors: list[BaseException] = []
        self.events: list[tuple[float, str]] = []
        self.max_send_gap = 0.0
        self._stop = threading.Event()
        self._log = _LogTail()
        self._logger = logging.getLogger("fastkafka")
        self._old_level = self._logger.level
        self._logger.addHandler(self._log)
        self._logger.setLevel(logging.DEBUG)
        self.producer = Producer(bootstrap_servers=bootstrap)
        self.t0 = time.monotonic()
        self.close_seconds: float | None = None
        self._thread = threading.Thread(target=self._run, name="failover-stream", daemon=True)

    def start(self) -> "PacedStream":
        self.t0 = time.monotonic()
        self._thread.start()
        return self

    def event(self, what: str) -> None:
        t = time.monotonic() - self.t0
        self.events.append((t, what))
        print(f"  [{t:7.2f}s] {what}", flush=True)

    def _on_delivery(self, seq):
        done = self.done

        def cb(err, md):
            done.append((time.monotonic(), seq, err, md))
        return cb

    def _run(self) -> None:
        per_tick = max(1, int(RATE * TICK))
        seq = 0
        next_tick = time.monotonic()
        last_send = next_tick
        try:
            while not self._stop.is_set():
                for _ in range(per_tick):
                    key = b"key-%03d" % (seq % 97) if self.keyed else None
                    fut = self.producer.send(self.topic, _value(seq), key=key,
                                             on_delivery=self._on_delivery(seq))
                    self.sent.append((seq, key))
                    self.futures.append(fut)
                    seq += 1
                now = time.monotonic()
                self.max_send_gap = max(self.max_send_gap, now - last_send)
                last_send = now
                next_tick = max(next_tick + TICK, now)   # behind schedule: no burst to catch up
                time.sleep(max(0.0, next_tick - now))
        except BaseException as e:   # noqa: BLE001 - reported by the test
            self.send_errors.append(e)

    def stop_and_close(self) -> None:
        """Stop sending, then close(CLOSE_TIMEOUT) and time it."""
        self._stop.set()
        self._thread.join(60)
        assert not self._thread.is_alive(), "the sending thread is stuck in send()"
        self.event(f"stream stopped after {len(self.sent)} records; close({CLOSE_TIMEOUT})")
        t = time.monotonic()
        self.producer.close(CLOSE_TIMEOUT)
        self.close_seconds = time.monotonic() - t
        self.event(f"closed in {self.close_seconds:.2f}s")

    def abandon(self) -> None:
        """Teardown after a failure: stop the thread and close without waiting long."""
        self._stop.set()
        self._thread.join(60)
        if self.close_seconds is None:
            self.producer.close(1.0)
        self._logger.removeHandler(self._log)
        self._logger.setLevel(self._old_level)

    def log_tail(self, n: int = 60) -> str:
        return "\n".join(self._log.lines[-n:])

    def longest_stall(self) -> tuple[float, float, float]:
        """Largest gap between consecutive delivery completions after the first one, when it began
        (seconds since the stream's start), and how long the first completion took (start-up:
        metadata, producer id)."""
        times = sorted(t for t, *_ in self.done)
        if not times:
            return 0.0, 0.0, 0.0
        gap, at, prev = 0.0, 0.0, times[0]
        for t in times[1:]:
            if t - prev > gap:
                gap, at = t - prev, prev - self.t0
            prev = t
        return gap, at, times[0] - self.t0


def _wait_full_isr(kc, timeout: float = ISR_TIMEOUT, topics=None) -> None:
    """Until every partition of every topic in the cluster (or of ``topics``) has a leader and all
    its replicas in the ISR."""
    from fastkafka.errors import KafkaError

    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            with kc.admin() as admin:
                cluster = admin.describe_cluster(timeout_ms=5000)
            if len(cluster.brokers) == len(kc.nodes):
                lagging = [(t.name, p.partition, p.leader, p.replicas, p.isr)
                           for t in cluster.topics.values() if topics is None or t.name in topics
                           for p in t.partitions
                           if p.leader < 0 or set(p.isr) != set(p.replicas)]
                if not lagging:
                    return
                last = f"partitions not fully in sync: {lagging[:10]}"
            else:
                last = f"brokers registered: {sorted(cluster.brokers)}"
        except KafkaError as e:
            last = repr(e)
        if time.monotonic() > deadline:
            raise AssertionError(f"cluster not back to full ISR within {timeout}s: {last}\n"
                                 f"{kc.last_output(10)}")
        time.sleep(0.25)


@pytest.fixture
def cluster(kafka_cluster3):
    """The module's 3-node cluster, all nodes up and in sync before and after the test."""
    kc = kafka_cluster3
    _wait_full_isr(kc)
    yield kc
    for node_id, node in kc.nodes.items():
        if not node.running:
            kc.start_node(node_id)
    _wait_full_isr(kc)


@pytest.fixture
def stream_factory(cluster):
    streams: list[PacedStream] = []

    def make(keyed: bool = True) -> PacedStream:
        topic = unique_name("failover")
        cluster.create_topic(topic, NPART)
        s = PacedStream(cluster.bootstrap, topic, keyed)
        streams.append(s)
        return s.start()

    yield make
    for s in streams:
        s.abandon()


def _verify(kc, s: PacedStream, name: str) -> dict:
    """Check exactly-once, in-order delivery at the reported offsets; print and return the numbers."""
    problems: list[str] = []
    n = len(s.sent)
    assert not s.send_errors, f"send() raised: {s.send_errors[:3]!r}"
    assert n > 0

    # Every future and every callback: exactly one outcome per record, no error.
    errors = [(seq, err) for _, seq, err, _ in s.done if err is not None]
    if errors:
        problems.append(f"{len(errors)} delivery errors, first: {errors[:5]}")
    cb_count: dict[int, int] = {}
    for _, seq, _, _ in s.done:
        cb_count[seq] = cb_count.get(seq, 0) + 1
    bad_cb = [seq for seq, _ in s.sent if cb_count.get(seq) != 1]
    if bad_cb:
        problems.append(f"{len(bad_cb)} records without exactly one delivery callback, first {bad_cb[:10]}")
    metadata = {}
    for (seq, _), fut in zip(s.sent, s.futures):
        if not fut.done():
            problems.append(f"future of record {seq} not done after close()")
            break
        exc = fut.exception(0)
        if exc is not None:
            problems.append(f"future of record {seq} failed: {exc!r}")
            break
        metadata[seq] = fut.get(0)

    # What the topic holds: the high watermarks must add up to exactly the records sent (none lost,
    # none written twice); then read them all back.
    with kc.admin() as admin:
        hw = [admin.list_offsets(s.topic, p, "latest", timeout_ms=15000) for p in range(NPART)]
    total = sum(hw)
    if total != n:
        problems.append(f"partitions hold {total} records (high watermarks {hw}), {n} were sent")
    read = read_back(kc.bootstrap, s.topic, NPART, total, timeout=90)
    values_read: dict[int, list[tuple[int, int, bytes | None]]] = {}   # seq -> [(partition, offset, key)]
    for p, msgs in read.items():
        seqs = [_seq(m.value) for m in msgs]
        out_of_order = [(a, b) for a, b in zip(seqs, seqs[1:]) if b <= a]
        if out_of_order:
            problems.append(f"partition {p} out of send order at {out_of_order[:5]}")
        for m, q in zip(msgs, seqs):
            values_read.setdefault(q, []).append((p, m.offset, m.key))
    dups = {q: where for q, where in values_read.items() if len(where) > 1}
    if dups:
        problems.append(f"{len(dups)} records written more than once, e.g. {list(dups.items())[:5]}")
    sent_keys = dict(s.sent)
    missing = [q for q in sent_keys if q not in values_read]
    if missing:
        problems.append(f"{len(missing)} records missing from the topic, first {missing[:10]}")
    unknown = [q for q in values_read if q not in sent_keys]
    if unknown:
        problems.append(f"{len(unknown)} records read that were never sent: {unknown[:10]}")
    mismatched = []
    for q, md in metadata.items():
        where = values_read.get(q)
        if where and ((md.partition, md.offset) != where[0][:2] or md.topic != s.topic
                      or where[0][2] != sent_keys[q]):
            mismatched.append((q, (md.partition, md.offset), where[0]))
    if mismatched:
        problems.append(f"{len(mismatched)} RecordMetadata differ from what was read "
                        f"(seq, reported, read): {mismatched[:5]}")

    m = s.producer.metrics()
    stall, stall_at, first = s.longest_stall()
    numbers = {
        "scenario": name, "records": n, "retries": m["retries"], "epoch_bumps": m["epoch_bumps"],
        "errors": m["errors"], "batches_sent": m["batches_sent"],
        "produce_requests": m["produce_requests"],
        "longest_stall_s": round(stall, 3), "stall_began_at_s": round(stall_at, 2),
        "first_delivery_s": round(first, 3), "max_send_gap_s": round(s.max_send_gap, 3), "close_s": round(s.close_seconds, 3),
        "elapsed_s": round(time.monotonic() - s.t0, 1),
        "log_warnings": sum(1 for line in s._log.lines if " WARNING " in line),
    }
    print(f"\nFAILOVER {name}: " + json.dumps(numbers), flush=True)
    if s.close_seconds > CLOSE_BOUND:
        problems.append(f"close({CLOSE_TIMEOUT}) took {s.close_seconds:.2f}s (bound {CLOSE_BOUND}s)")
    if problems:
        raise AssertionError(f"{name}: " + "\n".join(problems) + f"\nmetrics {m}\nevents {s.events}\n"
                             f"producer log (tail):\n{s.log_tail()}")
    return numbers


def _run_election(kc) -> str:
    """LeaderElectionCommand PREFERRED on every partition. With Kafka 4.4 the rig's tools classpath
    pairs kafka-tools 4.3.1 with kafka-clients 4.4.0, where org.apache.kafka.common.utils.Exit no
    longer exists: the tool does its work, then dies with NoClassDefFoundError on that class and exits
    1. That one failure is tolerated here (the test checks the leaders itself); any other is not."""
    from fastkafka._apachekafka import KafkaRigError

    try:
        return kc.run_tool(ELECTION, "--bootstrap-server", kc.bootstrap,
                           "--election-type", "PREFERRED", "--all-topic-partitions")
    except KafkaRigError as e:
        msg = str(e)
        if "NoClassDefFoundError: org/apache/kafka/common/utils/Exit" not in msg:
            raise
        print("  (LeaderElectionCommand exited 1 on the missing Exit class, after its work)")
        return msg


def test_kill_partition_leader_then_restart(cluster, stream_factory):
    s = stream_factory(keyed=True)
    time.sleep(2.0)
    victim = cluster.leader_of(s.topic, 0)
    s.event(f"SIGKILL node {victim} (leader of partition 0)")
    cluster.kill(victim)
    # Until the controller fences the dead node and moves its leaderships.
    deadline = time.monotonic() + 30
    while any(p.leader in (victim, -1) for p in cluster.partitions(s.topic)):
        assert time.monotonic() < deadline, f"leadership never left node {victim}"
        time.sleep(0.2)
    s.event(f"no partition led by node {victim} any more")
    time.sleep(1.0)
    s.event(f"restart node {victim}")
    cluster.start_node(victim)
    s.event(f"node {victim} registered")
    _wait_full_isr(cluster, topics={s.topic})
    s.event("full ISR again")
    time.sleep(2.0)
    s.stop_and_close()
    _verify(cluster, s, "kill-leader")


def test_rolling_restart(cluster, stream_factory):
    s = stream_factory(keyed=False)
    time.sleep(2.0)
    for node_id in sorted(cluster.nodes):
        s.event(f"controlled stop of node {node_id}")
        cluster.stop_node(node_id)
        s.event(f"node {node_id} stopped; starting it")
        cluster.start_node(node_id)
        s.event(f"node {node_id} registered")
        _wait_full_isr(cluster)
        s.event("full ISR again")
    time.sleep(2.0)
    s.stop_and_close()
    _verify(cluster, s, "rolling-restart")


def test_leader_move_reassign_and_preferred_election(cluster, stream_factory, tmp_path):
    s = stream_factory(keyed=True)
    time.sleep(2.0)
    before = {p.partition: p for p in cluster.partitions(s.topic)}
    # New replica order: the current leader goes last, so the new preferred leader is a follower.
    target = {p: [r for r in info.replicas if r != info.leader] + [info.leader]
              for p, info in before.items()}
    plan = tmp_path / "reassign.json"
    plan.write_text(json.dumps({"version": 1, "partitions": [
        {"topic": s.topic, "partition": p, "replicas": r} for p, r in sorted(target.items())]}))
    s.event(f"reassign (replica order): {target}")
    cluster.run_tool(REASSIGN, "--bootstrap-server", cluster.bootstrap,
                     "--reassignment-json-file", str(plan), "--execute")
    deadline = time.monotonic() + 60
    while True:
        now = {p.partition: p for p in cluster.partitions(s.topic)}
        if all(list(now[p].replicas) == target[p] for p in target):
            break
        assert time.monotonic() < deadline, f"reassignment not applied: {now}"
        time.sleep(0.2)
    s.event(f"reassignment applied; leaders now {[now[p].leader for p in sorted(now)]}")
    s.event("preferred leader election")
    out = _run_election(cluster)
    deadline = time.monotonic() + 60
    while True:
        now = {p.partition: p for p in cluster.partitions(s.topic)}
        if all(now[p].leader == target[p][0] for p in target):
            break
        assert time.monotonic() < deadline, f"leaders did not move to the preferred replicas: {now}\n{out}"
        time.sleep(0.2)
    moved = {p: (before[p].leader, now[p].leader) for p in sorted(now)}
    assert all(old != new for old, new in moved.values()), moved
    s.event(f"leaders moved (old, new): {moved}")
    _wait_full_isr(cluster, topics={s.topic})
    time.sleep(2.0)
    s.stop_and_close()
    _verify(cluster, s, "leader-move")
