"""Hostile-broker scenarios, each run in a child process by test_hostile_broker.py.

``python hostile_cases.py NAME`` runs one scenario against in-process fault brokers and prints one
JSON line of facts (after the marker ``RESULT``), which the test asserts on. A scenario that crashes
the interpreter (segfault, abort) or hangs is caught by the parent as a failed test, not a lost run.
"""
from __future__ import annotations

import json
import logging
import os
import sys
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.dirname(HERE))                      # tests/ (faultbroker, brokers)
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))     # the repository root

from faultbroker import Cluster, FaultBroker, rewrite_response  # noqa: E402
from fastkafka import Producer  # noqa: E402
from fastkafka.errors import KafkaError  # noqa: E402
from fastkafka.protocol import ApiKey  # noqa: E402

FAST = dict(request_timeout_ms=1500, delivery_timeout_ms=4000, retry_backoff_ms=20,
            reconnect_backoff_ms=20, reconnect_backoff_max_ms=200, linger_ms=2, max_block_ms=3000)

SCENARIOS = {}


def scenario(fn):
    SCENARIOS[fn.__name__] = fn
    return fn


def rss_mb() -> float:
    with open("/proc/self/statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE") / 1e6


def sender_alive(p: Producer) -> bool:
    return p._sender._thread.is_alive()


def outcomes(futs, timeout=15.0) -> dict:
    """{"ok": n, "ErrorClass": n, "none": n} over the futures (``none``: no outcome in time)."""
    out: dict[str, int] = {}
    deadline = time.monotonic() + timeout
    for f in futs:
        try:
            f.get(max(deadline - time.monotonic(), 0.01))
            key = "ok"
        except KafkaError as e:
            key = type(e).__name__ if f.done() else "none"
        out[key] = out.get(key, 0) + 1
    return out


def bounded_close(p: Producer, timeout: float) -> float:
    t = time.monotonic()
    p.close(timeout)
    return time.monotonic() - t


def error_text(fn) -> str:
    try:
        fn()
    except Exception as e:  # the test checks the class and the text
        return f"{type(e).__name__}: {e}"
    return "no error"


# --------------------------------------------------------------------------------- scenarios
@scenario
def api_versions_without_metadata():
    """One of two nodes lists no Metadata API: it is unusable with a clear error, the other works."""
    cluster = Cluster()
    with FaultBroker(cluster) as good, FaultBroker(cluster) as bad:
        bad.api_versions.pop(ApiKey.METADATA)
        cluster.create_topic("t", 2)
        for part in range(2):
            cluster.set_leader("t", part, good.node_id)
        p = Producer(bootstrap_servers=f"{bad.bootstrap},{good.bootstrap}", **FAST)
        futs = [p.send("t", b"v%d" % i) for i in range(200)]
        res = outcomes(futs)
        alive = sender_alive(p)
        errors = p._metadata.connection_errors()
        close_s = bounded_close(p, 5)
    # The same node alone: sends fail with an error naming it.
    with FaultBroker() as only:
        only.api_versions.pop(ApiKey.METADATA)
        only.create_topic("t", 1)
        p = Producer(bootstrap_servers=only.bootstrap, **{**FAST, "max_block_ms": 800})
        alone = error_text(lambda: p.send("t", b"x"))
        alone_alive = sender_alive(p)
        p.close(5)
    return {"outcomes": res, "alive": alive, "bad_address": bad.bootstrap,
            "connection_errors": errors, "close_s": close_s, "alone": alone, "alone_alive": alone_alive}


