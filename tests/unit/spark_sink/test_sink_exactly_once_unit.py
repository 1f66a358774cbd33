"""spark_sink.exactly_once without Spark or a broker: the commit log and the driver's id handling."""
from __future__ import annotations

import json

import pytest

from fastkafka.errors import ConfigError
from fastkafka._producer.transactions import PreparedTransaction
from spark_sink import exactly_once as eo
from spark_sink.options import settings_from_options

BASE = {"kafka.bootstrap.servers": "127.0.0.1:9", "topic": "t", "delivery.guarantee": "exactly_once",
        "transactional.id.prefix": "job"}


class FakeAdmin:
    def __init__(self, listed=(), unsupported=False):
        self.calls = []
        self.listed = list(listed)      # TransactionListing tuples list_transactions returns
        self.unsupported = unsupported

    def list_transactions(self, states=(), producer_ids=(), timeout_ms=None):
        self.calls.append(("list", tuple(states)))
        if self.unsupported:
            from fastkafka.errors import UnsupportedVersionError
            raise UnsupportedVersionError("node 1 does not support LIST_TRANSACTIONS")
        return [x for x in self.listed if not states or x.state in states]

    def fence_transactional_id(self, tid, timeout):
        self.calls.append(("fence", tid, timeout))

    def commit_transaction(self, t):
        self.calls.append(("commit", t.transactional_id))

    def abort_transaction(self, t):
        self.calls.append(("abort", t.transactional_id))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        return False


def test_fencing_uses_the_parsed_transaction_timeout_of_string_options():
    # Spark hands every option over as a string (batch_writer too)
    settings = settings_from_options({**BASE, "kafka.transaction.timeout.ms": "120000"})
    admin = FakeAdmin()
    eo.TransactionCommitter(settings)._fence(admin, [(1, 0), (0, 2), (1, 0)])
    assert admin.calls == [("fence", "job-0-2", 120000), ("fence", "job-1-0", 120000)]


def test_default_sink_transaction_timeout_is_the_brokers_default_cap():
    settings = settings_from_options(BASE)
    admin = FakeAdmin()
    eo.TransactionCommitter(settings)._fence(admin, [(0, 0)])
    assert admin.calls == [("fence", "job-0-0", 900_000)]


def test_commit_log_records_committing_then_committed_and_prunes(tmp_path):
    log = eo.CommitLog(str(tmp_path / "log"))
    txns = [PreparedTransaction("job-0-0", 7, 1), PreparedTransaction("job-1-1", 8, 3)]
    log.put(5, "committing", txns)
    assert log.unfinished() == [(5, json.loads((tmp_path / "log" / "5.json").read_text()))]
    assert eo.CommitLog.transactions(log.get(5)) == txns
    log.put(5, "committed", txns)
    assert log.unfinished() == [] and log.get(5)["state"] == "committed"
    assert log.get(6) is None
    newest = 6 + eo.LOG_KEEP + 2
    for b in range(6, newest + 1):
        log.put(b, "committed", [])
    assert log.batches() == list(range(newest - eo.LOG_KEEP + 1, newest + 1))   # the last LOG_KEEP
    assert not list((tmp_path / "log").glob("*.tmp"))


def test_commit_log_takes_file_uris_and_refuses_remote_ones(tmp_path):
    assert eo.CommitLog(f"file://{tmp_path}/a").path == f"{tmp_path}/a"
    with pytest.raises(ConfigError, match="transaction.log.path"):
        eo.CommitLog("hdfs://namenode/ckpt")


def test_replayed_batch_found_committed_aborts_the_new_transactions(tmp_path, monkeypatch):
    settings = settings_from_options({**BASE, "transaction.log.path": str(tmp_path)})
    committer = eo.TransactionCommitter(settings)
    admin = FakeAdmin()
    monkeypatch.setattr(committer, "_admin", lambda: admin)
    first = [PreparedTransaction("job-0-0", 1, 0)]
    assert committer.commit(first, 3) == "committed"
    replay = [PreparedTransaction("job-0-0", 1, 1)]
    assert committer.commit(replay, 3) == "replay"
    assert [c for c in admin.calls if c[0] != "list"] == [("commit", "job-0-0"), ("abort", "job-0-0")]


