"""TLS for broker connections (``security_protocol`` SSL and SASL_SSL).

The TLS layer runs on the I/O thread without blocking: each connection's socket stays a plain
non-blocking socket driven by the selector, and an :class:`ssl.SSLObject` between two
:class:`ssl.MemoryBIO`\\ s does the cryptography (``SSLContext.wrap_bio``). :class:`TlsSession`

* drives the handshake (:meth:`TlsSession.handshake`) as a step of the connection state machine,
  bounded by ``socket_connection_setup_timeout_ms`` in :mod:`fastkafka._net.network`;
* encrypts the connection's ``SendQueue`` and writes the ciphertext to the socket; a request's
  token completes once its ciphertext is on the socket;
* decrypts what the socket delivers and frames the plaintext with the connection's
  ``FrameReader``, which checks every size prefix before allocating anything for it.

After the handshake the data phase goes through ``transport.TlsPipe``: the same OpenSSL calls on
the SSL object inside the SSLObject, made with the GIL held (see below). Where the pipe cannot be
attached (``TlsPipe.attach`` returns None), the SSLObject's own ``read`` / ``write`` do the same
work.

Plaintext connections do not use this module at all: their path (``writev`` of the queued buffers,
``read`` into the frame reader) is unchanged.

:func:`build_context` makes the client context from the ``ssl_*`` settings (TLS 1.2 or newer,
certificate verification always on, host name check on unless ``ssl_check_hostname=False``), or
takes ``ssl_context`` as given.
"""
from __future__ import annotations

import os
import socket
import ssl

from fastkafka._net.transport import TlsPipe, fd_recv_into, fd_send, tls_attach_failure
from fastkafka.errors import ConfigError, KafkaError, TlsAuthenticationError, TlsError

__all__ = ["TlsError", "TlsAuthenticationError", "TlsSession", "build_context", "TLS_PROTOCOLS"]

#: security_protocol values that speak TLS to the broker.
TLS_PROTOCOLS = ("SSL", "SASL_SSL")

# The ssl module releases the GIL inside every SSLObject.read/write/pending/do_handshake call;
# getting it back from a thread busy in send() can take up to the interpreter's switch interval
# (5 ms), once per call. Measured on the send() loop over TLS, those hand-offs (write, read and
# pending, on top of the selector's) made each turn of the I/O thread several times longer than on
# a plaintext connection, so requests left later and flush() waited for a backlog. TlsPipe makes
# the calls with the GIL held: the one hand-off per turn left is the selector's, as in plaintext.
# Without the pipe, the TLS layer makes as few SSLObject calls as it can: plaintext is encrypted in
# pieces of up to _WRITE_CHUNK (many 16 KiB TLS records per call), decrypted records are taken
# while the incoming BIO holds bytes (no call that only ends in SSLWantReadError, no pending()),
# and the socket is read and written with the transport's GIL-holding fd_recv_into / fd_send.
_WRITE_CHUNK = 1024 * 1024
# Ciphertext read from the socket per read().
_READ_CHUNK = 256 * 1024
# Plaintext taken out of the SSL object per read() (one TLS record holds at most 16 KiB).
_PLAIN_CHUNK = 64 * 1024

PLAINTEXT_PORT_HINT = ("is this a TLS listener? A plaintext listener closes the connection when it "
                       "reads a TLS ClientHello as a request size; use security_protocol=PLAINTEXT "
                       "for it")


