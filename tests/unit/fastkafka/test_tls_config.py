"""TLS settings: names and aliases, checks at construction, secrets never shown; the TLS session
against a real TLS server (Python's ssl module on a socket pair), frames through it both ways."""
from __future__ import annotations

import socket
import ssl
import threading

import pytest

from fastkafka.config import ProducerConfig
from fastkafka.errors import ConfigError


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    from fastkafka_tools.tlsrig import make_pki

    return make_pki(str(tmp_path_factory.mktemp("pki")))


def cfg(**kw):
    return ProducerConfig(bootstrap_servers="127.0.0.1:9093", **kw)


def test_tls_context_from_files(pki):
    c = cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
            ssl_keyfile=pki.client_key)
    ctx = c.tls_context
    assert isinstance(ctx, ssl.SSLContext)
    assert ctx.minimum_version >= ssl.TLSVersion.TLSv1_2
    assert ctx.verify_mode == ssl.CERT_REQUIRED and ctx.check_hostname
    assert cfg().tls_context is None           # PLAINTEXT: no TLS at all


def test_dotted_aliases(pki):
    c = ProducerConfig({"bootstrap.servers": "h:1", "security.protocol": "ssl",
                        "ssl.ca.location": pki.ca, "ssl.certificate.location": pki.client_cert,
                        "ssl.key.location": pki.client_key_encrypted,
                        "ssl.key.password": pki.client_key_password,
                        "ssl.endpoint.identification.algorithm": "none"})
    assert c.security_protocol == "SSL" and c.ssl_cafile == pki.ca
    assert c.ssl_check_hostname is False and c.tls_context.check_hostname is False
    assert cfg(security_protocol="SSL", ssl_cafile=pki.ca,
               **{"ssl.endpoint.identification.algorithm": "https"}).ssl_check_hostname is True


def test_ssl_context_wins(pki):
    ctx = ssl.create_default_context(cafile=pki.ca)
    c = cfg(security_protocol="SSL", ssl_context=ctx, ssl_cafile=pki.other_ca)
    assert c.tls_context is ctx
    with pytest.raises(ConfigError, match="ssl_context must be an ssl.SSLContext"):
        cfg(security_protocol="SSL", ssl_context="not a context")


@pytest.mark.parametrize("setting", ["ssl_cafile", "ssl_certfile"])
def test_missing_file_names_the_setting(tmp_path, pki, setting):
    missing = str(tmp_path / "nope.pem")
    kw = {"ssl_cafile": pki.ca, "ssl_certfile": pki.client_cert, "ssl_keyfile": pki.client_key}
    kw[setting] = missing
    with pytest.raises(ConfigError, match=rf"{setting} '.*nope.pem' is not a readable file"):
        cfg(security_protocol="SSL", **kw)


def test_bad_files_name_the_setting(tmp_path, pki):
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    with pytest.raises(ConfigError, match="ssl_cafile .* no usable CA certificate"):
        cfg(security_protocol="SSL", ssl_cafile=str(junk))
    with pytest.raises(ConfigError, match="ssl_keyfile .*cannot be loaded"):
        cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
            ssl_keyfile=str(junk))
    # a key that does not belong to the certificate
    with pytest.raises(ConfigError, match="ssl_certfile .*cannot be loaded"):
        cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
            ssl_keyfile=pki.server_key)


def test_encrypted_key_password_is_checked_and_never_shown(pki):
    secret = "wrong-" + pki.client_key_password
    with pytest.raises(ConfigError) as exc:
        cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
            ssl_keyfile=pki.client_key_encrypted, ssl_password=secret)
    assert "ssl_password" in str(exc.value) and secret not in str(exc.value)
    assert pki.client_key_password not in str(exc.value)
    with pytest.raises(ConfigError, match="encrypted and ssl_password is not set"):
        cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
            ssl_keyfile=pki.client_key_encrypted)
    good = cfg(security_protocol="SSL", ssl_cafile=pki.ca, ssl_certfile=pki.client_cert,
               ssl_keyfile=pki.client_key_encrypted, ssl_password=pki.client_key_password)
    assert pki.client_key_password not in repr(good) and "ssl_password=***" in repr(good)
    with pytest.raises(ConfigError) as exc:
        cfg(security_protocol="SSL", ssl_password=12345)
    assert "12345" not in str(exc.value)


def test_tls_settings_need_a_tls_protocol(pki):
    with pytest.raises(ConfigError, match="ssl_cafile given, but security_protocol is PLAINTEXT"):
        cfg(ssl_cafile=pki.ca)
    with pytest.raises(ConfigError, match="security_protocol must be one of"):
        cfg(security_protocol="TLS")
    with pytest.raises(ConfigError, match="ssl_keyfile is set without ssl_certfile"):
        cfg(security_protocol="SSL", ssl_keyfile=pki.client_key)


