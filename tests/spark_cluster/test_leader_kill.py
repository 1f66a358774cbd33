"""A Kafka partition leader SIGKILLed while the standalone cluster writes to it: a 3-node Apache
Kafka cluster (``kafka_cluster3``), a topic of replication factor 3 and ``min.insync.replicas=2``,
twelve tasks on two executors writing to it; the node leading partition 0 is killed mid-write. The
other two keep every partition writable (two in-sync replicas), the producers follow the new
leaders. Read back with confluent-kafka's consumer: at-least-once lost nothing, exactly-once shows
every row once to read_committed readers and leaves no transaction open."""
from __future__ import annotations

import time
from collections import Counter

import pytest

from brokers import unique_name
from readall import end_offsets, open_transactions, read_all, wait_for

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

TOPIC_PARTITIONS = 4
ISR_TIMEOUT = 90.0


def _in_sync(kc, topic: str) -> bool:
    from fastkafka.errors import KafkaError

    try:
        parts = kc.partitions(topic, timeout=5.0)
    except KafkaError:
        return False
    return len(parts) == TOPIC_PARTITIONS and all(p.leader >= 0 and len(p.isr) == 3 for p in parts)


@pytest.fixture
def cluster(kafka_cluster3):
    """The module's 3-node cluster; a node the test killed is started again afterwards."""
    kc = kafka_cluster3
    yield kc
    for node_id, node in kc.nodes.items():
        if not node.running:
            kc.start_node(node_id)


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_leader_killed_mid_write(submit, cluster, tmp_path, guarantee):
    kc = cluster
    rows, parts = 24000, 12          # 2000 rows a task: 4 batches of 500, 0.4 s apart
    topic = unique_name("leaderkill")
    kc.create_topic(topic, TOPIC_PARTITIONS, replication_factor=3, config={"min.insync.replicas": 2})
    w = {"topic": topic, "rows": rows, "partitions": parts, "guarantee": guarantee,
         "prefix": unique_name("fk-tx"), "summary": str(tmp_path / f"{topic}.summary"), "pause": 0.4,
         "options": {"kafka.acks": "all"}}
    job = submit([w], conf={"spark.task.maxFailures": "4"}, bootstrap=kc.bootstrap)

    def writing():
        assert job.proc.poll() is None, f"the job ended before the kill:\n{job.log()}"
        written = sum(end_offsets(kc.bootstrap, topic, TOPIC_PARTITIONS, committed=False))
        return written if rows // 6 <= written < rows // 2 else None

    written = wait_for(writing, 180, "the write under way", every=0.1)
    victim = kc.leader_of(topic, 0)
    led = [p.partition for p in kc.partitions(topic) if p.leader == victim]
    kc.kill(victim)
    t_kill = time.monotonic()
    print(f"killed node {victim} (leader of partitions {led}) with {written} of {rows} rows written")

    # the other nodes take the killed node's partitions over while the job goes on
    wait_for(lambda: all(p.leader not in (victim, -1) for p in kc.partitions(topic)), 60,
             f"leadership leaving node {victim}")
    result = job.wait(240)
    print(f"write: {result['writes'][0]['seconds']} s, {time.monotonic() - t_kill:.1f} s after the kill")
    tasks = result["writes"][0]["tasks"]
    assert {t["index"] for t in tasks if t["status"] == "SUCCESS"} == set(range(parts)), tasks
    retried = [t for t in tasks if t["status"] != "SUCCESS"]
    print(f"task attempts that failed: {len(retried)} {[t['error'][:120] for t in retried]}")

    kc.start_node(victim)
    wait_for(lambda: _in_sync(kc, topic), ISR_TIMEOUT, f"{topic} back to three in-sync replicas", every=0.5)
    got = Counter(m.value() for m in read_all(kc.bootstrap, topic, TOPIC_PARTITIONS))
    want = Counter(f"row-{i}".ljust(256, ".").encode() for i in range(rows))
    if guarantee == "exactly_once":
        assert got == want, (f"{sum(got.values())} rows read, {len(want - got)} missing, "
                             f"{sum((got - want).values())} extra")
        assert (end_offsets(kc.bootstrap, topic, TOPIC_PARTITIONS, committed=True)
                == end_offsets(kc.bootstrap, topic, TOPIC_PARTITIONS, committed=False))
        assert open_transactions(kc, w["prefix"]) == []
    else:
        assert not (want - got), f"{len(want - got)} rows lost"
        assert set(got) == set(want)
