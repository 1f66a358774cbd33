"""confluent-kafka's ``Producer`` on fastkafka: code written for confluent-kafka runs with only
its import changed::

    from fastkafka.compat.confluent import Producer, KafkaException

    p = Producer({"bootstrap.servers": "127.0.0.1:9092", "linger.ms": 5})
    def delivery_report(err, msg):
        if err is not None:
            print("failed:", err)
        else:
            print(msg.topic(), msg.partition(), msg.offset())
    for data in ["a", "b"]:
        p.poll(0)
        p.produce("events", data.encode("utf-8"), callback=delivery_report)
    p.flush()

What it keeps: the configuration dict, read as librdkafka reads it
(fastkafka/compat/confluent/_config.py: every producer property honoured, mapped, ignored with
a reason or refused naming what to use; errors as ``KafkaException`` ``_INVALID_ARG``), with
``error_cb``, ``stats_cb``, ``logger``, ``on_delivery``, ``oauth_cb``,
``queue.buffering.max.messages`` and ``delivery.report.only.error`` implemented here;
librdkafka's default partitioner ``consistent_random`` (a key lands where confluent-kafka puts
it); ``produce()`` with confluent-kafka's arguments, never blocking (a record of a topic without
metadata waits here, :meth:`Producer._hold`, and fails with ``_MSG_TIMED_OUT`` after
``message.timeout.ms``); ``produce_batch()``; delivery reports served by ``poll()``/``flush()``
on the caller's thread as ``(err, msg)`` with a :class:`~fastkafka.compat.confluent._types.Message`
and a :class:`KafkaError` (all of confluent-kafka's codes); ``len()``; ``BufferError`` once
``queue.buffering.max.messages`` records wait (delivered or not, until their report is served);
``purge()``; ``list_topics()``, ``cluster_id()``; ``set_sasl_credentials()``; ``close()`` and
the context manager; transactions raising :class:`KafkaException`.

What it costs: little. ``produce()``, ``poll(0)`` and ``len()`` are compiled
(fastkafka/compat/confluent/_fast.pyx): per record one C :class:`Message` is made at produce
time, the I/O thread only appends the record's future to a list, and ``poll()`` takes that list
in one go, filling each Message from its batch before calling the callback on the caller's
thread. bench/compat.py measures it faster than confluent-kafka's own producer
(bench/results/compat.md). :class:`fastkafka.Producer` (callbacks on the I/O thread, no report
queue) is faster still.
docs/migration.md ("The compatibility layer") lists the differences that remain.

``SerializingProducer`` (``key.serializer``/``value.serializer``, confluent-kafka's or
:mod:`fastkafka.schema_registry`'s) is in ``_serializing``.

The package: ``_producer`` (the ``Producer``), ``_config`` (librdkafka's properties: honoured,
mapped, ignored or refused; the table of docs/migration.md), ``_types`` (``KafkaError``,
``KafkaException``, ``Message``, the metadata types), ``_codes`` (confluent-kafka's error codes,
generated), ``_fast`` (compiled: ``Message`` and ``PollCore``, which does ``produce()``, ``poll(0)``
and ``len()``), ``_logging`` (the ``logger`` setting) and ``_stats`` (``stats_cb``'s document in
librdkafka's schema).
"""
from __future__ import annotations

from fastkafka.compat.confluent._producer import (DEFAULT_MAX_MESSAGES, OFFSET_INVALID,
                                                  Producer)
from fastkafka.compat.confluent._serializing import (KeySerializationError, SerializationError,
                                                     SerializingProducer, ValueSerializationError)
from fastkafka.compat.confluent._types import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                                               TIMESTAMP_NOT_AVAILABLE, BrokerMetadata,
                                               ClusterMetadata, KafkaError, KafkaException, Message,
                                               PartitionMetadata, ThrottleEvent, TopicMetadata)

__all__ = ["Producer", "SerializingProducer", "SerializationError", "KeySerializationError",
           "ValueSerializationError", "KafkaError", "KafkaException", "Message", "ThrottleEvent", "ClusterMetadata",
           "TopicMetadata", "PartitionMetadata", "BrokerMetadata", "TIMESTAMP_NOT_AVAILABLE",
           "TIMESTAMP_CREATE_TIME", "TIMESTAMP_LOG_APPEND_TIME", "OFFSET_INVALID"]
