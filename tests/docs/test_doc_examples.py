"""Every ```python block of README.md, CHANGELOG.md and docs/**/*.md runs against a real broker.

The convention is in tests/docs/docblocks.py and docs/testing.md ("Examples in the documentation").
Each block is one test (its id is ``file:line``). It runs in a fresh namespace in this process,
with the placeholders replaced (``localhost:9092`` and the others) and its output captured; then:

* when a ``<!-- output -->`` text block follows it, what it printed must match;
* every topic named by a string in it is read back from where it ended before the example, with
  confluent-kafka (CRC checks on), ``read_committed`` and ``read_uncommitted``: what it wrote must be
  readable, and an example that uses no transaction must have written exactly what a consumer
  reads;
* a block with ``id=NAME`` runs ``CHECKS[NAME]`` on what it wrote and printed;
* a block must be checked by at least one of these: an example whose effect nothing checks fails.

``test_every_python_block_is_run`` checks the enumeration itself: no look-alike fence, no misplaced
comment, every block parametrized (none marked skip or xfail), every check attached to exactly one
block; the last test asserts that every block collected in this run was run (none skipped).
"""
from __future__ import annotations

import contextlib
import io
import os
import re
import uuid
from dataclasses import dataclass, field

import pytest

import docblocks
from brokers import ReadMessage, committed_offsets
from securedkafka import DOCS_PASSWORD, fetch_token

BLOCKS = docblocks.python_blocks()
STARTED: set[str] = set()      # examples whose test body began (a skip never gets here)


# ------------------------------------------------------------------ reading what an example wrote
def _consumer(bootstrap: str, isolation: str = "read_uncommitted"):
    from confluent_kafka import Consumer

    return Consumer({"bootstrap.servers": bootstrap, "group.id": f"docs-{uuid.uuid4().hex}",
                     "enable.auto.commit": False, "enable.auto.offset.store": False,
                     "check.crcs": True, "enable.partition.eof": True,
                     "isolation.level": isolation, "fetch.wait.max.ms": 50, "log_level": 3})


def end_offsets(bootstrap: str, names: set[str]) -> dict[tuple[str, int], int]:
    """{(topic, partition): high watermark} of the existing topics among ``names`` (a metadata
    request for all topics, which creates none)."""
    from confluent_kafka import TopicPartition

    if not names:
        return {}
    c = _consumer(bootstrap)
    try:
        topics = c.list_topics(timeout=15).topics
        out = {}
        for name in sorted(names & set(topics)):
            for p in topics[name].partitions:
                _low, high = c.get_watermark_offsets(TopicPartition(name, p), timeout=15, cached=False)
                out[(name, p)] = high
        return out
    finally:
        c.close()


def read_range(bootstrap: str, ranges: dict, isolation: str, timeout: float = 30.0) -> dict:
    """{topic: [ReadMessage]} of the records in ``ranges`` ({(topic, partition): (start, end)}),
    read from ``start`` until the partition's end as a consumer with ``isolation`` sees it."""
    import time

    from confluent_kafka import KafkaError, TopicPartition

    out: dict[str, list] = {}
    if not ranges:
        return out
    c = _consumer(bootstrap, isolation)
    pending = set(ranges)
    try:
        c.assign([TopicPartition(t, p, start) for (t, p), (start, _end) in ranges.items()])
        deadline = time.monotonic() + timeout
        while pending:
            assert time.monotonic() < deadline, f"read back timed out ({isolation}); left: {pending}"
            for m in c.consume(num_messages=1000, timeout=0.5):
                tp = (m.topic(), m.partition())
                err = m.error()
                if err is not None:
                    assert err.code() == KafkaError._PARTITION_EOF, f"consumer error {err}"
                    pending.discard(tp)
                    continue
                if m.offset() >= ranges[tp][1]:
                    continue
                out.setdefault(m.topic(), []).append(ReadMessage(
                    topic=m.topic(), partition=m.partition(), offset=m.offset(), key=m.key(),
                    value=m.value(), headers=list(m.headers() or [])))
    finally:
        c.close()
    for msgs in out.values():
        msgs.sort(key=lambda m: (m.partition, m.offset))
    return out


