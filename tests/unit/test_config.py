import pytest

from fastkafka.config import ProducerConfig, parse_servers
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
    ("lingerms", 5, "unknown config key 'lingerms'"),
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


def test_config_is_read_only():
    c = cfg()
    with pytest.raises(AttributeError):
        c.linger_ms = 3


def test_producer_rejects_bad_config_at_construction():
    from fastkafka import Producer
    with pytest.raises(ConfigError, match="unknown config key 'bogus'"):
        Producer(bootstrap_servers="127.0.0.1:1", bogus=1)
