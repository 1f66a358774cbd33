"""Asyncio producers inside the servers async services run: a FastAPI app under uvicorn and an
aiohttp ``web.Application``, each request handler producing one record and answering with its
partition and offset, driven by an HTTP load generator in another process. Request latency (p50,
p99), requests/s and the server's CPU per request, for fastkafka's ``AsyncProducer``, aiokafka's
``AIOKafkaProducer`` and confluent-kafka's ``AIOProducer``, against a handler that produces nothing
(the server's own cost).

    python bench/aio_servers.py [--rounds 2] [--seconds 3] [--warmup 1] [--connections 50]
                                [--size 100] [--partitions 6] [--servers uvicorn,aiohttp]
                                [--clients none,fk,aiok,ck,ckf] [--loop asyncio|uvloop]
                                [--bootstrap-servers HOST:PORT] [--out bench/results/aio_servers.md]

Servers (each measurement starts a fresh server process and stops it after; the app makes its
producer at startup and closes it at shutdown, as the frameworks' documentation teaches):

- ``uvicorn``: ``FastAPI(lifespan=...)``, ``POST /produce`` reads the body and produces it;
  ``uvicorn.Server(uvicorn.Config(app, loop=--loop, access_log=False)).run()``, one worker.
- ``aiohttp``: ``web.Application`` with the producer in ``cleanup_ctx``, the same handler;
  ``web.AppRunner`` + ``web.TCPSite`` on a loop of ``--loop``, access log off.

Handlers (``--clients``), all producers with acks=all, idempotence on, linger 5 ms, ``--size``-byte
values with no key on a fresh ``--partitions``-partition topic per measurement:

- ``none``: answers without producing (what the server, the framework and the load generator cost).
- ``fk``: ``md = await p.send(topic, body)`` (``fastkafka.aio.AsyncProducer``).
- ``aiok``: ``md = await p.send_and_wait(topic, body)`` (``aiokafka.AIOKafkaProducer``).
- ``ck``: ``msg = await (await p.produce(topic, body))`` (``confluent_kafka.aio.AIOProducer``, its
  defaults: a Python buffer of 1,000 records handed to librdkafka when full or after 1 s without
  activity, so a request that waits for its own record waits for that timer when fewer than 1,000
  requests are in flight).
- ``ckf``: the same with ``await p.flush()`` before awaiting the record's future (served at once).

Load: ``--connections`` client tasks on one aiohttp ``ClientSession`` (keep-alive, one connection
each) in a separate process, each posting ``--size`` bytes and waiting for the answer, then the
next; ``--warmup`` seconds unmeasured, then ``--seconds`` measured: the requests answered in
those seconds (a request begun in the warm-up and answered in them counts: a client whose requests
each take longer than the measured part still shows). Latency of a request = the answer read − the
post begun (``time.perf_counter_ns``). CPU: the server process's user + system
CPU seconds over the measured part (read from ``/proc``) / requests answered. A request that fails
or answers other than 200 counts as an error. Medians over ``--rounds`` rounds, the order of the
measurements reversed in even rounds, after one measurement not recorded (the broker's warm-up).

Broker: one Apache Kafka KRaft node started for the run (``fastkafka_tools.apachekafka``), or
``--bootstrap-servers``.
"""

import argparse
import asyncio
import contextlib
import json
import os
import platform
import signal
import statistics
import subprocess
import sys
import time
import uuid

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
if HERE not in sys.path:
    sys.path.insert(0, HERE)
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)

from brokers import BROKER_PROPERTIES, Topics  # noqa: E402
from harness import emit, kafka_run_line, process_cpu_s, round_order, tree_commit  # noqa: E402

RESULTS = os.path.join(HERE, "results", "aio_servers.md")
LINGER_MS = 5
SERVERS = ("uvicorn", "aiohttp")
CLIENTS = {
    "none": ("no Kafka (the server's own cost)", "return {...}"),
    "fk": ("fastkafka AsyncProducer", "md = await p.send(t, body)"),
    "aiok": ("aiokafka", "md = await p.send_and_wait(t, body)"),
    "ck": ("confluent-kafka AIOProducer", "msg = await (await p.produce(t, body))"),
    "ckf": ("confluent-kafka AIOProducer + flush()",
            "f = await p.produce(t, body); await p.flush(); msg = await f"),
}


