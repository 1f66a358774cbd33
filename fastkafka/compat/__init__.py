"""Compatibility layers for code written against other Kafka clients' producers.

``fastkafka.compat.confluent.Producer`` keeps confluent-kafka's shapes (``produce`` with
``poll``-driven callbacks that receive a message object, ``len``, ``purge``, ``list_topics``);
``fastkafka.compat.kafka_python.KafkaProducer`` keeps kafka-python's (its keyword arguments,
serializers, ``api_version``, and its future). Both run on :class:`fastkafka.Producer`: new code
should use that directly (docs/migration.md says what differs and why).
``fastkafka.compat.aiokafka.AIOKafkaProducer`` keeps aiokafka's (``fut = await send()``,
``create_batch``/``send_batch``, ``transaction()``, its errors), on
:class:`fastkafka.aio.AsyncProducer`.
"""
