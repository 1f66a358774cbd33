"""A streaming query of the Spark sink on the standalone cluster, its driver SIGKILLed mid-stream
and the query restarted from its checkpoint (``stream_job.py``: text files, two per micro-batch,
into ``writeStream.format("fastkafka")``). Read back with confluent-kafka's consumer from Apache
Kafka: exactly-once shows every row once to read_committed readers, across the restart, also when
the driver died with a micro-batch recorded as committing and not committed (the sink's crash
point ``after_log``); at-least-once loses no row."""
from __future__ import annotations

import json
import os
import time
from collections import Counter

import pytest

from brokers import unique_name
from readall import end_offsets, open_transactions, read_all, wait_for

pytestmark = [pytest.mark.broker, pytest.mark.timeout(600)]

HERE = os.path.dirname(os.path.abspath(__file__))
STREAM_JOB = os.path.join(HERE, "stream_job.py")
TOPIC_PARTITIONS = 4
FILES, ROWS_PER_FILE, FILES_PER_TRIGGER = 12, 1000, 2       # 6 micro-batches of 2 partitions
ROWS = FILES * ROWS_PER_FILE


def _input(tmp_path) -> str:
    """FILES text files of ROWS_PER_FILE lines ``row-<n>`` (n = 0 .. ROWS-1 across them), their
    modification times in order (the file source takes the oldest first)."""
    d = tmp_path / "input"
    d.mkdir()
    t0 = time.time() - 3600
    for f in range(FILES):
        path = d / f"part-{f:03d}.txt"
        path.write_text("".join(f"row-{f * ROWS_PER_FILE + i}\n" for i in range(ROWS_PER_FILE)))
        os.utime(path, (t0 + f, t0 + f))
    return str(d)


def _expected() -> Counter:
    return Counter(f"row-{n}".encode() for n in range(ROWS))


class Stream:
    """One query (topic, checkpoint, input) and the runs of stream_job.py on it."""

    def __init__(self, submit_job, kafka_broker, tmp_path, guarantee):
        self.submit_job, self.broker, self.tmp = submit_job, kafka_broker, tmp_path
        self.topic = unique_name("stream")
        kafka_broker.create_topic(self.topic, TOPIC_PARTITIONS)
        self.checkpoint = str(tmp_path / "checkpoint")
        self.log_dir = os.path.join(self.checkpoint, "fastkafka-transactions")
        self.spec = {"bootstrap": kafka_broker.bootstrap, "topic": self.topic, "guarantee": guarantee,
                     "prefix": unique_name("fk-stream"), "checkpoint": self.checkpoint,
                     "input": _input(tmp_path), "files_per_trigger": FILES_PER_TRIGGER}

    def run(self, name: str, **extra):
        spec = {**self.spec, "summary": str(self.tmp / f"{name}.summary"),
                "result": str(self.tmp / f"{name}.result.json"), **extra}
        return self.submit_job(STREAM_JOB, spec, name=name)

    def batches(self, kind: str) -> set[int]:
        """The micro-batch ids in the checkpoint's ``offsets`` (planned) or ``commits`` (done)."""
        d = os.path.join(self.checkpoint, kind)
        return {int(f) for f in os.listdir(d) if f.isdigit()} if os.path.isdir(d) else set()

    def summaries(self, name: str) -> list[dict]:
        path = self.tmp / f"{name}.summary"
        if not path.exists():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def read(self, committed: bool = True) -> Counter:
        return Counter(m.value() for m in read_all(self.broker.bootstrap, self.topic, TOPIC_PARTITIONS,
                                                   committed=committed))

    def check(self) -> Counter:
        got, want = self.read(), _expected()
        if self.spec["guarantee"] == "exactly_once":
            assert got == want, (f"{sum(got.values())} rows read, {len(want - got)} missing, "
                                 f"{sum((got - want).values())} extra")
            assert (end_offsets(self.broker.bootstrap, self.topic, TOPIC_PARTITIONS, committed=True)
                    == end_offsets(self.broker.bootstrap, self.topic, TOPIC_PARTITIONS, committed=False))
            assert open_transactions(self.broker, self.spec["prefix"]) == []
        else:
            assert not (want - got), f"{len(want - got)} rows lost"
            assert set(got) == set(want)
        return got


