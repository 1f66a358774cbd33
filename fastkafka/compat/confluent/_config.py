"""confluent-kafka's configuration dict read as librdkafka reads it, into :class:`fastkafka.Producer`
settings: every producer-relevant property of librdkafka's CONFIGURATION.md (2.16) is honoured,
mapped, accepted and ignored (with the reason, listed in docs/migration.md) or refused naming what
to use; a bad key or value raises ``KafkaException`` with a ``KafkaError`` of code ``_INVALID_ARG``,
as confluent-kafka does.

:func:`translate` is the one entry point: ``(fastkafka settings, the layer's own settings)``.
"""
from __future__ import annotations

import math
from typing import Any

from fastkafka import errors as fk

#: librdkafka's default port of a broker given without one
DEFAULT_PORT = 9092
INT32_MAX = 2**31 - 1

# -- the table ------------------------------------------------------------------------------------
# The layer's own keys (implemented in fastkafka/compat/confluent/_producer.py), any spelling.
OWN = {"error_cb", "stats_cb", "statistics.interval.ms", "logger", "on_delivery",
       "queue.buffering.max.messages", "delivery.report.only.error", "throttle_cb", "oauth_cb"}
OWN_ALIASES = {"dr_cb": "on_delivery", "dr_msg_cb": "on_delivery"}

#: librdkafka key -> fastkafka setting, the value as is (fastkafka checks it)
MAPPED = {
    "bootstrap.servers": "bootstrap_servers", "metadata.broker.list": "bootstrap_servers",
    "client.id": "client_id",
    "acks": "acks", "request.required.acks": "acks",
    "enable.idempotence": "enable_idempotence",
    "compression.type": "compression_type", "compression.codec": "compression_type",
    "batch.size": "batch_size",
    "message.max.bytes": "max_request_size",
    "receive.message.max.bytes": "max_response_size",
    "retries": "retries", "message.send.max.retries": "retries",
    "retry.backoff.ms": "retry_backoff_ms", "retry.backoff.max.ms": "retry_backoff_max_ms",
    "reconnect.backoff.ms": "reconnect_backoff_ms",
    "reconnect.backoff.max.ms": "reconnect_backoff_max_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "metadata.max.age.ms": "metadata_max_age_ms",
    "metadata.recovery.strategy": "metadata_recovery_strategy",
    "metadata.recovery.rebootstrap.trigger.ms": "metadata_recovery_rebootstrap_trigger_ms",
    "partitioner": "partitioner",
    "transactional.id": "transactional_id", "transaction.timeout.ms": "transaction_timeout_ms",
    "security.protocol": "security_protocol",
    "ssl.ca.location": "ssl_cafile", "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile", "ssl.key.password": "ssl_password",
    "ssl.keystore.location": "ssl_keystore_location",
    "ssl.keystore.password": "ssl_keystore_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "sasl.mechanisms": "sasl_mechanism", "sasl.mechanism": "sasl_mechanism",
    "sasl.username": "sasl_plain_username", "sasl.password": "sasl_plain_password",
    "sasl.oauthbearer.token.endpoint.url": "sasl_oauthbearer_token_endpoint_url",
    "sasl.oauthbearer.method": "sasl_oauthbearer_method",
    "sasl.oauthbearer.client.id": "sasl_oauthbearer_client_id",
    "sasl.oauthbearer.client.secret": "sasl_oauthbearer_client_secret",
    "sasl.oauthbearer.client.credentials.client.id": "sasl_oauthbearer_client_id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl_oauthbearer_client_secret",
    "sasl.oauthbearer.scope": "sasl_oauthbearer_scope",
    "sasl.oauthbearer.extensions": "sasl_oauthbearer_extensions",
}