def build_context(values: dict) -> ssl.SSLContext:
    """The client SSLContext for the ``ssl_*`` settings in ``values`` (canonical names). A file that
    cannot be read or used raises ConfigError naming its setting (never the password)."""
    given = values.get("ssl_context")
    if given is not None:
        return given
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.verify_mode = ssl.CERT_REQUIRED
    ctx.check_hostname = bool(values.get("ssl_check_hostname", True))
    from fastkafka._net.tls_stores import load_keystore, trust_cadata

    cadata, store_file = trust_cadata(values)   # ssl_truststore_*: PKCS12 or PEM
    cafile = values.get("ssl_cafile")
    if cadata is not None:
        try:
            ctx.load_verify_locations(cadata=cadata)
        except (ssl.SSLError, ValueError) as e:
            raise ConfigError(f"the trust store's certificates cannot be used: {_ssl_reason(e)}") from None
    elif store_file is not None:
        _load_ca_file(ctx, "ssl_truststore_location", store_file)
    elif cafile is not None:
        _load_ca_file(ctx, "ssl_cafile", cafile)
    else:
        ctx.load_default_certs(ssl.Purpose.SERVER_AUTH)
    if load_keystore(ctx, values):             # ssl_keystore_*: PKCS12 or PEM
        return ctx
    certfile, keyfile = values.get("ssl_certfile"), values.get("ssl_keyfile")
    password = values.get("ssl_password")
    if keyfile is not None and certfile is None:
        raise ConfigError("ssl_keyfile is set without ssl_certfile (the client certificate)")
    if password is not None and keyfile is None and certfile is None:
        raise ConfigError("ssl_password is set without ssl_keyfile or ssl_certfile")
    if certfile is not None:
        _check_file("ssl_certfile", certfile)
        if keyfile is not None:
            _check_file("ssl_keyfile", keyfile)
        try:
            ctx.load_cert_chain(certfile, keyfile, password=(lambda: password) if password is not None
                                else _no_password)
        except _NeedsPassword:
            raise ConfigError(f"ssl_keyfile {keyfile or certfile!r} is encrypted and ssl_password "
                              f"is not set") from None
        except (ssl.SSLError, ValueError, TypeError) as e:
            if keyfile is not None:
                what = (f"ssl_certfile {certfile!r} / ssl_keyfile {keyfile!r}: the client "
                        f"certificate and its private key cannot be loaded together")
            else:
                what = (f"ssl_certfile {certfile!r}: the client certificate and its private key "
                        f"(in the same file when ssl_keyfile is not set) cannot be loaded")
            if password is not None:
                what += " (or ssl_password does not decrypt the key)"
            raise ConfigError(f"{what}: {_ssl_reason(e)}") from None
    return ctx


class _NeedsPassword(Exception):
    pass


def _no_password():
    # Called by OpenSSL only for an encrypted key: without this, it would prompt on the terminal.
    raise _NeedsPassword()


def _check_file(setting: str, path) -> None:
    if not isinstance(path, (str, os.PathLike)):
        raise ConfigError(f"{setting} must be a file path, got {type(path).__name__}")
    if not os.path.isfile(path):
        raise ConfigError(f"{setting} {os.fspath(path)!r} is not a readable file")
    if not os.access(path, os.R_OK):
        raise ConfigError(f"{setting} {os.fspath(path)!r} cannot be read (permission denied)")


def _load_ca_file(ctx: ssl.SSLContext, setting: str, path: str) -> None:
    """Trust the PEM CA certificates of ``path`` (the setting ``setting``); ConfigError naming it."""
    _check_file(setting, path)
    try:
        ctx.load_verify_locations(cafile=path)
    except (ssl.SSLError, ValueError) as e:
        raise ConfigError(f"{setting} {path!r} holds no usable CA certificate (PEM expected): "
                          f"{_ssl_reason(e)}") from None


def _ssl_reason(e: BaseException) -> str:
    reason = getattr(e, "reason", None)
    text = getattr(e, "verify_message", None) or (reason.lower().replace("_", " ") if reason else None)
    return text or str(e)


# TLS alerts by which a broker refuses the client's certificate (retrying does not fix them).
_AUTH_ALERTS = ("certificate required", "bad certificate", "unknown ca", "certificate unknown",
                "access denied")


