# Connection set-up of fastkafka._net.network (included by network.pyx): connect, the handshake
# steps (TLS, ApiVersions, SASL's callbacks), failed attempts and their back-off, authentication
# failures. Module functions taking the client (Cython cannot split a class over includes); the
# client keeps one-line methods for the names fastkafka._net.handshake and .sasl call back.
# Every function here runs on the I/O thread with the GIL held.


def errno_text(err: int) -> str:
    """``"connection refused"`` for ECONNREFUSED: the system's text for a socket error number."""
    try:
        return os.strerror(err).lower()
    except (ValueError, OverflowError):  # pragma: no cover - not an errno
        return f"error {err}"


def connect_error_text(error: BaseException) -> str:
    """A short reason for a failed connection attempt, as a user reads it in an error message."""
    if isinstance(error, socket.gaierror):
        return f"name resolution failed: {error.strerror or error}"
    if isinstance(error, UnicodeError):
        return f"name resolution failed: the host name cannot be encoded ({error})"
    if isinstance(error, TimeoutError):
        return "timed out"
    if isinstance(error, OSError) and error.errno is not None:
        return errno_text(error.errno)
    return str(error)


def _connect(NetworkClient self, Connection conn, int64_t now):
    addr = self._address(conn.node_id)
    if addr is not None:
        conn.host, conn.port = addr
    self.metadata.connection_attempt(conn.host, conn.port)
    sock = None
    try:
        infos = socket.getaddrinfo(conn.host, conn.port, type=socket.SOCK_STREAM)
        # Every address the name resolves to, in the resolver's order: after a failed attempt
        # the next one is tried (as the Java client's client.dns.lookup=use_all_dns_ips), so
        # "localhost" reaches a broker listening on 127.0.0.1 even when ::1 comes first.
        addresses = list(dict.fromkeys((family, sockaddr) for family, _, _, _, sockaddr in infos))
        family, sockaddr = addresses[conn.address_index % len(addresses)]
        sock = socket.socket(family, socket.SOCK_STREAM)
        sock.setblocking(False)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        rc = sock.connect_ex(sockaddr)
    except (OSError, UnicodeError, ValueError) as e:
        # UnicodeError/ValueError: a host name no resolver takes (an over-long label, say).
        if sock is not None:
            sock.close()
        _connect_failed(self, conn, now, e)
        return
    conn.sock = sock
    conn.st.fd = sock.fileno()
    conn.connect_started_ms = now
    conn.st.last_activity_ms = now
    if rc == 0:
        # Loopback connects can complete at once: no connect event will come.
        _connected(self, conn, now)
    elif rc in (errno.EINPROGRESS, errno.EWOULDBLOCK, errno.EAGAIN):
        conn.st.status = CONNECTING
        self.update_interest(conn)
    else:
        sock.close()
        conn.sock = None
        conn.st.fd = -1
        _connect_failed(self, conn, now, OSError(rc, f"connect to {conn.host}:{conn.port}: {errno.errorcode.get(rc, rc)}"))

def _connect_failed(NetworkClient self, Connection conn, int64_t now, error):
    log.debug("connection to node %s (%s:%s) failed: %s", conn.node_id, conn.host, conn.port, error)
    self.metadata.connection_failed(conn.host, conn.port, connect_error_text(error))
    conn.address_index += 1
    conn.st.status = DISCONNECTED
    _schedule_reconnect(self, conn, now)
    self.metadata.last_error = error
    self.metadata.request_update()
    if self.error_hook is not None:
        _attempt_failed(self, now)

def _schedule_reconnect(NetworkClient self, Connection conn, int64_t now):
    conn.failures += 1
    base = self.config.reconnect_backoff_ms
    cap = self.config.reconnect_backoff_max_ms
    delay = min(cap, base * (2 ** min(conn.failures - 1, 20)))
    delay = int(delay * random.uniform(0.8, 1.2))
    conn.next_attempt_ms = now + delay

def _connected(NetworkClient self, Connection conn, int64_t now):
    if _failpoint is not None:
        _failpoint("connected", self, conn)
    sampled_record_c(&self.sampled.g.connections_created, &self.sampled.g.conf, 1, now)
    from fastkafka._net.handshake import ApiVersionsStep, TlsHandshakeStep
    conn.st.status = HANDSHAKE
    conn.handshake = deque([ApiVersionsStep()])
    conn.st.reauth_at_ms = 0
    if self.sasl is not None:
        conn.handshake.extend(self.sasl.steps())
    if self._tls_context is not None:
        conn.handshake.appendleft(TlsHandshakeStep(self._tls_context))
    self.update_interest(conn)
    _next_handshake_step(self, conn, now)

