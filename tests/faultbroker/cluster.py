"""Shared broker state: topics, leaders, partition logs and idempotent-producer bookkeeping.

Several :class:`~faultbroker.server.FaultBroker` instances can share one :class:`Cluster`; each
registers as a node, and the cluster decides which node leads which partition (round-robin by
default; ``set_leader`` moves one). A broker that is not the leader answers NOT_LEADER_OR_FOLLOWER.
"""
from __future__ import annotations

import struct
import threading
import uuid
from dataclasses import dataclass

# Kafka error codes used here
NONE = 0
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
INVALID_TOPIC_EXCEPTION = 17
TOPIC_ALREADY_EXISTS = 36
INVALID_PARTITIONS = 37
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
DUPLICATE_SEQUENCE_NUMBER = 46
INVALID_PRODUCER_EPOCH = 47

BATCH_HEADER_SIZE = 61
# RecordBatch v2 header offsets
OFF_BASE_OFFSET = 0
OFF_LENGTH = 8
OFF_MAGIC = 16
OFF_CRC = 17
OFF_ATTRIBUTES = 21
OFF_LAST_OFFSET_DELTA = 23
OFF_BASE_TIMESTAMP = 27
OFF_MAX_TIMESTAMP = 35
OFF_PRODUCER_ID = 43
OFF_PRODUCER_EPOCH = 51
OFF_BASE_SEQUENCE = 53
OFF_RECORD_COUNT = 57

DEFAULT_MAX_MESSAGE_BYTES = 1048588  # Kafka's default message.max.bytes


@dataclass
class BatchInfo:
    """Header fields of one RecordBatch v2 (see ``parse_batches``)."""
    start: int            # position in the records buffer
    size: int             # whole batch incl. baseOffset and batchLength
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    base_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    record_count: int


def parse_batches(records) -> list[BatchInfo]:
    """Split a Produce ``records`` buffer into batches; raises ValueError on a truncated buffer."""
    buf = memoryview(records)
    out = []
    pos = 0
    while pos < len(buf):
        if len(buf) - pos < BATCH_HEADER_SIZE:
            raise ValueError(f"truncated batch header at {pos} ({len(buf) - pos} bytes)")
        (length,) = struct.unpack_from(">i", buf, pos + OFF_LENGTH)
        size = 12 + length
        if length < BATCH_HEADER_SIZE - 12 or pos + size > len(buf):
            raise ValueError(f"bad batchLength {length} at {pos}")
        magic = buf[pos + OFF_MAGIC]
        (crc, attributes, lod, bts, mts, pid, epoch, seq, count) = struct.unpack_from(
            ">Ihiqqqhii", buf, pos + OFF_CRC)
        out.append(BatchInfo(pos, size, magic, crc, attributes, lod, bts, mts, pid, epoch, seq, count))
        pos += size
    return out


def crc_ok(records, info: BatchInfo) -> bool | None:
    """CRC-32C check (attributes..end); None when no crc32c implementation is importable."""
    try:
        from crc32c import crc32c  # the `crc32c` wheel (test dependency)
    except ImportError:  # pragma: no cover
        return None
    buf = memoryview(records)
    return crc32c(buf[info.start + OFF_ATTRIBUTES: info.start + info.size]) == info.crc


@dataclass
class StoredBatch:
    topic: str
    partition: int
    base_offset: int
    record_count: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    max_timestamp: int
    data: bytes           # the batch as stored, baseOffset field set to base_offset
    node_id: int          # which broker appended it

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.record_count - 1