def describe_handshake_error(e: BaseException, where: str, check_hostname: bool) -> KafkaError:
    """The typed error for an exception raised by the TLS layer while connecting to ``where``
    ("node 1 (127.0.0.1:9093)")."""
    if isinstance(e, ssl.SSLCertVerificationError):
        msg = e.verify_message or _ssl_reason(e)
        text = (f"TLS handshake with {where} failed: the broker's certificate was not accepted: "
                f"{msg}")
        if "hostname" in msg.lower() or "ip address mismatch" in msg.lower():
            text += (" (the certificate is for another host name; ssl_check_hostname=False turns "
                     "the host name check off)")
        elif "local issuer" in msg.lower() or "self-signed" in msg.lower() or "self signed" in msg.lower():
            text += " (its CA is not in ssl_cafile / ssl_context)"
        return TlsAuthenticationError(text)
    if isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError, EOFError)):
        return TlsError(f"{where} closed the connection during the TLS handshake: "
                        f"{PLAINTEXT_PORT_HINT}")
    if isinstance(e, ssl.SSLError):
        reason = _ssl_reason(e)
        text = f"TLS handshake with {where} failed: {reason}"
        low = reason.lower()
        if any(alert in low for alert in _AUTH_ALERTS):
            text += (" (the broker refused the client: it requires a client certificate that it "
                     "trusts; set ssl_certfile and ssl_keyfile)")
        elif "wrong version number" in low or "record layer failure" in low or "packet length" in low:
            return TlsError(f"TLS handshake with {where} failed: {reason}: the broker did not "
                            f"answer in TLS; {PLAINTEXT_PORT_HINT}")
        return TlsAuthenticationError(text)
    if isinstance(e, OSError):
        return TlsError(f"TLS handshake with {where} failed: "
                        f"{os.strerror(e.errno).lower() if e.errno else e}")
    return TlsError(f"TLS handshake with {where} failed: {type(e).__name__}: {e}")


def describe_data_error(e: BaseException, where: str, check_hostname: bool) -> KafkaError:
    """The typed error for an exception raised by the TLS layer after the client's side of the
    handshake (the data phase, with or without the GIL): a TlsError, retried like a disconnect;
    but a broker's alert refusing the client's certificate, which TLS 1.3 delivers after the
    client has finished its handshake, is the handshake's TlsAuthenticationError."""
    if isinstance(e, ssl.SSLError) and not isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        if any(alert in _ssl_reason(e).lower() for alert in _AUTH_ALERTS):
            return describe_handshake_error(e, where, check_hostname)
    if isinstance(e, (ssl.SSLEOFError, ssl.SSLZeroReturnError)):
        return TlsError(f"{where} closed the TLS connection")
    if isinstance(e, ssl.SSLError):
        return TlsError(f"TLS data from {where} could not be read: {_ssl_reason(e)} (a record "
                        f"that does not decrypt or a TLS alert; the connection is closed and "
                        f"its requests retried)")
    return TlsError(f"TLS connection to {where} failed: {type(e).__name__}: {e}")