@dataclass
class Run:
    """What one example did: its output, its namespace, the records it added per topic."""

    block: docblocks.Block
    bootstrap: str                                   # the plaintext listener of its broker
    stdout: str = ""
    namespace: dict = field(default_factory=dict)
    written: dict = field(default_factory=dict)      # {topic: offsets added}
    committed: dict = field(default_factory=dict)    # {topic: [ReadMessage]} (read_committed)
    uncommitted: dict = field(default_factory=dict)  # {topic: [ReadMessage]} (read_uncommitted)

    def values(self, topic: str, committed: bool = True) -> list:
        return [m.value for m in (self.committed if committed else self.uncommitted).get(topic, [])]


# ------------------------------------------------------------------------------- named checks
def check_send_batch(run: Run) -> None:
    msgs = run.committed["clicks"]
    first = [m for m in msgs if m.value in (b"a", b"b", None, b"d")]
    assert sorted(((m.key, m.value) for m in first), key=repr) == sorted(
        [(b"k1", b"a"), (b"k2", b"b"), (b"k3", None), (None, b"d")], key=repr)
    assert all(m.headers == [("batch", b"1")] for m in first)
    where = {m.value: m.partition for m in msgs}
    assert where[b"x"] == 0 and where[b"y"] == 2 and len(msgs) == 7


def check_partitioner(run: Run) -> None:
    assert {m.key: m.partition for m in run.committed["by-region"]} == {
        b"1:alice": 1, b"2:bob": 2, b"3:carol": 3}


def check_partitioner_consistent_random(run: Run) -> None:
    import zlib

    placed = {m.key: m.partition for m in run.committed["from-confluent"]}
    assert placed == {k: zlib.crc32(k) % 6 for k in (b"customer-42", b"customer-7")}


def check_txn_commit(run: Run) -> None:
    assert run.values("orders") == [b"order-1"]
    assert sorted(run.values("audit")) == [b"audit-1", b"audit-2"]


def check_txn_abort(run: Run) -> None:
    assert run.values("orders") == [b"kept"]
    assert run.values("orders", committed=False) == [b"kept", b"dropped"]


def check_txn_offsets(run: Run) -> None:
    assert run.values("payments-out") == [b"enriched payment 41"]
    assert committed_offsets(run.bootstrap, "payments-enricher-group", [("payments-in", 0)]) == {
        ("payments-in", 0): 42}


def check_txn_2pc(run: Run) -> None:
    assert run.values("exports") == [b"row-1", b"row-2", b"row-3"]


def check_admin(run: Run) -> None:
    msgs = run.committed["inventory"]
    assert [(m.partition, m.value) for m in msgs] == [(1, b"a"), (1, b"b"), (1, b"c")]


def check_spark_columns(run: Run) -> None:
    msgs = {m.value: m for m in run.committed["spark-events"]}
    assert set(msgs) == {b"clicked", b"bought", b"tick"}
    assert (msgs[b"clicked"].key, msgs[b"clicked"].partition) == (b"user-1", 0)
    assert (msgs[b"bought"].key, msgs[b"bought"].partition) == (b"user-2", 1)
    assert msgs[b"tick"].key is None
    assert all(m.headers == [("source", b"web")] for m in msgs.values())


def check_spark_stream(run: Run) -> None:
    got = sorted((m.key, m.value) for m in run.committed["spark-orders"])
    assert got == sorted((f"order-{i}-{j}".encode(), f"total {j}".encode())
                         for i in range(2) for j in range(3))


def check_spark_exactly_once(run: Run) -> None:
    assert sorted(run.values("spark-payments")) == sorted(f"payment-{i}".encode() for i in range(50))


def check_migrate_eos(run: Run) -> None:
    assert run.values("enriched-orders") == [b"o1 (enriched)", b"o2 (enriched)", b"o3 (enriched)"]
    assert committed_offsets(run.bootstrap, "order-enricher", [("raw-orders", 0)]) == {
        ("raw-orders", 0): 3}