@pytest.mark.parametrize("guarantee", ["at_least_once", "exactly_once"])
def test_driver_killed_mid_stream_then_restarted(submit_job, kafka_broker, tmp_path, guarantee):
    s = Stream(submit_job, kafka_broker, tmp_path, guarantee)
    first = s.run("first")

    def in_flight():
        assert first.proc.poll() is None, f"the stream ended before the kill:\n{first.log()}"
        done, planned = s.batches("commits"), s.batches("offsets")
        return len(done) >= 2 and planned and max(planned) > max(done)

    wait_for(in_flight, 180, "two micro-batches done and the next one under way", every=0.05)
    first.kill()
    done, planned = s.batches("commits"), s.batches("offsets")
    resume_at = max(done) + 1          # the first micro-batch Spark has not recorded as done
    assert resume_at < FILES // FILES_PER_TRIGGER, (done, planned)
    under_way = resume_at in planned   # its offsets were recorded: the restart runs it again
    print(f"driver killed after micro-batch {max(done)}, micro-batch {resume_at} "
          f"{'under way' if under_way else 'not planned yet'}")
    visible, written = sum(s.read().values()), sum(s.read(committed=False).values())
    print(f"at the kill: {visible} rows visible to read_committed, {written} written")
    assert visible > 0

    second = s.run("second")
    second.wait(150)
    assert s.batches("commits") == set(range(FILES // FILES_PER_TRIGGER))
    assert min(x["batch_id"] for x in s.summaries("second")) == resume_at
    s.check()


def test_driver_killed_between_committing_and_commit(submit_job, kafka_broker, tmp_path):
    """exactly_once: the driver dies after the sink's log recorded micro-batch 2 as committing and
    before any of its transactions was committed (crash point ``after_log@2``, then SIGKILL). The
    restarted query commits the recorded transactions before any task runs, then Spark replays
    micro-batch 2, whose new transactions the sink recognises as a replay and aborts."""
    s = Stream(submit_job, kafka_broker, tmp_path, "exactly_once")
    first = s.run("first", crash="after_log@2", hold=True)
    marker = os.path.join(s.log_dir, "test-crashed")

    def crashed():
        assert first.proc.poll() is None, f"the stream ended before the crash point:\n{first.log()}"
        return os.path.exists(marker)

    wait_for(crashed, 180, "the crash point after_log@2", every=0.05)
    first.kill()
    with open(os.path.join(s.log_dir, "2.json")) as f:
        recorded = json.load(f)
    n_txns = len(recorded["transactions"])         # one per task: a file per task here
    assert recorded["state"] == "committing" and n_txns >= 1, recorded
    assert 2 not in s.batches("commits")
    # batches 0 and 1 are visible; batch 2's rows are written, in transactions left open
    assert sum(s.read().values()) == 2 * FILES_PER_TRIGGER * ROWS_PER_FILE
    assert sum(s.read(committed=False).values()) == 3 * FILES_PER_TRIGGER * ROWS_PER_FILE
    still_open = {ln.split()[0] for ln in open_transactions(kafka_broker, s.spec["prefix"])}
    assert {t[0] for t in recorded["transactions"]} <= still_open, still_open

    second = s.run("second")
    second.wait(150)
    log = second.log(100_000)
    assert f"recovering micro-batch 2: committing its {n_txns} recorded transaction(s) again" in log, \
        log[-3000:]
    with open(os.path.join(s.log_dir, "2.json")) as f:
        assert json.load(f)["state"] == "committed"
    replayed = [x for x in s.summaries("second") if x["batch_id"] == 2]
    assert len(replayed) == 1 and replayed[0]["replay"], replayed
    assert replayed[0]["rows"] == FILES_PER_TRIGGER * ROWS_PER_FILE
    s.check()
    # the replay's rows were written a second time and aborted: read_uncommitted sees them
    assert sum(s.read(committed=False).values()) == ROWS + FILES_PER_TRIGGER * ROWS_PER_FILE