#: librdkafka's Kerberos keys: mapped with sasl.mechanism GSSAPI, ignored otherwise (as librdkafka
#: ignores them); sasl.kerberos.kinit.cmd is checked by fastkafka.config (no command is run)
KERBEROS = {
    "sasl.kerberos.service.name": "sasl_kerberos_service_name",
    "sasl.kerberos.principal": "sasl_kerberos_principal",
    "sasl.kerberos.keytab": "sasl_kerberos_keytab",
    "sasl.kerberos.min.time.before.relogin": "sasl_kerberos_min_time_before_relogin",
    "sasl.kerberos.kinit.cmd": "sasl.kerberos.kinit.cmd",
}

#: keys handled by translate() itself (their value changes form or combines with others)
COMBINED = {
    "linger.ms": "linger_ms (librdkafka's float milliseconds, rounded up)",
    "queue.buffering.max.ms": "linger_ms (librdkafka's float milliseconds, rounded up)",
    "message.timeout.ms": "delivery_timeout_ms (0: infinite); a request is bounded by the "
                          "message's deadline (request_timeout_ms lowered to fit)",
    "delivery.timeout.ms": "delivery_timeout_ms, as message.timeout.ms",
    "request.timeout.ms": "request_timeout_ms (the Produce request's timeout)",
    "socket.timeout.ms": "request_timeout_ms (the lesser of socket.timeout.ms and "
                         "request.timeout.ms bounds a request, as librdkafka bounds a Produce "
                         "request by both)",
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection (capped at "
                                             "1000; librdkafka's default 1000000)",
    "max.in.flight": "max_in_flight_requests_per_connection, as max.in.flight.requests.per.connection",
    "queue.buffering.max.kbytes": "buffer_memory (kbytes * 1024); produce() raises BufferError "
                                  "when it is full",
    "compression.level": "compression_level (-1, librdkafka's codec default: fastkafka's default)",
    "connections.max.idle.ms": "connections_max_idle_ms (0, librdkafka's 'never': never)",
    "topic.metadata.refresh.interval.ms": "metadata_max_age_ms when that is not given (-1: never)",
    "default.topic.config": "its topic settings merged in (deprecated in confluent-kafka); they "
                            "win over the same settings at the top level, as in confluent-kafka",
    "ssl.ca.pem": "ssl_truststore_certificates with ssl_truststore_type PEM",
    "ssl.certificate.pem": "ssl_keystore_certificate_chain with ssl_keystore_type PEM",
    "ssl.key.pem": "ssl_keystore_key with ssl_keystore_type PEM",
    "sasl.oauthbearer.config": "the argument oauth_cb is called with",
    "topic.metadata.propagation.max.ms": "topic_metadata_propagation_max_ms, and the layer's wait "
                                         "before a topic the brokers say does "
                                         "not exist is taken as such (from its first produce()): "
                                         "its waiting records then fail with "
                                         "UNKNOWN_TOPIC_OR_PART and produce() to it raises "
                                         "_UNKNOWN_TOPIC, as librdkafka does",
}

_DEBUG_CONTEXTS = {"generic", "broker", "topic", "metadata", "feature", "queue", "msg", "protocol",
                   "cgrp", "security", "fetch", "interceptor", "plugin", "consumer", "admin", "eos",
                   "mock", "assignor", "conf", "telemetry", "all"}
_CONSUMER = "a consumer property: librdkafka ignores it on a producer, and so does this layer"

#: librdkafka key -> why it is accepted with no effect (any value librdkafka accepts)
IGNORED = {
    "debug": "no librdkafka debug contexts: fastkafka logs to the 'fastkafka' logger (set it to "
             "logging.DEBUG; with logger= this producer's records go to that logger); the "
             "contexts are checked as librdkafka checks them",
    "log_level": "fastkafka's records are made at the 'fastkafka' logger's level: set that",
    "batch.num.messages": "batches are bounded by bytes (batch.size) only; librdkafka's other "
                          "bound (10000 records) is rarely reached before batch.size",
    "sticky.partitioning.linger.ms": "null keys stay on their sticky partition until its batch "
                                     "is sent",
    "message.copy.max.bytes": "record bytes are always copied once, into the batch",
    "topic.metadata.refresh.fast.interval.ms": "a lost leader's metadata is asked again with "
                                               "retry.backoff.ms and its exponential backoff",
    "topic.metadata.refresh.fast.cnt": "deprecated in librdkafka, no longer used",
    "topic.metadata.refresh.sparse": "Metadata requests name only the topics produced to",
    "socket.blocking.max.ms": "deprecated in librdkafka, no longer used",
    "socket.send.buffer.bytes": "the system's default socket buffers are used (librdkafka's "
                                "default 0 means the same)",
    "socket.receive.buffer.bytes": "the system's default socket buffers are used",
    "socket.keepalive.enable": "idle connections are closed by connections.max.idle.ms instead",
    "socket.nagle.disable": "TCP_NODELAY is always set (librdkafka's default true)",
    "socket.max.fails": "a timed-out request closes its connection (librdkafka's default 1)",
    "broker.address.ttl": "names are resolved at each connection attempt",
    "reconnect.backoff.jitter.ms": "deprecated in librdkafka, no longer used",
    "enabled_events": "the C event API does not apply to Python",
    "log.queue": "log records go to logger as they are made",
    "log.thread.name": "log records carry the thread name of the logging module",
    "enable.random.seed": "Python's random module is seeded by Python",
    "log.connection.close": "disconnects are logged at DEBUG by the 'fastkafka' logger",
    "internal.termination.signal": "no librdkafka threads to signal",
    "api.version.request.timeout.ms": "ApiVersions is bounded by "
                                      "socket.connection.setup.timeout.ms",
    "api.version.fallback.ms": "deprecated in librdkafka: brokers are asked for their API versions",
    "broker.version.fallback": "deprecated in librdkafka: brokers are asked for their API versions",
    "allow.auto.create.topics": "a consumer's setting: the producer's Metadata requests let the "
                                "broker create a topic when it is configured to "
                                "(auto.create.topics.enable), as librdkafka's producer does",
    "client.rack": "the producer does not use the rack (no fetch from follower)",
    "enable.metrics.push": "client metrics push (KIP-714) is not implemented: nothing is pushed",
    "queue.buffering.backpressure.threshold": "batches are sent as soon as linger.ms allows",
    "produce.offset.report": "deprecated in librdkafka, no longer used",
    "builtin.features": "checked only as a list of names",
    "ssl.ca.certificate.stores": "a Windows setting",
}
for _k in ("group.id", "group.instance.id", "partition.assignment.strategy", "session.timeout.ms",
           "heartbeat.interval.ms", "group.protocol.type", "group.protocol",
           "group.remote.assignor", "coordinator.query.interval.ms", "max.poll.interval.ms",
           "enable.auto.commit", "auto.commit.interval.ms", "enable.auto.offset.store",
           "queued.min.messages", "queued.max.messages.kbytes", "fetch.wait.max.ms",
           "fetch.queue.backoff.ms", "fetch.message.max.bytes", "max.partition.fetch.bytes",
           "fetch.max.bytes", "fetch.min.bytes", "fetch.error.backoff.ms", "offset.store.method",
           "isolation.level", "consume_cb", "rebalance_cb", "offset_commit_cb",
           "enable.partition.eof", "check.crcs", "auto.commit.enable", "auto.offset.reset",
           "offset.store.path", "offset.store.sync.interval.ms", "consume.callback.max.messages",
           "max.poll.records", "share.acknowledgement.mode"):
    IGNORED[_k] = _CONSUMER

#: (key, value that librdkafka also accepts and that asks for what is done anyway)
_IGNORED_ONLY_VALUES = {
    "broker.address.family": (("any",), "the address family a name resolves to is used; "
                                        "v4/v6 cannot be forced: give an address of that family"),
    "queuing.strategy": (("fifo",), "records are sent in produce order (fifo); lifo "
                                    "(deprecated in librdkafka) is not available"),
    "enable.gapless.guarantee": (("false",), "the idempotent producer never leaves a gap it does "
                                             "not report; the experimental fatal-on-gap mode is "
                                             "not available"),
    "client.dns.lookup": (("use_all_dns_ips",), "every address a name resolves to is tried; "
                                                "resolve_canonical_bootstrap_servers_only is "
                                                "not available (GSSAPI names each broker's "
                                                "service by the host it is reached at)"),
    "api.version.request": (("true",), "brokers are always asked for their API versions"),
    "enable.ssl.certificate.verification": (("true",), "the broker's certificate is always "
                                                       "verified: to trust another CA give "
                                                       "ssl.ca.location, or an ssl_context "
                                                       "built as you need it"),
}

#: librdkafka key -> what to use (refused)
REFUSED = {
    "ssl.cipher.suites": "cipher suites are OpenSSL's defaults: build an ssl.SSLContext with "
                         "set_ciphers() and pass it as ssl_context",
    "ssl.curves.list": "pass an ssl.SSLContext as ssl_context",
    "ssl.sigalgs.list": "pass an ssl.SSLContext as ssl_context",
    "ssl.crl.location": "pass an ssl.SSLContext with load_verify_locations() and verify_flags "
                        "as ssl_context",
    "ssl.providers": "OpenSSL providers cannot be chosen: pass an ssl.SSLContext as ssl_context",
    "ssl.engine.location": "OpenSSL engines cannot be loaded: pass an ssl.SSLContext as "
                           "ssl_context",
    "ssl.engine.id": "OpenSSL engines cannot be loaded: pass an ssl.SSLContext as ssl_context",
    "ssl.certificate.verify_cb": "pass an ssl.SSLContext as ssl_context",
    "https.ca.location": "the OAuth token endpoint is verified with the system's CAs",
    "https.ca.pem": "the OAuth token endpoint is verified with the system's CAs",
    "enable.sasl.oauthbearer.unsecure.jwt": "use sasl_jaas_config with OAuthBearerLoginModule "
                                            "and unsecuredLoginStringClaim_sub, or oauth_cb",
    "plugin.library.paths": "librdkafka plugins cannot be loaded: use interceptors=[...]",
    "topic.blacklist": "filter the topics in your code before produce()",
    "log_cb": "pass logger=",
    "partitioner_cb": "pass partitioner=callable(key, num_partitions, available_partitions)",
    "oauthbearer_token_refresh_cb": "pass oauth_cb",
}
for _k in ("sasl.oauthbearer.grant.type",
           "sasl.oauthbearer.assertion.algorithm", "sasl.oauthbearer.assertion.private.key.file",
           "sasl.oauthbearer.assertion.private.key.passphrase",
           "sasl.oauthbearer.assertion.private.key.pem", "sasl.oauthbearer.assertion.file",
           "sasl.oauthbearer.assertion.claim.aud", "sasl.oauthbearer.assertion.claim.exp.seconds",
           "sasl.oauthbearer.assertion.claim.iss", "sasl.oauthbearer.assertion.claim.jti.include",
           "sasl.oauthbearer.assertion.claim.nbf.seconds", "sasl.oauthbearer.assertion.claim.sub",
           "sasl.oauthbearer.assertion.jwt.template.file",
           "sasl.oauthbearer.metadata.authentication.type", "sasl.oauthbearer.sub.claim.name"):
    REFUSED[_k] = ("the JWT-assertion and metadata OIDC logins are not available: use oauth_cb, "
                   "or sasl.oauthbearer.method=oidc with sasl.oauthbearer.client.id / "
                   ".client.secret and sasl.oauthbearer.token.endpoint.url")

#: the topic-level properties default.topic.config may hold (librdkafka's topic table)
TOPIC_KEYS = {"request.required.acks", "acks", "request.timeout.ms", "message.timeout.ms",
              "delivery.timeout.ms", "queuing.strategy", "produce.offset.report", "partitioner",
              "compression.codec", "compression.type", "compression.level", "auto.commit.enable",
              "enable.auto.commit", "auto.commit.interval.ms", "auto.offset.reset",
              "offset.store.path", "offset.store.sync.interval.ms", "offset.store.method",
              "consume.callback.max.messages", "opaque", "partitioner_cb", "msg_order_cmp"}
REFUSED["msg_order_cmp"] = "records are sent in produce order"
#: C API settings: librdkafka refuses them from a configuration dict, and so does the layer
C_API = ("background_event_cb", "socket_cb", "connect_cb", "closesocket_cb", "open_cb",
         "resolve_cb", "opaque", "default_topic_conf", "oauthbearer_token_refresh_cb",
         "ssl_key", "ssl_certificate", "ssl_ca", "ssl_engine_callback_data",
         "ssl.certificate.verify_cb", "log_cb", "partitioner_cb", "msg_order_cmp")

#: fastkafka settings the layer sets itself: given, they are refused naming why
LAYER_FIXED = {
    "max_block_ms": "produce() never blocks in this layer, as librdkafka's: a record waits in "
                    "the queue for its topic's metadata up to message.timeout.ms; room is "
                    "bounded by queue.buffering.max.kbytes (BufferError at once)",
}


def config_error(message: str) -> Exception:
    """confluent-kafka's error for a bad configuration: ``KafkaException(KafkaError(_INVALID_ARG))``."""
    from fastkafka.compat.confluent._types import KafkaError, KafkaException

    return KafkaException(KafkaError(KafkaError._INVALID_ARG, message))


def _int(key: str, value: Any, lo: int, hi: int) -> int:
    v = value
    if isinstance(v, str):
        try:
            v = int(v.strip())
        except ValueError:
            raise config_error(f'Invalid value for configuration property "{key}"') from None
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, bool) or not isinstance(v, int):
        raise config_error(f'Invalid value for configuration property "{key}"')
    if not lo <= v <= hi:
        raise config_error(f'Configuration property "{key}" value {v} is outside allowed range '
                           f'{lo}..{hi}')
    return v