# ------------------------------------------------------------------------------------ producers
@contextlib.asynccontextmanager
async def open_producer(client: str, bootstrap: str):
    """The client's producer and an ``async send(topic, value) -> (partition, offset)``."""
    if client == "none":
        async def send(topic, value):
            return -1, -1
        yield send
    elif client == "fk":
        from fastkafka.aio import AsyncProducer

        async with AsyncProducer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, acks="all",
                                 enable_idempotence=True) as p:
            async def send(topic, value):
                md = await p.send(topic, value)
                return md.partition, md.offset
            yield send
    elif client == "aiok":
        from aiokafka import AIOKafkaProducer

        async with AIOKafkaProducer(bootstrap_servers=bootstrap, linger_ms=LINGER_MS, acks="all",
                                    enable_idempotence=True) as p:
            async def send(topic, value):
                md = await p.send_and_wait(topic, value)
                return md.partition, md.offset
            yield send
    elif client in ("ck", "ckf"):
        from confluent_kafka.aio import AIOProducer

        async with AIOProducer({"bootstrap.servers": bootstrap, "acks": "all",
                                "enable.idempotence": True, "linger.ms": LINGER_MS}) as p:
            flush = client == "ckf"

            async def send(topic, value):
                fut = await p.produce(topic, value)
                if flush:
                    await p.flush()
                msg = await fut
                return msg.partition(), msg.offset()
            yield send
    else:
        raise SystemExit(f"unknown client {client!r}")


# ------------------------------------------------------------------------------------ the servers
def new_loop(kind: str) -> asyncio.AbstractEventLoop:
    if kind == "uvloop":
        import uvloop

        return uvloop.new_event_loop()
    return asyncio.new_event_loop()


def serve_uvicorn(client: str, bootstrap: str, topic: str, loop_kind: str) -> None:
    # (no ``from __future__ import annotations`` in this file: FastAPI reads the handler's
    # annotation ``Request``, imported here, at run time)
    import uvicorn
    from fastapi import FastAPI, Request

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        async with open_producer(client, bootstrap) as send:
            app.state.send = send
            await send(topic, b"warm-up")
            yield

    app = FastAPI(lifespan=lifespan)

    @app.post("/produce")
    async def produce(request: Request):
        partition, offset = await request.app.state.send(topic, await request.body())
        return {"partition": partition, "offset": offset}

    class Server(uvicorn.Server):
        async def startup(self, sockets=None):
            await super().startup(sockets)
            port = self.servers[0].sockets[0].getsockname()[1]
            print(f"PORT {port}", flush=True)

    config = uvicorn.Config(app, host="127.0.0.1", port=0, loop=loop_kind, lifespan="on",
                            ws="none", log_level="warning", access_log=False)
    Server(config).run()


def serve_aiohttp(client: str, bootstrap: str, topic: str, loop_kind: str) -> None:
    from aiohttp import web

    send_key = web.AppKey("send", object)

    async def producer_ctx(app: web.Application):
        async with open_producer(client, bootstrap) as send:
            app[send_key] = send
            await send(topic, b"warm-up")
            yield

    async def produce(request: web.Request) -> web.Response:
        partition, offset = await request.app[send_key](topic, await request.read())
        return web.json_response({"partition": partition, "offset": offset})

    async def main():
        app = web.Application()
        app.cleanup_ctx.append(producer_ctx)
        app.router.add_post("/produce", produce)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        loop.add_signal_handler(signal.SIGTERM, stop.set)
        loop.add_signal_handler(signal.SIGINT, stop.set)
        try:
            site = web.TCPSite(runner, "127.0.0.1", 0)
            await site.start()
            print(f"PORT {runner.addresses[0][1]}", flush=True)
            await stop.wait()
        finally:
            await runner.cleanup()

    loop = new_loop(loop_kind)
    try:
        loop.run_until_complete(main())
    finally:
        loop.close()


# ------------------------------------------------------------------------------------ the load
def percentile(sorted_values: list, q: float):
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, int(q * len(sorted_values)))]


