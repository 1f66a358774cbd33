"""Shared fixtures: one real broker process of each kind per session, topics, the mock cluster.

* ``kafka_broker``: a session-scoped one-node Apache Kafka (:class:`fastkafka_tools.apachekafka.KafkaCluster`,
  version ``$FASTKAFKA_KAFKA_VERSION``, default 4.4.0): the reference broker.
* ``tansu_broker`` / ``noida_broker``: session-scoped :class:`fastkafka_tools.localbroker.LocalBroker`
  (quick stand-ins).
* ``broker``: parametrized over all three (ids ``kafka`` / ``noida`` / ``tansu``); started lazily, so
  a run that selects only one kind starts only that process (``-k kafka``).
* ``pki`` / ``tls_kafka``: module-scoped certificates and a one-node Apache Kafka with TLS and
  SASL_SSL listeners made with them (``tests/tlskafka.py``), for the TLS and Spark security tests.
* ``kafka_cluster3``: a 3-node Apache Kafka cluster (replication factor 3, min.insync.replicas=2),
  module-scoped, for the failover tests only.
* ``fresh_topic(partitions=1, prefix="t") -> name``: a new topic on ``broker``.
* ``mock_cluster``: a function-scoped 3-broker librdkafka mock cluster (``tests.mockcluster``).
* ``claimed`` / ``dist``: the CPython versions pyproject.toml claims, and the session's sdist and
  repaired wheels built by ``scripts/wheel.sh`` on first use (``tests/packaging/distbuild.py``), for
  the packaging tests and the wheel the Spark cluster tests ship to their executors.
* ``spark``: one SparkSession for the whole session (master ``local[2,4]``: two cores, and a failed
  task is retried up to 4 times, as on a cluster; Spark's own Kafka sink's jars in ``spark.jars``),
  started lazily by the first test that needs it
  (tests/spark, the Spark examples of the documentation in tests/docs).

Tests that need a real broker carry ``@pytest.mark.broker`` (added automatically to every test that
uses one of these fixtures); ``-m "not broker"`` runs the rest.
"""
from __future__ import annotations

import os
import sys

import pytest

# Test folders mirror the source folders: tests/unit/<package>/<subpackage>/ holds the unit tests of
# the package folder <package>/<subpackage>/ under the same name (tests/unit/fastkafka/_wire/ for
# fastkafka/_wire/); tests of several subpackages at once sit in the nearest common folder.
# tests/unit/test_repo_hygiene.py enforces it. Test module basenames are unique across tests/ (there
# is no __init__.py: pytest imports each by its basename).

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
if ROOT not in sys.path:
    sys.path.insert(0, ROOT)
TESTS = os.path.dirname(os.path.abspath(__file__))
if TESTS not in sys.path:
    sys.path.insert(0, TESTS)
if os.path.join(TESTS, "packaging") not in sys.path:
    sys.path.insert(0, os.path.join(TESTS, "packaging"))    # distbuild (the dist fixture)

from brokers import read_back, unique_name  # noqa: E402
import seam_modules  # noqa: E402

# A test-only compiled module that is not built fails the tests that import it, saying how to build it.
seam_modules.install()

# live_resources: every test must leave the compiled core's live-resource counters as it found them.
pytest_plugins = ["live_resources", "pytester"]

BROKER_FIXTURES = {"broker", "tansu_broker", "noida_broker", "kafka_broker", "kafka_cluster3",
                   "fresh_topic", "tls_kafka"}
BROKER_KINDS = ("kafka", "noida", "tansu")
MOCK_FIXTURES = {"mock_cluster"}


def pytest_configure(config):
    # zstd's C path is off by default with a libzstd older than 1.5.7 (fastkafka._wire.ccodecs: it
    # was slower than the Python codec's); the suite turns it on so that it is tested like the others.
    # The default itself is tested in a child process (tests/unit/fastkafka/_wire/test_ccodecs.py).
    from fastkafka._wire import ccodecs
    ccodecs.use_c("zstd", True)
    config.addinivalue_line("markers", "broker: needs a real broker started by the fixtures")
    config.addinivalue_line("markers", "mock: uses librdkafka's mock cluster")
    config.addinivalue_line("markers", "faultbroker: uses the in-process fault-injecting test broker")
    config.addinivalue_line("markers", "spark: uses the session's SparkSession (tests/spark)")


def pytest_collection_modifyitems(config, items):
    for item in items:
        names = set(getattr(item, "fixturenames", ()))
        if names & BROKER_FIXTURES and not item.get_closest_marker("broker"):
            item.add_marker(pytest.mark.broker)
        if names & MOCK_FIXTURES and not item.get_closest_marker("mock"):
            item.add_marker(pytest.mark.mock)