@scenario
def unencodable_broker_host():
    """Metadata names a broker whose host no resolver takes (a 70-character label), leading half the
    partitions: the thread survives, the other partitions deliver, every record gets an outcome."""
    cluster = Cluster()
    with FaultBroker(cluster) as b1, FaultBroker(cluster) as b2:
        cluster.create_topic("t", 2)
        cluster.set_leader("t", 0, b1.node_id)
        cluster.set_leader("t", 1, b2.node_id)
        bad_host = "h" * 70 + ".example"

        def poison(body, header, request):
            for b in body["brokers"]:
                if b["node_id"] == b2.node_id:
                    b["host"] = bad_host
        b1.script.on(ApiKey.METADATA, rewrite_response(poison), times=None)
        b2.script.on(ApiKey.METADATA, rewrite_response(poison), times=None)
        p = Producer(bootstrap_servers=b1.bootstrap, **FAST)
        futs0 = [p.send("t", b"a%d" % i, partition=0) for i in range(50)]
        futs1 = [p.send("t", b"b%d" % i, partition=1) for i in range(50)]
        res0, res1 = outcomes(futs0), outcomes(futs1)
        alive = sender_alive(p)
        late = [p.send("t", b"late", partition=1)]
        close_s = bounded_close(p, 2)
        res_late = outcomes(late, 1)
        stored = cluster.record_count("t", 0)
    # The same host as the only bootstrap address: a clear error, no dead thread.
    p = Producer(bootstrap_servers=f"{bad_host}:9092", **{**FAST, "max_block_ms": 800})
    direct = error_text(lambda: p.send("t", b"x"))
    direct_alive = sender_alive(p)
    p.close(5)
    return {"p0": res0, "p1": res1, "alive": alive, "late": res_late, "close_s": close_s,
            "stored_p0": stored, "direct": direct, "direct_alive": direct_alive}


@scenario
def sparse_partition_index():
    """Metadata with one partition numbered 2**31-1: no allocation sized by it, a clear error."""
    with FaultBroker() as fb:
        fb.create_topic("t", 1)

        def sparse(body, header, request):
            for t in body["topics"]:
                for part in t["partitions"]:
                    part["partition_index"] = 2**31 - 1
        fb.script.on(ApiKey.METADATA, rewrite_response(sparse), times=None)
        before = rss_mb()
        p = Producer(bootstrap_servers=fb.bootstrap, **{**FAST, "max_block_ms": 1500})
        t = time.monotonic()
        err = error_text(lambda: p.send("t", b"x"))
        took = time.monotonic() - t
        grown = rss_mb() - before
        alive = sender_alive(p)
        close_s = bounded_close(p, 2)
    return {"error": err, "took_s": took, "rss_growth_mb": grown, "alive": alive, "close_s": close_s}


@scenario
def many_partitions():
    """A legal but extreme answer: 200,000 partitions. Memory stays small per partition, sends
    work, close(2) is bounded."""
    n = 200_000
    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        node = fb.node_id
        parts = [{"error_code": 0, "partition_index": i, "leader_id": node, "leader_epoch": 0,
                  "replica_nodes": [node], "isr_nodes": [node], "offline_replicas": []} for i in range(n)]

        def many(body, header, request):
            for t in body["topics"]:
                if t["name"] == "t":
                    t["partitions"] = parts
        fb.script.on(ApiKey.METADATA, rewrite_response(many), times=None)
        p = Producer(bootstrap_servers=fb.bootstrap, **{**FAST, "max_block_ms": 60000})
        before = rss_mb()
        count = len(p.partitions_for("t"))
        after_metadata = rss_mb()
        fut = p.send("t", b"x", partition=0)
        res = outcomes([fut], 30)
        close_s = bounded_close(p, 2)
    return {"count": count, "bytes_per_partition": (after_metadata - before) * 1e6 / n,
            "outcomes": res, "close_s": close_s}