class PartitionLog:
    def __init__(self, topic: str, partition: int):
        self.topic = topic
        self.partition = partition
        self.batches: list[StoredBatch] = []
        self.log_start_offset = 0
        self.end_offset = 0
        # producer_id -> (epoch, last_sequence, deque of recent (base_seq, last_seq, base_offset))
        self.producers: dict[int, list] = {}

    def append(self, raw: bytes, info: BatchInfo, node_id: int) -> StoredBatch:
        data = bytearray(raw)
        struct.pack_into(">q", data, OFF_BASE_OFFSET, self.end_offset)
        b = StoredBatch(self.topic, self.partition, self.end_offset, info.record_count, info.producer_id,
                        info.producer_epoch, info.base_sequence, info.max_timestamp, bytes(data), node_id)
        self.batches.append(b)
        self.end_offset += info.record_count
        return b

    @property
    def record_count(self) -> int:
        return self.end_offset - self.log_start_offset


class Cluster:
    """Topic/leader/log state shared by one or more fault brokers. Thread-safe (one lock)."""

    def __init__(self, cluster_id: str = "fastkafka-faultbroker", auto_create_topics: bool = True,
                 default_partitions: int = 1, duplicate_mode: str = "offset",
                 max_message_bytes: int = DEFAULT_MAX_MESSAGE_BYTES, check_crc: bool = True):
        if duplicate_mode not in ("offset", "error"):
            raise ValueError("duplicate_mode is 'offset' (answer the original offset) or 'error' (46)")
        self.lock = threading.RLock()
        self.cluster_id = cluster_id
        self.auto_create_topics = auto_create_topics
        self.default_partitions = default_partitions
        self.duplicate_mode = duplicate_mode
        self.max_message_bytes = max_message_bytes
        self.topic_max_message_bytes: dict[str, int] = {}   # Kafka's topic max.message.bytes
        self.check_crc = check_crc
        self.nodes: dict[int, tuple[str, int]] = {}
        self.topics: dict[str, int] = {}
        self.leaders: dict[tuple[str, int], int] = {}
        self.logs: dict[tuple[str, int], PartitionLog] = {}
        self.topic_ids: dict[str, uuid.UUID] = {}
        self.leader_epochs: dict[tuple[str, int], int] = {}
        self._next_producer_id = 1000
        self.controller_id: int | None = None

    # -- nodes --------------------------------------------------------------------------------
    def register(self, node_id: int | None, host: str, port: int) -> int:
        with self.lock:
            if node_id is None:
                node_id = max(self.nodes, default=0) + 1
            if node_id in self.nodes:
                raise ValueError(f"node id {node_id} already registered")
            self.nodes[node_id] = (host, port)
            if self.controller_id is None:
                self.controller_id = node_id
            return node_id

    def unregister(self, node_id: int) -> None:
        with self.lock:
            self.nodes.pop(node_id, None)
            if self.controller_id == node_id:
                self.controller_id = min(self.nodes, default=None)

    # -- topics -------------------------------------------------------------------------------
    def create_topic(self, name: str, partitions: int | None = None) -> int:
        """Create a topic; returns an error code (0, TOPIC_ALREADY_EXISTS, INVALID_PARTITIONS...)."""
        if not name or len(name) > 249 or any(c not in _LEGAL for c in name) or name in (".", ".."):
            return INVALID_TOPIC_EXCEPTION
        n = self.default_partitions if partitions in (None, -1) else partitions
        if n < 1:
            return INVALID_PARTITIONS
        with self.lock:
            if name in self.topics:
                return TOPIC_ALREADY_EXISTS
            self.topics[name] = n
            self.topic_ids[name] = uuid.uuid4()
            nodes = sorted(self.nodes) or [1]
            for p in range(n):
                self.leaders[(name, p)] = nodes[p % len(nodes)]
                self.logs[(name, p)] = PartitionLog(name, p)
                self.leader_epochs[(name, p)] = 0
            return NONE

    def delete_topic(self, name: str) -> int:
        with self.lock:
            n = self.topics.pop(name, None)
            if n is None:
                return UNKNOWN_TOPIC_OR_PARTITION
            self.topic_ids.pop(name, None)
            for p in range(n):
                self.leaders.pop((name, p), None)
                self.logs.pop((name, p), None)
                self.leader_epochs.pop((name, p), None)
            return NONE

    def set_max_message_bytes(self, topic: str, max_message_bytes: int | None) -> None:
        """The topic's ``max.message.bytes``: a batch larger than this (compressed, header included)
        is answered MESSAGE_TOO_LARGE and not stored, before any sequence check, as Kafka does.
        None: back to the cluster's ``max_message_bytes``."""
        with self.lock:
            if max_message_bytes is None:
                self.topic_max_message_bytes.pop(topic, None)
            else:
                self.topic_max_message_bytes[topic] = max_message_bytes

    def set_leader(self, topic: str, partition: int, node_id: int) -> None:
        with self.lock:
            if (topic, partition) not in self.leaders:
                raise KeyError(f"{topic}-{partition} does not exist")
            self.leaders[(topic, partition)] = node_id
            self.leader_epochs[(topic, partition)] += 1

    def leader(self, topic: str, partition: int) -> int | None:
        with self.lock:
            return self.leaders.get((topic, partition))

    # -- logs ---------------------------------------------------------------------------------
    def log(self, topic: str, partition: int) -> PartitionLog | None:
        with self.lock:
            return self.logs.get((topic, partition))

    def batches(self, topic: str, partition: int | None = None) -> list[StoredBatch]:
        with self.lock:
            if partition is not None:
                log = self.logs.get((topic, partition))
                return list(log.batches) if log else []
            out = []
            for p in range(self.topics.get(topic, 0)):
                out.extend(self.logs[(topic, p)].batches)
            return out

    def lose_tail(self, topic: str, partition: int, batches: int = 1) -> list:
        """Forget the last ``batches`` stored batches of a partition, as a broker restarted without
        its unflushed tail would: the log end moves back (new records reuse those offsets) and each
        producer's sequence state is rolled back to before them. Returns the lost batches."""
        with self.lock:
            log = self.logs[(topic, partition)]
            lost = log.batches[-batches:]
            del log.batches[-batches:]
            log.end_offset = lost[0].base_offset if lost else log.end_offset
            for b in lost:
                state = log.producers.get(b.producer_id)
                if state is None:
                    continue
                state[1] = (b.base_sequence - 1) % 2**31 if b.base_sequence > 0 else -1
                state[2] = [r for r in state[2] if r[2] < b.base_offset]
            return lost

    def record_count(self, topic: str, partition: int | None = None) -> int:
        return sum(b.record_count for b in self.batches(topic, partition))

    def offset_for(self, topic: str, partition: int, timestamp: int) -> tuple[int, int]:
        """ListOffsets: (offset, timestamp) for -1 latest, -2 earliest, -3 max timestamp, or the
        first record with timestamp >= ``timestamp`` (exact for uncompressed batches, the batch's
        base offset for compressed ones). (-1, -1) when there is none."""
        with self.lock:
            log = self.logs[(topic, partition)]
            if timestamp == -1:
                return log.end_offset, -1
            if timestamp == -2:
                return log.log_start_offset, -1
            if timestamp == -3:
                best = None
                for b in log.batches:
                    for off, ts in _record_timestamps(b):
                        if best is None or ts > best[1]:
                            best = (off, ts)
                return best if best else (-1, -1)
            for b in log.batches:
                if b.max_timestamp < timestamp:
                    continue
                for off, ts in _record_timestamps(b):
                    if ts >= timestamp:
                        return off, ts
            return -1, -1

    def allocate_producer_id(self) -> int:
        with self.lock:
            pid = self._next_producer_id
            self._next_producer_id += 1
            return pid

    def append(self, topic: str, partition: int, records, node_id: int) -> tuple[int, int]:
        """Validate and append a Produce ``records`` buffer; returns (error_code, base_offset)."""
        if records is None:
            return CORRUPT_MESSAGE, -1
        raw = bytes(records) if not isinstance(records, (list, tuple)) else b"".join(bytes(r) for r in records)
        try:
            infos = parse_batches(raw)
        except ValueError:
            return CORRUPT_MESSAGE, -1
        if not infos:
            return CORRUPT_MESSAGE, -1
        limit = self.topic_max_message_bytes.get(topic, self.max_message_bytes)
        for info in infos:
            if info.magic != 2 or info.record_count < 0:
                return CORRUPT_MESSAGE, -1
            if info.size > limit:
                return MESSAGE_TOO_LARGE, -1
            if self.check_crc and crc_ok(raw, info) is False:
                return CORRUPT_MESSAGE, -1
        with self.lock:
            log = self.logs.get((topic, partition))
            if log is None:
                return UNKNOWN_TOPIC_OR_PARTITION, -1
            first_offset = None
            for info in infos:
                err, dup_offset = self._check_sequence(log, info)
                if err:
                    return err, -1
                if dup_offset is not None:
                    if first_offset is None:
                        first_offset = dup_offset
                    continue
                stored = log.append(raw[info.start:info.start + info.size], info, node_id)
                self._remember_sequence(log, info, stored.base_offset)
                if first_offset is None:
                    first_offset = stored.base_offset
            return NONE, first_offset

    # -- idempotence --------------------------------------------------------------------------
    def _check_sequence(self, log: PartitionLog, info: BatchInfo) -> tuple[int, int | None]:
        """(error, duplicate_base_offset). Only batches with a producer id are checked."""
        if info.producer_id < 0:
            return NONE, None
        state = log.producers.get(info.producer_id)
        if state is None:
            # No state for this producer on the partition: Apache Kafka accepts any first sequence.
            return NONE, None
        if info.producer_epoch > state[0]:
            if info.base_sequence != 0:
                return OUT_OF_ORDER_SEQUENCE_NUMBER, None
            return NONE, None
        epoch, last_seq, recent = state
        if info.producer_epoch < epoch:
            return INVALID_PRODUCER_EPOCH, None
        for base_seq, _last, base_offset in recent:
            if base_seq == info.base_sequence:
                if self.duplicate_mode == "error":
                    return DUPLICATE_SEQUENCE_NUMBER, None
                return NONE, base_offset
        expected = 0 if last_seq == 2**31 - 1 else last_seq + 1
        if info.base_sequence != expected:
            return OUT_OF_ORDER_SEQUENCE_NUMBER, None
        return NONE, None

    def _remember_sequence(self, log: PartitionLog, info: BatchInfo, base_offset: int) -> None:
        if info.producer_id < 0:
            return
        last_seq = (info.base_sequence + info.record_count - 1) % 2**31
        state = log.producers.get(info.producer_id)
        if state is None or info.producer_epoch > state[0]:
            state = [info.producer_epoch, -1, []]
            log.producers[info.producer_id] = state
        state[1] = last_seq
        state[2].append((info.base_sequence, last_seq, base_offset))
        del state[2][:-5]   # Kafka keeps the last 5 batches per producer and partition


def _varint(buf, pos: int) -> tuple[int, int]:
    shift = result = 0
    while True:
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (result >> 1) ^ -(result & 1), pos
        shift += 7


def _record_timestamps(b: StoredBatch):
    """(offset, timestamp) of each record; for a compressed batch only (base_offset, max_timestamp)."""
    data = b.data
    attributes, = struct.unpack_from(">h", data, OFF_ATTRIBUTES)
    base_ts, = struct.unpack_from(">q", data, OFF_BASE_TIMESTAMP)
    if attributes & 0x7:
        return [(b.base_offset, b.max_timestamp)]
    out = []
    pos = BATCH_HEADER_SIZE
    for _ in range(b.record_count):
        length, pos = _varint(data, pos)
        end = pos + length
        pos += 1                                   # attributes
        ts_delta, pos = _varint(data, pos)
        off_delta, pos = _varint(data, pos)
        out.append((b.base_offset + off_delta, base_ts + ts_delta))
        pos = end
    return out


_LEGAL = set("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")
