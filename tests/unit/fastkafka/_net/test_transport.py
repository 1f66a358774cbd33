"""Framing and gathered writes, driven with plain bytes and a real socketpair."""
import socket
import struct

import pytest
from hypothesis import given, strategies as st

from fastkafka._net.transport import FrameReader, SendQueue
from fastkafka.errors import CorruptFrameError


def frame(body: bytes) -> bytes:
    return struct.pack(">i", len(body)) + body


@given(st.lists(st.binary(max_size=300), max_size=20), st.lists(st.integers(1, 50), min_size=1))
def test_frames_survive_any_split(bodies, cuts):
    stream = b"".join(frame(b) for b in bodies)
    r = FrameReader(1 << 20)
    out, pos, i = [], 0, 0
    while pos < len(stream):
        n = cuts[i % len(cuts)]
        out.extend(r.feed(stream[pos:pos + n]))
        pos += n
        i += 1
    assert out == bodies
    assert r.buffered == 0


def test_several_frames_in_one_read_and_half_prefix():
    r = FrameReader(1 << 20)
    data = frame(b"a") + frame(b"bb") + frame(b"ccc")[:2]
    assert r.feed(data) == [b"a", b"bb"]
    assert r.feed(frame(b"ccc")[2:]) == [b"ccc"]


def test_negative_and_oversized_sizes_are_rejected_without_allocating():
    with pytest.raises(CorruptFrameError, match="negative frame size"):
        FrameReader(1024).feed(struct.pack(">i", -5))
    with pytest.raises(CorruptFrameError, match="exceeds the maximum of 1024"):
        FrameReader(1024).feed(struct.pack(">i", 2**31 - 1))


def test_send_queue_gathers_and_resumes_partial_writes():
    a, b = socket.socketpair()
    a.setblocking(False)
    b.setblocking(False)
    a.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 4096)
    q = SendQueue()
    big = bytes(range(256)) * 4096  # 1 MiB: cannot be written in one go
    header = b"HEADER"
    q.push([header, memoryview(big), b"tail"], "req1")
    q.push([b"second"], "req2")
    received = bytearray()
    done = []
    while q.has_pending():
        done.extend(q.write_to(a.fileno()))
        try:
            while True:
                chunk = b.recv(1 << 16)
                if not chunk:
                    break
                received += chunk
        except BlockingIOError:
            pass
    assert done == ["req1", "req2"]
    assert bytes(received) == header + big + b"tail" + b"second"
    assert q.pending_bytes == 0
    a.close()
    b.close()


def test_send_queue_pop_bytes_and_clear():
    q = SendQueue()
    q.push([b"abc", b"def"], 1)
    q.push([b"gh"], 2)
    data, done = q.pop_bytes(4)
    assert data == b"abcd" and done == []
    data, done = q.pop_bytes(3)
    assert data == b"efg" and done == [1]
    assert q.clear() == [2]
    assert not q.has_pending()


def test_reader_reads_from_socket_and_reports_eof():
    a, b = socket.socketpair()
    b.setblocking(False)
    a.sendall(frame(b"x" * 100000) + frame(b"y"))
    r = FrameReader(1 << 20)
    frames = []
    while len(frames) < 2:
        got, eof = r.read_from(b.fileno())
        frames.extend(got)
        assert not eof
    assert frames == [b"x" * 100000, b"y"]
    a.close()
    got, eof = r.read_from(b.fileno())
    assert got == [] and eof
    b.close()


def test_tls_pipe_attach_says_why_it_could_not_attach():
    """TlsPipe.attach returns None (the SSLObject fallback) where it cannot read the SSL*, and
    tls_attach_failure() gives the reason the DEBUG log line and the docs show; a real SSLObject of
    this interpreter attaches and clears the reason."""
    import ssl

    from fastkafka._net.transport import TlsPipe, tls_attach_failure

    class NoInner:
        pass

    assert TlsPipe.attach(NoInner()) is None
    assert "no _sslobj" in tls_attach_failure()

    class ForeignInner:
        _sslobj = object()

    assert TlsPipe.attach(ForeignInner()) is None
    assert "layout of _ssl.object" in tls_attach_failure()

    ctx = ssl.create_default_context()
    sslobj = ctx.wrap_bio(ssl.MemoryBIO(), ssl.MemoryBIO(), server_hostname="localhost")
    assert TlsPipe.attach(sslobj) is not None
    assert tls_attach_failure() == ""