# ---- the TLS session over a socket pair, against Python's own TLS server -------------------------
def _server_context(pki, cert=None):
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.load_cert_chain(cert or pki.server)
    return ctx


def _pump(session, sock, reader, send_queue=None, *, until, seconds=30):
    import select
    import time

    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if until():
            return
        if send_queue is not None or session.wants_write():
            select.select([sock], [sock], [], 0.05)
        else:
            select.select([sock], [], [], 0.05)
        if not session.established:
            session.handshake(sock)
            continue
        reader.frames.extend(session.read(sock, reader)[0])
        if send_queue is not None:
            reader.tokens.extend(session.write(sock, send_queue))
    raise AssertionError("no progress")


class _Collect:
    def __init__(self, max_size):
        from fastkafka._net.transport import FrameReader

        self.fr = FrameReader(max_size)
        self.frames = []
        self.tokens = []

    def feed(self, data):
        return self.fr.feed(data)


def test_tls_session_frames_both_ways(pki):
    """Frames (size-prefixed) far larger than a TLS record go through the session intact; a
    request's token completes once its ciphertext is written."""
    from fastkafka._net.transport import SendQueue
    from fastkafka._net.tls import TlsSession

    a, b = socket.socketpair()
    a.setblocking(False)
    server_ctx = _server_context(pki)
    payloads = [bytes([i]) * n for i, n in enumerate([1, 100, 16_384, 16_385, 300_000, 2_000_000])]
    received = []

    def server():
        s = server_ctx.wrap_socket(b, server_side=True)
        f = s.makefile("rb")
        for _ in payloads:
            size = int.from_bytes(f.read(4), "big")
            body = f.read(size)
            received.append(body)
            s.sendall(len(body).to_bytes(4, "big") + body[::-1])
        s.close()

    t = threading.Thread(target=server, daemon=True)
    t.start()
    ctx = cfg(security_protocol="SSL", ssl_cafile=pki.ca).tls_context
    session = TlsSession(ctx, "127.0.0.1", "node 1 (127.0.0.1:1)")
    q = SendQueue()
    for i, p in enumerate(payloads):
        q.push([len(p).to_bytes(4, "big"), p], ("token", i))
    col = _Collect(10_000_000)
    _pump(session, a, col, q, until=lambda: len(col.frames) == len(payloads))
    t.join(10)
    assert received == payloads
    assert col.frames == [p[::-1] for p in payloads]
    assert col.tokens == [("token", i) for i in range(len(payloads))]
    a.close()


def test_tls_session_rejects_an_untrusted_server(pki):
    from fastkafka.errors import TlsAuthenticationError
    from fastkafka._net.tls import TlsSession, describe_handshake_error

    a, b = socket.socketpair()
    a.setblocking(False)
    server_ctx = _server_context(pki, pki.expired)

    def server():
        try:
            server_ctx.wrap_socket(b, server_side=True)
        except (ssl.SSLError, OSError):
            pass
        b.close()

    t = threading.Thread(target=server, daemon=True)
    t.start()
    ctx = cfg(security_protocol="SSL", ssl_cafile=pki.ca).tls_context
    session = TlsSession(ctx, "127.0.0.1", "node 1 (127.0.0.1:1)")
    with pytest.raises(ssl.SSLCertVerificationError) as exc:
        _pump(session, a, _Collect(1024), until=lambda: session.established)
    err = describe_handshake_error(exc.value, "node 1 (127.0.0.1:1)", True)
    assert isinstance(err, TlsAuthenticationError) and "expired" in str(err)
    assert "node 1 (127.0.0.1:1)" in str(err)
    a.close()
    t.join(10)


def test_frame_reader_names_tls_bytes_read_as_a_size_prefix():
    """A plaintext client reading a TLS alert: the size prefix is refused before any allocation
    and the error asks whether the port speaks TLS; other oversized prefixes do not say so."""
    from fastkafka._net.transport import FrameReader
    from fastkafka.errors import CorruptFrameError

    for record in (bytes([0x15, 0x03, 0x03, 0x00, 0x02, 0x02, 0x32]),      # alert, TLS 1.2
                   bytes([0x16, 0x03, 0x01, 0x02, 0x00, 0x01])):            # handshake record
        with pytest.raises(CorruptFrameError, match=r"exceeds the maximum of 1048576; .*is this a TLS port\?"):
            FrameReader(1 << 20).feed(record)
    with pytest.raises(CorruptFrameError) as exc:
        FrameReader(1 << 20).feed(bytes([0x7F, 0x00, 0x00, 0x00]))
    assert "TLS" not in str(exc.value)