def _next_handshake_step(NetworkClient self, Connection conn, int64_t now):
    if conn.handshake:
        conn.handshake.popleft().start(self, conn, now)
    else:
        conn.st.status = READY
        conn.failures = 0
        self.auth_errors.pop(conn.node_id, None)   # it authenticated (SASL)
        self.metadata.connection_ready(conn.host, conn.port)
        log.debug("connection to node %s ready: %s", conn.node_id, conn)
        if self._all_down_since is not None:
            _brokers_recovered(self, conn, now)

def _on_api_versions(NetworkClient self, Connection conn, step, body, error):
    if error is not None:
        return  # the connection is already being closed with this error
    if _failpoint is not None:
        _failpoint("api_versions", self, conn)
    now = self.now_c()
    if body["error_code"] == UNSUPPORTED_VERSION:
        # The broker answered in v0 format with the ApiVersions range it supports.
        from fastkafka._net.handshake import ApiVersionsStep
        theirs = {e["api_key"]: (e["min_version"], e["max_version"]) for e in body["api_keys"]}
        lo, hi = theirs.get(ApiKey.API_VERSIONS, (0, 0))
        ours_lo, ours_hi = SUPPORTED_VERSIONS[ApiKey.API_VERSIONS]
        retry = min(hi, ours_hi)
        if retry < step.version and retry >= ours_lo:
            conn.handshake.appendleft(ApiVersionsStep(retry))
            _next_handshake_step(self, conn, now)
            return
    if body["error_code"] != 0:
        self._close(conn, now, UnsupportedVersionError(
            f"ApiVersions failed on node {conn.node_id}: error {body['error_code']}"))
        return
    missing = conn.negotiate(body["api_keys"], self.required_apis)
    if missing:
        # Unusable for this client; other nodes keep working. Retried after the longest backoff.
        conn.failures = max(conn.failures, 20)
        if self.error_hook is not None:
            err = UnsupportedVersionError(
                f"node {conn.node_id} ({conn.host}:{conn.port}) cannot be used: it supports no "
                f"version of {', '.join(missing)} that this client speaks")
            err.node, err.host, err.port, err.missing = conn.node_id, conn.host, conn.port, tuple(missing)
            _report(self, now, err)
        self._close(conn, now, InvalidBrokerResponseError(
            f"node {conn.node_id} ({conn.host}:{conn.port}) cannot be used: it supports no "
            f"version of {', '.join(missing)} that this client speaks (it lists "
            + ", ".join(f"{ApiKey(k).name if k in ApiKey._value2member_map_ else k} "
                        f"{conn.api_versions[k][0]}-{conn.api_versions[k][1]}"
                        for k in sorted(conn.api_versions)[:40]) + ")"))
        return
    _next_handshake_step(self, conn, now)

def _authentication_failed(NetworkClient self, Connection conn, int64_t now, error):
    """A handshake step could not authenticate (``error`` is not retriable): close the
    connection, try the node again only after reconnect_backoff_max_ms, and make the error
    known to those waiting on that node (sender: records for it; metadata waits; request())."""
    prev = self.auth_errors.get(conn.node_id)
    # ERROR once; the same failure again (each reconnect_backoff_max_ms) at DEBUG.
    log.log(logging.DEBUG if prev is not None and str(prev) == str(error) else logging.ERROR,
            "%s", error)
    self.stats["authentication_failures"] += 1
    conn.failures = max(conn.failures, 20)   # the longest reconnect backoff
    self.auth_errors[conn.node_id] = error
    if self.error_hook is not None:
        if getattr(error, "node", None) is None:   # (a TLS failure; SASL's name their broker)
            error.node, error.host, error.port = conn.node_id, conn.host, conn.port
        _report(self, now, error)
    self._close(conn, now, error, failure=f"authentication failed: {error.message}")
    self.metadata.fatal_connection_error(error)   # metadata waits raise it at once


# -- TLS (security_protocol SSL / SASL_SSL) ---------------------------------------------------
def _tls_handshake(NetworkClient self, Connection conn, int64_t now):
    """Advance the TLS handshake of ``conn`` with what its socket has; on completion, the next
    handshake step (ApiVersions) starts. Bounded by socket_connection_setup_timeout_ms."""
    try:
        done = conn._tls.handshake(conn.sock)
    except (ssl.SSLError, OSError, EOFError) as e:
        _tls_close(self, conn, now, e)
        return
    conn.st.last_activity_ms = now
    if done:
        path = conn._tls.data_path
        self.stats["tls_" + path] += 1
        if conn._tls.pipe is not None:
            log.debug("TLS handshake with node %s done (%s, %s); data path: openssl_direct",
                      conn.node_id, conn._tls.sslobj.version(), conn._tls.sslobj.cipher()[0])
        else:
            log.debug("TLS handshake with node %s done (%s, %s); data path: ssl_module (%s)",
                      conn.node_id, conn._tls.sslobj.version(), conn._tls.sslobj.cipher()[0],
                      conn._tls.fallback_reason)
        self.update_interest(conn)
        _next_handshake_step(self, conn, now)
    else:
        self.update_interest(conn)

