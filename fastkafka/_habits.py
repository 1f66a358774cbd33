"""Other clients' habits on :class:`fastkafka.Producer`: a message naming the equivalent (and the
compat layer that keeps the other client's API) instead of a bare AttributeError or TypeError."""
from __future__ import annotations

_CONFLUENT = "for confluent-kafka code use fastkafka.compat.confluent.Producer"
_KAFKA_PYTHON = "for kafka-python code use fastkafka.compat.kafka_python.KafkaProducer"
#: Methods other clients' producers have and fastkafka.Producer has not: what to use instead.
_HABITS = {
    # confluent-kafka
    "poll": "delivery callbacks run on the producer's I/O thread, there is nothing to poll "
            f"(send() returns a future; produce() takes on_delivery); {_CONFLUENT}",
    "list_topics": "partitions_for(topic) gives a topic's partitions, fastkafka.admin.Admin's "
                   f"list_topics() / describe_cluster() the cluster; {_CONFLUENT}",
    "purge": "close(timeout) fails what is still queued once the timeout has passed; "
             f"{_CONFLUENT}, whose purge() fails queued records with _PURGE_QUEUE",
    "produce_batch": "send_batch(topic, values, keys=..., ...) queues many records in one call; "
                     f"{_CONFLUENT}",
    "set_sasl_credentials": f"credentials are settings (sasl_plain_username, sasl_plain_password); "
                            f"{_CONFLUENT}",
    "init_transaction": "the method is init_transactions()",
    # kafka-python
    "bootstrap_connected": f"metrics()['metadata_version'] > 0 once a broker answered; {_KAFKA_PYTHON}",
    # aiokafka
    "start": "the producer connects on first use, nothing to start; for asyncio use "
             "fastkafka.aio.AsyncProducer",
    "stop": "close() delivers what is queued and stops; for asyncio use fastkafka.aio.AsyncProducer",
    "send_and_wait": "send(...).get(timeout) waits for one record; for asyncio use "
                     "fastkafka.aio.AsyncProducer",
}


class OtherClientsHabits:
    """Mixed into :class:`fastkafka.Producer`: ``p.poll(0)``, ``len(p)`` and the like, written for
    another client, fail with what to use instead."""

    def __getattr__(self, name: str):
        # Only reached for a name the instance and its class do not have: no cost on the hot path.
        habit = None if name.startswith("_") else _HABITS.get(name)
        if habit is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}",
                                 name=name, obj=self)
        raise AttributeError(f"fastkafka.Producer has no {name}(): {habit}", name=name, obj=self)

    def __len__(self) -> int:
        raise TypeError(
            "len() of a fastkafka.Producer is not defined: for confluent-kafka's len(producer) "
            "(messages and requests waiting) use fastkafka.compat.confluent.Producer, whose "
            "len() counts them; here metrics()['records_queued'] counts the records not yet "
            "delivered, and flush() returns the number still undelivered")

    def __bool__(self) -> bool:
        return True     # with __len__ defined, ``if producer:`` would otherwise call it