def _float_ms(key: str, value: Any, lo: float, hi: float) -> int:
    v = value
    if isinstance(v, str):
        try:
            v = float(v.strip())
        except ValueError:
            raise config_error(f'Invalid value for configuration property "{key}"') from None
    if isinstance(v, bool) or not isinstance(v, (int, float)) or math.isnan(v):
        raise config_error(f'Invalid value for configuration property "{key}"')
    if not lo <= v <= hi:
        raise config_error(f'Configuration property "{key}" value {v} is outside allowed range '
                           f'{lo:g}..{hi:g}')
    return int(math.ceil(v))


def _servers(key: str, value: Any) -> str:
    """librdkafka's broker list: CSV of ``[proto://]host[:port]`` (port default 9092)."""
    if isinstance(value, (list, tuple)):
        value = ",".join(str(v) for v in value)
    if not isinstance(value, str):
        raise config_error(f'Invalid value for configuration property "{key}"')
    out = []
    for item in value.split(","):
        item = item.strip()
        if not item:
            continue
        if "://" in item:
            item = item.split("://", 1)[1]
        if item.startswith("["):                            # [v6]:port or [v6]
            host, _, rest = item[1:].partition("]")
            port = rest[1:] if rest.startswith(":") else ""
            item = f"[{host}]:{port or DEFAULT_PORT}"
        elif item.count(":") == 0:
            item = f"{item}:{DEFAULT_PORT}"
        elif item.count(":") > 1:                           # a bare IPv6 address
            item = f"[{item}]:{DEFAULT_PORT}"
        out.append(item)
    return ",".join(out)


