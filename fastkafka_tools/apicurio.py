"""Apicurio Registry, run locally: a real Schema Registry server that speaks Confluent's REST API.

The project's own registry server (``fastkafka_tools.schema_registry_server``) is written to the
same API the serializers use, so agreeing with it proves little on its own. Apicurio Registry is an
independent implementation of Confluent's Schema Registry API (under ``/apis/ccompat/v7``); the
tests that run against it show that the serializers' requests and the schema ids they frame are
understood by a server the project did not write::

    with ApicurioRegistry() as reg:             # a free port, in-memory storage (H2)
        client = SchemaRegistryClient({"url": reg.url})   # http://127.0.0.1:PORT/apis/ccompat/v7

    url, stop = start_apicurio()                # the same, without a with-block

Apicurio is published on Maven Central as a plain jar of a Quarkus application, which runs only
after Quarkus's build step ("augmentation"). ``ensure_apicurio()`` does that step once per machine:
it writes a small Maven project into the cache (``cache_root()``, as for Apache Kafka's jars: outside
the work tree), whose classes are the application's jar unpacked and whose dependencies are the
application's own, and runs ``mvn package`` on it with Quarkus's Maven plugin. The result is a
runnable jar beside its ``lib/`` folder, reused by every later call (a ``.complete`` marker).

The version is :data:`APICURIO_VERSION` (2.4.2.Final, on Quarkus 2.16.4.Final): the 2.6 and 3.x
releases depend on a module (``apicurio-registry-schema-util-provider``) and Quarkus parent poms that
could not be resolved from Maven Central when this rig was written. Two more adjustments are made,
both at build time in the cache:

* the JSON Schema library the application depends on
  (``com.github.everit-org.json-schema:org.everit.json.schema``) is published outside Maven Central;
  the same library is taken under its Maven Central name, ``com.github.erosb:everit-json-schema``;
* the Quarkus extension that indexes run-time-changeable ("dynamic") configuration properties has no
  published deployment module, so it is left out and a bean stating that no property is dynamic
  takes its place: the server runs with the configuration it was started with, which is all the
  tests need.

Each server logs to ``<temp dir>/apicurio.log``; it is started in its own session and stopped by pid
(SIGTERM, then SIGKILL after a grace period), and every server still running is stopped at
interpreter exit. This module is a test rig; the producer itself needs no JVM.
"""
from __future__ import annotations

import atexit
import contextlib
import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
import urllib.error
import urllib.request
import weakref

from .apachekafka import _file_lock, cache_root
from .localbroker import LocalBrokerError, free_port

__all__ = ["ApicurioRegistry", "ApicurioRigError", "ensure_apicurio", "start_apicurio",
           "APICURIO_VERSION", "QUARKUS_VERSION", "CCOMPAT_PATH"]

APICURIO_VERSION = "2.4.2.Final"
# The Quarkus release the application was built with (the quarkus.version of its parent pom).
QUARKUS_VERSION = "2.16.4.Final"
# Where Apicurio serves Confluent's Schema Registry API.
CCOMPAT_PATH = "/apis/ccompat/v7"

_RUNNER = f"apicurio-registry-rig-{APICURIO_VERSION}-runner.jar"

_live: "weakref.WeakSet[ApicurioRegistry]" = weakref.WeakSet()
_live_lock = threading.Lock()
_build_lock = threading.Lock()


class ApicurioRigError(LocalBrokerError):
    """Maven or Java is missing, building the runnable application failed, or the server did not
    start or answer as asked."""


