"""A batch that cannot be closed (its compressor raises) fails, with that error, through the sender
(the one owner of batch outcomes); the partition goes on with the next batch."""

import pytest

from fastkafka._wire import ccodecs, records


@pytest.fixture
def python_gzip():
    """gzip by the Python codec (its C library turned off meanwhile): the one whose failure can be
    injected."""
    was = ccodecs.in_c("gzip")
    ccodecs.use_c("gzip", False)
    yield
    ccodecs.use_c("gzip", was)


def test_compressor_failure_fails_that_batch_and_the_partition_goes_on(fb, make_producer, monkeypatch,
                                                                       python_gzip):
    fb.create_topic("t", 1)
    p = make_producer(fb, compression_type="gzip", linger_ms=0)
    p.send("t", b"before").get(10)
    real = records._compress_buffer
    calls = []

    def broken_once(*args):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("compressor broke")
        return real(*args)

    monkeypatch.setattr(records, "_compress_buffer", broken_once)
    failed = p.send("t", b"lost")
    try:
        failed.get(10)
        raise AssertionError("the record should have failed")
    except RuntimeError as e:
        assert "compressor broke" in str(e)
    after = p.send("t", b"after").get(10)          # the partition was unmuted
    assert after.offset == 1
    assert fb.cluster.record_count("t") == 2
    assert p.metrics()["errors"] == 1
