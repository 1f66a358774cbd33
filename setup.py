"""Build script: compiles every ``.pyx`` under ``fastkafka/`` (and ``spark_sink/``).

Linux only: the compiled I/O loop uses epoll, eventfd, timerfd and futexes, so on any other platform
this script stops at once with a message, before anything is compiled.

The ``.pyx`` files are translated to C by the ``build_ext`` command (not when this file is loaded), so
making an sdist or reading the metadata runs no Cython and puts no generated C into the sdist.

Environment knobs (for development only):
  FASTKAFKA_EXT=a,b     build only the extensions whose dotted name contains one of these
  FASTKAFKA_DEBUG=1     keep Cython bounds/wraparound checks on and build with -O0 -g
  FASTKAFKA_JOBS=n      compile n extensions at once (default: the CPUs this process may use)
  FASTKAFKA_TEST_MODULES=1
                        also build the test-only modules (TEST_MODULES: seams into the compiled
                        core that only the tests call); ``scripts/setup.sh`` sets it. Without it
                        (a wheel, ``pip install .``, ``python -m build``) they are left out;
                        ``scripts/wheel.sh --test-modules`` compiles them alone, for a test run
                        beside an installed wheel.

And one for the wheel builder (buildtools/crosswheels.py, ``scripts/wheel.sh``), which compiles the
extensions itself, for every CPython and architecture, with zig for glibc 2.17:
  FASTKAFKA_NO_EXTENSIONS=1   a wheel of the Python files and metadata only

Importing this file (``import setup``) defines extensions() and CYTHON_DIRECTIVES without building.
"""
import sys


def unsupported_platform_message(platform: str) -> "str | None":
    """Why fastkafka-producer cannot be built on ``platform`` (a ``sys.platform`` value), or None."""
    if platform.startswith("linux"):
        return None
    return (f"fastkafka-producer builds and runs on Linux only (its I/O loop uses epoll, eventfd, "
            f"timerfd and futexes); this platform is sys.platform == {platform!r}")


# The wheels there are (buildtools/crosswheels.py, docs/platforms.md): named when a build from the
# sdist cannot start, since pip takes the sdist only when none of them fits.
WHEELS = ("CPython 3.10-3.15 on Linux x86_64 and aarch64 with glibc 2.17 or newer "
          "(manylinux2014)")


def build_prerequisites_message(cc: str, compiler: "str | None", include_dir: str, has_python_h: bool,
                                machine: str, python: str, libc: str) -> "str | None":
    """Why the extensions cannot be compiled here (no C compiler, no Python.h), or None: one
    message naming what is missing, the wheels that need neither, and how to get them."""
    missing = []
    if compiler is None:
        missing.append(f"a C compiler ({cc!r} is not on PATH; $CC names another)")
    if not has_python_h:
        missing.append(f"the Python headers (no Python.h in {include_dir})")
    if not missing:
        return None
    return (f"fastkafka-producer cannot be built from source here: missing {' and '.join(missing)}.\n"
            f"  pip chose the sdist because no wheel fits this machine ({python}, {machine}, {libc}).\n"
            f"  Wheels, which need no compiler, exist for {WHEELS}:\n"
            f"    pip install --only-binary fastkafka-producer fastkafka-producer\n"
            f"  (with --find-links DIR for the wheels of `bash scripts/wheel.sh --all`).\n"
            f"  Otherwise install a compiler and the headers, then retry (Debian/Ubuntu: apt-get install "
            f"gcc python3-dev; RHEL/Rocky/Alma: dnf install gcc python3-devel; Alpine is not supported).")


def free_threaded_message(gil_disabled) -> "str | None":
    """The refusal of a free-threaded CPython (``Py_GIL_DISABLED``), or None."""
    if not gil_disabled:
        return None
    return ("fastkafka-producer does not support the free-threaded build of CPython (3.14t, 3.15t): "
            "none could be built or tested for it (docs/platforms.md). Use the standard build of "
            "the same CPython, for which wheels exist.")


def _check_build_prerequisites() -> None:
    import platform
    import shutil
    import sysconfig

    why = free_threaded_message(sysconfig.get_config_var("Py_GIL_DISABLED"))
    if why is not None:
        sys.exit("error: " + why)
    cc = (os.environ.get("CC") or sysconfig.get_config_var("CC") or "cc").split()[0]
    compiler = shutil.which(cc)
    include = sysconfig.get_paths()["include"]
    libc = " ".join(platform.libc_ver()) or "unknown libc"
    why = build_prerequisites_message(
        cc, compiler, include, os.path.exists(os.path.join(include, "Python.h")), platform.machine(),
        f"{platform.python_implementation()} {platform.python_version()}", libc)
    if why is not None:
        sys.exit("error: " + why)


_why = unsupported_platform_message(sys.platform)
if _why is not None:
    sys.exit("error: " + _why)

import os  # noqa: E402
import shutil  # noqa: E402
from pathlib import Path  # noqa: E402

from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_ext import build_ext as _build_ext  # noqa: E402

ROOT = Path(__file__).resolve().parent
DEBUG = os.environ.get("FASTKAFKA_DEBUG") == "1"
ONLY = [s for s in os.environ.get("FASTKAFKA_EXT", "").split(",") if s]
NO_EXTENSIONS = os.environ.get("FASTKAFKA_NO_EXTENSIONS") == "1"
WITH_TEST_MODULES = os.environ.get("FASTKAFKA_TEST_MODULES") == "1"

