"""Producer configuration: pythonic keyword names and Java/librdkafka-style dotted keys.

Every setting has one canonical snake_case name; ``linger_ms`` and ``linger.ms`` are the same setting.
Settings of other clients whose value asks for what this producer does anyway are accepted with no
effect (``ACCEPTED_FOREIGN``); confluent-kafka keys with no setting here are refused naming what to
use instead (``REPLACED_FOREIGN``); a mistyped key names the closest valid one.
Values may be given as their Python type or as strings (as Spark options always are): ``"5"`` for an
integer, ``"true"``/``"false"`` for a boolean. Unknown keys, values of the wrong type or out of range,
and inconsistent combinations raise :class:`~fastkafka.errors.ConfigError` naming the setting.
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from fastkafka._producer.partitioner import PARTITIONERS
from fastkafka._wire.compression import CODECS, LEVEL_RANGES, check_available, validate_level  # noqa: F401 (re-exported)
from fastkafka.errors import ConfigError

INT32_MAX = 2**31 - 1


@dataclass(frozen=True)
class _Setting:
    name: str
    kind: str  # "int", "bool", "str", "acks", "servers", "codec", "opt_int", "partitioner", "callback"
    default: Any
    minimum: int | None = None
    maximum: int | None = None
    doc: str = ""


_SETTINGS = [
    _Setting("bootstrap_servers", "servers", None, doc="host:port[,host:port...] or a list"),
    _Setting("client_id", "str", "fastkafka"),
    _Setting("acks", "acks", -1, doc='"all" (-1), 0 or 1'),
    _Setting("enable_idempotence", "bool", True),
    _Setting("gil_free_io", "bool", True,
             doc="the I/O thread sends the steady state's batches (plaintext, uncompressed, acks "
                 "1 or all, not transactional) without taking the GIL: linger deadlines are met "
                 "while the application thread is busy; False sends every batch from the GIL turn"),
    _Setting("compression_type", "codec", "none", doc="none, gzip, snappy, lz4, zstd"),
    _Setting("compression_level", "opt_int", None),
    _Setting("linger_ms", "int", 5, 0, INT32_MAX),
    _Setting("batch_size", "int", 256 * 1024, 1, 64 * 1024 * 1024),
    _Setting("buffer_memory", "int", 64 * 1024 * 1024, 1024, 2**40),
    _Setting("max_block_ms", "int", 60_000, 0, 2**40),
    _Setting("max_in_flight_requests_per_connection", "int", 5, 1, 1000),
    _Setting("retries", "int", INT32_MAX, 0, INT32_MAX),
    _Setting("retry_backoff_ms", "int", 100, 0, INT32_MAX),
    _Setting("retry_backoff_max_ms", "int", 1000, 0, INT32_MAX,
             doc="cap of the exponential backoff of repeated InitProducerId, Metadata and admin requests"),
    _Setting("delivery_timeout_ms", "int", 120_000, 1, INT32_MAX),
    _Setting("exit_flush_timeout_ms", "int", 5000, 0, INT32_MAX,
             doc="a producer still open at interpreter exit, or dropped without close(), delivers "
                 "what is queued for up to this long; the rest fails with ProducerClosedError and "
                 "a WARNING names how many. 0: nothing is delivered, everything queued fails"),
    _Setting("request_timeout_ms", "int", 30_000, 1, INT32_MAX),
    _Setting("metadata_max_age_ms", "int", 300_000, 0, INT32_MAX),
    _Setting("topic_metadata_propagation_max_ms", "int", 30_000, 0, INT32_MAX,
             doc="how long a send waits for a topic the brokers report unknown (it may be being "
                 "created) before failing with UnknownTopicOrPartitionError, from the first send "
                 "to it; never longer than max_block_ms (librdkafka's "
                 "topic.metadata.propagation.max.ms)"),
    # java_metrics() and stats_cb (fastkafka._net.sampled, docs/observability.md)
    _Setting("metrics_sample_window_ms", "int", 30_000, 1, INT32_MAX,
             doc="the window of one sample of the windowed metrics (java_metrics(): rates, "
                 "averages, maxima), as the Java client's metrics.sample.window.ms"),
    _Setting("metrics_num_samples", "int", 2, 1, 32,
             doc="how many samples the windowed metrics keep, as metrics.num.samples"),
    _Setting("stats_cb", "callback", None,
             doc="callable(dict) given java_metrics() (and metrics() under \"fastkafka-metrics\") "
                 "every statistics_interval_ms, on the I/O thread; one that raises is logged"),
    _Setting("statistics_interval_ms", "int", 0, 0, INT32_MAX,
             doc="how often stats_cb runs (librdkafka's statistics.interval.ms); 0: never"),
    _Setting("max_request_size", "int", 1_048_576, 1024, 2**31 - 1),
    _Setting("connections_max_idle_ms", "int", 540_000, 1, 2**40),
    _Setting("reconnect_backoff_ms", "int", 50, 0, INT32_MAX),
    _Setting("reconnect_backoff_max_ms", "int", 1000, 0, INT32_MAX),
    _Setting("socket_connection_setup_timeout_ms", "int", 10_000, 1, INT32_MAX),
    _Setting("metadata_recovery_strategy", "recovery_strategy", "rebootstrap",
             doc='"rebootstrap": when every broker known from metadata stays unreachable, ask the '
                 'bootstrap addresses again; "none": keep trying the known brokers only'),
    _Setting("metadata_recovery_rebootstrap_trigger_ms", "int", 30_000, 0, INT32_MAX,
             doc="how long every known broker must be unreachable before rebootstrapping"),
    _Setting("max_response_size", "int", 100 * 1024 * 1024, 1024, 2**31 - 1,
             doc="largest response frame accepted before the connection is closed"),
    _Setting("on_error", "callback", None,
             doc="callable(error) for errors that belong to no single record (every broker down "
                 "and back, a failed SASL or TLS authentication, a broker lacking an API the "
                 "producer needs, a fenced or fatally failed producer, broker data loss), each a "
                 "typed fastkafka exception (docs/observability.md); runs on the I/O thread; "
                 "alias error_cb"),
    _Setting("error_report_interval_ms", "int", 60_000, 0, INT32_MAX,
             doc="on_error's rate limit: at most one report per kind of error and broker in this "
                 "time; the number held back rides on the next (error.suppressed) and is counted "
                 "in metrics()['errors_suppressed']; 0: no limit"),
    _Setting("interceptors", "interceptors", None,
             doc="[obj, ...]: objects with on_send(record) -> record, on_acknowledgement(metadata, "
                 "error), close() (the Java client's ProducerInterceptor; fastkafka.interceptors), "
                 "run in order"),
    _Setting("partitioner", "partitioner", "murmur2",
             doc='"murmur2" (Java-compatible for keys, sticky for null keys), librdkafka\'s '
                 '"consistent_random", "consistent", "murmur2_random", "fnv1a", "fnv1a_random" '
                 '(the same placement as librdkafka), "random", '
                 "or a callable(key, num_partitions, available_partitions) -> int"),
    _Setting("key_serializer", "serializer", None,
             doc="callable(key) -> bytes | str | None, applied to every key by send(), produce() "
                 "and send_batch() of lists (kafka-python's shape; also called for None)"),
    _Setting("value_serializer", "serializer", None,
             doc="callable(value) -> bytes | str | None, applied to every value as key_serializer"),
    _Setting("transactional_id", "opt_str", None,
             doc="makes the producer transactional (init_transactions(), begin_transaction(), ...); "
                 "needs idempotence"),
    _Setting("transaction_timeout_ms", "int", 60_000, 1, INT32_MAX,
             doc="how long the broker lets a transaction stay open before aborting it (capped by "
                 "the broker's transaction.max.timeout.ms)"),
    _Setting("security_protocol", "security_protocol", "PLAINTEXT",
             doc="PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL"),
    # TLS (security_protocol SSL / SASL_SSL): fastkafka._net.tls.build_context, checked at construction.
    _Setting("ssl_cafile", "path", None, doc="PEM file of the CA certificates that sign the brokers'"),
    _Setting("ssl_certfile", "path", None, doc="PEM file of the client certificate (mutual TLS)"),
    _Setting("ssl_keyfile", "path", None, doc="PEM file of the client certificate's private key"),
    _Setting("ssl_password", "secret", None, doc="password of an encrypted ssl_keyfile"),
    _Setting("ssl_check_hostname", "hostname_check", True,
             doc="check that the broker's certificate names the host connected to"),
    _Setting("ssl_context", "ssl_context", None,
             doc="a ready ssl.SSLContext; wins over the other ssl_* settings"),
    # Java key and trust stores (fastkafka._net.tls_stores): PKCS12 files, or PEM text in the config.
    _Setting("ssl_keystore_location", "path", None,
             doc="PKCS12 file of the client certificate, its chain and private key (mutual TLS)"),
    _Setting("ssl_keystore_password", "secret", None, doc="password of ssl_keystore_location"),
    _Setting("ssl_keystore_type", "store_type", None,
             doc="PKCS12 (the default with ssl_keystore_location) or PEM (ssl_keystore_key and "
                 "ssl_keystore_certificate_chain); JKS is refused with the keytool command that "
                 "converts it"),
    _Setting("ssl_keystore_key", "secret", None,
             doc="ssl_keystore_type=PEM: the client's private key, PEM text (encrypted with "
                 "ssl_password / ssl.key.password, or not)"),
    _Setting("ssl_keystore_certificate_chain", "opt_str", None,
             doc="ssl_keystore_type=PEM: the client certificate and its chain, PEM text"),
    _Setting("ssl_truststore_location", "path", None,
             doc="PKCS12 file of the CA certificates that sign the brokers'"),
    _Setting("ssl_truststore_password", "secret", None, doc="password of ssl_truststore_location"),
    _Setting("ssl_truststore_type", "store_type", None,
             doc="PKCS12 (the default with ssl_truststore_location) or PEM (ssl_truststore_certificates "
                 "or a PEM ssl_truststore_location)"),
    _Setting("ssl_truststore_certificates", "opt_str", None,
             doc="ssl_truststore_type=PEM: the CA certificates, PEM text"),
    # SASL (security_protocol SASL_PLAINTEXT / SASL_SSL): fastkafka._net.sasl, checked at construction.
    _Setting("sasl_mechanism", "sasl_mechanism", None,
             doc="PLAIN, SCRAM-SHA-256, SCRAM-SHA-512, OAUTHBEARER or GSSAPI"),
    _Setting("sasl_plain_username", "opt_str", None, doc="user name (PLAIN, SCRAM)"),
    _Setting("sasl_plain_password", "secret", None, doc="password (PLAIN, SCRAM); never shown"),
    _Setting("sasl_oauth_token_provider", "token_provider", None,
             doc="OAUTHBEARER: callable() -> (token, expiry as epoch seconds), called again "
                 "before the token expires; or an object with token() -> str (kafka-python's "
                 "and aiokafka's AbstractTokenProvider shape, synchronous), the expiry read from "
                 "the JWT's exp claim, and optional extensions() -> dict; "
                 "fastkafka.aws.MSKIAMTokenProvider for Amazon MSK IAM"),
    _Setting("sasl_jaas_config", "secret", None,
             doc="the Java client's login line (fastkafka._net.jaas): PlainLoginModule / "
                 "ScramLoginModule with username and password, or OAuthBearerLoginModule with "
                 "Kafka's unsecuredLogin* options or clientId / clientSecret / scope (with "
                 "sasl_oauthbearer_token_endpoint_url); never shown"),
    _Setting("sasl_oauthbearer_token_endpoint_url", "opt_str", None,
             doc="OAUTHBEARER: the OAuth token endpoint of the client-credentials login "
                 "(clientId and clientSecret in sasl_jaas_config); tokens are cached until "
                 "shortly before they expire"),
    # GSSAPI (Kerberos): fastkafka._net.kerberos, with the optional gssapi package.
    _Setting("sasl_kerberos_service_name", "str", "kafka",
             doc="GSSAPI: the brokers' Kerberos service (their principal is <service>/<host>@REALM)"),
    _Setting("sasl_kerberos_domain_name", "opt_str", None,
             doc="GSSAPI: the host of the brokers' service principal, instead of each broker's host"),
    _Setting("sasl_kerberos_name", "opt_str", None,
             doc="GSSAPI: the brokers' whole service name, 'service@host' or 'service/host@REALM' "
                 "(instead of sasl_kerberos_service_name and the host)"),
    _Setting("sasl_kerberos_principal", "opt_str", None,
             doc="GSSAPI: the client principal (needed with sasl_kerberos_keytab; else the ticket "
                 "cache's)"),
    _Setting("sasl_kerberos_keytab", "path", None,
             doc="GSSAPI: keytab of sasl_kerberos_principal; the ticket is acquired from it into a "
                 "memory cache of the producer's own, and again before it expires"),
    _Setting("sasl_kerberos_ticket_cache", "opt_str", None,
             doc="GSSAPI without a keytab: the ticket cache kinit filled (default: KRB5CCNAME's)"),
    _Setting("sasl_kerberos_krb5_conf", "path", None,
             doc="GSSAPI: the krb5.conf to use; the process's KRB5_CONFIG is set to it (libkrb5 "
                 "reads that variable; like the JVM's java.security.krb5.conf it holds for the "
                 "whole process)"),
    _Setting("sasl_kerberos_min_time_before_relogin", "int", 60_000, 0, INT32_MAX,
             doc="GSSAPI with a keytab: the ticket is acquired again once less than this many ms "
                 "of its life remain"),
    # OIDC client credentials as native settings (librdkafka's names; fastkafka._net.jaas).
    _Setting("sasl_oauthbearer_method", "opt_str", None,
             doc='OAUTHBEARER: "oidc" gets tokens from sasl_oauthbearer_token_endpoint_url with '
                 'sasl_oauthbearer_client_id / _client_secret / _scope (librdkafka\'s '
                 'sasl.oauthbearer.method); "default" takes sasl_oauth_token_provider or '
                 "sasl_jaas_config"),
    _Setting("sasl_oauthbearer_client_id", "opt_str", None,
             doc="OAUTHBEARER client credentials: the client id at the token endpoint"),
    _Setting("sasl_oauthbearer_client_secret", "secret", None,
             doc="OAUTHBEARER client credentials: the client secret; never shown"),
    _Setting("sasl_oauthbearer_scope", "opt_str", None,
             doc="OAUTHBEARER client credentials: the scope asked of the token endpoint"),
    _Setting("sasl_oauthbearer_extensions", "opt_str", None,
             doc="OAUTHBEARER: SASL extensions (RFC 7628) sent with the token, "
                 '"key=value,key2=value2" (librdkafka\'s form; keys are letters only)'),
    _Setting("sasl_aws_region", "opt_str", None,
             doc="Amazon MSK IAM (sasl.jaas.config with software.amazon.msk.auth.iam.IAMLoginModule, "
                 "or sasl.mechanism=AWS_MSK_IAM): the cluster's region; default: from the "
                 "bootstrap host (*.kafka.<region>.amazonaws.com), else AWS_REGION"),
    _Setting("sasl_login_read_timeout_ms", "opt_int", None, 1, INT32_MAX,
             doc="OAUTHBEARER: bound of one token endpoint request (connect and each read), "
                 "which runs on the I/O thread; default min(request_timeout_ms, 10000)"),
]

#: Settings whose value is never shown (repr, errors, logs).
SECRET_SETTINGS = {"ssl_password", "sasl_plain_password", "sasl_jaas_config",
                   "sasl_oauthbearer_client_secret",
                   "ssl_keystore_password", "ssl_truststore_password", "ssl_keystore_key"}

SETTINGS: dict[str, _Setting] = {s.name: s for s in _SETTINGS}

# Dotted (Java / librdkafka) spellings and a few well-known aliases.
ALIASES: dict[str, str] = {s.name.replace("_", "."): s.name for s in _SETTINGS}
ALIASES.update({
    "max.in.flight.requests.per.connection": "max_in_flight_requests_per_connection",
    "max.in.flight": "max_in_flight_requests_per_connection",
    "queue.buffering.max.ms": "linger_ms",
    "compression.codec": "compression_type",
    "request.required.acks": "acks",
    "message.max.bytes": "max_request_size",
    "message.timeout.ms": "delivery_timeout_ms",
    "socket.connection.setup.timeout.ms": "socket_connection_setup_timeout_ms",
    "retry.backoff.ms": "retry_backoff_ms",
    "enable.idempotence": "enable_idempotence",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.endpoint.identification.algorithm": "ssl_check_hostname",
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "sasl.mechanisms": "sasl_mechanism",
    # The Java client's names (Kafka 4.1+, KIP-1139) of the client-credentials settings
    "sasl.oauthbearer.client.credentials.client.id": "sasl_oauthbearer_client_id",
    "sasl.oauthbearer.client.credentials.client.secret": "sasl_oauthbearer_client_secret",
    # confluent-kafka's error_cb: here it gets the fastkafka exception (.code, .name, .retriable,
    # str()), on the I/O thread, instead of a KafkaError served by poll()
    "error_cb": "on_error",
})




@dataclass(frozen=True)
class _Accepted:
    """A Java-client or librdkafka setting accepted for configs copied from other clients: each of
    ``values`` asks for what this producer does anyway, so it is checked and then has no effect.
    Any other value is a ConfigError naming the key, ``supported`` and the accepted values."""

    values: tuple[str, ...]
    supported: str
    case_sensitive: bool = False
    requires: tuple[str, Any] | None = None  # (setting, value) that must also hold, e.g. the partitioner

    def accepts(self, value: Any) -> bool:
        if value is None:
            value = "null"
        elif isinstance(value, bool):
            value = "true" if value else "false"
        if not isinstance(value, str):
            return False
        value = value.strip()
        if self.case_sensitive:
            return value in self.values
        return value.lower() in {v.lower() for v in self.values}


_KAFKA_INTERNALS = "org.apache.kafka.clients.producer.internals."
_BYTES_SERIALIZER = _Accepted(
    ("org.apache.kafka.common.serialization.ByteArraySerializer", "ByteArraySerializer"),
    "a Java class cannot run here: keys and values are bytes-like or str (sent as UTF-8, as "
    "StringSerializer would) and written as they are; for anything else pass a Python callable, "
    "{name}=callable(obj) -> bytes (kafka-python's shape, e.g. "
    "lambda v: json.dumps(v).encode())",
    case_sensitive=True)

#: Settings of other clients (Java producer, librdkafka) accepted with the values listed: each
#: value describes what this producer already does. Keyed by the dotted name; the snake_case
#: spelling (``security_protocol``) works too. Documented in docs/configuration.md.
ACCEPTED_FOREIGN: dict[str, _Accepted] = {
    "client.dns.lookup": _Accepted(
        ("use_all_dns_ips", "default"),
        "the producer tries every address a bootstrap or broker name resolves to, one after another"),
    "partitioner.class": _Accepted(
        (_KAFKA_INTERNALS + "DefaultPartitioner", _KAFKA_INTERNALS + "BuiltInPartitioner", "null", ""),
        "the built-in partitioner: murmur2 of the key as the Java client, sticky for null keys "
        "(a Java class cannot run here; for your own partitioning pass "
        "partitioner=callable(key, num_partitions, available_partitions) -> int)",
        case_sensitive=True, requires=("partitioner", "murmur2")),
    "check.crcs": _Accepted(
        ("true", "false"), "a consumer setting: the producer writes a CRC-32C into every batch "
        "and reads no records"),
    "api.version.request": _Accepted(
        ("true",), "the producer always asks each broker for its API versions (ApiVersions)"),
    "broker.address.family": _Accepted(
        ("any",), "the producer uses whichever address family a name resolves to"),
    "sasl.login.callback.handler.class": _Accepted(
        ("org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginCallbackHandler",
         "org.apache.kafka.common.security.oauthbearer.secured.OAuthBearerLoginCallbackHandler",
         "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"),
        "the OAUTHBEARER client-credentials login of sasl.oauthbearer.token.endpoint.url is built "
        "in, and so is Amazon MSK IAM (fastkafka.aws.MSKIAMTokenProvider; a Java class cannot "
        "run here)", case_sensitive=True),
    "sasl.kerberos.kinit.cmd": _Accepted(
        ("/usr/bin/kinit", "kinit",
         'kinit -R -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal} || '
         'kinit -t "%{sasl.kerberos.keytab}" -k %{sasl.kerberos.principal}'),
        "no command is run: with sasl_kerberos_keytab the ticket is acquired in the process from "
        "the keytab (what kinit -k -t would do), without one the ticket cache your own kinit "
        "filled is used (KRB5CCNAME or sasl_kerberos_ticket_cache)", case_sensitive=True),
    "sasl.client.callback.handler.class": _Accepted(
        ("software.amazon.msk.auth.iam.IAMClientCallbackHandler",
         "software.amazon.msk.auth.iam.IAMOAuthBearerLoginCallbackHandler"),
        "Amazon MSK IAM is built in (fastkafka.aws.MSKIAMTokenProvider; a Java class cannot run "
        "here)", case_sensitive=True),
    "interceptor.classes": _Accepted(
        ("",), "no interceptors from class names (a Java class cannot run here; pass "
        "interceptors=[obj, ...], objects with on_send(record), on_acknowledgement(metadata, "
        "error), close(): see fastkafka.interceptors)",
        case_sensitive=True),
}
_FOREIGN_SNAKE = {k.replace(".", "_"): k for k in ACCEPTED_FOREIGN}

_UNSUPPORTED_FAMILIES = {
    "ssl.": ("this TLS setting is not supported: TLS is set up with ssl_cafile, ssl_certfile, "
             "ssl_keyfile, ssl_password, ssl_check_hostname, ssl_context (PEM files) or the "
             "PKCS12 / PEM stores ssl_keystore_* and ssl_truststore_*"),
    "sasl.": ("this SASL setting is not supported: SASL is set up with sasl_mechanism, "
              "sasl_jaas_config, sasl_plain_username, sasl_plain_password, "
              "sasl_oauth_token_provider, sasl_oauthbearer_token_endpoint_url or (GSSAPI) "
              "sasl_kerberos_*"),
}


_FASTKAFKA_LOGGER = "the 'fastkafka' logger (logging.getLogger(\"fastkafka\"))"
# confluent-kafka's producer shapes (poll-served callbacks, error_cb, stats_cb, logger, ...)
_COMPAT = "fastkafka.compat.confluent.Producer (confluent-kafka's shapes, only the import changed)"

#: confluent-kafka (librdkafka) keys with no setting here: a configuration copied with one of them
#: fails at construction with what to use instead, never with a guess at a similar key. Keyed by
#: confluent-kafka's spelling; the dotted and snake_case spellings are looked up alike.
#: Documented in docs/migration.md.
REPLACED_FOREIGN: dict[str, str] = {
    "logger": (
        "the producer logs through the logging module, to " + _FASTKAFKA_LOGGER + ": attach "
        "handlers or a level to it instead of passing a logger; counters are in "
        "producer.metrics(); or use " + _COMPAT + ", which routes its records to logger"),
    "log_level": "set the level of " + _FASTKAFKA_LOGGER + " instead",
    "debug": (
        "there are no librdkafka debug contexts: set " + _FASTKAFKA_LOGGER + " to logging.DEBUG"),
    "throttle_cb": (
        "there is no throttle callback: a broker's throttle (KIP-219) is honoured, no request goes "
        "to that broker until it has passed"),
    "oauth_cb": (
        "use sasl_oauth_token_provider=callable() -> (token, expiry as epoch seconds), called "
        "without the config string argument, with sasl_mechanism='OAUTHBEARER'"),
    "queue.buffering.max.messages": (
        "the queue is bounded in bytes, not records: use buffer_memory (bytes, default 64 MiB); "
        "produce() waits up to max_block_ms for room instead of raising BufferError; "
        + _COMPAT + " keeps the message count and its BufferError"),
    "queue.buffering.max.kbytes": (
        "use buffer_memory, in bytes (queue.buffering.max.kbytes * 1024)"),
    "batch.num.messages": "batches are bounded in bytes only: use batch_size (bytes)",
    "on_delivery": ("pass on_delivery (or callback) to each produce() or send() call; or use "
                    + _COMPAT + ", which takes a default on_delivery in its config"),
    "delivery.report.only.error": (
        "pass on_delivery only where you want reports, or a callback that ignores err=None; "
        "or use " + _COMPAT + ", which honours it"),
}


def _replaced(key: str) -> str | None:
    """What to use instead of a confluent-kafka key of REPLACED_FOREIGN, in any spelling."""
    for probe in (key, key.replace("_", "."), key.replace(".", "_")):
        if probe in REPLACED_FOREIGN:
            return REPLACED_FOREIGN[probe]
    return None


SECURITY_PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


def _suggestion(key: str) -> str | None:
    """The valid key closest to a mistyped one (snake_case names, dotted aliases and the accepted
    keys of other clients), in the spelling style of the key given when both exist."""
    normalized = key.strip().lower().replace("-", "_")
    candidates = [*SETTINGS, *ALIASES, *ACCEPTED_FOREIGN, *_FOREIGN_SNAKE]
    for probe in (key, normalized):
        if probe != key and probe in candidates:
            return probe
        match = difflib.get_close_matches(probe, candidates, n=1, cutoff=0.75)
        if match:
            return match[0]
    return None


def canonical_name(key: str) -> str:
    """Map a pythonic or dotted key to its canonical name, or raise ConfigError (naming the closest
    valid key when there is one). Accepted keys of other clients (:data:`ACCEPTED_FOREIGN`) map to
    their dotted name."""
    if not isinstance(key, str):
        raise ConfigError(f"config keys must be strings, got {key!r}")
    if key in SETTINGS:
        return key
    if key in ALIASES:
        return ALIASES[key]
    if key in ACCEPTED_FOREIGN:
        return key
    if key in _FOREIGN_SNAKE:
        return _FOREIGN_SNAKE[key]
    instead = _replaced(key)
    if instead is not None:
        raise ConfigError(f"config key {key!r} (confluent-kafka) is not supported: {instead}")
    msg = f"unknown config key {key!r}"
    hint = _suggestion(key)
    if hint is not None:
        msg += f": did you mean {hint}?"
    else:
        for prefix, why in _UNSUPPORTED_FAMILIES.items():
            if key.replace("_", ".").startswith(prefix):
                msg += f": {why}"
                break
    raise ConfigError(msg)


def _check_foreign(name: str, value: Any, values: dict[str, Any]) -> None:
    spec = ACCEPTED_FOREIGN[name]
    if not spec.accepts(value):
        accepted = ", ".join(repr(v) for v in spec.values)
        raise ConfigError(f"{name}={value!r} is not supported: {spec.supported}; accepted values: {accepted}")
    if spec.requires is not None:
        setting, required = spec.requires
        if values[setting] != required:
            raise ConfigError(
                f"{name}={value!r} asks for {setting}={required!r}, but {setting} is {values[setting]!r}")


def _parse_int(name: str, value: Any) -> int:
    if isinstance(value, bool):
        raise ConfigError(f"{name} must be an integer, got bool {value!r}")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise ConfigError(f"{name} must be an integer, got {type(value).__name__} {value!r}")


def _parse_bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ConfigError(f"{name} must be a boolean (or 'true'/'false'), got {value!r}")


def parse_servers(value: Any) -> list[tuple[str, int]]:
    """Parse "h1:p1,h2:p2" or a list of such strings into (host, port) pairs."""
    if isinstance(value, str):
        items = [v.strip() for v in value.split(",") if v.strip()]
    elif isinstance(value, (list, tuple)):
        items = list(value)
    else:
        raise ConfigError(f"bootstrap_servers must be a string or a list, got {value!r}")
    if not items:
        raise ConfigError("bootstrap_servers is empty")
    out = []
    for item in items:
        if not isinstance(item, str):
            raise ConfigError(f"bootstrap_servers entries must be strings, got {item!r}")
        host, sep, port = item.rpartition(":")
        if not sep or not host:
            raise ConfigError(f"bootstrap_servers entry {item!r} is not host:port")
        if host.startswith("[") and host.endswith("]"):
            host = host[1:-1]
        try:
            p = int(port)
        except ValueError:
            raise ConfigError(f"bootstrap_servers entry {item!r} has a bad port") from None
        if not 0 < p < 65536:
            raise ConfigError(f"bootstrap_servers entry {item!r} has a port out of range")
        out.append((host, p))
    return out


def _parse(setting: _Setting, value: Any) -> Any:
    name, kind = setting.name, setting.kind
    if kind == "int":
        v = _parse_int(name, value)
        if setting.minimum is not None and v < setting.minimum:
            raise ConfigError(f"{name} must be >= {setting.minimum}, got {v}")
        if setting.maximum is not None and v > setting.maximum:
            raise ConfigError(f"{name} must be <= {setting.maximum}, got {v}")
        return v
    if kind == "opt_int":
        return None if value is None else _parse_int(name, value)
    if kind == "bool":
        return _parse_bool(name, value)
    if kind == "str":
        if not isinstance(value, str):
            raise ConfigError(f"{name} must be a string, got {value!r}")
        return value
    if kind == "servers":
        return parse_servers(value)
    if kind == "acks":
        if isinstance(value, str) and value.strip().lower() == "all":
            return -1
        v = _parse_int(name, value)
        if v not in (-1, 0, 1):
            raise ConfigError(f"acks must be 'all', -1, 0 or 1, got {value!r}")
        return v
    if kind == "codec":
        if not isinstance(value, str) or value.strip().lower() not in CODECS:
            raise ConfigError(f"compression_type must be one of {', '.join(CODECS)}, got {value!r}")
        return value.strip().lower()
    if kind == "partitioner":
        if callable(value):
            return value
        if isinstance(value, str) and (value in PARTITIONERS or value == "default"):
            return "murmur2" if value == "default" else value
        names = ", ".join(repr(name) for name in PARTITIONERS)
        raise ConfigError(f"partitioner must be one of {names} ('default' is 'murmur2'), or a "
                          f"callable(key, num_partitions, available_partitions), got {value!r}")
    if kind == "recovery_strategy":
        if isinstance(value, str) and value.strip().lower() in ("rebootstrap", "none"):
            return value.strip().lower()
        raise ConfigError(f"metadata_recovery_strategy must be 'rebootstrap' or 'none', got {value!r}")
    if kind == "security_protocol":
        if isinstance(value, str) and value.strip().upper() in SECURITY_PROTOCOLS:
            return value.strip().upper()
        raise ConfigError(f"security_protocol must be one of {', '.join(SECURITY_PROTOCOLS)}, "
                          f"got {value!r}")
    if kind == "sasl_mechanism":
        from fastkafka._net.sasl import MECHANISMS

        if value is None:
            return None
        if isinstance(value, str) and value.strip().upper() in MECHANISMS + ("AWS_MSK_IAM",):
            # AWS_MSK_IAM (aws-msk-iam-auth's mechanism) becomes OAUTHBEARER with the MSK IAM
            # token: fastkafka._net.jaas.apply_jaas
            return value.strip().upper()
        raise ConfigError(f"sasl_mechanism must be one of {', '.join(MECHANISMS)}, got {value!r}")
    if kind == "opt_str":
        if value is None or isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {type(value).__name__}")
    if kind == "path":
        if value is None or isinstance(value, str):
            return value
        if hasattr(value, "__fspath__"):
            return str(value.__fspath__())
        raise ConfigError(f"{name} must be a file path, got {type(value).__name__}")
    if kind == "secret":
        if value is None or isinstance(value, str):
            return value
        raise ConfigError(f"{name} must be a string, got {type(value).__name__}")  # never the value
    if kind == "store_type":
        from fastkafka._net.tls_stores import parse_store_type

        return parse_store_type(name, value)
    if kind == "hostname_check":
        # ssl.endpoint.identification.algorithm (Java, librdkafka): "https" checks, "none"/"" not.
        if isinstance(value, str) and value.strip().lower() in ("https", "none", ""):
            return value.strip().lower() == "https"
        if isinstance(value, str) and value.strip().lower() not in ("true", "false"):
            raise ConfigError(f"{name} must be a boolean, or 'https' / 'none' as "
                              f"ssl.endpoint.identification.algorithm, got {value!r}")
        return _parse_bool(name, value)
    if kind == "ssl_context":
        import ssl

        if value is None or isinstance(value, ssl.SSLContext):
            return value
        raise ConfigError(f"{name} must be an ssl.SSLContext, got {type(value).__name__}")
    if kind == "serializer":
        # A Java class name: ByteArraySerializer asks for what is done anyway (no serializer).
        if isinstance(value, str):
            if _BYTES_SERIALIZER.accepts(value):
                return None
            accepted = ", ".join(repr(v) for v in _BYTES_SERIALIZER.values)
            raise ConfigError(f"{name}={value!r} is not supported: "
                              f"{_BYTES_SERIALIZER.supported.format(name=name)}; accepted class "
                              f"names: {accepted}")
        if value is None or callable(value):
            return value
        raise ConfigError(f"{name} must be a callable(obj) -> bytes or None, got "
                          f"{type(value).__name__}")
    if kind == "interceptors":
        from fastkafka.interceptors import parse_interceptors

        return parse_interceptors(value)
    if kind == "token_provider":
        from fastkafka._net.jaas import as_token_provider

        return as_token_provider(name, value)
    if kind == "callback":
        if value is None or callable(value):
            return value
        raise ConfigError(f"{name} must be a callable or None, got {type(value).__name__}")
    raise AssertionError(kind)  # pragma: no cover


class ProducerConfig:
    """Validated producer settings; attribute access by canonical name (``cfg.linger_ms``)."""

    def __init__(self, config: Mapping[str, Any] | None = None, **kwargs: Any):
        if config is not None and not isinstance(config, Mapping):
            raise ConfigError(f"config must be a mapping of settings, got {type(config).__name__}")
        given: dict[str, Any] = {}
        origin: dict[str, str] = {}
        for source in (config or {}, kwargs):
            for key, value in source.items():
                name = canonical_name(key)
                if name in given:
                    raise ConfigError(f"{name} given twice (as {origin[name]!r} and {key!r})")
                given[name] = value
                origin[name] = key
        values = {}
        for s in _SETTINGS:
            values[s.name] = _parse(s, given[s.name]) if s.name in given else s.default
        foreign = {name: value for name, value in given.items() if name in ACCEPTED_FOREIGN}
        for name, value in foreign.items():
            _check_foreign(name, value, values)
        object.__setattr__(self, "_values", values)
        object.__setattr__(self, "_explicit", frozenset(given))
        object.__setattr__(self, "_foreign", foreign)
        self._check(values)
        # Settings are plain attributes: reading one on the send path is a dict lookup.
        for name, value in values.items():
            object.__setattr__(self, name, value)

    def _check(self, v: dict[str, Any]) -> None:
        if v["bootstrap_servers"] is None:
            raise ConfigError("bootstrap_servers is required")
        # The compressor's own check (one table of codecs and levels: fastkafka._wire.compression),
        # so a level accepted here is one the compressor accepts.
        validate_level(v["compression_type"], v["compression_level"])
        check_available(v["compression_type"])
        idem_explicit = "enable_idempotence" in self._explicit
        if v["transactional_id"] is not None:
            if not v["transactional_id"]:
                raise ConfigError("transactional_id must be a non-empty string (or None)")
            if not v["enable_idempotence"]:
                raise ConfigError("transactional_id needs enable_idempotence=True (a transactional "
                                  "producer is idempotent)")
            idem_explicit = True   # conflicting settings are an error, not a silent downgrade
        if v["enable_idempotence"]:
            conflicts = []
            if v["acks"] != -1:
                conflicts.append("acks must be 'all'")
            if v["max_in_flight_requests_per_connection"] > 5:
                conflicts.append("max_in_flight_requests_per_connection must be <= 5")
            if v["retries"] == 0:
                conflicts.append("retries must be > 0")
            if conflicts:
                if idem_explicit:
                    raise ConfigError("enable_idempotence=True is inconsistent: " + "; ".join(conflicts))
                # Idempotence was only on by default: the explicit settings win.
                v["enable_idempotence"] = False
        if v["delivery_timeout_ms"] < v["linger_ms"] + v["request_timeout_ms"]:
            raise ConfigError(
                f"delivery_timeout_ms ({v['delivery_timeout_ms']}) must be >= linger_ms "
                f"({v['linger_ms']}) + request_timeout_ms ({v['request_timeout_ms']})")
        if v["batch_size"] > v["buffer_memory"]:
            raise ConfigError(f"batch_size ({v['batch_size']}) must be <= buffer_memory ({v['buffer_memory']})")
        if v["reconnect_backoff_max_ms"] < v["reconnect_backoff_ms"]:
            raise ConfigError("reconnect_backoff_max_ms must be >= reconnect_backoff_ms")
        if v["stats_cb"] is not None and v["statistics_interval_ms"] == 0:
            raise ConfigError("stats_cb is set but statistics_interval_ms is 0, which turns it off: "
                              "set statistics_interval_ms (e.g. 60000) to have it called")
        self._check_sasl(v)
        self._check_tls(v)

    def _check_sasl(self, v: dict[str, Any]) -> None:
        """SASL settings: consistent with security_protocol and the mechanism (fastkafka._net.sasl)."""
        from fastkafka._net.jaas import apply_jaas
        from fastkafka._net.sasl import check_settings

        # sasl_jaas_config -> user/password or the OAUTHBEARER token provider
        apply_jaas(v, self._foreign)
        check_settings(v, self._explicit)

    def _check_tls(self, v: dict[str, Any]) -> None:
        """The TLS context, built once here so that a bad file is a ConfigError at construction."""
        from fastkafka._net.tls import TLS_PROTOCOLS, build_context

        ssl_given = sorted(n for n in self._explicit if n.startswith("ssl_") and v[n] is not None)
        if v["security_protocol"] in TLS_PROTOCOLS:
            object.__setattr__(self, "tls_context", build_context(v))
        else:
            if ssl_given:
                raise ConfigError(f"{', '.join(ssl_given)} given, but security_protocol is "
                                  f"{v['security_protocol']}: TLS settings need SSL or SASL_SSL")
            object.__setattr__(self, "tls_context", None)

    def __setattr__(self, name, value):
        raise AttributeError("ProducerConfig is read-only")

    @property
    def compression_code(self) -> int:
        return CODECS[self._values["compression_type"]]

    @property
    def ordered(self) -> bool:
        """True when a partition must be muted while one of its batches is in flight."""
        v = self._values
        return v["max_in_flight_requests_per_connection"] == 1 or (
            not v["enable_idempotence"] and v["retries"] > 0)

    def is_explicit(self, name: str) -> bool:
        return name in self._explicit

    def as_dict(self) -> dict[str, Any]:
        """The settings by canonical name; a secret (SECRET_SETTINGS) given reads ``"***"``."""
        return {k: ("***" if k in SECRET_SETTINGS and v is not None else v)
                for k, v in self._values.items()}

    @property
    def accepted_foreign(self) -> dict[str, Any]:
        """The settings of other clients given (and accepted, with no effect), as given."""
        return dict(self._foreign)

    def __repr__(self) -> str:
        items = ", ".join(f"{k}={'***' if k in SECRET_SETTINGS and v is not None else repr(v)}"
                          for k, v in self._values.items() if k in self._explicit)
        return f"ProducerConfig({items})"


Partitioner = Callable[[Any, int, list], int]
