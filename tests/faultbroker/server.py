"""The network layer of the fault broker, on Kafka's socket-server model.

One acceptor thread accepts connections and hands them round-robin to N processor threads. Each
processor owns a selector and its connections: it reads one complete size-prefixed request, stops
reading that connection ("mutes" it), puts the request on the shared request queue, and a pool of
handler threads turns requests into responses, which go back to the owning processor's response
queue. The processor writes the response and only then reads the connection's next request, so the
responses on a connection come in request order.

Faults from the script are applied at two points: the handler decides what the response bytes are
and how they are to be written (split, cut, delayed, dropped); the processor carries that out.
"""
from __future__ import annotations

import itertools
import logging
import queue
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field

log = logging.getLogger("faultbroker")

READ = selectors.EVENT_READ
WRITE = selectors.EVENT_WRITE


@dataclass
class RawRequest:
    conn_id: int
    processor: "Processor"
    payload: bytes           # without the size prefix
    received_at: float


@dataclass
class Response:
    """What a handler asks the processor to do with a connection after a request."""
    conn_id: int
    data: bytes | None = None              # a complete frame (size prefix included) or None
    close_before: bool = False             # close instead of writing
    close_after: int | None = None         # write this many bytes, then close
    chunk: int | None = None               # max bytes per send()
    pause: float = 0.0                     # pause between chunks
    not_before: float = 0.0                # monotonic time before which nothing is written


@dataclass
class Conn:
    id: int
    sock: socket.socket
    peer: tuple
    rbuf: bytearray = field(default_factory=bytearray)
    state: str = "read"                    # read | busy | write
    events: int = 0                        # currently registered selector events
    out: memoryview | None = None
    out_pos: int = 0
    out_end: int = 0
    close_after: bool = False
    chunk: int | None = None
    pause: float = 0.0
    next_write_at: float = 0.0
    pending: Response | None = None        # a delayed response
    slow_checked: bool = False             # slow_read decided for the request being read
    slow: tuple | None = None              # (delay, chunk) while reading slowly
    next_read_at: float = 0.0


