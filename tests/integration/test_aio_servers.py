"""fastkafka.aio under the servers async services run: a FastAPI app under uvicorn and an aiohttp
``web.Application``, each producing from its request handlers to Apache Kafka while concurrent HTTP
clients call them, started and stopped several times in one process, under asyncio's event loop
and uvloop's.

The producer lives as these servers' documentation teaches: created by the app's startup hook
(FastAPI's lifespan, aiohttp's ``cleanup_ctx``) on the server's loop, used by the handlers, closed
by the shutdown hook. One cycle in two creates it before the server starts instead, outside any
running loop and on another thread (a module-level producer, made at import): the shape in which
asyncio wrappers that take ``get_event_loop()`` at construction are known to deadlock under
uvicorn. It is bound to the server's loop at its first use.

Proved, per loop: every request is answered 200 within a bound (a deadlock fails the cycle, not
the suite), every record is read back exactly once by confluent-kafka's consumer, the partition
and offset an awaited send returned are where the record is, every fire-and-forget record's
``on_delivery`` ran without error by the time the server stopped, and after all cycles no thread
of the producer is left and the process has the descriptors it had before the first server.
"""
from __future__ import annotations

import asyncio
import contextlib
import gc
import os
import threading
import time

import aiohttp
import pytest
import uvicorn
from aiohttp import web
from fastapi import FastAPI, Request

from aioloops import LOOPS, run
from brokers import read_all, read_back, unique_name
from fastkafka.aio import AsyncProducer

pytestmark = [pytest.mark.parametrize("loop_kind", LOOPS), pytest.mark.timeout(180)]

CYCLES = 5              # server starts and stops per test
CLIENTS = 50            # concurrent HTTP requests per cycle: even ones await send(), odd produce()
PARTITIONS = 3
#: Bounds of one cycle (seconds). What they guard against: a deadlock (a handler whose send never
#: completes, a shutdown hook that never returns) hangs the server; the bounds turn it into a
#: failure naming the step. A cycle takes about 0.5 s on a quiet 2-core machine.
START_S = 20.0
REQUEST_S = 20.0
STOP_S = 30.0
#: How long the process may take to close what the servers and clients opened (seconds).
SETTLE_S = 5.0


def _fds() -> dict[int, str]:
    out = {}
    for name in os.listdir("/proc/self/fd"):
        try:
            out[int(name)] = os.readlink(f"/proc/self/fd/{name}")
        except OSError:
            pass                    # the listing's own descriptor, closed meanwhile
    return out


def _producer_threads() -> list[str]:
    return [t.name for t in threading.enumerate() if t.name.startswith("fastkafka")]


class Ledger:
    """What the handlers of one test did: the awaited sends' answers come back to the client; the
    fire-and-forget records' outcomes are counted here by their ``on_delivery``."""

    def __init__(self):
        self.delivered: list[tuple[int, int]] = []      # (partition, offset)
        self.failed: list[str] = []

    def on_delivery(self, err, md) -> None:
        if err is None:
            self.delivered.append((md.partition, md.offset))
        else:
            self.failed.append(repr(err))


class Cycle:
    """One start-to-stop of a server: the producer it uses (made before it starts, or None: the
    startup hook makes one) and how many records its fire-and-forget handler queued."""

    def __init__(self, bootstrap: str, premade: bool):
        self.bootstrap = bootstrap
        # made here, on the test's thread, with no loop running: as at a module's import
        self.premade = AsyncProducer(bootstrap_servers=bootstrap, linger_ms=1) if premade else None
        self.produced = 0
        self.used: AsyncProducer | None = None      # held until the cycle's checks are done

    def producer(self) -> AsyncProducer:
        self.used = self.premade or AsyncProducer(bootstrap_servers=self.bootstrap, linger_ms=1)
        return self.used


def _fastapi_app(topic: str, ledger: Ledger) -> FastAPI:
    """One app, started by every cycle (``app.state.cycle`` says which)."""

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        producer = app.state.cycle.producer()
        app.state.producer = producer
        try:
            yield
        finally:
            await producer.close(STOP_S / 2)
            del app.state.producer
            app.state.cycle = None

    app = FastAPI(lifespan=lifespan)

    @app.post("/send/{key}")
    async def send(key: str, request: Request):
        md = await request.app.state.producer.send(topic, await request.body(), key=key)
        return {"partition": md.partition, "offset": md.offset}

    @app.post("/produce/{key}")
    async def produce(key: str, request: Request):
        request.app.state.producer.produce(topic, await request.body(), key=key,
                                           on_delivery=ledger.on_delivery)
        request.app.state.cycle.produced += 1
        return {"queued": True}

    return app


