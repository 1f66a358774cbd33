"""FaultBroker: an in-process Kafka-protocol broker whose responses can be scripted to misbehave.

    with FaultBroker() as b:                                  # its own one-node cluster, port 0
        b.create_topic("t", 3)
        b.script.on(ApiKey.PRODUCE, partition_error(6), times=2)
        b.script.on(ApiKey.PRODUCE, split_frames(chunk=1))
        ... client against b.bootstrap ...
        assert b.cluster.record_count("t") == 10

Several brokers can share a :class:`Cluster`: each registers as a node, Metadata lists all nodes,
and a broker that does not lead a partition answers NOT_LEADER_OR_FOLLOWER for it.

APIs: ApiVersions v0-3 (an unknown version is answered with error 35 in a v0 body, like Kafka),
Metadata, Produce (acks 0 -> no response), InitProducerId, ListOffsets, CreateTopics, DeleteTopics, at
the versions in ``fastkafka.protocol.SUPPORTED_VERSIONS``.

SASL (``FaultBroker(sasl=SaslServer(...))``): SaslHandshake and SaslAuthenticate with PLAIN, SCRAM
(the server side is the independent ``scramp`` package) and OAUTHBEARER (any token in ``tokens``);
until a connection has authenticated, and once its session (``session_lifetime_ms``) has run out,
any other request closes it, as Kafka does. Faults come from the script like for any API (a
``rewrite_response`` on SASL_AUTHENTICATE that changes the server's signature, a ``delay``, a
``disconnect_before_response``).
"""
from __future__ import annotations

import struct
import threading
import time
from dataclasses import dataclass, field

from fastkafka.protocol import SUPPORTED_VERSIONS, ApiKey

from . import cluster as C
from .cluster import Cluster
from .protocol import decode_request, encode_response
from .script import Action, Script
from .server import RawRequest, Response, SocketServer

UNSUPPORTED_VERSION = 35
_SASL_APIS = (ApiKey.SASL_HANDSHAKE, ApiKey.SASL_AUTHENTICATE)
_SASL_FREE = (ApiKey.API_VERSIONS, *_SASL_APIS)   # allowed before authentication
FETCH = 1
ADVERTISE_ONLY = {FETCH: (4, 4)}


@dataclass
class RequestRecord:
    api_key: int
    api_version: int
    correlation_id: int
    client_id: str | None
    conn_id: int
    body: dict | None
    actions: list[Action] = field(default_factory=list)
    received_at: float = 0.0
    response: dict | None = None     # the body answered (before faults), None if none


class SaslServer:
    """What a FaultBroker accepts: ``users`` maps a mechanism (PLAIN, SCRAM-SHA-256, SCRAM-SHA-512)
    to {user: password}; ``tokens`` are the OAUTHBEARER tokens accepted; ``mechanisms`` defaults
    to those configured; ``session_lifetime_ms`` (0 = none) is answered in SaslAuthenticate v1+."""

    def __init__(self, users: dict | None = None, tokens=(), mechanisms=None,
                 session_lifetime_ms: int = 0):
        self.users = {k: dict(v) for k, v in (users or {}).items()}
        self.tokens = set(tokens)
        if mechanisms is None:
            mechanisms = list(self.users) + (["OAUTHBEARER"] if self.tokens else [])
        self.mechanisms = list(mechanisms)
        self.session_lifetime_ms = session_lifetime_ms
        self.lock = threading.Lock()
        self.conns: dict[int, dict] = {}       # conn id -> {"mechanism", "server", "until", "user"}
        self.log: list[tuple] = []             # (conn id, mechanism, user or token, ok)