class Processor(threading.Thread):
    def __init__(self, server, index: int):
        super().__init__(name=f"faultbroker-{server.port_hint}-processor-{index}", daemon=True)
        self.server = server
        self.index = index
        self.selector = selectors.DefaultSelector()
        self.new_conns: queue.SimpleQueue = queue.SimpleQueue()
        self.responses: queue.SimpleQueue = queue.SimpleQueue()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self.selector.register(self._wake_r, READ, None)
        self.conns: dict[int, Conn] = {}
        self.running = True

    # -- called from other threads ----------------------------------------------------------
    def accept(self, sock: socket.socket, peer) -> None:
        self.new_conns.put((sock, peer))
        self.wakeup()

    def respond(self, resp: Response) -> None:
        self.responses.put(resp)
        self.wakeup()

    def wakeup(self) -> None:
        try:
            self._wake_w.send(b"\0")
        except (BlockingIOError, OSError):
            pass

    def shutdown(self) -> None:
        self.running = False
        self.wakeup()

    # -- the loop ---------------------------------------------------------------------------
    def run(self) -> None:
        try:
            while self.running:
                self._configure_new_connections()
                self._process_new_responses()
                self._run_timers()
                events = self.selector.select(self._select_timeout())
                for key, mask in events:
                    if key.data is None:
                        try:
                            while self._wake_r.recv(4096):
                                pass
                        except (BlockingIOError, OSError):
                            pass
                        continue
                    conn = key.data
                    try:
                        if mask & READ and conn.id in self.conns:
                            self._read(conn)
                        if mask & WRITE and conn.id in self.conns:
                            self._write(conn)
                    except OSError as e:
                        log.debug("connection %d: %r", conn.id, e)
                        self._close(conn)
        except Exception:  # pragma: no cover - a bug in the test broker itself
            log.exception("processor %d crashed", self.index)
            self.server.crashed.append(self.name)
        finally:
            for conn in list(self.conns.values()):
                self._close(conn)
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()

    def _configure_new_connections(self) -> None:
        while True:
            try:
                sock, peer = self.new_conns.get_nowait()
            except queue.Empty:
                return
            conn = Conn(next(self.server.conn_ids), sock, peer)
            self.conns[conn.id] = conn
            self.server._conn_opened(conn)
            self._set_events(conn, READ)

    def _process_new_responses(self) -> None:
        while True:
            try:
                resp = self.responses.get_nowait()
            except queue.Empty:
                return
            if isinstance(resp, _DisconnectAll):
                for conn in list(self.conns.values()):
                    self._close(conn)
                resp.done.set()
                continue
            conn = self.conns.get(resp.conn_id)
            if conn is None:
                continue  # closed meanwhile
            if resp.not_before > time.monotonic():
                conn.pending = resp
                continue
            self._start_response(conn, resp)

    def _select_timeout(self) -> float:
        now = time.monotonic()
        t = 0.2
        for conn in self.conns.values():
            for due in (conn.pending.not_before if conn.pending else None,
                        conn.next_write_at if conn.state == "write" and conn.next_write_at > now else None,
                        conn.next_read_at if conn.slow and conn.next_read_at > now else None):
                if due is not None:
                    t = min(t, max(0.0, due - now))
        return t

    def _run_timers(self) -> None:
        now = time.monotonic()
        for conn in list(self.conns.values()):
            if conn.pending is not None and conn.pending.not_before <= now:
                resp, conn.pending = conn.pending, None
                self._start_response(conn, resp)
            if conn.id not in self.conns:
                continue
            if conn.state == "write" and conn.events == 0 and conn.next_write_at <= now:
                self._set_events(conn, WRITE)
            if conn.state == "read" and conn.slow and conn.events == 0 and conn.next_read_at <= now:
                self._set_events(conn, READ)

    # -- reading ----------------------------------------------------------------------------
    def _read(self, conn: Conn) -> None:
        if conn.state != "read":
            self._set_events(conn, 0)
            return
        limit = 65536
        if conn.slow:
            if time.monotonic() < conn.next_read_at:
                self._set_events(conn, 0)
                return
            limit = conn.slow[1]
        elif not conn.slow_checked and len(conn.rbuf) < 6 and self.server.script.has("slow_read"):
            limit = 6 - len(conn.rbuf)     # see the api key before reading the rest of the request
        data = conn.sock.recv(limit)
        if not data:
            self._close(conn)
            return
        conn.rbuf += data
        if conn.slow:
            conn.next_read_at = time.monotonic() + conn.slow[0]
            self._set_events(conn, 0)
        self._try_dispatch(conn)

    def _try_dispatch(self, conn: Conn) -> None:
        """Hand over one complete request if the buffer holds one; then mute the connection."""
        buf = conn.rbuf
        if len(buf) < 4:
            return
        (size,) = struct.unpack_from(">i", buf, 0)
        if size < 0 or size > self.server.max_request_size:
            log.info("connection %d: bad request size %d, closing", conn.id, size)
            self.server.protocol_errors.append((conn.id, f"bad request size {size}"))
            self._close(conn)
            return
        if not conn.slow_checked and len(buf) >= 6:
            conn.slow_checked = True
            (api_key,) = struct.unpack_from(">h", buf, 4)
            acts = self.server.script.take({"api_key": api_key}, None, kinds={"slow_read"})
            if acts:
                conn.slow = (acts[-1].delay, acts[-1].chunk)
                conn.next_read_at = time.monotonic() + conn.slow[0]
                self._set_events(conn, 0)
        if len(buf) < 4 + size:
            return
        payload = bytes(buf[4:4 + size])
        del buf[:4 + size]
        conn.slow_checked = False
        conn.slow = None
        conn.state = "busy"
        self._set_events(conn, 0)
        self.server.request_queue.put(RawRequest(conn.id, self, payload, time.monotonic()))

    # -- writing ----------------------------------------------------------------------------
    def _start_response(self, conn: Conn, resp: Response) -> None:
        if resp.close_before:
            self._close(conn)
            return
        if resp.data is None:
            self._resume_reading(conn)
            return
        conn.out = memoryview(resp.data)
        conn.out_pos = 0
        conn.out_end = len(resp.data) if resp.close_after is None else min(len(resp.data), resp.close_after)
        conn.close_after = resp.close_after is not None
        conn.chunk = resp.chunk
        conn.pause = resp.pause
        conn.next_write_at = 0.0
        conn.state = "write"
        if conn.out_end == 0:
            self._finish_write(conn)
            return
        self._set_events(conn, WRITE)

    def _write(self, conn: Conn) -> None:
        if conn.state != "write":
            return
        now = time.monotonic()
        if now < conn.next_write_at:
            self._set_events(conn, 0)
            return
        n = conn.out_end - conn.out_pos
        if conn.chunk:
            n = min(n, conn.chunk)
        sent = conn.sock.send(conn.out[conn.out_pos:conn.out_pos + n])
        conn.out_pos += sent
        if conn.out_pos >= conn.out_end:
            self._finish_write(conn)
        elif conn.chunk and conn.pause > 0:
            conn.next_write_at = now + conn.pause
            self._set_events(conn, 0)

    def _finish_write(self, conn: Conn) -> None:
        conn.out = None
        if conn.close_after:
            self._close(conn)
            return
        self._resume_reading(conn)

    def _resume_reading(self, conn: Conn) -> None:
        conn.state = "read"
        self._set_events(conn, READ)
        self._try_dispatch(conn)   # a pipelined request may already be buffered

    # -- bookkeeping ------------------------------------------------------------------------
    def _set_events(self, conn: Conn, events: int) -> None:
        if events == conn.events:
            return
        if conn.events == 0:
            self.selector.register(conn.sock, events, conn)
        elif events == 0:
            self.selector.unregister(conn.sock)
        else:
            self.selector.modify(conn.sock, events, conn)
        conn.events = events

    def _close(self, conn: Conn) -> None:
        if self.conns.pop(conn.id, None) is None:
            return
        if conn.events:
            try:
                self.selector.unregister(conn.sock)
            except (KeyError, ValueError, OSError):
                pass
            conn.events = 0
        try:
            conn.sock.close()
        except OSError:
            pass
        self.server._conn_closed(conn)