# Compiled modules that only the tests use, never shipped in a wheel (tests/packaging checks the
# wheels lack them): built only with FASTKAFKA_TEST_MODULES=1.
TEST_MODULES = ("fastkafka._net.failpoints", "fastkafka._producer.testing")

# Extra C sources compiled into a given extension (dotted name -> list of paths).
EXTRA_SOURCES = {
    "fastkafka._wire.crc32c": ["fastkafka/_wire/crc32c_impl.c"],
    # the codecs' C libraries are opened with dlopen at import, never linked (docs/internals.md)
    "fastkafka._wire.ccodecs": ["fastkafka/_wire/ccodecs_impl.c"],
}

# Libraries linked into a given extension beyond libc: libdl for dlopen (part of libc itself from
# glibc 2.34 on, where -ldl links nothing more).
EXTRA_LIBRARIES = {
    "fastkafka._wire.ccodecs": ["dl"],
}

CYTHON_DIRECTIVES = {
    "language_level": "3",
    "boundscheck": DEBUG,
    "wraparound": DEBUG,
    "initializedcheck": DEBUG,
    "cdivision": True,
    "embedsignature": True,
}


def extensions(test_modules: "bool | None" = None) -> list:
    """One Extension per .pyx, its sources still the .pyx (build_ext translates them). The
    TEST_MODULES are among them only with ``test_modules`` (default: FASTKAFKA_TEST_MODULES=1)."""
    if test_modules is None:
        test_modules = WITH_TEST_MODULES
    exts = []
    for pyx in sorted(ROOT.glob("fastkafka/**/*.pyx")) + sorted(ROOT.glob("spark_sink/**/*.pyx")):
        rel = pyx.relative_to(ROOT)
        name = ".".join(rel.with_suffix("").parts)
        if ONLY and not any(s in name for s in ONLY):
            continue
        if name in TEST_MODULES and not test_modules:
            continue
        cflags = ["-O0", "-g"] if DEBUG else ["-O3"]
        exts.append(
            Extension(
                name,
                [rel.as_posix()] + EXTRA_SOURCES.get(name, []),
                include_dirs=["fastkafka/_wire", "fastkafka/protocol", "fastkafka/_net", "fastkafka/_producer"],
                libraries=EXTRA_LIBRARIES.get(name, []),
                extra_compile_args=cflags + ["-Wno-unused-function"],
            )
        )
    return exts


def _jobs() -> int:
    if os.environ.get("FASTKAFKA_JOBS"):
        return max(1, int(os.environ["FASTKAFKA_JOBS"]))
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _without_rpath(args: list) -> list:
    """A link command without its run-time search path options."""
    out, skip = [], False
    for a in args:
        if skip:
            skip = False
        elif a in ("-Wl,-rpath", "-Wl,-R", "-R"):
            skip = True                     # the directory is the next argument
        elif not a.startswith(("-Wl,-rpath,", "-Wl,-rpath=", "-Wl,-R", "-R")):
            out.append(a)
    return out


class build_ext(_build_ext):
    """Cythonizes the extensions' .pyx sources (all at once, with the project's directives) when
    the command runs, then compiles them, several at a time.

    The extensions link nothing but libc, so the link command loses the run-time search path some
    interpreters put in their LDSHARED (pyenv builds name their own lib directory): a wheel must not
    name a directory of the machine that built it. A build that is not in place (a wheel, ``pip
    install .``) carries no debug information (-g0: the symbol table stays, for backtraces; the
    wheel is a fifth of the size); the in-place development build and FASTKAFKA_DEBUG=1 keep it."""

    def finalize_options(self):
        super().finalize_options()
        if self.parallel is None and _jobs() > 1:
            self.parallel = _jobs()

    def run(self):
        _check_build_prerequisites()           # before Cython: a message, not a compiler error
        from Cython.Build import cythonize

        templates = [Extension(e.name, list(e.sources), include_dirs=list(e.include_dirs),
                               extra_compile_args=list(e.extra_compile_args)) for e in self.extensions]
        translated = {e.name: e for e in cythonize(templates, compiler_directives=CYTHON_DIRECTIVES,
                                                   nthreads=_jobs() if _jobs() > 1 else 0,
                                                   force=self.force, quiet=True)}
        for ext in self.extensions:            # keep setuptools' objects, swap in the C sources
            ext.sources = list(translated[ext.name].sources)
            ext.depends = list(translated[ext.name].depends)
        # (setuptools' run() clears inplace while it compiles: decide here)
        self._debug_info = DEBUG or bool(self.inplace) or bool(getattr(self, "editable_mode", False))
        super().run()

    def copy_file(self, infile, outfile, *args, **kwargs):
        """An in-place build's compiled module replaces the old file (a new inode) instead of
        overwriting it: a process that has the old one loaded (a test run in the same work tree)
        keeps its mapping rather than crashing with SIGBUS."""
        if not str(outfile).endswith(".so") or os.path.isdir(outfile):
            return super().copy_file(infile, outfile, *args, **kwargs)
        tmp = f"{outfile}.{os.getpid()}.tmp"
        shutil.copyfile(infile, tmp)
        shutil.copymode(infile, tmp)
        os.replace(tmp, outfile)
        return outfile, True

    def build_extensions(self):
        self.compiler.linker_so = _without_rpath(self.compiler.linker_so)
        if not self._debug_info:
            for ext in self.extensions:
                ext.extra_compile_args = list(ext.extra_compile_args) + ["-g0"]
        super().build_extensions()


if __name__ == "__main__":          # setuptools runs this file as __main__
    setup(ext_modules=[] if NO_EXTENSIONS else extensions(), cmdclass={"build_ext": build_ext})