def _tls_close(NetworkClient self, Connection conn, int64_t now, error):
    """Close ``conn`` after a TLS failure, with its typed error. After the handshake (a record that
    does not decrypt, an alert, a close in the middle of a record) a TlsError, retried like a
    disconnect. During the handshake, one that retrying does not fix
    (an untrusted certificate, a client certificate refused: TlsAuthenticationError) is an
    authentication failure: the node is retried only after reconnect_backoff_max_ms, and
    metadata waits, admin requests and the records queued for that node fail with it at once."""
    from fastkafka._net.tls import describe_data_error, describe_handshake_error
    where = f"node {conn.node_id} ({conn.host}:{conn.port})"
    if conn._tls is not None and conn._tls.established:
        exc = describe_data_error(error, where, bool(conn._tls.check_hostname))
    else:
        exc = describe_handshake_error(error, where, bool(conn._tls and conn._tls.check_hostname))
    if exc.retriable:
        self._close(conn, now, exc)
    else:
        _authentication_failed(self, conn, now, exc)


# -- errors that belong to no single record (error_hook: the producer's on_error) -----------------
def _report(NetworkClient self, int64_t now, error):
    """Hand ``error`` to error_hook with the completions of this poll (after the I/O: the hook
    never runs in the middle of a connection's state change)."""
    self._completions.append((self.error_hook, now, error))

def _attempt_failed(NetworkClient self, int64_t now):
    """A connection attempt failed. When now every broker known (from metadata, or the bootstrap
    addresses) has failed its last attempt since it was last connected, no broker can be reached:
    reported once, at this transition (the attempts that follow change nothing until a connection
    is ready again: _brokers_recovered). A broker not tried since its connection was lost, or never
    tried, is not known to be down; the metadata refresh a lost connection asks for tries them."""
    if self._all_down_since is not None:
        return
    brokers = self.metadata.cluster.brokers
    if not brokers:
        return
    for node in brokers:
        c = self.connections.get(node)
        if c is None or (<Connection>c).failures == 0:
            return
    self._all_down_since = now
    from fastkafka._net.cluster import format_address
    from fastkafka.errors import AllBrokersDownError
    last = self.metadata.connection_errors()
    down = {}
    for b in brokers.values():
        addr = format_address(b.host, b.port)
        down[addr] = last.get(addr, "unreachable")
    text = ", ".join(f"{addr} ({why})" for addr, why in down.items())
    n = len(down)
    error = AllBrokersDownError(
        f"all {n} known broker{'s' if n != 1 else ''} down: {text}; still trying, records wait "
        f"up to delivery_timeout_ms", brokers=down)
    log.warning("%s", error)
    _report(self, now, error)

def _brokers_recovered(NetworkClient self, Connection conn, int64_t now):
    """A connection is ready after every broker was down: the outage ends (reported once)."""
    from fastkafka.errors import BrokersRecovered
    down_ms = max(now - self._all_down_since, 0)
    self._all_down_since = None
    notice = BrokersRecovered(
        f"node {conn.node_id} ({conn.host}:{conn.port}) is reachable again after no broker could "
        f"be reached for {down_ms} ms", node=conn.node_id, host=conn.host, port=conn.port,
        down_ms=down_ms)
    log.warning("%s", notice)
    _report(self, now, notice)


# -- windowed statistics of requests and answers (fastkafka._net.sampled) -------------------------

cdef inline void _record_io(NetworkClient self, Connection conn, bint answer, double nbytes,
                            int64_t now) noexcept:
    """A request queued (``answer`` False) or an answer read, of ``nbytes`` bytes, on ``conn``.
    Produce requests of batches are counted by produce_send_c, their GIL-free answers by the
    GIL-free turn."""
    cdef ProducerSampled *g = &self.sampled.g
    sampled_record_c(&g.responses if answer else &g.requests, &g.conf, nbytes, now)
    if conn.st.nm != NULL:
        sampled_record_c(&conn.st.nm.responses if answer else &conn.st.nm.requests, &g.conf,
                         nbytes, now)


cdef inline void _record_produce_answer(NetworkClient self, Connection conn, double latency,
                                        int64_t throttle, int64_t now) noexcept:
    """A Produce answer read with the GIL: its latency (ms since queued, to the microsecond) and
    throttle time."""
    cdef ProducerSampled *g = &self.sampled.g
    sampled_record_c(&g.latency, &g.conf, latency, now)
    sampled_record_c(&g.throttle, &g.conf, throttle, now)
    if conn.st.nm != NULL:
        sampled_record_c(&conn.st.nm.latency, &g.conf, latency, now)
