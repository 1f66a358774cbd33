#!/usr/bin/env bash
# Create .venv (if needed) and install fastkafka (the distribution fastkafka-producer, editable) with
# its test dependencies, compiling the Cython extensions in place, then fetch Apache Kafka (the
# reference broker of the tests, the demo's `--broker kafka` and the benchmarks) from Maven Central
# into a cache outside the work tree.
# Needs python3 (3.10+) with venv, a C compiler, the Python headers, Java 17+ and Maven (both
# installed here with apt when missing and run as root).
set -euo pipefail
cd "$(dirname "$0")/.."
export FASTKAFKA_TEST_MODULES=1   # the test-only compiled modules too (setup.py; never in a wheel)
PY=${PYTHON:-python3}
bash scripts/system-packages.sh
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