def test_recovery_commits_a_half_committed_batch_again(tmp_path, monkeypatch):
    settings = settings_from_options({**BASE, "transaction.log.path": str(tmp_path)})
    committer = eo.TransactionCommitter(settings)
    admin = FakeAdmin()
    monkeypatch.setattr(committer, "_admin", lambda: admin)
    committer.log.put(4, "committing", [PreparedTransaction("job-1-0", 2, 0)])
    committer.recover()
    assert admin.calls == [("commit", "job-1-0")]
    assert committer.log.get(4)["state"] == "committed"
    committer.recover()   # nothing left to do
    assert len(admin.calls) == 1


def _listing(tid, state="Ongoing", pid=7):
    from fastkafka.admin import TransactionListing
    return TransactionListing(tid, pid, state)


def test_commit_takes_over_open_transactions_of_attempts_that_reported_nothing(monkeypatch):
    """A losing speculative attempt (numbered above the winner) reports nothing, and its open
    transaction would hold read_committed readers back until its timeout: the coordinators list
    it, and the driver takes its id over after committing; again after the grace. Other jobs'
    ids (a longer prefix, another shape) and the committed ones are left alone."""
    settings = settings_from_options(BASE)
    committer = eo.TransactionCommitter(settings)
    admin = FakeAdmin(listed=[_listing("job-0-1"), _listing("job-0-0"), _listing("job-2-0-0"),
                              _listing("jobs-0-1"), _listing("job-1-3", "CompleteAbort"),
                              _listing("other")])
    monkeypatch.setattr(committer, "_admin", lambda: admin)
    monkeypatch.setattr(eo.time, "sleep", lambda s: admin.calls.append(("sleep", s)))
    assert committer.commit([PreparedTransaction("job-0-0", 1, 0)], -1) == "committed"
    timeout = 900_000
    assert admin.calls == [("commit", "job-0-0"), ("list", ("Ongoing",)),
                           ("fence", "job-0-1", timeout), ("sleep", eo.ZOMBIE_GRACE_S),
                           ("list", ("Ongoing",)), ("fence", "job-0-1", timeout)]


def test_commit_without_open_leftovers_does_not_wait(monkeypatch):
    settings = settings_from_options(BASE)
    committer = eo.TransactionCommitter(settings)
    admin = FakeAdmin(listed=[_listing("job-0-0")])
    monkeypatch.setattr(committer, "_admin", lambda: admin)
    monkeypatch.setattr(eo.time, "sleep", lambda s: admin.calls.append(("sleep", s)))
    committer.commit([PreparedTransaction("job-0-0", 1, 0)], -1)
    assert admin.calls == [("commit", "job-0-0"), ("list", ("Ongoing",))]


def test_a_cluster_without_list_transactions_is_logged_once_and_skipped(monkeypatch, capsys):
    settings = settings_from_options(BASE)
    committer = eo.TransactionCommitter(settings)
    admin = FakeAdmin(unsupported=True)
    monkeypatch.setattr(committer, "_admin", lambda: admin)
    monkeypatch.setattr(eo.time, "sleep", lambda s: admin.calls.append(("sleep", s)))
    committer.commit([PreparedTransaction("job-0-1", 1, 0)], -1, failed_attempts=[(0, 0)])
    assert admin.calls == [("commit", "job-0-1"), ("list", ("Ongoing",)), ("sleep", eo.ZOMBIE_GRACE_S),
                           ("fence", "job-0-0", 900_000)]
    assert capsys.readouterr().err.count("cannot list transactions") == 1
