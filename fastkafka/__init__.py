"""fastkafka: a Kafka producer whose hot paths are compiled with Cython.

Example::

    from fastkafka import Producer
    with Producer(bootstrap_servers="127.0.0.1:9092") as p:
        p.send("events", b"hello").get(timeout=10)
"""

# Linux only: the compiled I/O loop is built on epoll, eventfd, timerfd and futexes. Anywhere else
# the import stops here, before any compiled module is loaded, saying so.
import sys as _sys

if not _sys.platform.startswith("linux"):
    raise ImportError(
        f"fastkafka supports Linux only (its I/O loop uses epoll, eventfd, timerfd and futexes); "
        f"this platform is sys.platform == {_sys.platform!r}")
del _sys

from fastkafka._version import __version__  # noqa: E402
from fastkafka._wire.records import EncodedHeaders  # noqa: E402
from fastkafka.errors import ConfigError, KafkaError, KafkaTimeoutError  # noqa: E402
from fastkafka.producer import BatchFuture, FutureRecordMetadata, Producer, RecordMetadata  # noqa: E402
from fastkafka._producer.transactions import GroupMetadata, PreparedTransaction  # noqa: E402

__all__ = ["Producer", "RecordMetadata", "FutureRecordMetadata", "BatchFuture", "EncodedHeaders", "KafkaError",
           "KafkaTimeoutError", "ConfigError", "GroupMetadata", "PreparedTransaction", "__version__"]