_POM = """<?xml version="1.0" encoding="UTF-8"?>
<!-- Made by fastkafka_tools.apicurio: Apicurio Registry's application jar, made runnable by
     Quarkus's build step. -->
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>fastkafka.rig</groupId>
  <artifactId>apicurio-registry-rig</artifactId>
  <version>{apicurio}</version>
  <packaging>jar</packaging>
  <properties>
    <apicurio.version>{apicurio}</apicurio.version>
    <quarkus.version>{quarkus}</quarkus.version>
    <maven.compiler.source>17</maven.compiler.source>
    <maven.compiler.target>17</maven.compiler.target>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencyManagement>
    <dependencies>
      <dependency>
        <groupId>io.quarkus</groupId>
        <artifactId>quarkus-bom</artifactId>
        <version>${{quarkus.version}}</version>
        <type>pom</type>
        <scope>import</scope>
      </dependency>
    </dependencies>
  </dependencyManagement>
  <dependencies>
    <!-- The application's dependencies (type pom: its jar itself is unpacked into the classes). -->
    <dependency>
      <groupId>io.apicurio</groupId>
      <artifactId>apicurio-registry-app</artifactId>
      <version>${{apicurio.version}}</version>
      <type>pom</type>
      <exclusions>
        <exclusion>
          <groupId>io.apicurio</groupId>
          <artifactId>apicurio-common-app-components-config-index</artifactId>
        </exclusion>
        <exclusion>
          <groupId>com.github.everit-org.json-schema</groupId>
          <artifactId>org.everit.json.schema</artifactId>
        </exclusion>
      </exclusions>
    </dependency>
    <dependency>
      <groupId>com.github.erosb</groupId>
      <artifactId>everit-json-schema</artifactId>
      <version>1.14.2</version>
    </dependency>
  </dependencies>
  <build>
    <plugins>
      <plugin>
        <groupId>org.apache.maven.plugins</groupId>
        <artifactId>maven-dependency-plugin</artifactId>
        <version>3.6.1</version>
        <executions>
          <execution>
            <id>unpack-application</id>
            <phase>process-classes</phase>
            <goals><goal>unpack</goal></goals>
            <configuration>
              <artifactItems>
                <artifactItem>
                  <groupId>io.apicurio</groupId>
                  <artifactId>apicurio-registry-app</artifactId>
                  <version>${{apicurio.version}}</version>
                  <type>jar</type>
                  <outputDirectory>${{project.build.outputDirectory}}</outputDirectory>
                </artifactItem>
              </artifactItems>
            </configuration>
          </execution>
        </executions>
      </plugin>
      <plugin>
        <groupId>io.quarkus</groupId>
        <artifactId>quarkus-maven-plugin</artifactId>
        <version>${{quarkus.version}}</version>
        <executions>
          <execution>
            <goals><goal>build</goal></goals>
          </execution>
        </executions>
      </plugin>
    </plugins>
  </build>
</project>
"""

# Stands in for the dynamic-configuration index that the left-out Quarkus extension would build.
_STATIC_CONFIG_BEAN = """package fastkafka.rig;

import java.util.List;
import javax.enterprise.context.ApplicationScoped;
import javax.enterprise.inject.Produces;
import javax.inject.Singleton;

import io.apicurio.common.apps.config.DynamicConfigPropertyList;

/** No configuration property can be changed at run time: the server keeps its start-up settings. */
@ApplicationScoped
public class StaticConfigProperties {
    @Produces
    @Singleton
    DynamicConfigPropertyList noDynamicProperties() {
        return new DynamicConfigPropertyList(List.of());
    }
}
"""


