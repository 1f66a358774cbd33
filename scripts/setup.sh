#!/usr/bin/env bash
# Create .venv (if needed) and install fastkafka with its test dependencies, compiling the Cython
# extensions in place. Needs python3 (3.10+) with venv, a C compiler, the Python headers and
# Java 17+ (installed here with apt when missing and run as root).
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
if [ ! -x .venv/bin/python ]; then
  "$PY" -m venv .venv
fi
.venv/bin/python -m pip install -q --upgrade pip
.venv/bin/python -m pip install -q -e ".[test]"
.venv/bin/python -c "import fastkafka._wire.records, fastkafka._core.accumulator; print('fastkafka built:', fastkafka.__version__)" \
  || { echo "build check failed" >&2; exit 1; }