PRODUCER = web.AppKey("producer", AsyncProducer)


def _aiohttp_app(topic: str, ledger: Ledger, cycle: Cycle) -> web.Application:
    async def producer_ctx(app: web.Application):
        app[PRODUCER] = cycle.producer()
        yield
        await app[PRODUCER].close(STOP_S / 2)

    async def send(request: web.Request) -> web.Response:
        md = await request.app[PRODUCER].send(topic, await request.read(),
                                              key=request.match_info["key"])
        return web.json_response({"partition": md.partition, "offset": md.offset})

    async def produce(request: web.Request) -> web.Response:
        request.app[PRODUCER].produce(topic, await request.read(), key=request.match_info["key"],
                                      on_delivery=ledger.on_delivery)
        cycle.produced += 1
        return web.json_response({"queued": True})

    app = web.Application()
    app.cleanup_ctx.append(producer_ctx)
    app.router.add_post("/send/{key}", send)
    app.router.add_post("/produce/{key}", produce)
    return app


class UvicornServer:
    """``uvicorn.Server(...).run()`` on a thread of its own (reload off, lifespan on, the loop of
    ``loop_kind`` made by uvicorn's ``loop=`` setting), on a free port."""

    def __init__(self, app, loop_kind: str):
        config = uvicorn.Config(app, host="127.0.0.1", port=0, loop=loop_kind, lifespan="on",
                                ws="none", log_level="warning", access_log=False,
                                timeout_graceful_shutdown=int(STOP_S / 2))
        self.server = uvicorn.Server(config)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="test-uvicorn", daemon=True)

    def _run(self):
        try:
            self.server.run()
        except BaseException as e:      # reported by stop()
            self.error = e

    def start(self) -> int:
        self.thread.start()
        deadline = time.monotonic() + START_S
        while not self.server.started:
            assert self.thread.is_alive(), f"uvicorn stopped while starting: {self.error!r}"
            assert time.monotonic() < deadline, f"uvicorn not started in {START_S} s"
            time.sleep(0.01)
        return self.server.servers[0].sockets[0].getsockname()[1]

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(STOP_S)
        assert not self.thread.is_alive(), f"uvicorn not stopped in {STOP_S} s (the shutdown hung)"
        assert self.error is None, self.error


class AiohttpServer:
    """``web.AppRunner`` and ``web.TCPSite`` on a thread of its own, its loop of ``loop_kind``, on a
    free port; stopped by ``runner.cleanup()`` (which runs the cleanup_ctx exits)."""

    def __init__(self, app: web.Application, loop_kind: str):
        self.app, self.loop_kind = app, loop_kind
        self.port: int | None = None
        self.error: BaseException | None = None
        self._started = threading.Event()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self.thread = threading.Thread(target=self._run, name="test-aiohttp", daemon=True)

    def _run(self):
        async def serve():
            self._loop, self._stop = asyncio.get_running_loop(), asyncio.Event()
            runner = web.AppRunner(self.app, access_log=None)
            await runner.setup()
            try:
                site = web.TCPSite(runner, "127.0.0.1", 0)
                await site.start()
                self.port = runner.addresses[0][1]
                self._started.set()
                await self._stop.wait()
            finally:
                await runner.cleanup()

        try:
            run(self.loop_kind, serve, timeout=START_S + REQUEST_S + STOP_S + 60)
        except BaseException as e:      # reported by start() / stop()
            self.error = e
        finally:
            self._started.set()

    def start(self) -> int:
        self.thread.start()
        assert self._started.wait(START_S), f"aiohttp not started in {START_S} s"
        assert self.error is None and self.port is not None, self.error
        return self.port

    def stop(self) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self.thread.join(STOP_S)
        assert not self.thread.is_alive(), f"aiohttp not stopped in {STOP_S} s (the cleanup hung)"
        assert self.error is None, self.error