def ensure_apicurio(quiet: bool = True) -> str:
    """The path of Apicurio Registry's runnable jar, built with Maven the first time (a few minutes,
    most of it fetching; later calls return at once). Safe to call from several processes at once."""
    target = os.path.join(cache_root(), f"apicurio-{APICURIO_VERSION}")
    runner = os.path.join(target, _RUNNER)
    marker = os.path.join(target, ".complete")
    if os.path.exists(marker):
        return runner
    mvn = shutil.which("mvn")
    if mvn is None:
        raise ApicurioRigError("Apicurio Registry is built with Maven, and `mvn` is not on PATH "
                               "(Debian/Ubuntu: apt-get install maven; scripts/setup.sh does this)")
    if shutil.which("javac") is None:
        raise ApicurioRigError("building Apicurio Registry compiles one Java class, and `javac` (a JDK) "
                               "is not on PATH (Debian/Ubuntu: apt-get install openjdk-17-jdk-headless; "
                               "scripts/system-packages.sh does this)")
    os.makedirs(cache_root(), exist_ok=True)
    with _build_lock, _file_lock(os.path.join(cache_root(), ".apicurio.lock")):
        if os.path.exists(marker):
            return runner
        tmp = tempfile.mkdtemp(prefix=".apicurio-", dir=cache_root())
        try:
            project = os.path.join(tmp, "project")
            source = os.path.join(project, "src", "main", "java", "fastkafka", "rig")
            os.makedirs(source)
            with open(os.path.join(project, "pom.xml"), "w") as f:
                f.write(_POM.format(apicurio=APICURIO_VERSION, quarkus=QUARKUS_VERSION))
            with open(os.path.join(source, "StaticConfigProperties.java"), "w") as f:
                f.write(_STATIC_CONFIG_BEAN)
            cmd = [mvn, "-B", "-f", os.path.join(project, "pom.xml"), "package", "-DskipTests",
                   "-Dquarkus.package.type=legacy-jar"]
            if quiet:
                cmd.insert(1, "-q")
            proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                  stderr=subprocess.STDOUT, cwd=project)
            built = os.path.join(project, "target", _RUNNER)
            if proc.returncode != 0 or not os.path.exists(built):
                tail = proc.stdout.decode("utf-8", "replace")[-3000:]
                raise ApicurioRigError(f"building Apicurio Registry {APICURIO_VERSION} with Maven failed "
                                       f"(exit {proc.returncode}):\n{tail}")
            # The runner jar names its libraries as lib/<name>.jar in its manifest: keep them beside it.
            app = os.path.join(tmp, "app")
            os.makedirs(app)
            os.replace(built, os.path.join(app, _RUNNER))
            os.replace(os.path.join(project, "target", "lib"), os.path.join(app, "lib"))
            shutil.rmtree(target, ignore_errors=True)
            os.replace(app, target)
            with open(marker, "w") as f:
                f.write(APICURIO_VERSION + "\n")
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return runner