async def load(port: int, connections: int, size: int, warmup: float, seconds: float,
               server_pid: int) -> dict:
    import aiohttp

    body = os.urandom(size // 2).hex().encode()[:size].ljust(size, b"x")
    lat_ns: list[int] = []
    errors: list[str] = []
    clock = time.perf_counter_ns
    t0 = clock()
    measure_from = t0 + int(warmup * 1e9)
    end = measure_from + int(seconds * 1e9)
    cpu = {}

    async def worker(http):
        while True:
            start = clock()
            if start >= end:
                return
            try:
                async with http.post("/produce", data=body) as r:
                    await r.read()
                    ok = r.status == 200
                    if not ok:
                        err = f"HTTP {r.status}"
            except Exception as e:          # counted, the run goes on
                ok, err = False, f"{type(e).__name__}: {e}"
            done = clock()
            if measure_from <= done <= end:
                if ok:
                    lat_ns.append(done - start)
                else:
                    errors.append(err)

    async def cpu_marks():
        await asyncio.sleep(max(0.0, (measure_from - clock()) / 1e9))
        cpu["start"] = process_cpu_s(server_pid)
        await asyncio.sleep(max(0.0, (end - clock()) / 1e9))
        cpu["end"] = process_cpu_s(server_pid)

    timeout = aiohttp.ClientTimeout(total=max(30.0, 3 * seconds))
    async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=connections)) as http:
        await asyncio.gather(cpu_marks(), *(worker(http) for _ in range(connections)))
    lat_ns.sort()
    n = len(lat_ns)
    cpu_s = (cpu["end"] - cpu["start"]) if None not in (cpu.get("start"), cpu.get("end")) else None
    return {"requests": n, "rps": n / seconds, "errors": len(errors), "error_sample": errors[:3],
            "p50_ms": percentile(lat_ns, 0.50) / 1e6 if n else None,
            "p99_ms": percentile(lat_ns, 0.99) / 1e6 if n else None,
            "cpu_us_per_request": cpu_s / n * 1e6 if cpu_s is not None and n else None}


# ------------------------------------------------------------------------------------ one measurement
def measure(server: str, client: str, bootstrap: str, topic: str, args) -> dict:
    """Start the server process, run the load generator process against it, stop the server."""
    me = os.path.abspath(__file__)
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
    srv = subprocess.Popen([sys.executable, me, "--_serve", server, client, bootstrap, topic,
                            "--loop", args.loop], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           text=True, env=env, cwd=ROOT)
    try:
        port = None
        deadline = time.monotonic() + 60
        while port is None and time.monotonic() < deadline:
            line = srv.stdout.readline()
            if not line:
                break
            if line.startswith("PORT "):
                port = int(line.split()[1])
        if port is None:
            srv.kill()
            return {"failed": f"server did not start: {srv.stderr.read()[-1500:]}"}
        cp = subprocess.run([sys.executable, me, "--_load", str(port), str(srv.pid),
                             "--connections", str(args.connections), "--size", str(args.size),
                             "--warmup", str(args.warmup), "--seconds", str(args.seconds)],
                            capture_output=True, text=True, env=env, cwd=ROOT,
                            timeout=args.warmup + args.seconds + 90)
        line = next((ln for ln in reversed(cp.stdout.splitlines()) if ln.startswith("RESULT ")), None)
        if line is None:
            return {"failed": f"load generator: exit {cp.returncode}: {cp.stderr[-1500:]}"}
        r = json.loads(line[len("RESULT "):])
    finally:
        if srv.poll() is None:
            srv.send_signal(signal.SIGTERM)
            try:
                srv.wait(60)
            except subprocess.TimeoutExpired:
                srv.kill()
                srv.wait()
                return {"failed": "server did not stop within 60 s of SIGTERM"}
    if srv.returncode not in (0, -signal.SIGTERM):
        r["failed"] = f"server exit {srv.returncode}: {srv.stderr.read()[-1500:]}"
    return r


# ------------------------------------------------------------------------------------ report
def med(rs: list[dict], field: str):
    vals = [r[field] for r in rs if "failed" not in r and r.get(field) is not None]
    return statistics.median(vals) if vals else None