def _bool(key: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise config_error(f'Invalid value for configuration property "{key}"')


def _flat(conf: dict) -> dict:
    """``default.topic.config`` merged in: its keys win over the same keys at the top level,
    as in confluent-kafka (which sets the dict as librdkafka's default topic configuration
    after the top-level properties)."""
    dtc = conf.get("default.topic.config", conf.get("default_topic_config"))
    out = {k: v for k, v in conf.items() if k not in ("default.topic.config",
                                                      "default_topic_config")}
    if dtc is not None:
        if not isinstance(dtc, dict):
            raise config_error('Invalid value for configuration property "default.topic.config": '
                               'expected a dict of topic properties')
        for k, v in dtc.items():
            if k not in TOPIC_KEYS:
                raise config_error(f'No such configuration property: "{k}" (in '
                                   f'default.topic.config: a topic property is expected)')
            for alias in _TOPIC_ALIASES.get(k, (k,)):
                out.pop(alias, None)
            out[k] = v
    return out


_TOPIC_ALIASES = {}
for _group in (("acks", "request.required.acks"), ("message.timeout.ms", "delivery.timeout.ms"),
               ("compression.codec", "compression.type")):
    for _k in _group:
        _TOPIC_ALIASES[_k] = _group


def translate(conf: dict) -> tuple[dict, dict, dict]:
    """``(fastkafka settings, layer settings, ignored)`` of confluent-kafka's ``conf``.

    ``layer settings``: the keys of :data:`OWN` (canonical name -> value) plus
    ``sasl.oauthbearer.config``; ``ignored``: the keys accepted with no effect, as given."""
    from fastkafka.config import ALIASES, SETTINGS

    flat = _flat(conf)
    out: dict = {}
    own: dict = {}
    ignored: dict = {}
    given_as: dict = {}

    def put(name: str, value: Any, key: str) -> None:
        if name in out:
            raise config_error(f"{key!r} and {given_as[name]!r} are the same setting ({name}): "
                               f"give one")
        out[name] = value
        given_as[name] = key

    linger = request = socket_t = message_t = None
    kerberos: dict = {}
    for key, value in flat.items():
        if not isinstance(key, str):
            raise config_error(f"configuration keys must be strings, got {key!r}")
        dotted = key
        if key in OWN_ALIASES:
            dotted = OWN_ALIASES[key]
        elif key not in OWN and key.replace("_", ".") in OWN:
            dotted = key.replace("_", ".")
        if dotted in OWN:
            own[dotted] = value
            continue
        if key in KERBEROS:
            kerberos[key] = value
        elif key in MAPPED:
            name = MAPPED[key]
            if name == "bootstrap_servers":
                value = _servers(key, value)
            put(name, value, key)
        elif key in ("linger.ms", "queue.buffering.max.ms"):
            if linger is not None:
                raise config_error("linger.ms and queue.buffering.max.ms are the same setting: "
                                   "give one")
            linger = _float_ms(key, value, 0, 900000)
        elif key in ("message.timeout.ms", "delivery.timeout.ms"):
            if message_t is not None:
                raise config_error("message.timeout.ms and delivery.timeout.ms are the same "
                                   "setting: give one")
            message_t = _int(key, value, 0, INT32_MAX)
        elif key == "request.timeout.ms":
            request = _int(key, value, 1, 900000)
        elif key == "socket.timeout.ms":
            socket_t = _int(key, value, 10, 300000)
        elif key in ("max.in.flight.requests.per.connection", "max.in.flight"):
            put("max_in_flight_requests_per_connection", min(_int(key, value, 1, 1000000), 1000),
                key)
        elif key == "queue.buffering.max.kbytes":
            put("buffer_memory", _int(key, value, 1, INT32_MAX) * 1024, key)
        elif key == "compression.level":
            level = _int(key, value, -1, 12)
            if level != -1:
                put("compression_level", level, key)
        elif key == "connections.max.idle.ms":
            idle = _int(key, value, 0, INT32_MAX)
            put("connections_max_idle_ms", idle if idle > 0 else 2**40, key)
        elif key == "topic.metadata.refresh.interval.ms":
            ignored[key] = value
            refresh = _int(key, value, -1, 3600000)
            if "metadata.max.age.ms" not in flat and "metadata_max_age_ms" not in flat:
                put("metadata_max_age_ms", refresh if refresh > 0 else INT32_MAX, key)
        elif key == "ssl.ca.pem":
            put("ssl_truststore_certificates", value, key)
            out.setdefault("ssl_truststore_type", "PEM")
        elif key == "ssl.certificate.pem":
            put("ssl_keystore_certificate_chain", value, key)
            out.setdefault("ssl_keystore_type", "PEM")
        elif key == "ssl.key.pem":
            put("ssl_keystore_key", value, key)
            out.setdefault("ssl_keystore_type", "PEM")
        elif key == "sasl.oauthbearer.config":
            own[key] = value
        elif key == "topic.metadata.propagation.max.ms":
            own[key] = _int(key, value, 0, 3600000)
            put("topic_metadata_propagation_max_ms", own[key], key)
        elif key == "debug":
            if not isinstance(value, str) or not set(
                    c.strip() for c in value.split(",") if c.strip()) <= _DEBUG_CONTEXTS:
                raise config_error(f'Invalid value "{value}" for configuration property "debug"')
            ignored[key] = value
        elif key == "log_level":
            _int(key, value, 0, 7)
            ignored[key] = value
        elif key == "batch.num.messages":
            _int(key, value, 1, 1000000)
            ignored[key] = value
        elif key in IGNORED:
            ignored[key] = value
        elif key in _IGNORED_ONLY_VALUES:
            values, why = _IGNORED_ONLY_VALUES[key]
            v = value if not isinstance(value, bool) else ("true" if value else "false")
            if not isinstance(v, str) or v.strip().lower() not in values:
                raise config_error(f"{key}={value!r} is not supported by "
                                   f"fastkafka.compat.confluent: {why}")
            ignored[key] = value
        elif key in C_API:
            raise config_error(f'Property "{key}" must be set through dedicated .._set_..() '
                               f'function (a C API setting: in Python, '
                               f'{REFUSED.get(key, "it has no equivalent")})')
        elif key in REFUSED:
            raise config_error(f"{key} is not supported by fastkafka.compat.confluent: "
                               f"{REFUSED[key]}")
        else:
            # fastkafka's own settings (snake_case or dotted) pass through to ProducerConfig
            name = key if key in SETTINGS else ALIASES.get(key)
            if name is None:
                try:
                    from fastkafka.config import canonical_name
                    canonical_name(key)
                except fk.ConfigError as e:
                    text = getattr(e, "message", None) or str(e)
                    hint = text.split(": ", 1)[1] if ": " in text else ""
                    raise config_error(f'No such configuration property: "{key}"'
                                       + (f" ({hint})" if hint else "")) from None
                name = key      # a foreign key fastkafka accepts (ACCEPTED_FOREIGN)
            if name in LAYER_FIXED:
                raise config_error(f"{key} is not supported by fastkafka.compat.confluent: "
                                   f"{LAYER_FIXED[name]}")
            if name in ("linger_ms", "request_timeout_ms", "delivery_timeout_ms"):
                if name == "linger_ms":
                    linger = _float_ms(key, value, 0, INT32_MAX)
                elif name == "request_timeout_ms":
                    request = _int(key, value, 1, INT32_MAX)
                else:
                    message_t = _int(key, value, 1, INT32_MAX)
                continue
            put(name, value, key)
    gssapi = str(out.get("sasl_mechanism") or "").strip().upper() == "GSSAPI"
    for key, value in kerberos.items():
        if gssapi:
            put(KERBEROS[key], value, key)
        else:
            ignored[key] = value
    # timeouts: librdkafka bounds a Produce request by socket.timeout.ms, request.timeout.ms and
    # what is left of the message's timeout; fastkafka's one request_timeout_ms is the least.
    linger = 5 if linger is None else linger
    req = min(t for t in (request, socket_t, 30000 if request is None and socket_t is None
                          else None) if t is not None)
    if message_t is not None:
        deadline = INT32_MAX if message_t == 0 else message_t
        if linger >= deadline:
            linger = deadline - 1
        req = max(1, min(req, deadline - linger))
        out["delivery_timeout_ms"] = deadline
    else:
        # librdkafka's default message.timeout.ms: 300000, or transaction.timeout.ms when
        # transactional.id is set
        default = 300000
        if "transactional_id" in out and out["transactional_id"]:
            default = _int("transaction.timeout.ms", out.get("transaction_timeout_ms", 60000),
                           1000, INT32_MAX)
        out["delivery_timeout_ms"] = max(default, linger + req)
    out["linger_ms"] = linger
    out["request_timeout_ms"] = req
    return out, own, ignored


#: what the layer does with each of its own keys (fastkafka/compat/confluent/_producer.py)
OWN_DOC = {
    "error_cb": "honoured: error_cb(KafkaError) served by poll()/flush() (every broker down as "
                "_ALL_BROKERS_DOWN, authentication failures, a fenced producer)",
    "stats_cb": "honoured: a JSON string in librdkafka's statistics schema, for the fields "
                "fastkafka measures, served by poll()",
    "statistics.interval.ms": "honoured (with stats_cb)",
    "logger": "honoured: this producer's log records go to it",
    "on_delivery": "honoured: the default delivery callback",
    "dr_cb": "honoured, as on_delivery",
    "dr_msg_cb": "honoured, as on_delivery",
    "queue.buffering.max.messages": "honoured: BufferError when this many records wait for "
                                    "their report (0: no limit)",
    "delivery.report.only.error": "honoured",
    "throttle_cb": "honoured: a ThrottleEvent (broker_name, broker_id, throttle_time in "
                   "seconds) from poll() for each broker whose answers carried a throttle time "
                   "since the last poll()",
    "oauth_cb": "mapped: called as oauth_cb(sasl.oauthbearer.config) for each OAUTHBEARER "
                "token; (token, expiry) of its answer are used, principal and extensions are not",
}


def settings_table() -> list[tuple[str, str]]:
    """``(property, what the layer does)`` for every property this module knows: the table of
    docs/migration.md (tests/unit/fastkafka/compat/test_confluent_compat.py checks the two agree)."""
    rows = {}
    for k, doc in OWN_DOC.items():
        rows[k] = doc
    for k, name in MAPPED.items():
        rows[k] = f"mapped to `{name}`"
    for k, doc in COMBINED.items():
        rows[k] = f"mapped to {doc}"
    for k, name in KERBEROS.items():
        rows[k] = (f"mapped to `{name}` with sasl.mechanism GSSAPI (ignored otherwise, as by "
                   f"librdkafka)")
    rows["sasl.kerberos.kinit.cmd"] = (
        "with sasl.mechanism GSSAPI: no command is run (the ticket comes from "
        "sasl.kerberos.keytab in the process, or from the ticket cache your kinit filled); "
        "librdkafka's default command and `kinit` are accepted, another command is refused; "
        "ignored otherwise")
    consumer = sorted(k for k, why in IGNORED.items() if why == _CONSUMER)
    for k, why in IGNORED.items():
        if why != _CONSUMER:
            rows[k] = f"accepted, ignored: {why}"
    for k, (values, why) in _IGNORED_ONLY_VALUES.items():
        rows[k] = (f"accepted as {' / '.join(repr(v) for v in values)}, which is what is done: "
                   f"{why}; another value is refused")
    for k, why in REFUSED.items():
        rows[k] = f"refused: {why}"
    for k in C_API:
        rows[k] = ("refused, as by librdkafka (a C API setting)"
                   + (f": {REFUSED[k]}" if k in REFUSED else ""))
    rows["max.block.ms"] = f"refused: {LAYER_FIXED['max_block_ms']}"
    rows["interceptors"] = ("fastkafka's `interceptors=[obj, ...]` (objects with on_send, "
                            "on_acknowledgement, close; librdkafka's is internal, not settable)")
    out = sorted(rows.items())
    out.append((", ".join(consumer), "accepted, ignored: consumer properties (librdkafka "
                                     "ignores them on a producer)"))
    return out


def settings_markdown() -> str:
    """The table of :func:`settings_table` as markdown rows (``| `key` | answer |``)."""
    lines = ["| librdkafka property | `fastkafka.compat.confluent` |", "|---|---|"]
    for key, answer in settings_table():
        keys = ", ".join(f"`{k}`" for k in key.split(", "))
        lines.append(f"| {keys} | {answer.replace('|', '/')} |")
    return "\n".join(lines)