class Acceptor(threading.Thread):
    def __init__(self, server, listener: socket.socket, processors: list[Processor]):
        super().__init__(name=f"faultbroker-{server.port_hint}-acceptor", daemon=True)
        self.server = server
        self.listener = listener
        self.processors = processors
        self.selector = selectors.DefaultSelector()
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self.selector.register(listener, READ, "listen")
        self.selector.register(self._wake_r, READ, "wake")
        self.running = True

    def shutdown(self) -> None:
        self.running = False
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass

    def run(self) -> None:
        current = 0
        try:
            while self.running:
                for key, _ in self.selector.select(0.5):
                    if key.data != "listen" or not self.running:
                        continue
                    while True:
                        try:
                            sock, peer = self.listener.accept()
                        except (BlockingIOError, InterruptedError):
                            break
                        except OSError:
                            break
                        if not self.server.accepting:
                            sock.close()       # "broker down": refuse by closing at once
                            continue
                        sock.setblocking(False)
                        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
                        self.processors[current].accept(sock, peer)
                        current = (current + 1) % len(self.processors)
        finally:
            self.selector.close()
            self._wake_r.close()
            self._wake_w.close()


class HandlerPool:
    """Handler threads taking requests off the shared queue (a ``None`` per thread stops them)."""

    def __init__(self, server, n: int):
        self.server = server
        self.threads = [threading.Thread(target=self._run, name=f"faultbroker-{server.port_hint}-handler-{i}",
                                         daemon=True) for i in range(n)]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def _run(self) -> None:
        q = self.server.request_queue
        while True:
            req = q.get()
            if req is None:
                return
            try:
                resp = self.server.handle(req)
            except Exception:
                log.exception("handler failed; closing the connection")
                self.server.handler_errors.append(req)
                resp = Response(req.conn_id, close_before=True)
            req.processor.respond(resp)

    def shutdown(self, timeout: float) -> None:
        for _ in self.threads:
            self.server.request_queue.put(None)
        for t in self.threads:
            t.join(timeout)


class SocketServer:
    """Acceptor + processors + handler pool. Subclasses implement ``handle(RawRequest) -> Response``."""

    max_request_size = 100 * 1024 * 1024

    def __init__(self, host: str = "127.0.0.1", port: int = 0, num_processors: int = 2,
                 num_handlers: int = 2):
        self.listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind((host, port))
        self.listener.listen(128)
        self.listener.setblocking(False)
        self.host, self.port = self.listener.getsockname()[:2]
        self.port_hint = self.port
        self.request_queue: queue.Queue = queue.Queue()
        self.conn_ids = itertools.count(1)
        self.accepting = True
        self.protocol_errors: list = []
        self.handler_errors: list = []
        self.crashed: list = []
        self._conn_lock = threading.Lock()
        self.connections_opened = 0
        self.open_connections: dict[int, tuple] = {}
        self.processors = [Processor(self, i) for i in range(num_processors)]
        self.handlers = HandlerPool(self, num_handlers)
        self.acceptor = Acceptor(self, self.listener, self.processors)
        self._closed = False

    def start(self):
        for p in self.processors:
            p.start()
        self.handlers.start()
        self.acceptor.start()
        return self

    def _conn_opened(self, conn: Conn) -> None:
        with self._conn_lock:
            self.connections_opened += 1
            self.open_connections[conn.id] = conn.peer

    def _conn_closed(self, conn: Conn) -> None:
        with self._conn_lock:
            self.open_connections.pop(conn.id, None)

    def disconnect_all(self) -> None:
        """Close every open client connection (from the processors' own threads) and return once
        they are closed: a request sent after this call cannot reach an old connection."""
        orders = [_DisconnectAll() for _ in self.processors]
        for p, order in zip(self.processors, orders):
            p.respond(order)
        for order in orders:
            order.done.wait(5)

    def handle(self, req: RawRequest) -> Response:  # pragma: no cover - abstract
        raise NotImplementedError

    @property
    def threads(self) -> list[threading.Thread]:
        return [self.acceptor, *self.processors, *self.handlers.threads]

    def close(self, timeout: float = 5.0) -> None:
        if self._closed:
            return
        self._closed = True
        self.acceptor.shutdown()
        self.acceptor.join(timeout)
        try:
            self.listener.close()
        except OSError:
            pass
        self.handlers.shutdown(timeout)
        for p in self.processors:
            p.shutdown()
        for p in self.processors:
            p.join(timeout)
        alive = [t.name for t in self.threads if t.is_alive()]
        if alive:
            raise RuntimeError(f"fault broker threads did not stop: {alive}")


class _DisconnectAll(Response):
    def __init__(self):
        super().__init__(conn_id=-1)
        self.done = threading.Event()