def fmt(v, digits: int = 1) -> str:
    return "—" if v is None else f"{v:,.{digits}f}"


def render(results: dict, args, wall_s: float, broker_line: str, load0: float) -> str:
    lines = [
        "# asyncio producers under uvicorn (FastAPI) and aiohttp",
        "",
        f"`python bench/aio_servers.py --rounds {args.rounds} --seconds {args.seconds:g} "
        f"--warmup {args.warmup:g} --connections {args.connections} --size {args.size} "
        f"--partitions {args.partitions} --servers {','.join(args.server_list)} "
        f"--clients {','.join(args.client_list)} --loop {args.loop}` — "
        f"{time.strftime('%Y-%m-%d %H:%M', time.gmtime())} UTC, whole run {wall_s:.0f} s.",
        "",
        f"fastkafka at git {tree_commit(ROOT)}. One POST per request, a {args.size}-byte body "
        f"produced as one record (no key) to a fresh {args.partitions}-partition topic per "
        f"measurement, acks=all, idempotence on, linger {LINGER_MS} ms for every producer; the "
        f"answer carries the record's partition and offset. {args.connections} connections kept "
        f"alive, each posting the next request once the last was answered, from a load generator "
        f"in its own process; {args.warmup:g} s unmeasured then {args.seconds:g} s measured; a "
        f"fresh server process per measurement, one worker, event loop {args.loop}. Medians of "
        f"{args.rounds} rounds (order reversed in even rounds), after one unrecorded measurement "
        f"(the broker's warm-up). CPU: the server process's, per "
        f"request answered. The method is in the docstring of bench/aio_servers.py.",
        "",
        "Noise: a 2-core machine shared by the broker, the server, the load generator and whatever "
        "else runs on it; the load generator's own CPU is part of what limits requests/s (the "
        "\"no Kafka\" row is that ceiling).",
        "",
    ]
    for server in args.server_list:
        title = "FastAPI under uvicorn" if server == "uvicorn" else "aiohttp web.Application"
        lines += [f"## {title}", "",
                  "| handler | code | requests/s | p50 ms | p99 ms | server CPU µs/request | errors "
                  "| rounds (requests/s) |",
                  "|---|---|---:|---:|---:|---:|---:|---|"]
        for client in args.client_list:
            rs = results[(server, client)]
            name, code = CLIENTS[client]
            failed = [r["failed"] for r in rs if "failed" in r]
            per_round = ", ".join("failed" if "failed" in r else f"{r['rps']:,.0f}" for r in rs)
            errors = sum(r.get("errors", 0) for r in rs if "failed" not in r)
            bold = f"**{name}**" if client == "fk" else name
            lines.append(f"| {bold} | `{code}` | {fmt(med(rs, 'rps'), 0)} | {fmt(med(rs, 'p50_ms'), 2)} "
                         f"| {fmt(med(rs, 'p99_ms'), 2)} | {fmt(med(rs, 'cpu_us_per_request'), 0)} "
                         f"| {errors} | {per_round} |")
            for f in failed:
                lines.append(f"|  | failed: {f.splitlines()[0][:200]} | | | | | | |")
        lines.append("")
    lines += ["## Machine", "", f"- {broker_line}",
              f"- nproc: {os.cpu_count()}; Python {platform.python_version()}, {platform.platform()}",
              f"- load average (1 min) at the start / end of the run: {load0:.2f} / "
              f"{os.getloadavg()[0]:.2f}", ""]
    from importlib import metadata

    versions = []
    for dist in ("uvicorn", "fastapi", "aiohttp", "aiokafka", "confluent-kafka", "uvloop"):
        try:
            versions.append(f"{dist} {metadata.version(dist)}")
        except metadata.PackageNotFoundError:
            pass
    lines += [f"- {', '.join(versions)}", ""]
    return "\n".join(lines)


