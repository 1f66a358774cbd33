"""Debian roots for the interpreters and architectures this machine does not have: CPython 3.14 and
3.15 (Debian unstable, amd64) and an arm64 Debian (bookworm, Python 3.11) run under qemu-user.

Each root is made once per machine with ``debootstrap`` into the cache outside the work tree
(``$FASTKAFKA_CACHE/roots/NAME``, default ``~/.cache/fastkafka/roots/NAME``), under a lock, in a
temporary folder renamed into place when complete. The packaging tests and ``scripts/wheel.sh``
use them: the wheels' headers come from the roots' ``-dev`` packages, and the wheels are installed
and tested inside them.

    python -m buildtools.roots ensure sid-amd64 bookworm-arm64   # make them (once)
    python -m buildtools.roots path sid-amd64                    # where it is
    python -m buildtools.roots run sid-amd64 -- python3.14 -V    # a command inside

``run`` mounts ``/proc`` and binds ``/dev`` (and the folders asked for) in a mount namespace of the
command's own: the host never sees them, and they end with the command. A root shares the host's network: a broker on 127.0.0.1 is
reachable from inside. Needs root, ``debootstrap`` and, for arm64, ``qemu-user-static`` with
``binfmt-support`` (installed with apt when missing, as scripts/setup.sh installs Java).
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass

from fastkafka_tools.apachekafka import _file_lock, cache_root


@dataclass(frozen=True)
class RootSpec:
    name: str
    suite: str
    arch: str               # Debian's name: amd64, arm64
    packages: tuple

    @property
    def foreign(self) -> bool:
        return self.arch != _host_arch()


ROOTS = {
    # CPython 3.14 and 3.15 with their headers (the x86_64 wheels' build) and venv (their tests);
    # the arm64 headers of both come from the same suite (fetched by ``arm64-headers``, below).
    "sid-amd64": RootSpec("sid-amd64", "sid", "amd64", (
        "python3.14", "python3.14-venv", "python3.14-dev",
        "python3.15", "python3.15-venv", "python3.15-dev", "ca-certificates")),
    # An arm64 Debian with its Python 3.11, run under qemu-user (binfmt_misc).
    "bookworm-arm64": RootSpec("bookworm-arm64", "bookworm", "arm64", (
        "python3", "python3-venv", "python3-dev", "ca-certificates")),
}

# Files of the host a root needs for pip: name resolution, the CA bundle, pip's own settings.
_HOST_FILES = ("/etc/resolv.conf", "/etc/ssl/certs/ca-certificates.crt", "/etc/pip.conf")
_MARKER = ".fastkafka-root"


class RootError(RuntimeError):
    """A root could not be made or entered (a missing tool, a failed debootstrap, no emulation)."""


def _host_arch() -> str:
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(os.uname().machine, os.uname().machine)


def roots_dir() -> str:
    return os.path.join(cache_root(), "roots")


def root_path(name: str) -> str:
    _spec(name)
    return os.path.join(roots_dir(), name)


def _spec(name: str) -> RootSpec:
    try:
        return ROOTS[name]
    except KeyError:
        raise RootError(f"no root named {name!r} (known: {', '.join(sorted(ROOTS))})") from None


def _marker_text(spec: RootSpec) -> str:
    return f"{spec.suite} {spec.arch} {' '.join(spec.packages)}\n"


def is_ready(name: str) -> bool:
    spec = _spec(name)
    try:
        with open(os.path.join(root_path(name), _MARKER)) as f:
            return f.read() == _marker_text(spec)
    except OSError:
        return False


def _apt_install(*packages: str) -> None:
    if os.geteuid() != 0 or shutil.which("apt-get") is None:
        raise RootError(f"needs {' '.join(packages)} (Debian/Ubuntu, as root: apt-get install "
                        f"{' '.join(packages)})")
    subprocess.run(["apt-get", "update", "-q"], check=True, stdout=subprocess.DEVNULL)
    subprocess.run(["apt-get", "install", "-y", "-q", *packages], check=True, stdout=subprocess.DEVNULL)


def ensure_emulation(arch: str) -> None:
    """arm64 programs run here (qemu-user through binfmt_misc), or RootError says why not."""
    if arch == _host_arch():
        return
    qemu = {"arm64": "aarch64"}.get(arch, arch)
    if shutil.which(f"qemu-{qemu}-static") is None or shutil.which("update-binfmts") is None:
        _apt_install("qemu-user-static", "binfmt-support")
    if not os.path.exists("/proc/sys/fs/binfmt_misc/register"):
        subprocess.run(["mount", "-t", "binfmt_misc", "binfmt_misc", "/proc/sys/fs/binfmt_misc"],
                       check=False, stderr=subprocess.DEVNULL)
    entry = f"/proc/sys/fs/binfmt_misc/qemu-{qemu}"
    if not os.path.exists(entry) or open(entry).readline().strip() != "enabled":
        subprocess.run(["update-binfmts", "--enable", f"qemu-{qemu}"], check=False,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if not os.path.exists(entry) or open(entry).readline().strip() != "enabled":
        raise RootError(f"{arch} programs cannot run here: binfmt_misc has no enabled qemu-{qemu} "
                        f"entry (needs root, qemu-user-static and binfmt-support)")


def ensure(name: str, quiet: bool = True) -> str:
    """The path of root ``name``, made with debootstrap the first time (safe from several processes)."""
    spec = _spec(name)
    target = root_path(name)
    if is_ready(name):
        if spec.foreign:
            ensure_emulation(spec.arch)
        return target
    if os.geteuid() != 0:
        raise RootError(f"making the {name} root needs root (debootstrap and chroot)")
    if shutil.which("debootstrap") is None:
        _apt_install("debootstrap")
    if spec.foreign:
        ensure_emulation(spec.arch)
    os.makedirs(roots_dir(), exist_ok=True)
    with _file_lock(os.path.join(roots_dir(), f".{name}.lock")):
        if is_ready(name):
            return target
        if os.path.exists(target):                  # an older package list, or a failed attempt
            _remove(target)
        tmp = tempfile.mkdtemp(prefix=f".{name}-", dir=roots_dir())
        cmd = ["debootstrap", f"--arch={spec.arch}", "--variant=minbase",
               f"--include={','.join(spec.packages)}", spec.suite, tmp]
        proc = subprocess.run(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT)
        if proc.returncode != 0:
            log = proc.stdout.decode("utf-8", "replace")[-3000:]
            _remove(tmp)
            raise RootError(f"debootstrap of {name} failed (exit {proc.returncode}):\n{log}")
        with open(os.path.join(tmp, _MARKER), "w") as f:
            f.write(_marker_text(spec))
        os.rename(tmp, target)
    return target


def ensure_packages(name: str, packages) -> None:
    """Debian packages installed in root ``name`` with its own apt (once: a marker lists what was
    installed), for what a test needs beyond the root's package list (codec libraries, stunnel)."""
    path = ensure(name)
    want = sorted(set(packages))
    marker = os.path.join(path, ".fastkafka-extra-packages")
    with _file_lock(os.path.join(roots_dir(), f".{name}.lock")):
        try:
            have = set(open(marker).read().split())
        except OSError:
            have = set()
        missing = [p for p in want if p not in have]
        if not missing:
            return
        # the mirror may serve a suite whose Release file is past its Valid-Until date (a snapshot)
        for argv in (["apt-get", "-o", "Acquire::Check-Valid-Until=false", "update", "-q"],
                     ["apt-get", "install", "-y", "-q", *missing]):
            r = run(name, argv, env={"DEBIAN_FRONTEND": "noninteractive"}, stdin=subprocess.DEVNULL,
                    stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            if r.returncode != 0:
                raise RootError(f"{' '.join(argv)} in the {name} root failed (exit {r.returncode}):\n"
                                f"{r.stdout.decode('utf-8', 'replace')[-3000:]}")
        with open(marker, "w") as f:
            f.write("\n".join(sorted(have | set(missing))) + "\n")


def _mounted(path: str) -> bool:
    real = os.path.realpath(path)
    with open("/proc/self/mounts") as f:
        return any(line.split()[1] == real for line in f)


def _remove(path: str) -> None:
    """Delete a root, never through a mount left in it."""
    for sub in ("dev", "proc"):
        p = os.path.join(path, sub)
        if _mounted(p):
            subprocess.run(["umount", "-l", p], check=False)
        if _mounted(p):
            raise RootError(f"{p} is still mounted: not deleting {path}")
    shutil.rmtree(path, ignore_errors=True)


def _prepare(path: str) -> None:
    for src in _HOST_FILES:
        if os.path.exists(src):
            dst = path + src
            os.makedirs(os.path.dirname(dst), exist_ok=True)
            if os.path.islink(dst):
                os.unlink(dst)
            shutil.copyfile(src, dst)


def run(name: str, argv: list, *, env: dict | None = None, binds: tuple = (), **kwargs):
    """subprocess.run(argv) inside root ``name`` (made if needed), with /proc and /dev mounted for
    the command; ``binds`` are host folders bound at the same path inside (e.g. a wheel's folder).
    Returns the CompletedProcess; kwargs go to subprocess.run.

    The mounts are made in a mount namespace of the command's own (``unshare --mount``): they are
    never seen on the host, go away with the command, and one command's end cannot unmount /proc or
    /dev under another running in the same root at the same time."""
    path = ensure(name)
    _prepare(path)
    # the host's tools by absolute path: ``env`` is the command's, its PATH may be a venv's alone
    tools = {t: shutil.which(t) for t in ("unshare", "mount", "chroot")}
    if None in tools.values():
        raise RootError(f"running a command in a root needs {', '.join(t for t, p in tools.items() if p is None)}"
                        f" (util-linux, coreutils)")
    mount, chroot = shlex.quote(tools["mount"]), shlex.quote(tools["chroot"])
    script = ["set -e", f"{mount} -t proc proc {shlex.quote(path + '/proc')}",
              f"{mount} --rbind /dev {shlex.quote(path + '/dev')}"]
    for host in binds:
        host = os.path.realpath(host)
        os.makedirs(path + host, exist_ok=True)
        script.append(f"{mount} --bind {shlex.quote(host)} {shlex.quote(path + host)}")
    script.append(f'exec {chroot} {shlex.quote(path)} "$@"')
    base_env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                "HOME": "/root", "LANG": "C.UTF-8"}
    if env:
        base_env.update(env)
    return subprocess.run([tools["unshare"], "--mount", "--propagation", "private", "/bin/sh", "-c",
                           "\n".join(script), "sh", *argv], env=base_env, **kwargs)


def main(argv: list | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(__doc__)
        return 0
    verb, rest = args[0], args[1:]
    try:
        if verb == "ensure":
            for name in rest or sorted(ROOTS):
                print(ensure(name))
            return 0
        if verb == "path":
            for name in rest:
                print(root_path(name))
            return 0
        if verb == "run":
            if "--" not in rest or rest.index("--") != 1:
                raise RootError("usage: run NAME -- COMMAND...")
            return run(rest[0], rest[2:]).returncode
    except RootError as e:
        print(f"roots: {e}", file=sys.stderr)
        return 1
    print(f"roots: unknown verb {verb!r} (ensure, path, run)", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
