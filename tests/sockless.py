"""A real NetworkClient whose connection to node 1 is READY without a socket, for unit tests of the
sender's Produce path: no I/O, bytes in and out (the connection is a state machine fed frames)."""
import struct

from fastkafka._net.cluster import Metadata
from fastkafka._net.connection import Connection, State
from fastkafka._net.network import NetworkClient
from fastkafka.config import ProducerConfig
from fastkafka.protocol import ApiKey


class SocklessClient:
    """A real NetworkClient whose connection to node 1 is READY without a socket, fed bytes: a
    request the sender queues stays on the connection's send queue (taken here as bytes, as if
    written), and an answer is fed to the connection as a frame, the way the client feeds what it
    reads, then handed to the produce handler."""

    def __init__(self, version, response_frame=None, clock=None, **config):
        """``version``: the highest Produce version the "broker" speaks; ``response_frame(version,
        body, correlation_id)``: encodes an answer (for :meth:`answer`); ``clock``: the network
        client's (a test's fake clock); ``config``: ProducerConfig settings."""
        cfg = ProducerConfig(bootstrap_servers="127.0.0.1:9", client_id="unit", **config)
        md = Metadata(cfg.bootstrap_servers, cfg.metadata_max_age_ms, cfg.retry_backoff_ms)
        kw = {} if clock is None else {"clock": clock}
        self.net = NetworkClient(cfg, md, manage_metadata=False, **kw)
        self.version = version
        self.response_frame = response_frame
        self.conn = Connection(1, "h", 9, 1 << 20)
        self.conn.state = State.READY
        self.conn.negotiate([{"api_key": int(ApiKey.PRODUCE), "min_version": 3,
                              "max_version": version}], ())
        self.net.connections[1] = self.conn
        self.written = []          # (frame without its size prefix, tokens done)

    def take(self):
        """The bytes queued since the last take, as if the socket took them: one request each."""
        data, tokens = self.conn.send_queue.pop_bytes()
        frames = []
        while data:
            size = struct.unpack(">i", data[:4])[0]
            frames.append(data[4:4 + size])
            data = data[4 + size:]
        self.written.extend(frames)
        return frames, tokens

    def answer(self, response: dict):
        if not self.written:
            self.take()
        corr = struct.unpack(">i", self.written[-1][4:8])[0]
        r, body, _ = self.conn.receive(self.response_frame(self.version, response, corr), 0)
        r.handler = self.net.produce_handler
        r(body, None)
