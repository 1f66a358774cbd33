#!/usr/bin/env bash
# Create .venv (if needed) and install fastkafka (the distribution fastkafka-producer, editable) with
# its test dependencies, compiling the Cython extensions in place, then fetch Apache Kafka (the
# reference broker of the tests, the demo's `--broker kafka` and the benchmarks) from Maven Central
# into a cache outside the work tree.
# Needs python3 (3.10+) with venv, a C compiler, the Python headers, Java 17+ and Maven (both
# installed here with apt when missing and run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
# Spark (the sink's tests and the demo) needs a Java 17+ runtime on PATH.
if ! command -v java >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q openjdk-17-jre-headless
  else
    echo "Spark needs Java 17+ on PATH (Debian/Ubuntu: apt-get install openjdk-17-jre-headless)" >&2
    exit 1
  fi
fi
# Apache Kafka's jars are fetched with Maven.
if ! command -v mvn >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q maven
  else
    echo "Apache Kafka's jars are fetched with Maven (Debian/Ubuntu: apt-get install maven)" >&2
    exit 1
  fi
fi
# stunnel puts TLS in front of tansu for the TLS tests (tests/integration/test_tls.py).
if ! command -v stunnel4 >/dev/null 2>&1 && ! command -v stunnel >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q stunnel4
  else
    echo "the TLS tests need stunnel (Debian/Ubuntu: apt-get install stunnel4)" >&2
    exit 1
  fi
fi
# The CRC-32C C vectors are also compiled by gcc for aarch64 (its "+crc" target attribute; run under
# qemu) and zig; qemu-user-static runs the aarch64 builds and the arm64 root (tests/unit/fastkafka/wire,
# tests/packaging, buildtools/roots.py).
if [ "$(uname -m)" = x86_64 ] && { ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q gcc-aarch64-linux-gnu qemu-user-static binfmt-support debootstrap
  else
    echo "the aarch64 tests need gcc-aarch64-linux-gnu, qemu-user-static, binfmt-support and debootstrap (apt-get install)" >&2
    exit 1
  fi
fi
# The codecs' C libraries: batches are compressed in C without the GIL when they are on the machine
# (opened at run time; a missing one means that codec is compressed in Python). The tests expect all four.
missing_codecs=""
for pair in libz.so.1:zlib1g libsnappy.so.1:libsnappy1v5 liblz4.so.1:liblz4-1 libzstd.so.1:libzstd1; do
  if ! ldconfig -p 2>/dev/null | grep -q "${pair%%:*}"; then missing_codecs="$missing_codecs ${pair#*:}"; fi
done
if [ -n "$missing_codecs" ]; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q $missing_codecs
  else
    echo "without$missing_codecs those codecs are compressed in Python (Debian/Ubuntu: apt-get install$missing_codecs)" >&2
  fi
fi
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
# The distribution is fastkafka-producer since 0.2.0 (the import name stays fastkafka). A venv made
# before that has the project installed as "fastkafka": that install goes first, or its metadata and
# import hook would linger beside the new one; so does the old name's in-tree build metadata.
if .venv/bin/python -m pip show -q fastkafka >/dev/null 2>&1; then
  .venv/bin/python -m pip uninstall -y -q fastkafka
fi
rm -rf fastkafka.egg-info
.venv/bin/python -m pip install -q -e ".[test]"
# The build requirements too, so that an in-place rebuild after editing a .pyx
# (`FASTKAFKA_EXT=name .venv/bin/python setup.py build_ext --inplace`, bench/ab.py's trees) works here.
.venv/bin/python -m pip install -q "setuptools>=77" "Cython>=3.0,<4"
.venv/bin/python -c "import fastkafka._wire.records, fastkafka._producer.accumulator; print('fastkafka built:', fastkafka.__version__)" \
  || { echo "build check failed" >&2; exit 1; }
# Apache Kafka's broker and tools jars ($FASTKAFKA_KAFKA_VERSION, default 4.4.0); a no-op once cached.
.venv/bin/python -m fastkafka_tools.apachekafka fetch --tools
# The Spark 3.5 environment of tests/spark35 (partition_writer / batch_writer on Spark 3.x): a venv of
# its own in the same cache (pyspark 3.5 cannot share one with pyspark 4.2); a no-op once made.
.venv/bin/python -m fastkafka_tools.spark35 >/dev/null