class FaultBroker(SocketServer):
    """A scriptable test broker (see the module docstring). ``close()`` joins every thread."""

    def __init__(self, cluster: Cluster | None = None, node_id: int | None = None, host: str = "127.0.0.1",
                 port: int = 0, num_processors: int = 2, num_handlers: int = 2,
                 api_versions: dict | None = None, advertise_only: dict | None = None, advertised_host: str | None = None, start: bool = True,
                 sasl: SaslServer | None = None):
        super().__init__(host, port, num_processors, num_handlers)
        self.cluster = cluster if cluster is not None else Cluster()
        self.advertised_host = advertised_host or self.host
        self.node_id = self.cluster.register(node_id, self.advertised_host, self.port)
        self.script = Script()
        self.sasl = sasl
        self.api_versions = {int(k): v for k, v in (api_versions or SUPPORTED_VERSIONS).items()}
        # Advertised, not implemented: librdkafka writes RecordBatch v2 (magic 2) only when the broker
        # lists Fetch >= v4 next to Produce >= v3; without it, it falls back to magic-0 message sets.
        # A Fetch request closes the connection.
        self.advertise_only = dict(ADVERTISE_ONLY) if advertise_only is None else dict(advertise_only)
        self._log_lock = threading.Lock()
        self.requests: list[RequestRecord] = []
        if start:
            self.start()

    # -- conveniences ---------------------------------------------------------------------------
    @property
    def bootstrap(self) -> str:
        return f"{self.advertised_host}:{self.port}"

    def create_topic(self, name: str, partitions: int = 1) -> None:
        err = self.cluster.create_topic(name, partitions)
        if err:
            raise ValueError(f"create_topic({name!r}, {partitions}) -> error {err}")

    def received(self, api_key: int | None = None) -> list[RequestRecord]:
        with self._log_lock:
            return [r for r in self.requests if api_key is None or r.api_key == api_key]

    def batches(self, topic: str, partition: int | None = None):
        return self.cluster.batches(topic, partition)

    def set_down(self) -> None:
        """Refuse new connections and drop the open ones (until ``set_up``)."""
        self.accepting = False
        self.disconnect_all()

    def set_up(self) -> None:
        self.accepting = True

    def close(self, timeout: float = 5.0) -> None:
        try:
            super().close(timeout)
        finally:
            self.cluster.unregister(self.node_id)

    def __enter__(self) -> "FaultBroker":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"<FaultBroker node {self.node_id} at {self.bootstrap}>"

    # -- request handling (handler threads) -------------------------------------------------------
    def handle(self, req: RawRequest) -> Response:
        try:
            header, body = decode_request(req.payload)
        except Exception as e:
            header = getattr(e, "header", None)
            if header is not None and header["api_key"] == ApiKey.API_VERSIONS:
                self._record(header, None, [], req)
                return self._finish(req, header, [], self._api_versions_unsupported(header))
            self.protocol_errors.append((req.conn_id, repr(e)))
            return Response(req.conn_id, close_before=True)
        actions = self.script.take(header, body)
        rec = self._record(header, body, actions, req)
        api_key, version = header["api_key"], header["api_version"]
        if version < self.api_versions.get(api_key, (0, -1))[0] or version > self.api_versions.get(api_key, (0, -1))[1]:
            if api_key == ApiKey.API_VERSIONS:
                return self._finish(req, header, actions, self._api_versions_unsupported(header))
            self.protocol_errors.append((req.conn_id, f"api {api_key} v{version} not advertised"))
            return Response(req.conn_id, close_before=True)
        if self.sasl is not None and api_key not in _SASL_FREE and not self._sasl_session_ok(req.conn_id):
            self.protocol_errors.append((req.conn_id, f"api {api_key} before SASL authentication "
                                                      f"or after the session expired"))
            return Response(req.conn_id, close_before=True)
        handler = self._HANDLERS[api_key]
        result = handler(self, header, body, actions, req) if api_key in _SASL_APIS else \
            handler(self, header, body, actions)
        for a in actions:
            if a.kind == "rewrite_response" and result is not None:
                changed = a.fn(result, header, body)
                result = result if changed is None else changed
        rec.response = result
        if result is None:      # no response (acks=0)
            frame = None
        else:
            corr = header["correlation_id"]
            for a in actions:
                if a.kind == "wrong_correlation_id":
                    corr = (corr + a.delta + 2**31) % 2**32 - 2**31
            frame = encode_response(api_key, version, corr, result)
        return self._finish(req, header, actions, frame)

    def _record(self, header, body, actions, req) -> None:
        rec = RequestRecord(header["api_key"], header["api_version"], header["correlation_id"],
                            header.get("client_id"), req.conn_id, body, list(actions), req.received_at)
        with self._log_lock:
            self.requests.append(rec)
        return rec

    @staticmethod
    def _finish(req: RawRequest, header, actions: list[Action], frame: bytes | None) -> Response:
        resp = Response(req.conn_id, data=frame)
        for a in actions:
            k = a.kind
            if k == "no_response":
                resp.data = None
            elif k == "disconnect_before_response":
                resp.close_before = True
            elif k == "disconnect_mid_response":
                resp.close_after = a.after_bytes
            elif k == "split_frames":
                resp.chunk, resp.pause = a.chunk, a.pause
            elif k == "delay":
                resp.not_before = max(resp.not_before, time.monotonic() + a.seconds)
            elif k == "oversized_size_prefix" and resp.data is not None:
                resp.data = struct.pack(">i", a.size) + resp.data[4:]
        if resp.data is None and resp.close_after is not None:
            resp.close_before = True
        return resp

    @staticmethod
    def _error_override(actions, topic=None, partition=None):
        """The code of a partition_error action covering (topic, partition), and whether to append."""
        for a in actions:
            if a.kind != "partition_error":
                continue
            parts = a.partitions
            if parts is None or partition in parts or (topic, partition) in parts or \
                    (partition is None and topic in parts) or topic in parts:
                return a.code, a.append
        return None, False

    # -- APIs -------------------------------------------------------------------------------------
    def _api_versions_unsupported(self, header) -> bytes:
        lo, hi = self.api_versions[ApiKey.API_VERSIONS]
        return encode_response(ApiKey.API_VERSIONS, 0, header["correlation_id"], {
            "error_code": UNSUPPORTED_VERSION,
            "api_keys": [{"api_key": int(ApiKey.API_VERSIONS), "min_version": lo, "max_version": hi}]})

    def _api_versions(self, header, body, actions):
        code, _ = self._error_override(actions)
        return {"error_code": code or 0, "throttle_time_ms": 0,
                "api_keys": [{"api_key": int(k), "min_version": lo, "max_version": hi}
                             for k, (lo, hi) in sorted({**self.advertise_only, **self.api_versions}.items())]}

    def _metadata(self, header, body, actions):
        cl = self.cluster
        allow_auto = body.get("allow_auto_topic_creation", True)
        requested = body.get("topics")
        with cl.lock:
            if requested is None:
                names = sorted(cl.topics)
            else:
                names = [t["name"] for t in requested if t.get("name")]
            topics = []
            for name in names:
                if name not in cl.topics and allow_auto and cl.auto_create_topics:
                    cl.create_topic(name)
                code, _ = self._error_override(actions, name)
                if name not in cl.topics:
                    topics.append({"error_code": code or C.UNKNOWN_TOPIC_OR_PARTITION, "name": name,
                                   "partitions": []})
                    continue
                parts = []
                for p in range(cl.topics[name]):
                    leader = cl.leaders[(name, p)]
                    parts.append({"error_code": 0, "partition_index": p, "leader_id": leader,
                                  "leader_epoch": cl.leader_epochs.get((name, p), 0),
                                  "replica_nodes": [leader], "isr_nodes": [leader], "offline_replicas": []})
                topics.append({"error_code": code or 0, "name": name, "topic_id": cl.topic_ids[name],
                               "is_internal": False, "partitions": parts})
            brokers = [{"node_id": n, "host": h, "port": p, "rack": None} for n, (h, p) in sorted(cl.nodes.items())]
            return {"throttle_time_ms": 0, "brokers": brokers, "cluster_id": cl.cluster_id,
                    "controller_id": cl.controller_id if cl.controller_id is not None else -1,
                    "topics": topics}

    def _produce(self, header, body, actions):
        cl = self.cluster
        responses = []
        for td in body["topic_data"]:
            name = td["name"]
            presp = []
            for pd in td["partition_data"]:
                p = pd["index"]
                code, append = self._error_override(actions, name, p)
                base_offset = -1
                if code is None or append:
                    leader = cl.leader(name, p)
                    if leader is None:
                        err = C.UNKNOWN_TOPIC_OR_PARTITION
                    elif leader != self.node_id and append != "as_leader":
                        err = C.NOT_LEADER_OR_FOLLOWER
                    else:
                        err, base_offset = cl.append(name, p, pd["records"], self.node_id)
                    if code is None:
                        code = err
                    elif code:
                        base_offset = -1
                entry = {"index": p, "error_code": code, "base_offset": base_offset,
                         "log_append_time_ms": -1, "log_start_offset": 0 if code == 0 else -1,
                         "record_errors": [], "error_message": None}
                if code == C.NOT_LEADER_OR_FOLLOWER:
                    leader = cl.leader(name, p)
                    if leader is not None:
                        entry["current_leader"] = {"leader_id": leader,
                                                   "leader_epoch": cl.leader_epochs.get((name, p), 0)}
                presp.append(entry)
            responses.append({"name": name, "partition_responses": presp})
        if body["acks"] == 0:
            return None
        return {"responses": responses, "throttle_time_ms": 0}

    def _init_producer_id(self, header, body, actions):
        code, _ = self._error_override(actions)
        if code:
            return {"throttle_time_ms": 0, "error_code": code, "producer_id": -1, "producer_epoch": -1}
        pid, epoch = body.get("producer_id", -1), body.get("producer_epoch", -1)
        if pid is not None and pid >= 0 and epoch is not None and epoch >= 0:
            return {"throttle_time_ms": 0, "error_code": 0, "producer_id": pid, "producer_epoch": epoch + 1}
        return {"throttle_time_ms": 0, "error_code": 0, "producer_id": self.cluster.allocate_producer_id(),
                "producer_epoch": 0}

    def _list_offsets(self, header, body, actions):
        cl = self.cluster
        topics = []
        for t in body["topics"]:
            name = t["name"]
            parts = []
            for pr in t["partitions"]:
                p = pr["partition_index"]
                code, _ = self._error_override(actions, name, p)
                entry = {"partition_index": p, "error_code": 0, "timestamp": -1, "offset": -1, "leader_epoch": -1}
                leader = cl.leader(name, p)
                if code:
                    entry["error_code"] = code
                elif leader is None:
                    entry["error_code"] = C.UNKNOWN_TOPIC_OR_PARTITION
                elif leader != self.node_id:
                    entry["error_code"] = C.NOT_LEADER_OR_FOLLOWER
                else:
                    entry["offset"], entry["timestamp"] = cl.offset_for(name, p, pr["timestamp"])
                    entry["leader_epoch"] = cl.leader_epochs.get((name, p), 0)
                parts.append(entry)
            topics.append({"name": name, "partitions": parts})
        return {"throttle_time_ms": 0, "topics": topics}

    def _create_topics(self, header, body, actions):
        out = []
        for t in body["topics"]:
            name = t["name"]
            code, _ = self._error_override(actions, name)
            n = t["num_partitions"]
            if t.get("assignments"):
                n = len(t["assignments"])
            if code is None:
                if body.get("validate_only"):
                    code = C.TOPIC_ALREADY_EXISTS if name in self.cluster.topics else 0
                else:
                    code = self.cluster.create_topic(name, n)
            created = code == 0
            out.append({"name": name, "topic_id": self.cluster.topic_ids.get(name) if created else None,
                        "error_code": code, "error_message": None if created else f"error {code}",
                        "num_partitions": self.cluster.topics.get(name, -1) if created else -1,
                        "replication_factor": 1 if created else -1, "configs": []})
        for o in out:
            if o["topic_id"] is None:
                del o["topic_id"]
        return {"throttle_time_ms": 0, "topics": out}

    def _delete_topics(self, header, body, actions):
        if header["api_version"] >= 6:
            names = [t["name"] for t in body["topics"]]
        else:
            names = list(body["topic_names"])
        out = []
        for name in names:
            code, _ = self._error_override(actions, name)
            if code is None:
                code = self.cluster.delete_topic(name)
            out.append({"name": name, "error_code": code, "error_message": None})
        return {"throttle_time_ms": 0, "responses": out}

    # -- SASL -------------------------------------------------------------------------------------
    def _sasl_session_ok(self, conn_id: int) -> bool:
        with self.sasl.lock:
            st = self.sasl.conns.get(conn_id)
        return bool(st and st.get("until") is not None and
                    (st["until"] == 0 or time.monotonic() * 1000 < st["until"]))

    def _sasl_handshake(self, header, body, actions, req):
        sasl = self.sasl
        if sasl is None:
            return {"error_code": 33, "mechanisms": []}
        mech = body["mechanism"]
        if mech not in sasl.mechanisms:
            return {"error_code": 33, "mechanisms": list(sasl.mechanisms)}
        with sasl.lock:
            st = sasl.conns.setdefault(req.conn_id, {})
            st.update(mechanism=mech, server=None, step=0)
        return {"error_code": 0, "mechanisms": list(sasl.mechanisms)}

    def _sasl_authenticate(self, header, body, actions, req):
        sasl = self.sasl
        st = None
        if sasl is not None:
            with sasl.lock:
                st = sasl.conns.get(req.conn_id)
        if st is None or "mechanism" not in st:
            return {"error_code": 34, "error_message": "no SaslHandshake first", "auth_bytes": b""}
        mech = st["mechanism"]
        data = bytes(body["auth_bytes"])
        lifetime = sasl.session_lifetime_ms if header["api_version"] >= 1 else 0

        def ok(reply=b"", who=None):
            st["until"] = (time.monotonic() * 1000 + lifetime) if lifetime else 0
            sasl.log.append((req.conn_id, mech, who, True))
            return {"error_code": 0, "error_message": None, "auth_bytes": reply,
                    "session_lifetime_ms": lifetime}

        def fail(msg, who=None):
            sasl.log.append((req.conn_id, mech, who, False))
            return {"error_code": 58, "error_message": msg, "auth_bytes": b""}

        if mech == "PLAIN":
            try:
                _, user, password = data.decode("utf-8").split("\0")
            except ValueError:
                return fail("Authentication failed: malformed PLAIN message")
            if sasl.users.get("PLAIN", {}).get(user) == password:
                return ok(who=user)
            return fail("Authentication failed: Invalid username or password", user)
        if mech == "OAUTHBEARER":
            if st.get("step") == 1:
                return fail("Authentication failed: invalid token")
            text = data.decode("utf-8", "replace")
            token = text.split("auth=Bearer ", 1)[-1].split("\x01", 1)[0] if "auth=Bearer " in text else None
            if token in sasl.tokens:
                return ok(who=token)
            st["step"] = 1
            sasl.log.append((req.conn_id, mech, token, False))
            return {"error_code": 0, "error_message": None,
                    "auth_bytes": b'{"status":"invalid_token"}', "session_lifetime_ms": 0}
        from scramp import ScramException, ScramMechanism   # SCRAM-SHA-256 / SCRAM-SHA-512
        users = sasl.users.get(mech, {})
        try:
            if st.get("server") is None:
                m = ScramMechanism(mech)
                infos = {u: m.make_auth_info(pw, iteration_count=4096) for u, pw in users.items()}

                def auth_fn(user):
                    st["user"] = user
                    if user not in infos:
                        raise ScramException("Unknown user")
                    return infos[user]

                st["server"] = m.make_server(auth_fn)
                st["server"].set_client_first(data.decode("utf-8"))
                return {"error_code": 0, "error_message": None,
                        "auth_bytes": st["server"].get_server_first().encode(), "session_lifetime_ms": 0}
            st["server"].set_client_final(data.decode("utf-8"))
            return ok(st["server"].get_server_final().encode(), st.get("user"))
        except ScramException:
            return fail("Authentication failed during authentication due to invalid credentials "
                        f"with SASL mechanism {mech}", st.get("user"))

    _HANDLERS = {
        ApiKey.SASL_HANDSHAKE: _sasl_handshake,
        ApiKey.SASL_AUTHENTICATE: _sasl_authenticate,
        ApiKey.API_VERSIONS: _api_versions,
        ApiKey.METADATA: _metadata,
        ApiKey.PRODUCE: _produce,
        ApiKey.INIT_PRODUCER_ID: _init_producer_id,
        ApiKey.LIST_OFFSETS: _list_offsets,
        ApiKey.CREATE_TOPICS: _create_topics,
        ApiKey.DELETE_TOPICS: _delete_topics,
    }