@scenario
def raising_handlers():
    """A step of response handling raises once at each stage (ApiVersions, Metadata, Produce answer,
    a connection's reads): the thread survives, each failure is contained, every record arrives."""
    import fastkafka._net.network as netcore
    import fastkafka._net.cluster as cluster_mod
    import fastkafka._net.failpoints as failpoints
    import fastkafka._producer.testing as sender_hooks

    armed = {"api_versions": 1, "metadata": 1, "produce": 1, "read": 1}
    lock = threading.Lock()

    def once(name) -> bool:
        with lock:
            if armed[name] > 0:
                armed[name] -= 1
                return True
        return False

    orig_meta = netcore.cluster_from_response

    def stage_fails(stage, client, conn):
        # The network client's fault-injection hook: runs at the start of each stage.
        if stage == "api_versions" and once("api_versions"):
            raise RuntimeError("injected: ApiVersions handling")
        if stage == "read" and armed["api_versions"] == 0 and armed["produce"] == 0 and once("read"):
            raise RuntimeError("injected: a connection's read")

    def meta(*a, **kw):
        if once("metadata"):
            raise RuntimeError("injected: Metadata handling")
        return orig_meta(*a, **kw)

    def produce_answer_fails(stage, _sender):
        # The sender's fault-injection hook.
        if stage == "produce_response" and once("produce"):
            raise RuntimeError("injected: Produce answer handling")

    failpoints.set_network_failpoint(stage_fails)
    netcore.cluster_from_response = meta
    sender_hooks.set_sender_failpoint(produce_answer_fails)
    assert cluster_mod  # the module the client imports cluster_from_response from
    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        p = Producer(bootstrap_servers=fb.bootstrap, **{**FAST, "delivery_timeout_ms": 20000,
                                                       "max_block_ms": 10000})
        futs = []
        for wave in range(5):
            futs += [p.send("t", b"w%d-%d" % (wave, i)) for i in range(40)]
            time.sleep(0.1)
        res = outcomes(futs, 25)
        alive = sender_alive(p)
        stats = p.metrics()
        close_s = bounded_close(p, 5)
        stored = fb.cluster.record_count("t")
    return {"outcomes": res, "alive": alive, "left_armed": armed, "stored": stored,
            "contained": stats["net_contained_failures"], "close_s": close_s}


@scenario
def init_producer_id_minus_one():
    """InitProducerId answered with producer id -1 and no error: retried with a growing backoff,
    not in a storm."""
    with FaultBroker() as fb:
        fb.create_topic("t", 1)

        def minus_one(body, header, request):
            body["producer_id"] = -1
            body["producer_epoch"] = -1
        fb.script.on(ApiKey.INIT_PRODUCER_ID, rewrite_response(minus_one), times=None)
        p = Producer(bootstrap_servers=fb.bootstrap, retry_backoff_ms=100, retry_backoff_max_ms=1000,
                     delivery_timeout_ms=4000, request_timeout_ms=1000, linger_ms=0)
        fut = p.send("t", b"x")
        res = outcomes([fut], 10)
        requests = len(fb.received(ApiKey.INIT_PRODUCER_ID))
        failures = p.metrics()["init_producer_id_failures"]
        alive = sender_alive(p)
        close_s = bounded_close(p, 5)
    return {"outcomes": res, "requests": requests, "failures": failures, "alive": alive,
            "close_s": close_s}


@scenario
def sender_thread_dies():
    """The last resort: a bug kills the I/O thread mid-stream. Every queued and in-flight record
    gets an outcome, later sends are refused at once, close returns."""
    import fastkafka._producer.testing as sender_hooks

    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        p = Producer(bootstrap_servers=fb.bootstrap, **FAST)
        p.send("t", b"warm-up").get(10)

        def broken(stage, _sender):
            if stage == "run_once":
                raise RuntimeError("injected: a bug in the I/O loop")
        futs = [p.send("t", b"v%d" % i) for i in range(100)]
        sender_hooks.set_sender_failpoint(broken)
        p._sender.wakeup()
        p._sender.join(5)
        sender_hooks.set_sender_failpoint(None)
        res = outcomes(futs, 5)
        later = error_text(lambda: p.send("t", b"late"))
        close_s = bounded_close(p, 2)
    return {"outcomes": res, "later": later, "close_s": close_s}