CHECKS = {
    "send-batch": check_send_batch,
    "partitioner": check_partitioner,
    "partitioner-consistent-random": check_partitioner_consistent_random,
    "txn-commit": check_txn_commit,
    "txn-abort": check_txn_abort,
    "txn-offsets": check_txn_offsets,
    "txn-2pc": check_txn_2pc,
    "admin": check_admin,
    "spark-columns": check_spark_columns,
    "spark-stream": check_spark_stream,
    "spark-exactly-once": check_spark_exactly_once,
    "migrate-eos": check_migrate_eos,
}


# ---------------------------------------------------------------------------------- the runner
def _environment(block, request, monkeypatch) -> tuple[str, dict, dict]:
    """(plaintext bootstrap, placeholder -> real text, extra names) for the block's kinds."""
    names: dict = {}
    if block.kinds & {"tls", "sasl"}:
        pki = request.getfixturevalue("pki")
        kc = request.getfixturevalue("docs_secured_kafka")
        bootstrap = kc.bootstrap
        mapping = {"localhost:9092": kc.bootstrap, "localhost:9093": kc.bootstrap_for("SSL"),
                   "localhost:9094": kc.bootstrap_for("SASLSSL"), '"ca.pem"': repr(pki.ca),
                   '"client.pem"': repr(pki.client_cert), '"client.key"': repr(pki.client_key_encrypted)}
        monkeypatch.setenv("KEY_PASSWORD", pki.client_key_password)
        monkeypatch.setenv("KAFKA_PASSWORD", DOCS_PASSWORD)
        names["fetch_token"] = fetch_token
    else:
        bootstrap = request.getfixturevalue("kafka_broker").bootstrap
        mapping = {"localhost:9092": bootstrap}
    if "spark" in block.kinds:
        names["spark"] = request.getfixturevalue("spark")
    if "registry" in block.kinds:
        mapping["http://localhost:8081"] = request.getfixturevalue("schema_registry")
    return bootstrap, mapping, names


def run_example(block, bootstrap: str, mapping: dict, names: dict) -> Run:
    code = docblocks.substitute(block.code, mapping)
    candidates = docblocks.topic_candidates(code)
    before = end_offsets(bootstrap, candidates)
    run = Run(block, bootstrap)
    run.namespace = {"__name__": "__doc_example__", **names}
    # Line numbers of the compiled example are those of the Markdown file: a traceback points there.
    source = "\n" * block.line + code
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        exec(compile(source, os.path.join(docblocks.ROOT, block.path), "exec"), run.namespace)
    run.stdout = out.getvalue()
    after = end_offsets(bootstrap, candidates)
    ranges = {tp: (before.get(tp, 0), end) for tp, end in after.items() if end > before.get(tp, 0)}
    for (topic, _p), (start, end) in ranges.items():
        run.written[topic] = run.written.get(topic, 0) + end - start
    run.committed = read_range(bootstrap, ranges, "read_committed")
    run.uncommitted = read_range(bootstrap, ranges, "read_uncommitted")
    return run


def _transactional(code: str) -> bool:
    return bool(re.search(r"transactional|exactly_once", code))


def _params():
    out = []
    for b in BLOCKS:
        marks = [pytest.mark.broker, pytest.mark.timeout(300 if "spark" in b.kinds else 120)]
        if "spark" in b.kinds:
            marks.append(pytest.mark.spark)
        out.append(pytest.param(b, id=b.id, marks=marks))
    return out


@pytest.mark.parametrize("block", _params())
def test_example(block, request, monkeypatch):
    STARTED.add(block.id)
    bootstrap, mapping, names = _environment(block, request, monkeypatch)
    run = run_example(block, bootstrap, mapping, names)
    try:
        checked = []
        if block.output is not None:
            assert docblocks.output_matches(block.output, run.stdout), (
                f"{block.id} printed:\n{run.stdout}\nthe document shows:\n{block.output}")
            checked.append("output")
        for topic, added in run.written.items():
            committed = run.committed.get(topic, [])
            uncommitted = run.uncommitted.get(topic, [])
            assert len(committed) <= len(uncommitted) <= added, (topic, added, len(uncommitted))
            if not _transactional(block.code):
                assert len(committed) == len(uncommitted) == added, (
                    f"{block.id}: {added} offsets added to {topic!r}, {len(committed)} records read")
        if run.written:
            checked.append("records read back")
        if block.name is not None:
            CHECKS[block.name](run)
            checked.append(f"CHECKS[{block.name!r}]")
        assert checked, (f"{block.id}: nothing checks what this example does: make it print (and "
                         f"show the output in a <!-- output --> text block), write records, or "
                         f"give it a check (<!-- example: id=NAME -->, CHECKS in this file)")
    finally:
        run.namespace.clear()     # futures and producers of the example: released before teardown


