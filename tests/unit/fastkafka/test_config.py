import pytest

from fastkafka.config import ACCEPTED_FOREIGN, ProducerConfig, canonical_name, parse_servers
from fastkafka.errors import ConfigError


def cfg(**kw):
    kw.setdefault("bootstrap_servers", "127.0.0.1:9092")
    return ProducerConfig(**kw)


def test_defaults():
    c = cfg()
    assert c.acks == -1
    assert c.enable_idempotence is True
    assert c.max_in_flight_requests_per_connection == 5
    assert c.compression_type == "none" and c.compression_code == 0
    assert c.bootstrap_servers == [("127.0.0.1", 9092)]


def test_dotted_and_pythonic_keys_are_the_same_setting():
    a = ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": "7", "compression.type": "lz4",
                        "enable.idempotence": "false", "acks": "1"})
    b = ProducerConfig(bootstrap_servers="h:1", linger_ms=7, compression_type="lz4",
                       enable_idempotence=False, acks=1)
    assert a.as_dict() == b.as_dict()


def test_same_setting_twice_is_an_error():
    with pytest.raises(ConfigError, match="linger_ms given twice"):
        ProducerConfig({"bootstrap.servers": "h:1", "linger.ms": 1}, linger_ms=2)


@pytest.mark.parametrize("key,value,match", [
    ("lingerms", 5, "unknown config key 'lingerms': did you mean linger_ms?"),
    ("linger_ms", "soon", "linger_ms must be an integer"),
    ("linger_ms", True, "linger_ms must be an integer, got bool"),
    ("linger_ms", -1, "linger_ms must be >= 0"),
    ("acks", 2, "acks must be"),
    ("compression_type", "brotli", "compression_type must be one of"),
    ("enable_idempotence", "maybe", "enable_idempotence must be a boolean"),
    ("partitioner", "round-robin", "partitioner must be"),
    ("batch_size", 0, "batch_size must be >= 1"),
])
def test_bad_values_name_the_setting(key, value, match):
    with pytest.raises(ConfigError, match=match):
        cfg(**{key: value})


LIBRDKAFKA_PARTITIONERS = ("random", "consistent", "consistent_random", "murmur2", "murmur2_random",
                           "fnv1a", "fnv1a_random")


@pytest.mark.parametrize("name", LIBRDKAFKA_PARTITIONERS)
def test_librdkafka_partitioner_names_are_accepted(name):
    assert cfg(partitioner=name).partitioner == name
    assert ProducerConfig({"bootstrap.servers": "h:1", "partitioner": name}).partitioner == name


def test_partitioner_default_alias_and_error_lists_the_names():
    assert cfg(partitioner="default").partitioner == "murmur2"
    assert cfg().partitioner == "murmur2"
    with pytest.raises(ConfigError) as e:
        cfg(partitioner="Consistent_Random")     # librdkafka's names are case-sensitive too
    for name in LIBRDKAFKA_PARTITIONERS:
        assert repr(name) in str(e.value)
    assert "callable" in str(e.value) and "'Consistent_Random'" in str(e.value)


def test_bootstrap_required_and_parsed():
    with pytest.raises(ConfigError, match="bootstrap_servers is required"):
        ProducerConfig()
    assert parse_servers("a:1, b:2") == [("a", 1), ("b", 2)]
    assert parse_servers(["[::1]:9092"]) == [("::1", 9092)]
    for bad in ("nohost", "h:port", "h:70000", ""):
        with pytest.raises(ConfigError, match="bootstrap_servers"):
            parse_servers(bad)


def test_explicit_idempotence_conflicts_raise():
    with pytest.raises(ConfigError, match="acks must be 'all'"):
        cfg(enable_idempotence=True, acks=1)
    with pytest.raises(ConfigError, match="max_in_flight_requests_per_connection must be <= 5"):
        cfg(enable_idempotence=True, max_in_flight_requests_per_connection=6)


def test_default_idempotence_yields_to_explicit_settings():
    c = cfg(acks=1)
    assert c.enable_idempotence is False
    assert c.ordered  # retries on, idempotence off: partitions are muted while in flight


def test_inconsistent_timeouts_and_sizes():
    with pytest.raises(ConfigError, match="delivery_timeout_ms"):
        cfg(delivery_timeout_ms=1000, request_timeout_ms=30000)
    with pytest.raises(ConfigError, match="batch_size .* buffer_memory"):
        cfg(batch_size=10_000_000, buffer_memory=1_000_000)
    with pytest.raises(ConfigError, match="compression_level .* out of range"):
        cfg(compression_type="gzip", compression_level=12)
    with pytest.raises(ConfigError, match="not supported for compression_type 'snappy'"):
        cfg(compression_type="snappy", compression_level=1)


def test_compression_level_range_is_the_compressors():
    assert cfg(compression_type="zstd", compression_level=0).compression_level == 0
    assert cfg(compression_type="zstd").compression_level is None      # the codec default
    with pytest.raises(ConfigError, match=r"compression_level 23 .* 'zstd': valid -131072\.\.22"):
        cfg(compression_type="zstd", compression_level=23)
    with pytest.raises(ConfigError, match=r"compression_level 17 .* 'lz4': valid 0\.\.16"):
        cfg(compression_type="lz4", compression_level="17")