@scenario
def callback_never_returns():
    """A delivery callback that never returns: close(1) still returns within 1 s + the grace, and
    every other record gets an outcome."""
    from fastkafka.producer import CLOSE_GRACE_S

    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        p = Producer(bootstrap_servers=fb.bootstrap, **{**FAST, "linger_ms": 50})
        block, blocking = threading.Event(), threading.Event()

        def never_returns(err, md):
            blocking.set()
            block.wait()

        first = p.send("t", b"first", on_delivery=never_returns)
        # The first batch is delivered; its callback now blocks the I/O thread.
        if not blocking.wait(10):
            raise RuntimeError("the first record's callback did not run within 10 s")
        futs = [p.send("t", b"v%d" % i) for i in range(50)]
        close_s = bounded_close(p, 1)
        res = outcomes(futs, 1)
        first_done = first.done()
        block.set()
    return {"close_s": close_s, "grace": CLOSE_GRACE_S, "outcomes": res, "first_done": first_done}


@scenario
def forked_child():
    """A producer used in a process forked after it was created fails at once, naming the fork; a
    new producer made in the child works; the parent's producer is unaffected."""
    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        p = Producer(bootstrap_servers=fb.bootstrap, **FAST)
        p.send("t", b"parent-1").get(10)
        r, w = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child
            try:
                t = time.monotonic()
                child = {"send": error_text(lambda: p.send("t", b"child")),
                         "flush": error_text(lambda: p.flush(1))}
                child["send_s"] = time.monotonic() - t
                q = Producer(bootstrap_servers=fb.bootstrap, **FAST)
                child["new_offset"] = q.send("t", b"child-new").get(10).offset
                q.close(5)
                os.write(w, json.dumps(child).encode())
            finally:
                os._exit(0)
        os.close(w)
        data = b""
        while chunk := os.read(r, 65536):
            data += chunk
        os.waitpid(pid, 0)
        parent_offset = p.send("t", b"parent-2").get(10).offset
        p.close(5)
    return {"child": json.loads(data), "parent_offset": parent_offset}


@scenario
def broker_loses_acknowledged_tail():
    """A broker that lost records it acknowledged (its unflushed tail): the producer tells the
    application through on_error with a typed error naming node, partition and what it had acked,
    counts it, logs an ERROR, bumps its epoch and delivers the rest."""
    reported = []
    errors_logged = []

    class Catch(logging.Handler):
        def emit(self, record):
            if record.levelno >= logging.ERROR:
                errors_logged.append(record.getMessage())
    logging.getLogger("fastkafka").addHandler(Catch())
    with FaultBroker() as fb:
        fb.create_topic("t", 1)
        p = Producer(bootstrap_servers=fb.bootstrap, on_error=reported.append, **FAST)
        first = [p.send("t", b"a%d" % i) for i in range(10)]
        assert p.flush(10) == 0
        acked = [f.get(1) for f in first]
        lost = fb.cluster.lose_tail("t", 0, batches=1)
        later = [p.send("t", b"b%d" % i) for i in range(10)]
        res = outcomes(later, 15)
        m = p.metrics()
        close_s = bounded_close(p, 5)
        stored = [sb.record_count for sb in fb.cluster.batches("t", 0)]
    err = reported[0] if reported else None
    return {"reported": len(reported), "type": type(err).__name__ if err else None,
            "message": str(err) if err else None,
            "fields": None if err is None else [err.node, err.topic, err.partition,
                                                err.acked_sequence_end, err.acked_offset],
            "node": fb.node_id, "last_acked_offset": acked[-1].offset, "lost_records": sum(b.record_count for b in lost),
            "later": res, "metric": m["broker_data_loss"], "epoch_bumps": m["epoch_bumps"],
            "error_logged": any("no longer has records" in e for e in errors_logged),
            "stored": stored, "close_s": close_s}


if __name__ == "__main__":
    logging.basicConfig(level=logging.WARNING, stream=sys.stderr)
    result = SCENARIOS[sys.argv[1]]()
    print("RESULT " + json.dumps(result), flush=True)
