"""The cost of transactions in the core: fastkafka's transactional producer against the plain
(idempotent) one, on Apache Kafka.

    python bench/txn_e2e.py [--records 1000000] [--size 100] [--partitions 6] [--rounds 5]
                            [--out FILE]

Four of ``bench/e2e.py``'s measurements, run by its machinery (one KRaft node with full JIT,
``brokers.each_broker``, ``e2e_measure.run_rounds``; every measurement in its own child process
against a fresh topic, interleaved round-robin for ``--rounds`` rounds, in reverse order in even
rounds):

- ``fk_batch_list``: ``send_batch(list)`` over 100k-record chunks, then ``flush()`` (idempotent,
  acks=all: the producer's defaults);
- ``fk_batch_txn``: the same chunks, each in its own transaction: ``begin_transaction()``,
  ``send_batch(chunk)``, ``commit_transaction()``;
- ``fk_send_all``: ``send()`` per record, then ``flush()``;
- ``fk_send_txn``: ``send()`` per record, a ``begin_transaction()`` / ``commit_transaction()``
  around every 100k records;
- ``ck_all`` / ``ck_txn``: confluent-kafka's ``produce()`` loop (acks=all, idempotent), plain and
  with the same transactions, for a reference of what transactions cost another client.

The clock runs from the first send to the last ``commit_transaction()`` (or ``flush()``)
returning. The transactional producers run ``init_transactions()`` and commit one warm-up record
in a transaction before it starts (the plain ones deliver one warm-up record). After each
measurement a read_committed consumer (confluent-kafka, ``isolation.level=read_committed``) reads
the topic to its last stable offset and must count exactly the records sent plus the warm-up
record: every transaction committed, nothing open, nothing twice. The table gives each
transactional variant against its plain counterpart: the ratio of the medians and the median of
the ratios of each round (both ran in the same round); then fastkafka's transactional variants
against confluent-kafka's.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from brokers import each_broker  # noqa: E402
from e2e_measure import MEASUREMENTS, TXN_RECORDS, run_rounds  # noqa: E402
from harness import emit, fmt_rate, machine_section, medians, ratio_table  # noqa: E402

NAMES = ["fk_batch_list", "fk_batch_txn", "fk_send_all", "fk_send_txn", "ck_all", "ck_txn"]
PAIRS = [("fk_batch_txn", "fk_batch_list"), ("fk_send_txn", "fk_send_all"), ("ck_txn", "ck_all"),
         ("fk_send_txn", "ck_txn"), ("fk_batch_txn", "ck_txn")]


def label(name: str) -> str:
    return f"`{name}`: {MEASUREMENTS[name][1]}"


def section(results: dict[str, list[dict]], args, wall: float, title: str) -> list[str]:
    med = medians(NAMES, results)
    lines = [f"## {title}", "", f"{args.rounds} interleaved rounds, {wall:.0f} s.", "",
             "| measurement | median records/s | median MB/s | rounds (records/s) |", "|---|---:|---:|---|"]
    for name in NAMES:
        rs = results[name]
        rounds_txt = ", ".join(fmt_rate(r["rate"]) if "failed" not in r else "FAILED" for r in rs)
        if med[name] is None:
            why = next((r["failed"] for r in rs if "failed" in r), "no data")
            lines.append(f"| {label(name)} | FAILED | | {rounds_txt} ({why}) |")
        else:
            lines.append(f"| {label(name)} | {fmt_rate(med[name])} | {med[name] * args.size / 1e6:.1f} "
                         f"| {rounds_txt} |")
    lines += ["", "Transactional against plain, and fastkafka against confluent-kafka in transactions "
                  "(same rounds):", "",
              *ratio_table(PAIRS, results, label, "records/s"), ""]
    return lines


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--records", type=int, default=1_000_000)
    ap.add_argument("--size", type=int, default=100)
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--kafka-heap-mb", type=int, default=1536, help="Apache Kafka broker's JVM heap")
    ap.add_argument("--timeout", type=float, default=300.0, help="per-measurement limit, seconds")
    ap.add_argument("--out", default=None, help="write the report here too")
    args = ap.parse_args(argv)
    args.slow_records = args.records  # run_rounds' child command line carries it; no slow client here

    wall0 = time.monotonic()
    load0 = os.getloadavg()[0]
    runs, broker_lines = each_broker(
        ["kafka"], args, lambda kind, broker: run_rounds(kind, broker, args, NAMES, 0, committed=True))
    [(title, results, seconds)] = runs
    wall = time.monotonic() - wall0
    lines = [
        "# Transactions in the core: transactional against plain producers",
        "",
        f"`python bench/txn_e2e.py --records {args.records} --size {args.size} --partitions "
        f"{args.partitions} --rounds {args.rounds}` — {time.strftime('%Y-%m-%d %H:%M')}, whole run {wall:.0f} s.",
        "",
        f"{args.size}-byte random values, no keys, no compression, {args.partitions}-partition topic (fresh per "
        f"measurement), linger 5 ms, acks=all, idempotent; transactions of {TXN_RECORDS:,} records. Rate = "
        "records / (first send -> last commit_transaction() or flush() returned), median of interleaved "
        "rounds (in reverse order in even rounds); every topic read back with read_committed and counted exactly.",
        "",
        *section(results, args, seconds, title),
        *machine_section(broker_lines, load0),
    ]
    emit("\n".join(lines), args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
