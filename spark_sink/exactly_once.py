"""Exactly-once delivery for the Spark sink: a two-phase commit over Kafka transactions.

With ``delivery.guarantee=exactly_once``:

1. **Tasks write and prepare.** Each task attempt opens a transaction with the transactional id
   ``<transactional.id.prefix>-<Spark partition id>-<attempt number>``, sends its rows, flushes, and
   leaves the transaction open (``Producer.prepare_transaction``). Its commit message carries the
   transaction's identity (transactional id, producer id, epoch). A zombie attempt can never make
   its rows visible: only the driver commits, and only the identities the successful attempts
   reported. Attempts have ids of their own because a failed attempt's Python worker can outlive
   the attempt (measured here: its InitProducerId arriving after the next attempt's); with a shared
   id it would fence the attempt that replaced it.
2. **The driver commits.** ``commit(messages)`` commits every reported transaction
   (``Admin.commit_transaction``: EndTxn), then takes over the ids of the attempts that failed
   (``Admin.fence_transactional_id``: InitProducerId, which aborts what such an attempt left open)
   after a grace of :data:`ZOMBIE_GRACE_S`. ``abort(messages)`` aborts the reported transactions
   and takes over the id of every attempt of every partition (``max.task.attempts`` of them), at
   once and after the grace: nothing of a failed write stays open to hold back ``read_committed``
   consumers until the transaction timeout.
3. **Replays are recognised (streaming).** Spark may replay a micro-batch whose output was already
   committed: when the driver fails after the sink's commit and before Spark records the batch in its
   checkpoint. As Spark's own file sink does with its metadata log of committed batches, the driver
   keeps a :class:`CommitLog` (one small JSON file per micro-batch, in the checkpoint directory or the
   directory given by ``transaction.log.path``). Before committing batch N it records N as
   *committing* with the identities it is about to commit; after committing, as *committed*. Then:

   * a replayed batch N found *committed*: the replay's transactions are aborted (its rows are
     already visible);
   * a batch N found *committing* (the driver failed in the middle of committing): the recorded
     transactions are committed again (EndTxn is idempotent for the same producer epoch) and the
     replay's transactions aborted. This recovery also runs when the stream writer is created, before
     any task of the restarted query: a replayed task's ``init_transactions`` would otherwise abort a
     recorded transaction that was not committed yet.

   This is the approach Flink's two-phase-commit sink takes (it re-commits the transactions recorded
   in its checkpoint on recovery), with the sink's own log in place of Flink's checkpoint.
"""

from __future__ import annotations

import json
import os
import re
import sys
import time
from typing import TYPE_CHECKING, Any, Iterable

from fastkafka.admin import _ADMIN_KEYS, Admin
from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError, KafkaError, UnsupportedVersionError
from fastkafka import PreparedTransaction

if TYPE_CHECKING:
    from .options import SinkSettings

#: How many committed micro-batches the log keeps (older files are removed).
LOG_KEEP = 100
#: A failed task attempt's Python worker can outlive the attempt for a moment (Spark reports the
#: failure before the worker is gone): it may still register its transactional id and open a
#: transaction after the driver took the id over. The driver takes the ids of failed attempts over
#: again after this many seconds, so no such transaction stays open until its timeout.
ZOMBIE_GRACE_S = 3.0


def transactional_id(prefix: str, partition_id: int, attempt: int) -> str:
    """The transactional id of one attempt of a Spark partition's task (the same in every
    micro-batch). Attempts have ids of their own: a failed attempt whose worker is still running
    can then never fence (and so abort) the transaction of the attempt that replaced it; the driver
    takes the ids of failed attempts over instead."""
    return f"{prefix}-{partition_id}-{attempt}"


