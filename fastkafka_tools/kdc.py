"""A throw-away MIT Kerberos realm for the GSSAPI tests: a KDC (``krb5kdc``) in the foreground as a
child process, its database, principals and keytabs in a temporary directory.

:class:`Kdc` makes, at :meth:`Kdc.start`, a ``krb5.conf`` and a ``kdc.conf`` (the KDC on a free
port of 127.0.0.1, TCP only so that the JVM and libkrb5 talk alike), the database (``kdb5_util
create -s``, with a stash file) and the principals (``kadmin.local``). Nothing outside the
temporary directory is used or changed: the machine's ``/etc/krb5.conf`` is never read, because
every command gets ``KRB5_CONFIG`` / ``KRB5_KDC_PROFILE`` in its own environment, and
:meth:`Kdc.environ` gives the same variables for the process that uses the realm (set them with
``os.environ.update`` for libkrb5 in this process; the broker's JVM takes
``-Djava.security.krb5.conf``).

Helpers make what the tests need: a principal with a keytab (:meth:`Kdc.add_principal`), a keytab
the KDC no longer accepts (:meth:`Kdc.stale_keytab`: the principal re-keyed after the keytab was
written), a ticket cache from ``kinit`` with a short lifetime (:meth:`Kdc.kinit`), and a KDC that is
down (:meth:`Kdc.stop_kdc` / :meth:`Kdc.start_kdc`) or that accepts connections and never answers
(:meth:`Kdc.silence`). The Debian packages are ``krb5-kdc``, ``krb5-admin-server`` and
``krb5-user`` (scripts/system-packages.sh --tests installs them).
"""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import threading
import time

from fastkafka_tools.localbroker import free_port

__all__ = ["Kdc", "KdcError", "REALM"]

REALM = "FASTKAFKA.TEST"
_SBIN = ("/usr/sbin", "/usr/local/sbin", "/sbin")


class KdcError(RuntimeError):
    """The realm could not be made or the KDC did not start (the tool's output is in the message)."""


def _tool(name: str) -> str:
    path = shutil.which(name) or next((os.path.join(d, name) for d in _SBIN
                                       if os.path.exists(os.path.join(d, name))), None)
    if path is None:
        raise KdcError(f"{name} is not installed: the Kerberos tests need MIT Kerberos "
                       f"(Debian/Ubuntu: apt-get install krb5-kdc krb5-admin-server krb5-user)")
    return path


