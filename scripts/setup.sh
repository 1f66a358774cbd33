#!/usr/bin/env bash
# Create .venv (if needed), install fastkafka (the distribution fastkafka-producer, editable) with its
# test dependencies, and compile the Cython extensions in place. Used by demo.sh, perf.sh and test.sh;
# test.sh then fetches what only the tests need (Apache Kafka's jars, the Spark 3.5 venv).
# Needs python3 (3.10+) with venv, a C compiler, the Python headers, Java 17+ and Maven (both
# installed here with apt when missing and run as root).
#
# A rerun is quick: the pip steps run again only when pyproject.toml, setup.py, this script or the
# interpreter changed (a stamp in .venv), and the in-place build compiles only the extensions whose
# sources changed. Every step prints a line when it starts, and a long one a line every 30 s.
set -euo pipefail
cd "$(dirname "$0")/.."
export FASTKAFKA_TEST_MODULES=1   # the test-only compiled modules too (setup.py; never in a wheel)
PY=${PYTHON:-python3}

# step WHAT COMMAND...: runs COMMAND, announced, with a line every 30 s while it is silent about it.
step() {
  local what=$1 t0=$SECONDS next=$((SECONDS + 30)) pid
  shift
  echo "==> $what"
  "$@" &
  pid=$!
  while ! wait_briefly "$pid"; do
    if (( SECONDS >= next )); then echo "    ... $what: $((SECONDS - t0)) s so far"; next=$((next + 30)); fi
  done
  wait "$pid" || { echo "setup: failed: $what" >&2; exit 1; }
  echo "    done in $((SECONDS - t0)) s: $what"
}
wait_briefly() { sleep 1; ! kill -0 "$1" 2>/dev/null; }

step "system packages (Java, Maven, stunnel, the codecs' libraries)" bash scripts/system-packages.sh
if [ ! -x .venv/bin/python ]; then
  step "create .venv with $PY" "$PY" -m venv .venv
fi
pip=(.venv/bin/python -m pip --disable-pip-version-check)

stamp=.venv/.fastkafka-setup
key=$(cat pyproject.toml setup.py scripts/setup.sh | sha256sum | cut -c1-16)-$(.venv/bin/python -c 'import sys; print(sys.version.split()[0])')
if [ "$(cat "$stamp" 2>/dev/null)" = "$key" ] && "${pip[@]}" show -q fastkafka-producer >/dev/null 2>&1; then
  echo "==> .venv is up to date with pyproject.toml and setup.py: no pip install"
else
  rm -f "$stamp"
  step "upgrade pip" "${pip[@]}" install --upgrade pip
  # The distribution is fastkafka-producer since 0.2.0 (the import name stays fastkafka). A venv made
  # before that has the project installed as "fastkafka": that install goes first, or its metadata and
  # import hook would linger beside the new one; so does the old name's in-tree build metadata.
  if "${pip[@]}" show -q fastkafka >/dev/null 2>&1; then
    step "uninstall the old distribution name fastkafka" "${pip[@]}" uninstall -y fastkafka
  fi
  rm -rf fastkafka.egg-info
  # The build requirements, so that the in-place build below (and `FASTKAFKA_EXT=name .venv/bin/python
  # setup.py build_ext --inplace` after editing a .pyx, bench/ab.py's trees) runs in this venv.
  step "install the build requirements (setuptools, Cython)" "${pip[@]}" install "setuptools>=77" "Cython>=3.0,<4"
  # The editable install without its extensions (FASTKAFKA_NO_EXTENSIONS): they are compiled in place
  # below, where a rerun recompiles only what changed; pip would compile all of them every time.
  step "install fastkafka-producer (editable) and its test dependencies (pyspark is large)" \
    env FASTKAFKA_NO_EXTENSIONS=1 "${pip[@]}" install --no-build-isolation -e ".[test]"
  echo "$key" >"$stamp"
fi
# fastkafka_tools (the local brokers, the Apache Kafka rig, the TLS certificates, the perf tool and the
# demo) is not part of the distribution: the work tree goes on the venv's path, so that
# `.venv/bin/python -m fastkafka_tools.<tool>` runs from any directory.
site=$(.venv/bin/python -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
echo "$PWD" >"$site/fastkafka-source-tree.pth"
step "compile the extensions in place (only those whose sources changed)" \
  .venv/bin/python setup.py build_ext --inplace
.venv/bin/python -c "import fastkafka._wire.records, fastkafka._producer.accumulator, fastkafka_tools; print('fastkafka built:', fastkafka.__version__)" \
  || { echo "build check failed" >&2; exit 1; }