class CommitLog:
    """The driver's log of micro-batches: ``<batch id>.json`` holding ``state`` (``committing`` or
    ``committed``) and the transactions of the batch. Written atomically (a temporary file, fsync,
    rename, fsync of the directory)."""

    def __init__(self, path: str) -> None:
        if path.startswith("file:"):
            path = path[len("file:"):]
            while path.startswith("//"):
                path = path[1:]
        if "://" in path:
            raise ConfigError(
                f"the sink's transaction log must be a local or mounted directory, got {path!r}: set "
                f"the option 'transaction.log.path' to a directory the driver can write")
        self.path = path
        os.makedirs(path, exist_ok=True)

    def _file(self, batch_id: int) -> str:
        return os.path.join(self.path, f"{batch_id}.json")

    def get(self, batch_id: int) -> dict[str, Any] | None:
        try:
            with open(self._file(batch_id)) as f:
                entry: dict[str, Any] = json.load(f)
                return entry
        except FileNotFoundError:
            return None

    def put(self, batch_id: int, state: str, transactions: Iterable[PreparedTransaction]) -> None:
        entry = {"batch_id": batch_id, "state": state,
                 "transactions": [[t.transactional_id, t.producer_id, t.producer_epoch]
                                  for t in transactions]}
        tmp = self._file(batch_id) + ".tmp"
        with open(tmp, "w") as f:
            json.dump(entry, f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, self._file(batch_id))
        fd = os.open(self.path, os.O_RDONLY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
        if state == "committed":
            self._prune(batch_id)

    def batches(self) -> list[int]:
        out = []
        for name in os.listdir(self.path):
            if name.endswith(".json") and name[:-5].lstrip("-").isdigit():
                out.append(int(name[:-5]))
        return sorted(out)

    def unfinished(self) -> list[tuple[int, dict[str, Any]]]:
        """The batches recorded as committing (the driver stopped in the middle of committing)."""
        return [(b, e) for b in self.batches() if (e := self.get(b)) and e["state"] == "committing"]

    def _prune(self, newest: int) -> None:
        for b in self.batches():
            if b <= newest - LOG_KEEP:
                try:
                    os.remove(self._file(b))
                except FileNotFoundError:
                    pass

    @staticmethod
    def transactions(entry: dict[str, Any]) -> list[PreparedTransaction]:
        return [PreparedTransaction(t, p, e) for t, p, e in entry["transactions"]]


def _log(line: str) -> None:
    print(f"fastkafka sink: {line}", file=sys.stderr)  # the driver's Python worker: Spark's log


class TransactionCommitter:
    """The driver's side: commits, aborts and recovers the tasks' prepared transactions."""

    def __init__(self, settings: SinkSettings) -> None:
        if not settings.transactional_id_prefix:
            raise ConfigError("delivery.guarantee=exactly_once needs the option "
                              "'transactional.id.prefix'")
        self.settings = settings
        self.prefix: str = settings.transactional_id_prefix
        self.log = CommitLog(settings.transaction_log_path) if settings.transaction_log_path else None

    def _transaction_timeout_ms(self) -> int:
        # parsed as the tasks' producers parse it (Spark options arrive as strings)
        return int(ProducerConfig(self.settings.producer_kwargs()).as_dict()["transaction_timeout_ms"])

    def _admin(self) -> Admin:
        given = {k: v for k, v in self.settings.producer_kwargs().items() if k in _ADMIN_KEYS}
        return Admin(given)

    def _finish(self, admin: Admin, prepared: list[PreparedTransaction], commit: bool) -> None:
        for t in prepared:
            (admin.commit_transaction if commit else admin.abort_transaction)(t)

    def recover(self) -> None:
        """Commit again the transactions of every batch the log shows half committed."""
        if self.log is None or self._crashed():
            return
        unfinished = self.log.unfinished()
        if not unfinished:
            return
        with self._admin() as admin:
            for batch_id, entry in unfinished:
                txns = CommitLog.transactions(entry)
                _log(f"recovering micro-batch {batch_id}: committing its {len(txns)} recorded "
                     f"transaction(s) again")
                self._finish(admin, txns, True)
                self.log.put(batch_id, "committed", txns)

    def _fence(self, admin: Admin, attempts: Iterable[tuple[int, int]]) -> None:
        """Take over the transactional ids of these (partition, attempt) pairs: a transaction one
        of them left open is aborted, and that attempt can write no more."""
        prefix = self.prefix
        timeout = self._transaction_timeout_ms()
        for p, a in sorted(set(attempts)):
            admin.fence_transactional_id(transactional_id(prefix, p, a), timeout)

    def commit(self, prepared: list[PreparedTransaction], batch_id: int,
               failed_attempts: Iterable[tuple[int, int]] = ()) -> str:
        """Commit the tasks' transactions of ``batch_id`` (-1: a batch write, no log). Returns what
        was done: ``"committed"``, or ``"replay"`` when the log shows the batch committed before
        (the new transactions are then aborted). ``failed_attempts``: the (partition, attempt)
        pairs that failed before a later attempt succeeded; their ids are taken over after the
        commit, which aborts what such an attempt still running may have opened meanwhile."""
        with self._admin() as admin:
            outcome = self._commit(admin, prepared, batch_id)
            # Attempts that reported nothing may have left a transaction open: a losing
            # speculative attempt (its number may be above the winner's), an attempt killed when
            # another succeeded. The coordinators list them; they are taken over at once.
            zombies = self._fence_open(admin, prepared)
            if failed_attempts or zombies:
                # and again after the grace, for such attempts still running meanwhile
                time.sleep(ZOMBIE_GRACE_S)
                self._fence(admin, failed_attempts)
                self._fence_open(admin, prepared)
        return outcome

    def _fence_open(self, admin: Admin, keep: Iterable[PreparedTransaction]) -> list[str]:
        """Take over every transactional id of this sink (``<prefix>-<partition>-<attempt>``)
        whose transaction the coordinators list as still open (Ongoing), but those of ``keep``
        (the transactions just committed). Returns the ids taken over. A cluster without
        ListTransactions (Kafka before 3.0) is told once in the log and skipped: the fencing of
        the failed attempts' ids and the transaction timeout remain."""
        if getattr(self, "_no_listing", False):
            return []
        try:
            listed = admin.list_transactions(states=["Ongoing"])
        except UnsupportedVersionError as e:
            self._no_listing = True
            _log(f"the cluster cannot list transactions ({e}): transactions of attempts that "
                 f"reported nothing (speculative copies) are aborted by their timeout only")
            return []
        mine = re.compile(re.escape(self.prefix) + r"-\d+-\d+")
        kept = {t.transactional_id for t in keep}
        zombies = sorted({x.transactional_id for x in listed
                          if mine.fullmatch(x.transactional_id) and x.transactional_id not in kept})
        if zombies:
            _log(f"taking over {len(zombies)} transactional id(s) left open by attempts that "
                 f"reported nothing: {', '.join(zombies[:10])}{' ...' if len(zombies) > 10 else ''}")
            timeout = self._transaction_timeout_ms()
            for tid in zombies:
                admin.fence_transactional_id(tid, timeout)
        return zombies

    def _commit(self, admin: Admin, prepared: list[PreparedTransaction], batch_id: int) -> str:
        if self.log is not None and batch_id >= 0:
            entry = self.log.get(batch_id)
            if entry is not None:
                if entry["state"] == "committing":
                    recorded = CommitLog.transactions(entry)
                    self._finish(admin, recorded, True)
                    self.log.put(batch_id, "committed", recorded)
                _log(f"micro-batch {batch_id} was committed before (a replay): aborting the "
                     f"{len(prepared)} transaction(s) of the replay")
                self._finish(admin, prepared, False)
                return "replay"
            self.log.put(batch_id, "committing", prepared)
        self._crash_point("after_log", batch_id)
        for i, t in enumerate(prepared):
            admin.commit_transaction(t)
            if i == 0:
                self._crash_point("after_first_commit", batch_id)
        if self.log is not None and batch_id >= 0:
            self.log.put(batch_id, "committed", prepared)
        self._crash_point("after_commit", batch_id)
        return "committed"

    def abort(self, prepared: list[PreparedTransaction], partitions: int, batch_id: int = -1) -> None:
        """Abort the reported transactions, then take over every partition's transactional id,
        which aborts whatever a failed attempt left open.

        A micro-batch the log records as committing or committed is rolled forward instead: the
        decision to commit was taken (a commit that failed after it, e.g. a lost connection, ends
        up in Spark's abort); its recorded transactions are committed, and a replay of the batch
        will be recognised."""
        if self._crashed():
            return
        log = self.log
        entry = log.get(batch_id) if log is not None and batch_id >= 0 else None
        if log is not None and entry is not None:
            recorded = CommitLog.transactions(entry)
            with self._admin() as admin:
                if entry["state"] == "committing":
                    self._finish(admin, recorded, True)
                    log.put(batch_id, "committed", recorded)
                self._finish(admin, [t for t in prepared if t not in recorded], False)
            _log(f"micro-batch {batch_id} was recorded for commit before Spark aborted it: "
                 f"committed (Spark replays it, and the replay is recognised)")
            return
        with self._admin() as admin:
            for t in prepared:
                try:
                    admin.abort_transaction(t)
                except KafkaError as e:   # fenced meanwhile: the fencing below aborts it
                    _log(f"aborting {t.transactional_id}: {e}")
            # Every attempt Spark may have run of every partition (failed ones report nothing).
            attempts = [(p, a) for p in range(partitions) for a in range(self.settings.max_attempts)]
            self._fence(admin, attempts)
            self._fence_open(admin, ())   # and speculative copies, numbered beyond those
            time.sleep(ZOMBIE_GRACE_S)    # then once more, for attempts still running
            self._fence(admin, attempts)
            self._fence_open(admin, ())

    def _crash_point(self, where: str, batch_id: int) -> None:
        """Fault injection for the sink's tests (option ``test.crash``: ``<point>@<batch id>``):
        the driver fails at that point, as a driver crash would, before Spark records the batch."""
        spec = self.settings.test_crash
        if spec and spec == f"{where}@{batch_id}":
            if self.log is not None:
                open(os.path.join(self.log.path, "test-crashed"), "w").close()
            raise RuntimeError(f"fastkafka sink test crash {spec}")

    def _crashed(self) -> bool:
        """After a test crash the driver counts as dead for the rest of the query: a dead driver
        neither aborts nor recovers; the restarted query (without ``test.crash``) does."""
        if self.log is None:
            return False
        marker = os.path.join(self.log.path, "test-crashed")
        if not self.settings.test_crash:
            if os.path.exists(marker):
                os.remove(marker)
            return False
        return os.path.exists(marker)