def _call(port: int, tag: str) -> list[tuple[str, str, dict]]:
    """``CLIENTS`` POSTs at once from a client loop of this thread; returns (kind, value, answer)
    for each, every one answered 200 within ``REQUEST_S``."""

    async def one(http: aiohttp.ClientSession, i: int):
        kind = "send" if i % 2 == 0 else "produce"
        value = f"{tag}-{i}"
        async with http.post(f"/{kind}/k{i}", data=value.encode()) as r:
            body = await r.text()
            assert r.status == 200, (kind, r.status, body)
            return kind, value, await r.json()

    async def main():
        timeout = aiohttp.ClientTimeout(total=REQUEST_S)
        connector = aiohttp.TCPConnector(limit=0)
        async with aiohttp.ClientSession(f"http://127.0.0.1:{port}", timeout=timeout,
                                         connector=connector) as http:
            answers = await asyncio.gather(*(one(http, i) for i in range(CLIENTS)))
        await asyncio.sleep(0)          # the connections' closing callbacks run
        return answers

    return run("asyncio", main, timeout=REQUEST_S + 5)


def _serve_cycles(kafka_broker, loop_kind: str, make_server) -> None:
    topic = unique_name(f"aio-srv-{loop_kind}")
    kafka_broker.create_topic(topic, PARTITIONS)
    ledger = Ledger()
    # The first uvloop loop of a process opens libuv's process-wide signal pipe, kept to the end:
    # opened before the count, not by the servers.
    run(loop_kind, lambda: asyncio.sleep(0))
    gc.collect()
    fds_before = _fds()
    assert _producer_threads() == []

    awaited: dict[str, tuple[int, int]] = {}        # value -> (partition, offset) answered
    produced: list[str] = []
    for c in range(CYCLES):
        cycle = Cycle(kafka_broker.bootstrap, premade=c % 2 == 1)
        server = make_server(topic, ledger, cycle)
        port = server.start()
        try:
            answers = _call(port, f"{loop_kind}-c{c}")
        finally:
            server.stop()
        for kind, value, answer in answers:
            if kind == "send":
                awaited[value] = (answer["partition"], answer["offset"])
            else:
                assert answer == {"queued": True}
                produced.append(value)
        # The shutdown hook closed the producer: its I/O thread is gone while the producer is
        # still referenced (a producer dropped unclosed is closed by its finalizer: not that).
        assert cycle.used is not None and _producer_threads() == [], _producer_threads()
        # what the fire-and-forget handler queued was delivered by then
        assert cycle.produced == CLIENTS // 2
        assert len(ledger.delivered) == len(produced) and ledger.failed == [], ledger.failed

    # No thread of the producers left, and once the producers are let go of, the process holds
    # the descriptors it held before. (A closed producer keeps the eventfds and the timerfd of its
    # poller until it is freed, not a socket: a wakeup() from another thread must not write to a
    # descriptor number reused meanwhile.)
    del cycle, server
    deadline = time.monotonic() + SETTLE_S
    while True:
        gc.collect()
        threads, fds = _producer_threads(), _fds()
        if (threads == [] and len(fds) <= len(fds_before)) or time.monotonic() > deadline:
            break
        time.sleep(0.05)
    assert threads == [], threads
    extra = {fd: target for fd, target in fds.items() if fds_before.get(fd) != target}
    assert len(fds) <= len(fds_before), f"{len(fds) - len(fds_before)} descriptors more: {extra}"

    # every record once, and the awaited ones where their handler said
    n = CYCLES * CLIENTS
    assert len(awaited) + len(produced) == n
    got = read_back(kafka_broker.bootstrap, topic, PARTITIONS, n)
    where = {}
    for part, msgs in got.items():
        for m in msgs:
            assert m.value.decode() not in where, f"{m.value!r} read twice"
            where[m.value.decode()] = (part, m.offset)
            assert m.key == b"k" + m.value.decode().rsplit("-", 1)[1].encode()
    assert sorted(where) == sorted(list(awaited) + produced)
    assert {v: where[v] for v in awaited} == awaited
    assert len(read_all(kafka_broker.bootstrap, topic, PARTITIONS)) == n    # nothing more
    assert sorted(ledger.delivered) == sorted(where[v] for v in produced)


def test_fastapi_under_uvicorn_started_and_stopped(kafka_broker, loop_kind):
    app = None

    def make_server(topic, ledger, cycle):
        nonlocal app
        if app is None:
            app = _fastapi_app(topic, ledger)   # the same app, started by every cycle
        app.state.cycle = cycle
        return UvicornServer(app, loop_kind)

    _serve_cycles(kafka_broker, loop_kind, make_server)


def test_aiohttp_app_started_and_stopped(kafka_broker, loop_kind):
    def make_server(topic, ledger, cycle):
        return AiohttpServer(_aiohttp_app(topic, ledger, cycle), loop_kind)

    _serve_cycles(kafka_broker, loop_kind, make_server)