# ------------------------------------------------------------------------------ the enumeration
_RAW_PYTHON_FENCE = re.compile(r"^[ >]*(`{3,}|~{3,})\s*python\s*$", re.IGNORECASE)


def test_every_python_block_is_run():
    docs = docblocks.all_documents()
    paths = [d.path for d in docs]
    assert "README.md" in paths and "docs/spark.md" in paths, paths
    problems = [p for d in docs for p in d.problems]
    assert problems == [], "\n".join(problems)
    # The parser misses no fence: as many ```python lines (outside other blocks: a block shown as
    # text inside a longer fence) as parsed python blocks, per file.
    for d in docs:
        shown = [(b.line, b.last_line) for b in d.blocks if b.lang != docblocks.PYTHON]
        with open(os.path.join(docblocks.ROOT, d.path), encoding="utf-8") as f:
            raw = [n for n, line in enumerate(f, 1) if _RAW_PYTHON_FENCE.match(line)
                   and not any(start < n < end for start, end in shown)]
        assert len(raw) == len(d.python), f"{d.path}: ```python fences at {raw}, {len(d.python)} parsed"
    # Every python block is a parametrized case of test_example, with no skip or xfail mark.
    params = _params()
    assert [p.values[0].id for p in params] == [b.id for b in BLOCKS]
    assert len({b.id for b in BLOCKS}) == len(BLOCKS)
    for p in params:
        assert not [m for m in p.marks if m.name in ("skip", "skipif", "xfail")], p.id
    assert len(BLOCKS) >= 20, [b.id for b in BLOCKS]
    # Checks and blocks match one to one.
    named = [b.name for b in BLOCKS if b.name is not None]
    assert sorted(named) == sorted(CHECKS), (sorted(named), sorted(CHECKS))


def test_convention_parser_on_samples(tmp_path):
    (tmp_path / "docs").mkdir()
    (tmp_path / "README.md").write_text(
        "<!-- example: spark id=x -->\n```python\nprint(1)\n```\n\n<!-- output -->\n```text\n1\n```\n"
        "```py\nx\n```\n<!-- example: tls -->\n```bash\nls\n```\n<!-- example: gpu -->\n```python\n"
        "pass\n```\n")
    (tmp_path / "docs" / "a.md").write_text("- item\n\n   ```python\n   import os\n   ```\n")
    docs = docblocks.all_documents(str(tmp_path))
    readme, a = docs
    assert [(b.lang, sorted(b.kinds), b.name) for b in readme.python] == [
        ("python", ["spark"], "x"), ("python", [], None)]
    assert readme.python[0].output == "1\n"
    assert len(readme.problems) == 3, readme.problems          # ```py, comment over bash, "gpu"
    assert [b.code for b in a.python] == ["import os\n"] and a.problems == []


@pytest.mark.parametrize("expected,got,ok", [
    ("a ... c\n", "a bb c\n", True),
    ("a ... c\n", "a bb d\n", False),
    ("x\n", "x\ny\n", False),
    ("3 records\n", "3 records  \n", True),
])
def test_output_matching(expected, got, ok):
    assert docblocks.output_matches(expected, got) is ok


def test_all_collected_examples_were_run(request):
    """Last in this file: every example collected in this run was run (one that failed was run and
    reported; one that was skipped, by a fixture or a mark, never started and fails here)."""
    collected = {item.callspec.id for item in request.session.items
                 if item.originalname == "test_example" and hasattr(item, "callspec")}
    assert collected <= STARTED, f"examples collected but not run: {sorted(collected - STARTED)}"