# ---- mistyped keys name the closest valid one ---------------------------------------------------
@pytest.mark.parametrize("key,hint", [
    ("linger_sm", "linger_ms"),                        # snake_case names
    ("bootstrap_server", "bootstrap_servers"),
    ("lingerr.ms", "linger.ms"),                       # dotted aliases, answered in the same style
    ("compresion.type", "compression.type"),
    ("retries.backoff.ms", "retry.backoff.ms"),
    ("LINGER_MS", "linger_ms"),                        # case
    ("Linger.MS", "linger.ms"),
    ("security.protocl", "security.protocol"),         # accepted keys of other clients too
    ("client_dns_lookp", "client_dns_lookup"),
])
def test_mistyped_key_names_the_closest_valid_key(key, hint):
    with pytest.raises(ConfigError) as exc:
        cfg(**{key: "1"})
    assert str(exc.value).endswith(f"unknown config key {key!r}: did you mean {hint}?")


def test_unknown_key_without_a_close_match_has_no_guess():
    with pytest.raises(ConfigError) as exc:
        cfg(bogus=1)
    assert str(exc.value).endswith("unknown config key 'bogus'")


def test_sasl_keys_say_they_are_not_supported_without_echoing_values():
    for key in ("sasl.kerberos.ticket.renew.window.factor", "sasl.login.refresh.window.factor"):
        with pytest.raises(ConfigError, match=rf"unknown config key '{key}'.*not supported") as exc:
            cfg(**{key: "s3cret-value"})
        assert "s3cret" not in str(exc.value)


# ---- settings copied from other clients ----------------------------------------------------------
KAFKA_INTERNALS = "org.apache.kafka.clients.producer.internals."
BYTE_ARRAY = "org.apache.kafka.common.serialization.ByteArraySerializer"


@pytest.mark.parametrize("key,value", [
    ("client.dns.lookup", "use_all_dns_ips"), ("client.dns.lookup", "default"),
    ("partitioner.class", KAFKA_INTERNALS + "DefaultPartitioner"),
    ("partitioner.class", KAFKA_INTERNALS + "BuiltInPartitioner"),
    ("partitioner.class", None), ("partitioner.class", "null"), ("partitioner.class", ""),
    ("check.crcs", "true"), ("check.crcs", False),
    ("api.version.request", "true"), ("broker.address.family", "any"), ("interceptor.classes", ""),
])
def test_settings_of_other_clients_asking_for_what_the_producer_does_are_accepted(key, value):
    c = ProducerConfig({"bootstrap.servers": "127.0.0.1:9092", key: value})
    assert c.accepted_foreign == {canonical_name(key): value}
    assert c.as_dict() == cfg().as_dict()              # and change nothing


def test_a_java_producer_config_is_accepted_whole():
    java = {"bootstrap.servers": "h:1", "security.protocol": "PLAINTEXT", "acks": "all",
            "client.dns.lookup": "use_all_dns_ips", "key.serializer": BYTE_ARRAY,
            "value.serializer": BYTE_ARRAY, "enable.idempotence": "true", "linger.ms": "5",
            "partitioner.class": KAFKA_INTERNALS + "DefaultPartitioner", "compression.type": "lz4"}
    c = ProducerConfig(java)
    assert c.linger_ms == 5 and c.compression_type == "lz4" and c.partitioner == "murmur2"
    # The canonical names (as spark_sink ships settings to executors) build the same config.
    again = ProducerConfig({canonical_name(k): v for k, v in java.items()})
    assert again.as_dict() == c.as_dict() and again.accepted_foreign == c.accepted_foreign


@pytest.mark.parametrize("key,value,supported", [
    ("partitioner.class", "com.example.MyPartitioner", "partitioner=callable"),
    ("partitioner.class", KAFKA_INTERNALS + "UniformStickyPartitioner", "murmur2 of the key"),
    ("client.dns.lookup", "resolve_canonical_bootstrap_servers_only", "every address"),
    ("check.crcs", "maybe", "CRC-32C"),
    ("interceptor.classes", "com.example.Tracing", "no interceptors"),
])
def test_settings_of_other_clients_the_producer_cannot_honour_are_errors(key, value, supported):
    with pytest.raises(ConfigError) as exc:
        cfg(**{key: value})
    msg = str(exc.value)
    assert msg.startswith(f"CONFIG_ERROR (-100): {key}={value!r} is not supported: ")
    assert supported in msg
    accepted = ", ".join(repr(v) for v in ACCEPTED_FOREIGN[key].values)
    assert msg.endswith(f"accepted values: {accepted}")


def test_default_partitioner_class_conflicts_with_another_partitioner():
    with pytest.raises(ConfigError, match=r"partitioner.class=.*DefaultPartitioner' asks for "
                                          r"partitioner='murmur2', but partitioner is 'random'"):
        cfg(**{"partitioner.class": KAFKA_INTERNALS + "DefaultPartitioner", "partitioner": "random"})


def test_config_is_read_only():
    c = cfg()
    with pytest.raises(AttributeError):
        c.linger_ms = 3


def test_producer_rejects_bad_config_at_construction():
    from fastkafka import Producer
    with pytest.raises(ConfigError, match="unknown config key 'bogus'"):
        Producer(bootstrap_servers="127.0.0.1:1", bogus=1)


def test_metadata_recovery_strategy():
    assert cfg().metadata_recovery_strategy == "rebootstrap"
    assert cfg().metadata_recovery_rebootstrap_trigger_ms == 30_000
    assert cfg(**{"metadata.recovery.strategy": "NONE"}).metadata_recovery_strategy == "none"
    with pytest.raises(ConfigError, match="metadata_recovery_strategy"):
        cfg(metadata_recovery_strategy="sometimes")
