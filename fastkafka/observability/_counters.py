"""The producer's own counters: what :meth:`fastkafka.Producer.metrics` returns, gathered from
its parts (the I/O thread's stats, the network client's under ``net_``, the buffer pool, the
accumulator, the I/O thread's waits and GIL-free turns, idempotence and transactions)."""
from __future__ import annotations

from typing import Any

from fastkafka._net.ioloop import handover_count


def producer_counters(sender: Any, client: Any, pool: Any, acc: Any, metadata: Any) -> dict:
    m = dict(sender.stats)
    m.update({f"net_{k}": v for k, v in client.stats.items()})
    idem = sender.idem
    m.update({
        "buffer_total_bytes": pool.total,
        "buffer_available_bytes": pool.available_memory,
        "buffer_waiters": pool.queued,
        "records_queued": acc.incomplete_record_count(),
        "in_flight_batches": sender.in_flight_batches,
        "connections": sum(1 for c in client.connections.values() if c.sock is not None),
        "metadata_version": metadata.version,
        "producer_id": idem.producer_id if idem else -1,
        "producer_epoch": idem.producer_epoch if idem else -1,
        "epoch_bumps": idem.epoch_bumps if idem else 0,
    })
    poller = client.poller
    m.update({
        # The I/O thread's blocking waits, and how long it took to get the GIL back after
        # them (fastkafka/_net/ioloop.pyx); gil_handovers is process-wide.
        "io_waits": poller.waits,
        "io_gil_wait_ms_total": poller.gil_wait_ns / 1e6,
        "io_gil_wait_max_ms": poller.gil_wait_max_ns / 1e6,
        "io_slow_gil_waits": poller.slow_gil_waits,
        "io_wakeups_written": poller.wakeups_written,
        "io_timers_armed": poller.timers_armed,
        # Inside those waits: GIL-free turns run, and the Produce requests they sent
        # (fastkafka/_producer/gil_free_turn.pyx).
        "io_gil_free_turns": poller.gil_free_turns,
        "gil_free_requests": sender.gil_free_requests,
        "gil_free_answers": sender.gil_free_answers,
        "gil_handovers": handover_count(),
    })
    # The TLS data path of the connections made so far (fastkafka/_net/tls.py: TlsConnection.data_path).
    direct, fallback = m["net_tls_openssl_direct"], m["net_tls_ssl_module"]
    m["tls_data_path"] = ("openssl_direct" if direct and not fallback else
                          "ssl_module" if fallback and not direct else
                          "mixed" if direct else None)
    if sender.txn is not None:
        m.update(sender.txn.stats)
        m["txn_state"] = sender.txn.state.value
    return m
