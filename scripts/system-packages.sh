#!/usr/bin/env bash
# The system packages the tests, the demo and the benchmarks need, installed with apt when missing
# (as root): Java 17+ (Spark, Apache Kafka), Maven (Kafka's jars), stunnel (TLS in front of tansu),
# the codecs' C libraries, libkrb5-dev (the gssapi package's build); with --tests also MIT
# Kerberos's KDC (krb5-kdc, krb5-admin-server, krb5-user) and, for the aarch64 tests and the Debian
# roots, gcc-aarch64-linux-gnu, qemu-user-static, binfmt-support and debootstrap. Called by scripts/setup.sh
# and scripts/test.sh (--tests); a no-op once they are there.
set -euo pipefail
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
# Apicurio Registry (tests/apicurio_rig.py) is built with Maven from a Java source: a JDK's javac.
if ! command -v javac >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q openjdk-17-jdk-headless
  else
    echo "Apicurio Registry is built with a JDK (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless)" >&2
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
# The gssapi package (the `gssapi` and `test` extras: SASL GSSAPI) is built by pip against MIT
# Kerberos where it has no wheel: krb5-config and the headers of libkrb5-dev.
if ! command -v krb5-config >/dev/null 2>&1; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q libkrb5-dev
  else
    echo "the gssapi package is built against MIT Kerberos (Debian/Ubuntu: apt-get install libkrb5-dev)" >&2
    exit 1
  fi
fi
# The GSSAPI tests run a throw-away MIT Kerberos realm (fastkafka_tools/kdc.py): krb5kdc,
# kdb5_util and kadmin.local (krb5-kdc, krb5-admin-server), kinit (krb5-user).
if [ "${1:-}" = --tests ] && { ! command -v kinit >/dev/null 2>&1 || [ ! -x /usr/sbin/krb5kdc ] || [ ! -x /usr/sbin/kadmin.local ]; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q krb5-kdc krb5-admin-server krb5-user
  else
    echo "the GSSAPI tests need MIT Kerberos's KDC (apt-get install krb5-kdc krb5-admin-server krb5-user)" >&2
    exit 1
  fi
fi
# The CRC-32C C vectors are also compiled by gcc for aarch64 (its "+crc" target attribute; run under
# qemu) and zig; qemu-user-static runs the aarch64 builds and the arm64 root (tests/unit/fastkafka/_wire,
# tests/packaging, buildtools/roots.py).
if [ "${1:-}" = --tests ] && [ "$(uname -m)" = x86_64 ] && { ! command -v aarch64-linux-gnu-gcc >/dev/null 2>&1 || ! command -v qemu-aarch64-static >/dev/null 2>&1 || ! command -v debootstrap >/dev/null 2>&1; }; then
  if command -v apt-get >/dev/null 2>&1 && [ "$(id -u)" = 0 ]; then
    apt-get update -q && apt-get install -y -q gcc-aarch64-linux-gnu qemu-user-static binfmt-support debootstrap
  else
    echo "the aarch64 tests need gcc-aarch64-linux-gnu, qemu-user-static, binfmt-support and debootstrap (apt-get install)" >&2
    exit 1
  fi
fi