def _start(kind: str):
    from fastkafka_tools.localbroker import LocalBroker

    return LocalBroker(kind=kind).start(timeout=20)


@pytest.fixture(scope="session")
def kafka_broker():
    """One Apache Kafka node for the whole session (small heap, C1-only JIT)."""
    from fastkafka_tools.apachekafka import KafkaCluster

    kc = KafkaCluster(nodes=1).start()
    yield kc
    kc.stop()


@pytest.fixture(scope="module")
def pki(tmp_path_factory):
    """Certificates made for the module (``fastkafka_tools.tlsrig.make_pki``)."""
    from fastkafka_tools.tlsrig import make_pki

    return make_pki(str(tmp_path_factory.mktemp("pki")))


@pytest.fixture(scope="module")
def tls_kafka(pki):
    """One Apache Kafka node with TLS and SASL_SSL listeners (``tests/tlskafka.py``), per module."""
    from tlskafka import tls_kafka_cluster

    kc = tls_kafka_cluster(pki).start()
    yield kc
    kc.stop()


@pytest.fixture(scope="module")
def kafka_cluster3():
    """Three Apache Kafka nodes, for the failover tests (started per module that asks for it)."""
    from fastkafka_tools.apachekafka import KafkaCluster

    kc = KafkaCluster(nodes=3).start()
    yield kc
    kc.stop()


@pytest.fixture(scope="session")
def tansu_broker():
    b = _start("tansu")
    yield b
    b.stop()


@pytest.fixture(scope="session")
def noida_broker():
    b = _start("noida")
    yield b
    b.stop()


@pytest.fixture(params=BROKER_KINDS, ids=lambda k: k)
def broker(request):
    """A running broker of each kind (the session's single process of that kind)."""
    b = request.getfixturevalue(f"{request.param}_broker")
    if not b.running:
        raise RuntimeError(f"session {request.param} broker died; last output:\n{b.last_output()}")
    return b


@pytest.fixture
def fresh_topic(broker):
    """Factory: ``fresh_topic(partitions=1, prefix="t")`` creates a uniquely named topic on ``broker``."""
    def make(partitions: int = 1, prefix: str = "t") -> str:
        name = unique_name(prefix)
        broker.create_topic(name, partitions)
        return name

    return make


@pytest.fixture
def mock_cluster():
    from mockcluster import MockCluster

    mc = MockCluster(3)
    try:
        yield mc
    finally:
        mc.destroy()


@pytest.fixture
def reader():
    """``read_back`` as a fixture, for tests that prefer injection over imports."""
    return read_back


@pytest.fixture(scope="session")
def spark():
    """The session's one SparkSession, with the data source ``fastkafka`` registered and Spark's
    own Kafka sink (``format("kafka")``, the peer of tests/spark/test_differential.py) on its
    classpath: its jars (``ensure_jars("spark-kafka")``, fetched once with Maven) in ``spark.jars``."""
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    from pyspark.sql import SparkSession

    import spark_sink
    from fastkafka_tools.apachekafka import ensure_jars

    jars = [os.path.join(folder, j) for folder in (ensure_jars("spark-kafka"), ensure_jars("spark-avro"))
            for j in sorted(os.listdir(folder)) if j.endswith(".jar")]      # + from_avro (tests/spark)

    session = (SparkSession.builder.master("local[2,4]").appName("fastkafka-tests")
               .config("spark.ui.enabled", "false")
               .config("spark.sql.shuffle.partitions", "4")
               .config("spark.sql.execution.arrow.maxRecordsPerBatch", "2000")
               .config("spark.driver.extraJavaOptions", "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC")
               .config("spark.jars", ",".join(jars))
               .getOrCreate())
    session.sparkContext.setLogLevel("ERROR")
    spark_sink.register(session)
    yield session
    session.stop()


@pytest.fixture(scope="session")
def claimed() -> list[str]:
    from distbuild import claimed_versions

    versions = claimed_versions()
    assert versions, "pyproject.toml has no 'Programming Language :: Python :: 3.X' classifier"
    return versions


@pytest.fixture(scope="session")
def dist(tmp_path_factory, claimed):
    """The session's sdist and wheels (``distbuild.Dist``), each built once when first asked for."""
    from distbuild import Dist, primary_version

    return Dist(root=tmp_path_factory.mktemp("dist"), versions=claimed, primary=primary_version(claimed))


# Schema Registry: the session's registry server (tests/schema_registry_rig.py).
from schema_registry_rig import schema_registry, schema_registry_server  # noqa: E402,F401

# Apicurio Registry: a real, independent registry server (tests/apicurio_rig.py).
from apicurio_rig import apicurio_registry  # noqa: E402,F401