# ------------------------------------------------------------------------------------ main
def parse_args(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--seconds", type=float, default=3.0, help="measured seconds per measurement")
    ap.add_argument("--warmup", type=float, default=1.0, help="unmeasured seconds before them")
    ap.add_argument("--connections", type=int, default=50, help="concurrent client connections")
    ap.add_argument("--size", type=int, default=100, help="request body (record value) bytes")
    ap.add_argument("--partitions", type=int, default=6)
    ap.add_argument("--servers", default=",".join(SERVERS))
    ap.add_argument("--clients", default=",".join(CLIENTS))
    ap.add_argument("--loop", choices=("asyncio", "uvloop"), default="asyncio")
    ap.add_argument("--bootstrap-servers", default=None, help="use this broker instead of starting one")
    ap.add_argument("--out", default=RESULTS, help="results file (default %(default)s); '-' prints only")
    ap.add_argument("--_serve", nargs=4, metavar=("SERVER", "CLIENT", "BOOTSTRAP", "TOPIC"),
                    help=argparse.SUPPRESS)
    ap.add_argument("--_load", nargs=2, metavar=("PORT", "SERVER_PID"), help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    args.server_list = [s for s in args.servers.split(",") if s]
    args.client_list = [c for c in args.clients.split(",") if c]
    bad = [s for s in args.server_list if s not in SERVERS] + \
          [c for c in args.client_list if c not in CLIENTS]
    if bad:
        ap.error(f"unknown server or client: {', '.join(bad)}")
    return args


def summary(r: dict) -> str:
    return r.get("failed") or (f"{r['rps']:,.0f} req/s, p50 {fmt(r['p50_ms'], 2)} ms, "
                               f"p99 {fmt(r['p99_ms'], 2)} ms, "
                               f"{fmt(r['cpu_us_per_request'], 0)} µs CPU/request, {r['errors']} errors")


def main(argv=None) -> int:
    args = parse_args(argv)
    if args._serve:
        server, client, bootstrap, topic = args._serve
        (serve_uvicorn if server == "uvicorn" else serve_aiohttp)(client, bootstrap, topic, args.loop)
        return 0
    if args._load:
        port, pid = map(int, args._load)
        r = asyncio.run(load(port, args.connections, args.size, args.warmup, args.seconds, pid))
        print("RESULT " + json.dumps(r), flush=True)
        return 0

    wall0, load0 = time.monotonic(), os.getloadavg()[0]
    broker = None
    if args.bootstrap_servers:
        bootstrap = args.bootstrap_servers
        broker_line = f"broker: {bootstrap} (given with --bootstrap-servers)"
    else:
        from fastkafka_tools.apachekafka import KafkaCluster

        broker = KafkaCluster(nodes=1, jit="full", properties=BROKER_PROPERTIES).start(timeout=180)
        bootstrap = broker.bootstrap
        broker_line = kafka_run_line(broker.version, broker.heap_mb, "full", broker.data_place)
    topics = Topics(bootstrap)
    pairs = [(s, c) for s in args.server_list for c in args.client_list]
    results: dict = {p: [] for p in pairs}
    try:
        # A broker just started answers its first Produce requests slowly (its JIT, the new
        # topics' files): one measurement, not recorded, before the rounds.
        kafka = [c for c in args.client_list if c != "none"]
        if kafka:
            topic = f"srv-warmup-{uuid.uuid4().hex[:8]}"
            topics.create([topic], args.partitions)
            r = measure(args.server_list[0], kafka[0], bootstrap, topic, args)
            print(f"warm-up {args.server_list[0]} {kafka[0]}: {summary(r)}", flush=True)
        for rnd in range(1, args.rounds + 1):
            for server, client in round_order(pairs, rnd):
                topic = f"srv-{server}-{client}-{uuid.uuid4().hex[:8]}"
                topics.create([topic], args.partitions)
                r = measure(server, client, bootstrap, topic, args)
                results[(server, client)].append(r)
                print(f"round {rnd} {server} {client}: {summary(r)}", flush=True)
    finally:
        if broker is not None:
            broker.stop()
    text = render(results, args, time.monotonic() - wall0, broker_line, load0)
    emit(text, None if args.out == "-" else args.out)
    return 0 if all("failed" not in r and not r.get("errors") for rs in results.values()
                    for r in rs) else 1


if __name__ == "__main__":
    sys.exit(main())