class ApicurioRegistry:
    """One Apicurio Registry server on 127.0.0.1, in-memory storage; :attr:`url` is the base URL of
    its Confluent-compatible API, for ``SchemaRegistryClient({"url": ...})``."""

    def __init__(self, port: int = 0, heap_mb: int = 256, log_dir: str | None = None):
        self.host = "127.0.0.1"
        self.port = port or free_port()
        self.heap_mb = heap_mb
        self._own_dir = log_dir is None
        self.log_dir = log_dir or tempfile.mkdtemp(prefix="fastkafka-apicurio-")
        self.log_file = os.path.join(self.log_dir, "apicurio.log")
        self._proc: subprocess.Popen | None = None
        self.startup_seconds: float | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.port}{CCOMPAT_PATH}"

    @property
    def pid(self) -> int | None:
        return self._proc.pid if self._proc is not None else None

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def __repr__(self) -> str:
        return f"<ApicurioRegistry {self.url} {'running' if self.running else 'stopped'}>"

    def __enter__(self) -> "ApicurioRegistry":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()

    def command(self) -> list[str]:
        java = shutil.which("java")
        if java is None:
            raise ApicurioRigError("Apicurio Registry needs a Java 17+ runtime on PATH "
                                   "(Debian/Ubuntu: apt-get install openjdk-17-jre-headless)")
        return [java, f"-Xmx{self.heap_mb}m", "-Xms64m", "-XX:+UseSerialGC",
                # a quick start and little compiler CPU on a 2-core machine
                "-XX:TieredStopAtLevel=1", "-Djava.awt.headless=true",
                f"-Dquarkus.http.host={self.host}", f"-Dquarkus.http.port={self.port}",
                # the in-memory database needs no pool of 20 connections
                "-Dquarkus.datasource.jdbc.min-size=1", "-Dquarkus.datasource.jdbc.initial-size=1",
                "-Dquarkus.datasource.jdbc.max-size=8",
                "-jar", ensure_apicurio()]

    def start(self, timeout: float = 120.0) -> "ApicurioRegistry":
        """Start the server and return once ``GET <url>/subjects`` answers 200."""
        if self.running:
            return self
        cmd = self.command()
        env = dict(os.environ, HTTP_PORT=str(self.port))
        began = time.monotonic()
        with open(self.log_file, "ab") as out:
            self._proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT,
                                          env=env, start_new_session=True, close_fds=True)
        with _live_lock:
            _live.add(self)
        try:
            self._wait_answering(began + timeout)
        except BaseException:
            self.stop(remove_log=False)   # the error names the log file: keep it
            raise
        self.startup_seconds = time.monotonic() - began
        return self

    def _wait_answering(self, deadline: float) -> None:
        last: Exception | None = None
        while True:
            if self._proc is None or self._proc.poll() is not None:
                rc = None if self._proc is None else self._proc.returncode
                raise ApicurioRigError(f"Apicurio Registry exited with code {rc} during start-up; "
                                       f"last output ({self.log_file}):\n{self.last_output()}")
            try:
                with urllib.request.urlopen(f"{self.url}/subjects", timeout=2) as resp:
                    if resp.status == 200:
                        return
                    last = ApicurioRigError(f"HTTP {resp.status}")
            except (OSError, urllib.error.URLError) as e:
                last = e
            if time.monotonic() >= deadline:
                raise ApicurioRigError(f"Apicurio Registry on {self.url} did not answer GET /subjects "
                                       f"in time (last error: {last!r}); last output ({self.log_file}):\n"
                                       f"{self.last_output()}")
            time.sleep(0.2)

    def stop(self, grace: float = 15.0, remove_log: bool = True) -> int | None:
        """SIGTERM, SIGKILL after ``grace`` seconds; reaps the process and removes the log folder
        the server made for itself (``remove_log``). Returns the exit code."""
        proc = self._proc
        if proc is None:
            return None
        if proc.poll() is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(proc.pid, signal.SIGTERM)
            try:
                proc.wait(grace)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.killpg(proc.pid, signal.SIGKILL)
                proc.wait(10)
        self._proc = None
        with _live_lock:
            _live.discard(self)
        if remove_log and self._own_dir:
            shutil.rmtree(self.log_dir, ignore_errors=True)
        return proc.returncode

    def last_output(self, n: int = 40) -> str:
        with contextlib.suppress(OSError):
            with open(self.log_file, "rb") as f:
                f.seek(0, os.SEEK_END)
                f.seek(max(0, f.tell() - 16384))
                return "\n".join(f.read().decode("utf-8", "replace").splitlines()[-n:])
        return ""


def start_apicurio(port: int = 0, heap_mb: int = 256):
    """Start a server; returns ``(url, stop)``: the Confluent-compatible API's base URL and a
    function that stops the server."""
    reg = ApicurioRegistry(port=port, heap_mb=heap_mb).start()
    return reg.url, reg.stop


@atexit.register
def _stop_all() -> None:
    with _live_lock:
        servers = list(_live)
    for reg in servers:
        with contextlib.suppress(Exception):
            reg.stop(grace=5.0)


def main(argv: list[str] | None = None) -> int:
    """``python -m fastkafka_tools.apicurio build``: build the runnable jar (setup does this);
    ``run [--port N]``: start a server and keep it running until Ctrl-C."""
    import argparse

    ap = argparse.ArgumentParser(prog="python -m fastkafka_tools.apicurio")
    sub = ap.add_subparsers(dest="cmd", required=True)
    sub.add_parser("build", help="build Apicurio Registry's runnable jar with Maven (cached)")
    r = sub.add_parser("run", help="start a server and keep it running until Ctrl-C")
    r.add_argument("--port", type=int, default=0, help="default: a free port")
    args = ap.parse_args(argv)
    if args.cmd == "build":
        print(f"Apicurio Registry {APICURIO_VERSION}: {ensure_apicurio()}", flush=True)
        return 0
    with ApicurioRegistry(port=args.port) as reg:
        print(f"schema.registry.url={reg.url} (started in {reg.startup_seconds:.1f} s; log: {reg.log_file})",
              flush=True)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGINT, signal.SIGTERM})
        signal.sigwait({signal.SIGINT, signal.SIGTERM})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
