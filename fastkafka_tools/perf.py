"""The perf tool: producer throughput and latency, in the manner of kafka-producer-perf-test.

    python -m fastkafka_tools.perf --num-records 1000000 --record-size 100
    python -m fastkafka_tools.perf --topic t --num-records 500000 --record-size 100 --throughput 100000 \\
        --producer-props linger.ms=5 compression.type=lz4 --bootstrap-servers 127.0.0.1:9092

Without ``--bootstrap-servers`` it starts a local broker (tansu, in-memory) for the run and stops it
afterwards. Prints a progress line every ``--reporting-interval`` ms and a final line with records/s,
MB/s, average and maximum latency and the 50th/95th/99th/99.9th percentiles (send() to ack).
"""

from __future__ import annotations

import argparse
import os
import sys
import threading
import time
from array import array

from fastkafka.errors import KafkaError


class Stats:
    """Latency and throughput bookkeeping, fed from delivery callbacks on the I/O thread."""

    def __init__(self, num_records: int, reporting_interval_ms: int, out=sys.stdout):
        self.start = time.monotonic()
        self.window_start = self.start
        self.latencies = array("f")  # ms, one per acknowledged record (sampled when huge)
        self.sample_every = max(1, num_records // 2_000_000)
        self.count = 0
        self.bytes = 0
        self.errors = 0
        self.first_error: BaseException | None = None
        self.max_latency = 0.0
        self.total_latency = 0.0
        self.window_count = 0
        self.window_bytes = 0
        self.window_max = 0.0
        self.window_total = 0.0
        self.interval = reporting_interval_ms / 1000.0
        self.out = out
        self.lock = threading.Lock()

    def record(self, latency_ms: float, nbytes: int, n: int = 1) -> None:
        with self.lock:
            self.count += n
            self.bytes += nbytes
            self.total_latency += latency_ms * n
            if latency_ms > self.max_latency:
                self.max_latency = latency_ms
            self.window_count += n
            self.window_bytes += nbytes
            self.window_total += latency_ms * n
            if latency_ms > self.window_max:
                self.window_max = latency_ms
            if n == 1:
                if self.count % self.sample_every == 0:
                    self.latencies.append(latency_ms)
            else:
                self.latencies.extend([latency_ms] * max(1, n // self.sample_every))
            now = time.monotonic()
            if now - self.window_start >= self.interval:
                self._print_window(now)

    def error(self, err: BaseException) -> None:
        with self.lock:
            self.errors += 1
            if self.first_error is None:
                self.first_error = err

    def _print_window(self, now: float) -> None:
        elapsed = now - self.window_start
        rate = self.window_count / elapsed
        mb = self.window_bytes / elapsed / 1024 / 1024
        avg = self.window_total / self.window_count if self.window_count else 0.0
        print(f"{self.window_count} records sent, {rate:.1f} records/sec ({mb:.2f} MB/sec), "
              f"{avg:.1f} ms avg latency, {self.window_max:.1f} ms max latency.", file=self.out, flush=True)
        self.window_start = now
        self.window_count = self.window_bytes = 0
        self.window_total = self.window_max = 0.0

    def summary(self) -> dict:
        elapsed = time.monotonic() - self.start
        lat = sorted(self.latencies)

        def pct(p):
            return lat[min(int(len(lat) * p), len(lat) - 1)] if lat else 0.0
        return {
            "records": self.count, "errors": self.errors, "seconds": elapsed,
            "records_per_sec": self.count / elapsed if elapsed else 0.0,
            "mb_per_sec": self.bytes / elapsed / 1024 / 1024 if elapsed else 0.0,
            "avg_latency_ms": self.total_latency / self.count if self.count else 0.0,
            "max_latency_ms": self.max_latency,
            "p50": pct(0.5), "p95": pct(0.95), "p99": pct(0.99), "p999": pct(0.999),
        }

    def print_summary(self) -> dict:
        s = self.summary()
        print(f"{s['records']} records sent, {s['records_per_sec']:.1f} records/sec "
              f"({s['mb_per_sec']:.2f} MB/sec), {s['avg_latency_ms']:.2f} ms avg latency, "
              f"{s['max_latency_ms']:.2f} ms max latency, {s['p50']:.0f} ms 50th, {s['p95']:.0f} ms 95th, "
              f"{s['p99']:.0f} ms 99th, {s['p999']:.0f} ms 99.9th.", file=self.out, flush=True)
        return s


class _Callback:
    """Per-record delivery callback: one small object, no closure."""

    __slots__ = ("stats", "sent", "size")

    def __init__(self, stats: Stats, sent: float, size: int):
        self.stats = stats
        self.sent = sent
        self.size = size

    def __call__(self, err, md) -> None:
        if err is not None:
            self.stats.error(err)
        else:
            self.stats.record((time.monotonic() - self.sent) * 1000.0, self.size)


class Throttle:
    """Paces sends to ``target`` records/s (<= 0: unlimited)."""

    def __init__(self, target: float):
        self.target = target
        self.start = time.monotonic()

    def wait(self, sent: int) -> None:
        if self.target <= 0:
            return
        ahead = sent / self.target - (time.monotonic() - self.start)
        if ahead > 0.001:
            time.sleep(ahead)


def parse_props(items: list[str]) -> dict:
    props = {}
    for item in items or []:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise SystemExit(f"--producer-props expects key=value, got {item!r}")
        props[key.strip()] = value.strip()
    return props


def run(args, out=sys.stdout) -> dict:
    from fastkafka.admin import Admin
    from fastkafka.config import ProducerConfig
    from fastkafka.producer import Producer

    props = parse_props(args.producer_props)
    # Validate the producer settings before starting a broker for nothing.
    ProducerConfig(props, **({} if any(k in props for k in ("bootstrap.servers", "bootstrap_servers"))
                             else {"bootstrap_servers": args.bootstrap_servers or "127.0.0.1:9092"}))
    broker = None
    bootstrap = args.bootstrap_servers
    if not bootstrap:
        from .localbroker import LocalBroker
        broker = LocalBroker(kind=args.broker, storage="null" if args.broker == "tansu" and args.discard else "memory")
        broker.start()
        bootstrap = broker.bootstrap
        print(f"started a local {args.broker} broker on {bootstrap}", file=out, flush=True)
    try:
        with Admin(bootstrap_servers=bootstrap) as admin:
            admin.create_topic(args.topic, partitions=args.partitions, exist_ok=True)
        if "bootstrap_servers" not in props:
            props.setdefault("bootstrap.servers", bootstrap)
        payload = os.urandom(args.record_size)
        stats = Stats(args.num_records, args.reporting_interval, out)
        throttle = Throttle(args.throughput)
        with Producer(props) as producer:
            if args.mode == "send":
                send = producer.send
                for i in range(args.num_records):
                    send(args.topic, payload, on_delivery=_Callback(stats, time.monotonic(), args.record_size))
                    if args.throughput > 0:
                        throttle.wait(i + 1)
            else:
                chunk = args.batch_records
                values = [payload] * chunk
                futures = []
                sent = 0
                while sent < args.num_records:
                    n = min(chunk, args.num_records - sent)
                    t0 = time.monotonic()
                    fut = producer.send_batch(args.topic, values if n == chunk else values[:n])
                    fut.add_callback(lambda f, t0=t0, n=n: _batch_done(stats, f, t0, n, args.record_size))
                    futures.append(fut)
                    sent += n
                    throttle.wait(sent)
            producer.flush()
        return stats.print_summary() | {"first_error": stats.first_error}
    finally:
        if broker is not None:
            broker.stop()


def _batch_done(stats: Stats, fut, t0: float, n: int, size: int) -> None:
    latency = (time.monotonic() - t0) * 1000.0
    failed = fut.failed
    if failed:
        stats.error(fut.first_error)
    if n - failed:
        stats.record(latency, (n - failed) * size, n - failed)


def build_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m fastkafka_tools.perf", description=__doc__.split("\n\n")[0])
    p.add_argument("--topic", default="fastkafka-perf")
    p.add_argument("--num-records", type=int, default=1_000_000)
    p.add_argument("--record-size", type=int, default=100)
    p.add_argument("--throughput", type=float, default=-1, help="records/s to aim for; -1 = unlimited")
    p.add_argument("--producer-props", nargs="*", default=[], metavar="KEY=VALUE")
    p.add_argument("--bootstrap-servers", default=None,
                   help="broker to use; without it a local broker is started for the run")
    p.add_argument("--broker", choices=("tansu", "noida"), default="tansu",
                   help="kind of local broker to start when --bootstrap-servers is not given")
    p.add_argument("--discard", action="store_true",
                   help="local tansu broker discards data (null storage) for long runs")
    p.add_argument("--partitions", type=int, default=6, help="partitions of the topic if it is created")
    p.add_argument("--mode", choices=("send", "batch"), default="send",
                   help="send(): one call per record; batch: send_batch() of --batch-records at a time")
    p.add_argument("--batch-records", type=int, default=10_000)
    p.add_argument("--reporting-interval", type=int, default=5000, help="ms between progress lines")
    return p


def main(argv=None) -> int:
    args = build_parser().parse_args(argv)
    if args.num_records <= 0 or args.record_size < 0:
        print("--num-records must be > 0 and --record-size >= 0", file=sys.stderr)
        return 2
    try:
        result = run(args)
    except KafkaError as e:
        print(f"fastkafka-perf: {type(e).__name__}: {e}", file=sys.stderr)
        return 1
    if result["errors"]:
        print(f"{result['errors']} records failed; first error: {result['first_error']}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
