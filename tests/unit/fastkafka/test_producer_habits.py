"""fastkafka.Producer met with other clients' habits: each missing method of confluent-kafka's,
kafka-python's and aiokafka's producers is an AttributeError naming the equivalent and the compat
layer; ``len(p)`` a TypeError naming the confluent layer's ``len()``; everything else stays as
Python has it (bare AttributeError, hasattr False, truthiness True)."""
from __future__ import annotations

import pytest

from fastkafka import Producer


@pytest.fixture(scope="module")
def producer():
    p = Producer(bootstrap_servers="127.0.0.1:1")      # never connects: nothing is sent
    yield p
    p.close(0)


@pytest.mark.parametrize("name,says", [
    ("poll", ["I/O thread", "nothing to poll", "fastkafka.compat.confluent.Producer"]),
    ("list_topics", ["partitions_for(topic)", "Admin", "fastkafka.compat.confluent.Producer"]),
    ("purge", ["close(timeout)", "fastkafka.compat.confluent.Producer"]),
    ("produce_batch", ["send_batch(", "fastkafka.compat.confluent.Producer"]),
    ("set_sasl_credentials", ["sasl_plain_password", "fastkafka.compat.confluent.Producer"]),
    ("init_transaction", ["init_transactions()"]),
    ("bootstrap_connected", ["metadata_version", "fastkafka.compat.kafka_python.KafkaProducer"]),
    ("start", ["first use", "fastkafka.aio.AsyncProducer"]),
    ("stop", ["close()", "fastkafka.aio.AsyncProducer"]),
    ("send_and_wait", ["send(...).get(timeout)", "fastkafka.aio.AsyncProducer"]),
])
def test_another_clients_method_names_the_equivalent(producer, name, says):
    with pytest.raises(AttributeError) as exc:
        getattr(producer, name)
    msg = str(exc.value)
    assert msg.startswith(f"fastkafka.Producer has no {name}(): ")
    for part in says:
        assert part in msg, (part, msg)
    assert exc.value.name == name and exc.value.obj is producer
    assert not hasattr(producer, name)


def test_a_call_fails_the_same_way(producer):
    with pytest.raises(AttributeError, match=r"has no poll\(\).*compat\.confluent"):
        producer.poll(0)


def test_len_is_a_type_error_naming_the_confluent_layer(producer):
    with pytest.raises(TypeError) as exc:
        len(producer)
    msg = str(exc.value)
    assert "fastkafka.compat.confluent.Producer" in msg and "records_queued" in msg
    assert bool(producer) is True                  # ``if producer:`` does not call __len__
    assert "records_queued" in producer.metrics()   # what the message points at exists


@pytest.mark.parametrize("name", ["nope", "_private", "__deepcopy__", "pol"])
def test_other_missing_names_stay_plain_attribute_errors(producer, name):
    with pytest.raises(AttributeError) as exc:
        getattr(producer, name)
    assert str(exc.value) == f"'Producer' object has no attribute {name!r}"
    assert getattr(producer, name, "default") == "default"


def test_what_the_producer_has_is_untouched(producer):
    # the habits name only methods it lacks; the ones it has are its own
    from fastkafka._habits import _HABITS

    assert not [n for n in _HABITS if n in dir(Producer)]
    for name in ("send", "produce", "flush", "partitions_for", "metrics", "close"):
        assert callable(getattr(producer, name))


def test_the_public_names_are_those_the_api_reference_lists():
    # dir(Producer), its bases included, shows what users call: each public name is one the API
    # reference lists for fastkafka.Producer (docs/api/index.rst), none serves only fastkafka.aio
    import pathlib
    import re
    index = pathlib.Path(__file__).resolve().parents[3] / "docs" / "api" / "index.rst"
    m = re.search(r"autoclass:: fastkafka\.Producer\n   :members: (.*?)\n   :", index.read_text(), re.S)
    listed = {n.strip() for n in m.group(1).split(",")}
    assert {n for n in dir(Producer) if not n.startswith("_")} == listed
