"""A local broker (tansu or noida-db) behind Debian's stunnel4 (OpenSSL): a real TLS endpoint.

``broker_behind_stunnel(kind, certs, directory)`` starts one broker process and one stunnel process
with one TLS service per certificate in ``certs`` (each on its own port, forwarding to the broker)
and yields the services' addresses. The broker must advertise the LAST service's address in
metadata, since a client connects to what metadata names:

* tansu takes ``--advertised-listener-url``;
* noida-db advertises the address it binds and has no option for another: it gets an
  :class:`AdvertisingProxy` between stunnel and itself, which rewrites noida's own address in every
  response (Metadata, DescribeCluster, FindCoordinator) to the TLS service's.
"""
from __future__ import annotations

import contextlib
import shutil
import socket
import struct
import subprocess
import threading
import time

__all__ = ["AdvertisingProxy", "broker_behind_stunnel", "STUNNEL_KINDS"]

STUNNEL_KINDS = ("tansu", "noida")


class AdvertisingProxy:
    """Forwards 127.0.0.1:``port`` to 127.0.0.1:``target_port``; in every response frame, the
    broker address 127.0.0.1:``target_port`` (a Kafka string followed by an int32 port, as in
    Metadata, DescribeCluster and FindCoordinator) becomes 127.0.0.1:``advertised_port``. Host
    and port keep their sizes, so frames are rewritten in place."""

    HOST = b"127.0.0.1"

    def __init__(self, target_port: int, advertised_port: int):
        self.target_port = target_port
        self.old = self.HOST + struct.pack(">i", target_port)
        self.new = self.HOST + struct.pack(">i", advertised_port)
        self.rewritten = 0
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self._socks: list[socket.socket] = []
        self._threads: list[threading.Thread] = []
        self._lock = threading.Lock()
        self._closed = False
        self._accept_thread = threading.Thread(target=self._accept, name="advertising-proxy",
                                               daemon=True)
        self._accept_thread.start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port), timeout=5)
                upstream.settimeout(None)
            except OSError:
                client.close()
                continue
            with self._lock:
                if self._closed:
                    client.close()
                    upstream.close()
                    return
                self._socks += [client, upstream]
                for target, args in ((self._pipe, (client, upstream)),
                                     (self._responses, (upstream, client))):
                    t = threading.Thread(target=target, args=args, daemon=True)
                    self._threads.append(t)
                    t.start()

    @staticmethod
    def _recv_exact(s: socket.socket, n: int) -> bytes | None:
        buf = bytearray()
        while len(buf) < n:
            chunk = s.recv(n - len(buf))
            if not chunk:
                return None
            buf += chunk
        return bytes(buf)

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                dst.sendall(data)
        except OSError:
            pass
        self._shut(src, dst)

    def _responses(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while True:
                head = self._recv_exact(src, 4)
                if head is None:
                    break
                body = self._recv_exact(src, struct.unpack(">i", head)[0])
                if body is None:
                    break
                if self.old in body:
                    body = body.replace(self.old, self.new)
                    self.rewritten += 1
                dst.sendall(head + body)
        except OSError:
            pass
        self._shut(src, dst)

    @staticmethod
    def _shut(*socks: socket.socket) -> None:
        for s in socks:
            with contextlib.suppress(OSError):
                s.shutdown(socket.SHUT_RDWR)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            socks = list(self._socks)
        with contextlib.suppress(OSError):
            self.listener.shutdown(socket.SHUT_RDWR)
        self.listener.close()
        self._accept_thread.join(5)
        self._shut(*socks)
        for t in self._threads:
            t.join(5)
        for s in socks:
            s.close()


def _stunnel_exe() -> str:
    exe = shutil.which("stunnel4") or shutil.which("stunnel")
    assert exe is not None, "stunnel is not installed (scripts/setup.sh installs stunnel4 with apt)"
    return exe


@contextlib.contextmanager
def broker_behind_stunnel(kind: str, certs, directory):
    """A ``kind`` broker ("tansu" or "noida") behind one stunnel process with one TLS service per
    certificate in ``certs`` (PEM certificate + key files), each on its own port; the broker
    advertises the last service's address. ``directory`` (a pathlib.Path) holds stunnel's
    configuration and log. Yields the services' addresses."""
    from fastkafka_tools.localbroker import LocalBroker, free_port

    if kind not in STUNNEL_KINDS:
        raise ValueError(f"kind must be one of {STUNNEL_KINDS}, not {kind!r}")
    exe = _stunnel_exe()
    ports = [free_port() for _ in certs]
    proxy = None
    if kind == "tansu":
        broker = LocalBroker(kind="tansu", advertised_port=ports[-1]).start(timeout=20)
        backend = broker.port
    else:
        broker = LocalBroker(kind="noida").start(timeout=20)
        proxy = AdvertisingProxy(broker.port, ports[-1])
        backend = proxy.port
    conf = directory / "stunnel.conf"
    conf.write_text("foreground = yes\npid =\n" + "".join(
        f"[kafka{i}]\naccept = 127.0.0.1:{port}\nconnect = 127.0.0.1:{backend}\ncert = {cert}\n"
        for i, (port, cert) in enumerate(zip(ports, certs))))
    log_path = directory / "stunnel.log"
    log = open(log_path, "wb")
    proc = None
    try:
        proc = subprocess.Popen([exe, str(conf)], stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, start_new_session=True)
        deadline = time.monotonic() + 15
        for port in ports:
            while True:
                try:
                    socket.create_connection(("127.0.0.1", port), timeout=0.5).close()
                    break
                except OSError:
                    if proc.poll() is not None or time.monotonic() > deadline:
                        raise RuntimeError(f"stunnel did not start: {log_path.read_text()}")
                    time.sleep(0.05)
        yield [f"127.0.0.1:{port}" for port in ports]
    finally:
        if proc is not None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        log.close()
        if proxy is not None:
            proxy.close()
        broker.stop()
