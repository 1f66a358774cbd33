"""On Apache Kafka: a batch larger than the topic's ``max.message.bytes`` is split, not failed.

Each test creates a topic with ``max.message.bytes=20000`` and sends records of 100 random
(incompressible) bytes with a ``batch_size`` and ``linger_ms`` large enough that they go out as one
batch of about 33 KB, plus one record of 25 KB that exceeds the limit on its own, in the middle.
Kafka refuses the batch with MESSAGE_TOO_LARGE; the producer splits it until the pieces fit. Every
other record is read back once and in send order by an independent reader (confluent-kafka, CRCs
checked), at the offset its future reported; the big record fails alone with MessageTooLargeError.
"""
from __future__ import annotations

import os
import time

import pytest

from fastkafka import Producer
from fastkafka.errors import MessageTooLargeError

from brokers import read_back, unique_name

LIMIT = 20000
CODECS = ["none", "gzip", "snappy", "lz4", "zstd"]
SETTINGS = dict(request_timeout_ms=10000, delivery_timeout_ms=60000, retry_backoff_ms=20)


def limited_topic(kafka_broker, partitions=1):
    name = unique_name("split")
    kafka_broker.create_topic(name, partitions, config={"max.message.bytes": str(LIMIT)})
    return name


def records(n, tag=b"r"):
    return [tag + b"%06d-" % i + os.urandom(100 - 8 - len(tag)) for i in range(n)]


def settings(idempotent, **kw):
    s = {**SETTINGS, **kw}
    if not idempotent:  # without idempotence, order across retries needs one request in flight
        s.update(enable_idempotence=False, max_in_flight_requests_per_connection=1)
    return s


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
@pytest.mark.parametrize("codec", CODECS)
def test_batch_over_topic_limit_is_split(kafka_broker, codec, idempotent):
    topic = limited_topic(kafka_broker)
    values = records(300)
    big = b"BIG" + os.urandom(25000)
    sent = values[:150] + [big] + values[150:]
    outcomes = {}

    def on_delivery(i):
        return lambda err, md: outcomes.setdefault(i, []).append((err, md))

    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  **settings(idempotent, compression_type=codec, linger_ms=500, batch_size=1 << 20)) as p:
        futs = [p.send(topic, v, partition=0, on_delivery=on_delivery(i)) for i, v in enumerate(sent)]
        with pytest.raises(MessageTooLargeError):
            futs[150].get(30)
        offsets = [f.get(30).offset for i, f in enumerate(futs) if i != 150]
        m = p.metrics()
    got = read_back(kafka_broker.bootstrap, topic, 1, len(values))[0]
    assert [r.value for r in got] == values                    # each once, in send order
    assert [r.offset for r in got] == offsets
    assert sorted(outcomes) == list(range(len(sent))) and all(len(o) == 1 for o in outcomes.values())
    assert isinstance(outcomes[150][0][0], MessageTooLargeError)
    assert m["batches_split"] > 0 and m["errors"] == 1


@pytest.mark.parametrize("idempotent", [True, False], ids=["idempotent", "plain"])
def test_send_batch_counts_each_record_once(kafka_broker, idempotent):
    """send_batch: the BatchFuture counts the 300 records delivered and the one too large failed."""
    topic = limited_topic(kafka_broker)
    values = records(300)
    sent = values[:150] + [b"BIG" + os.urandom(25000)] + values[150:]
    with Producer(bootstrap_servers=kafka_broker.bootstrap,
                  **settings(idempotent, compression_type="lz4", linger_ms=500, batch_size=1 << 20)) as p:
        bf = p.send_batch(topic, sent, partition=0)
        with pytest.raises(MessageTooLargeError):
            bf.get(30)
        assert (bf.delivered, bf.failed, bf.appended) == (300, 1, 301)
        assert p.metrics()["batches_split"] > 0
    got = read_back(kafka_broker.bootstrap, topic, 1, len(values))[0]
    assert [r.value for r in got] == values


@pytest.mark.parametrize("codec", ["none", "zstd"])
def test_pipelined_stream_with_batches_over_the_limit(kafka_broker, codec):
    """Idempotent, up to 5 requests in flight, waves of records that fill batches over the limit
    with smaller batches behind them, and a few records too large on their own: every other record
    arrives once and in order, on three partitions."""
    topic = limited_topic(kafka_broker, partitions=3)
    sent = {part: [] for part in range(3)}
    futs = {part: [] for part in range(3)}
    bigs = 0
    with Producer(bootstrap_servers=kafka_broker.bootstrap, **SETTINGS, compression_type=codec,
                  linger_ms=10, batch_size=48 * 1024, max_in_flight_requests_per_connection=5) as p:
        for wave in range(6):
            for part in range(3):
                chunk = records(450, tag=b"w%dp%d" % (wave, part))
                if wave in (2, 4) and part != 1:
                    chunk[200] = b"BIG" + os.urandom(25000)
                    bigs += 1
                sent[part] += chunk
                futs[part] += [p.send(topic, v, partition=part) for v in chunk]
            time.sleep(0.03)
        outcome = {part: [] for part in range(3)}
        for part in range(3):
            for v, f in zip(sent[part], futs[part]):
                if v.startswith(b"BIG"):
                    with pytest.raises(MessageTooLargeError):
                        f.get(60)
                else:
                    outcome[part].append((v, f.get(60).offset))
        m = p.metrics()
    assert m["batches_split"] > 0 and m["errors"] == bigs
    for part in range(3):
        got = read_back(kafka_broker.bootstrap, topic, [part], len(outcome[part]))[part]
        assert [(r.value, r.offset) for r in got] == outcome[part]
