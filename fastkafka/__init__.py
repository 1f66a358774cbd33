"""fastkafka: a Kafka producer whose hot paths are compiled with Cython.

    from fastkafka import Producer
    with Producer(bootstrap_servers="127.0.0.1:9092") as p:
        p.send("events", b"hello").get(timeout=10)
"""

__version__ = "0.1.0"

from ._wire.records import EncodedHeaders  # noqa: E402
from .errors import ConfigError, KafkaError, KafkaTimeoutError  # noqa: E402
from .producer import BatchFuture, FutureRecordMetadata, Producer, RecordMetadata  # noqa: E402

__all__ = ["Producer", "RecordMetadata", "FutureRecordMetadata", "BatchFuture", "EncodedHeaders", "KafkaError",
           "KafkaTimeoutError", "ConfigError", "__version__"]