class TlsSession:
    """The TLS state of one connection: an SSLObject between two memory BIOs, the ciphertext not yet
    on the socket and the tokens of requests whose last plaintext byte is in that ciphertext."""

    __slots__ = ("incoming", "outgoing", "sslobj", "established", "out", "out_off", "held_tokens",
                 "where", "check_hostname", "bytes_in", "_rbuf", "_rview", "pipe", "fallback_reason")

    def __init__(self, context: ssl.SSLContext, host: str, where: str):
        self.incoming = ssl.MemoryBIO()
        self.outgoing = ssl.MemoryBIO()
        server_hostname = host if context.check_hostname or _is_name(host) else None
        self.sslobj = context.wrap_bio(self.incoming, self.outgoing, server_side=False,
                                       server_hostname=server_hostname)
        self.established = False
        self.out = b""          # ciphertext taken from the outgoing BIO, not yet fully sent
        self.out_off = 0
        self.held_tokens: list = []
        self.where = where
        self.check_hostname = context.check_hostname
        self.bytes_in = 0
        self._rbuf = bytearray(_READ_CHUNK)
        self._rview = memoryview(self._rbuf)
        self.pipe = None        # TlsPipe, once the handshake is done (None: the SSLObject's calls)
        self.fallback_reason = ""   # why the handshake's end attached no TlsPipe

    @property
    def data_path(self) -> str:
        """The data phase's path: ``"openssl_direct"`` (TlsPipe: OpenSSL called on the queued
        buffers where they lie) or ``"ssl_module"`` (the ssl.SSLObject's own read/write: the
        portable fallback, for a Python whose _ssl object this build cannot read)."""
        return "openssl_direct" if self.pipe is not None else "ssl_module"

    def wants_write(self) -> bool:
        if self.pipe is not None:
            return self.pipe.wants_write
        return self.out_off < len(self.out) or self.outgoing.pending > 0

    # -- socket side ---------------------------------------------------------------------------
    def _flush(self, sock: socket.socket) -> bool:
        """Send pending ciphertext; True when all of it is on the socket."""
        while True:
            if self.out_off >= len(self.out):
                if not self.outgoing.pending:
                    return True
                self.out = self.outgoing.read()
                self.out_off = 0
            n = fd_send(sock.fileno(), self.out, self.out_off)
            if n == 0:
                return False
            self.out_off += n
            if self.out_off < len(self.out):
                return False

    def _fill(self, sock: socket.socket) -> bool:
        """Move what the socket holds into the incoming BIO; True at end of stream."""
        fd = sock.fileno()
        while True:
            n = fd_recv_into(fd, self._rbuf)
            if n < 0:
                return False
            if n == 0:
                self.incoming.write_eof()
                return True
            self.bytes_in += n
            self.incoming.write(self._rview[:n])
            if n < _READ_CHUNK:
                return False

    # -- handshake -----------------------------------------------------------------------------
    def handshake(self, sock: socket.socket) -> bool:
        """Advance the handshake with what the socket has; True once it is complete. Raises the
        ssl/OS exception of a failure (see :func:`describe_handshake_error`)."""
        eof = self._fill(sock)
        try:
            self.sslobj.do_handshake()
            self.established = True
        except ssl.SSLWantReadError:
            if eof:
                self._flush_quietly(sock)
                raise EOFError("end of stream during the TLS handshake") from None
        except ssl.SSLError:
            self._flush_quietly(sock)   # the alert telling the broker why
            raise
        self._flush(sock)
        if self.established:
            self._attach_pipe()
        return self.established

    def _attach_pipe(self) -> None:
        pipe = TlsPipe.attach(self.sslobj)
        if pipe is None:
            self.fallback_reason = tls_attach_failure()
            return
        if self.out_off < len(self.out):   # ciphertext of the handshake's last flight goes first
            pipe.put_ciphertext(memoryview(self.out)[self.out_off:])
        self.out, self.out_off = b"", 0
        self.pipe = pipe

    def _flush_quietly(self, sock):
        try:
            self._flush(sock)
        except OSError:
            pass

    # -- data ----------------------------------------------------------------------------------
    def write(self, sock: socket.socket, send_queue) -> list:
        """Encrypt and send what ``send_queue`` holds, as far as the socket takes it. Returns the
        tokens of requests now fully on the socket. Raises OSError / ssl.SSLError."""
        done: list = []
        pipe = self.pipe
        fd = sock.fileno() if pipe is not None else -1
        while True:
            if not (pipe.flush(fd) if pipe is not None else self._flush(sock)):
                return done
            if self.held_tokens:
                done.extend(self.held_tokens)
                self.held_tokens = []
            if not send_queue.has_pending():
                return done
            if pipe is not None:     # encrypted where the buffers lie (TlsPipe)
                self.held_tokens.extend(pipe.encrypt(send_queue, _WRITE_CHUNK))
                continue
            data, tokens = send_queue.pop_bytes(_WRITE_CHUNK)
            if data:
                self.sslobj.write(data)
            self.held_tokens.extend(tokens)

    def read(self, sock: socket.socket, reader) -> tuple[list, bool]:
        """Read, decrypt and frame what the socket has. Returns (frames, eof)."""
        if self.pipe is not None:
            return self.pipe.read(sock.fileno(), reader)
        eof = self._fill(sock)
        frames: list = []
        incoming = self.incoming
        # One TLS record holds at most 16 KiB of plaintext and SSL_read returns one record's worth
        # per call, so with _PLAIN_CHUNK above that nothing decrypted is left behind in the SSL
        # object (no pending() call, which would give the GIL up once more).
        while incoming.pending or eof:
            try:
                plain = self.sslobj.read(_PLAIN_CHUNK)
            except ssl.SSLWantReadError:
                break
            except ssl.SSLZeroReturnError:   # the broker's close_notify
                eof = True
                break
            except ssl.SSLEOFError:
                eof = True
                break
            if not plain:
                eof = True
                break
            frames.extend(reader.feed(plain))
        if self.outgoing.pending:   # TLS 1.3 post-handshake messages (key update) to answer
            self._flush(sock)
        return frames, eof


def _is_name(host: str) -> bool:
    """True for a DNS name (sent as SNI), False for an IP address literal."""
    try:
        socket.inet_pton(socket.AF_INET6 if ":" in host else socket.AF_INET, host)
        return False
    except OSError:
        return True