class Kdc:
    """One realm with its KDC; use as a context manager or call :meth:`start` / :meth:`close`."""

    def __init__(self, realm: str = REALM, max_life_s: int = 3600):
        self.realm = realm
        self.max_life_s = max_life_s
        self.dir = tempfile.mkdtemp(prefix="fastkafka-kdc-")
        self.port = free_port()
        self.krb5_conf = os.path.join(self.dir, "krb5.conf")
        self.kdc_conf = os.path.join(self.dir, "kdc.conf")
        self.log_file = os.path.join(self.dir, "kdc.log")
        self._proc: subprocess.Popen | None = None
        self._silent: socket.socket | None = None
        self._silent_conns: list[socket.socket] = []
        self._silent_thread: threading.Thread | None = None
        self._count = 0

    # -- set-up ---------------------------------------------------------------------------
    def environ(self) -> dict[str, str]:
        """The variables that point libkrb5 at this realm (and nowhere else)."""
        return {"KRB5_CONFIG": self.krb5_conf, "KRB5_KDC_PROFILE": self.kdc_conf,
                "KRB5CCNAME": f"FILE:{os.path.join(self.dir, 'default.ccache')}"}

    def _env(self, extra: dict | None = None) -> dict:
        env = dict(os.environ)
        env.update(self.environ())
        env.update(extra or {})
        return env

    def _run(self, cmd: list[str], extra_env: dict | None = None, stdin: str | None = None,
             check: bool = True) -> subprocess.CompletedProcess:
        proc = subprocess.run(cmd, input=(stdin or "").encode(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, env=self._env(extra_env), timeout=60)
        if check and proc.returncode != 0:
            raise KdcError(f"{os.path.basename(cmd[0])} failed (exit {proc.returncode}): "
                           f"{proc.stdout.decode('utf-8', 'replace')[-2000:]}")
        return proc

    def kadmin(self, query: str) -> str:
        """Run one ``kadmin.local`` query against the realm; its output."""
        return self._run([_tool("kadmin.local"), "-r", self.realm, "-q", query]).stdout.decode(
            "utf-8", "replace")

    def _write_config(self) -> None:
        with open(self.krb5_conf, "w") as f:
            f.write(f"""[libdefaults]
    default_realm = {self.realm}
    dns_lookup_realm = false
    dns_lookup_kdc = false
    dns_canonicalize_hostname = false
    rdns = false
    udp_preference_limit = 1
    ticket_lifetime = {self.max_life_s}
    forwardable = false
    permitted_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
    default_tkt_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
    default_tgs_enctypes = aes256-cts-hmac-sha1-96 aes128-cts-hmac-sha1-96
    kdc_timeout = 3000
    max_retries = 1

[realms]
    {self.realm} = {{
        kdc = tcp/127.0.0.1:{self.port}
        kdc = 127.0.0.1:{self.port}
    }}

[domain_realm]
    localhost = {self.realm}
    .localhost = {self.realm}
""")
        with open(self.kdc_conf, "w") as f:
            f.write(f"""[kdcdefaults]
    kdc_listen = 127.0.0.1:{self.port}
    kdc_tcp_listen = 127.0.0.1:{self.port}

[realms]
    {self.realm} = {{
        database_name = {os.path.join(self.dir, 'principal')}
        key_stash_file = {os.path.join(self.dir, 'stash')}
        acl_file = {os.path.join(self.dir, 'kadm5.acl')}
        max_life = {self.max_life_s}s
        max_renewable_life = 0
        supported_enctypes = aes256-cts-hmac-sha1-96:normal aes128-cts-hmac-sha1-96:normal
    }}

[logging]
    kdc = FILE:{self.log_file}
    admin_server = FILE:{self.log_file}
    default = FILE:{self.log_file}
""")
        with open(os.path.join(self.dir, "kadm5.acl"), "w") as f:
            f.write("")

    def start(self) -> "Kdc":
        """Make the realm (first time) and start the KDC."""
        if not os.path.exists(os.path.join(self.dir, "principal")):
            self._write_config()
            master = os.urandom(12).hex()
            self._run([_tool("kdb5_util"), "-r", self.realm, "create", "-s", "-W", "-P", master])
        self.start_kdc()
        return self

    def start_kdc(self, timeout: float = 15.0) -> None:
        """Start ``krb5kdc -n`` (foreground) and wait until its port takes connections."""
        self._unsilence()
        if self._proc is not None and self._proc.poll() is None:
            return
        out = open(os.path.join(self.dir, "krb5kdc.out"), "ab")
        try:
            self._proc = subprocess.Popen([_tool("krb5kdc"), "-n", "-r", self.realm],
                                          stdin=subprocess.DEVNULL, stdout=out,
                                          stderr=subprocess.STDOUT, env=self._env(),
                                          start_new_session=True, close_fds=True)
        finally:
            out.close()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._proc.poll() is not None:
                raise KdcError(f"krb5kdc exited with {self._proc.returncode}: {self.last_output()}")
            try:
                socket.create_connection(("127.0.0.1", self.port), timeout=0.5).close()
                return
            except OSError:
                time.sleep(0.05)
        self.stop_kdc()
        raise KdcError(f"krb5kdc did not listen on 127.0.0.1:{self.port} within {timeout} s: "
                       f"{self.last_output()}")

    def stop_kdc(self) -> None:
        """Stop the KDC (its port then refuses connections); the realm's files stay."""
        proc, self._proc = self._proc, None
        if proc is not None and proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(10)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def silence(self) -> None:
        """Stop the KDC and listen on its port without ever answering: a KDC that hangs."""
        self.stop_kdc()
        sock = socket.socket()
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(("127.0.0.1", self.port))
        sock.listen(16)
        self._silent = sock

        def accept():
            while True:
                try:
                    conn, _ = sock.accept()
                except OSError:
                    return
                self._silent_conns.append(conn)   # kept open, never read from or answered

        self._silent_thread = threading.Thread(target=accept, name="kdc-silent", daemon=True)
        self._silent_thread.start()

    def _unsilence(self) -> None:
        sock, self._silent = self._silent, None
        if sock is None:
            return
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        sock.close()
        for conn in self._silent_conns:
            conn.close()
        self._silent_conns.clear()
        if self._silent_thread is not None:
            self._silent_thread.join(5)

    @property
    def running(self) -> bool:
        return self._proc is not None and self._proc.poll() is None

    def last_output(self, n: int = 4000) -> str:
        text = ""
        for name in ("krb5kdc.out", "kdc.log"):
            try:
                with open(os.path.join(self.dir, name), "rb") as f:
                    text += f.read().decode("utf-8", "replace")[-n:]
            except OSError:
                pass
        return text

    def close(self) -> None:
        """Stop the KDC and remove the realm's directory."""
        self._unsilence()
        self.stop_kdc()
        shutil.rmtree(self.dir, ignore_errors=True)

    def __enter__(self) -> "Kdc":
        return self.start()

    def __exit__(self, *exc) -> None:
        self.close()

    # -- principals, keytabs, tickets -----------------------------------------------------
    def principal(self, name: str) -> str:
        return name if "@" in name else f"{name}@{self.realm}"

    def add_principal(self, name: str, keytab: str | None = None, max_life_s: int | None = None) -> str:
        """Make principal ``name`` (random key) and write its keytab; the keytab's path."""
        principal = self.principal(name)
        life = f"-maxlife {max_life_s}s " if max_life_s else ""
        self.kadmin(f"addprinc -randkey {life}{principal}")
        if keytab is None:
            self._count += 1
            keytab = os.path.join(self.dir, f"{name.replace('/', '_')}-{self._count}.keytab")
        self.kadmin(f"ktadd -k {keytab} {principal}")
        return keytab

    def stale_keytab(self, name: str) -> str:
        """A keytab of principal ``name`` (made here) that the KDC refuses: the principal is re-keyed
        after the keytab was written, so its key has an old version number."""
        keytab = self.add_principal(name)
        self.kadmin(f"cpw -randkey {self.principal(name)}")   # a new key (kvno + 1); the old one gone
        return keytab

    def kinit(self, principal: str, keytab: str, lifetime_s: int | None = None,
              ccache: str | None = None) -> str:
        """``kinit -k -t keytab principal`` into a new ticket cache (``lifetime_s``: ``-l``); the
        cache's name (``FILE:...``) for KRB5CCNAME or the producer's ticket cache setting."""
        if ccache is None:
            self._count += 1
            ccache = "FILE:" + os.path.join(self.dir, f"ccache-{self._count}")
        cmd = [_tool("kinit"), "-k", "-t", keytab]
        if lifetime_s is not None:
            cmd += ["-l", f"{lifetime_s}s"]
        self._run(cmd + [self.principal(principal)], extra_env={"KRB5CCNAME": ccache})
        return ccache
