"""Shared helpers: timing, results (JSON + table rows), synthetic data, fake data-file metadata, fresh processes
(and the Spark benchmarks' child processes)."""

from __future__ import annotations

import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import pyarrow as pa

import lakefmt

# The rows every side of a comparison appends, and the on-disk size, come from the peers' shared harness.
from benchmarks.peers.harness import DAY_US, EPOCH_US
from benchmarks.peers.harness import EVENTS_SCHEMA as EVENTS_SCHEMA
from benchmarks.peers.harness import day_name as day_name
from benchmarks.peers.harness import events as events
from benchmarks.peers.harness import tree_size as tree_size
from lakefmt.spec import ColumnStats, DataFile
from lakefmt.spec.partition import partition_path

PACKAGE_DIR = Path(__file__).resolve().parent
REPO_DIR = PACKAGE_DIR.parent

#: The table of the metadata benchmarks: min/max/null-count statistics are kept for exactly 3 columns
#: (id, ts, and the partition column dt).
META_SCHEMA = pa.schema([("id", pa.int64()), ("ts", pa.timestamp("us")), ("dt", pa.string())])
META_PARTITION_KEYS = ("dt",)


# -- timing ---------------------------------------------------------------------------------------------
@contextmanager
def timed(sink: list[float]) -> Iterator[None]:
    """Append the wall time of the block (seconds) to ``sink``."""
    t0 = time.perf_counter()
    try:
        yield
    finally:
        sink.append(time.perf_counter() - t0)


def median(xs: Sequence[float]) -> float:
    return float(statistics.median(xs))


def interleaved(sides: dict[str, Callable[[int], Any]], reps: int,
                after: Callable[[str, int], None] | None = None) -> dict[str, dict[str, list[float]]]:
    """Run each side ``reps`` times, interleaved (A B C, then B C A, ...); return each side's wall times and
    process CPU times (all threads) in seconds: ``{side: {"wall": [...], "cpu": [...]}}``.

    Rotating the order spreads drift (page cache, a neighbour's load) evenly over the sides. CPU time is
    much less sensitive than wall time to other processes on a shared machine. ``after(side, rep)`` runs
    outside the timings (cleanup)."""
    names = list(sides)
    times: dict[str, dict[str, list[float]]] = {n: {"wall": [], "cpu": []} for n in names}
    for rep in range(reps):
        k = rep % len(names)
        for name in names[k:] + names[:k]:
            c0, t0 = time.process_time(), time.perf_counter()
            sides[name](rep)
            t1, c1 = time.perf_counter(), time.process_time()
            times[name]["wall"].append(t1 - t0)
            times[name]["cpu"].append(c1 - c0)
            if after is not None:
                after(name, rep)
    return times


# -- results --------------------------------------------------------------------------------------------
@dataclass
class Comparison:
    """One side-by-side measurement. ``ratio`` is lakefmt's cost over the baseline's (lower is better), or for
    scaling comparisons late over early, or for throughputs lakefmt's rate over the baseline's (higher is
    better). ``target`` is checked on ``ratio`` (``check='ratio<='``, or ``'ratio>='`` for throughput ratios)
    or on ``value`` (``check='value>='``, for rates such as entries/s)."""

    name: str
    value: float
    baseline: float | None
    unit: str
    ratio: float | None
    target: float | None = None
    check: str | None = None  # "ratio<=" | "ratio>=" | "value>=" | None (informative)
    note: str = ""
    met: bool | None = field(default=None)

    def __post_init__(self) -> None:
        if self.target is None or self.check is None:
            self.met = None
        elif self.check == "ratio<=":
            self.met = self.ratio is not None and self.ratio <= self.target
        elif self.check == "ratio>=":
            self.met = self.ratio is not None and self.ratio >= self.target
        elif self.check == "value>=":
            self.met = self.value >= self.target
        else:
            raise ValueError(f"unknown check {self.check!r}")

    def target_text(self) -> str:
        if self.target is None or self.check is None:
            return "-"
        if self.check in ("ratio<=", "ratio>="):
            return f"ratio {self.check[5:]} {self.target:g}"
        return f">= {_num(self.target)} {self.unit}"


@dataclass
class Result:
    benchmark: str
    mode: str
    params: dict[str, Any]
    metrics: dict[str, Any] = field(default_factory=dict)
    comparisons: list[Comparison] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    environment: dict[str, Any] = field(default_factory=dict)
    duration_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return {
            "benchmark": self.benchmark,
            "mode": self.mode,
            "duration_s": round(self.duration_s, 3),
            "environment": self.environment,
            "params": self.params,
            "comparisons": [asdict(c) for c in self.comparisons],
            "metrics": self.metrics,
            "notes": self.notes,
        }


def environment() -> dict[str, Any]:
    """What the numbers depend on (no paths: results are committed to the repository)."""
    return {
        "python": platform.python_version(),
        "pyarrow": pa.__version__,
        "lakefmt": lakefmt.__version__,
        "git_commit": _git(["rev-parse", "--short", "HEAD"]),
        "git_dirty": bool(_git(["status", "--porcelain", "--untracked-files=no", "--", "lakefmt"])),
        "platform": platform.platform(terse=True),
        "machine": platform.machine(),
        "cpu_count": os.cpu_count(),
        "cpu_affinity": len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else None,
        "pyarrow_cpu_count": pa.cpu_count(),
        "pyarrow_io_thread_count": pa.io_thread_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }


def _git(args: list[str]) -> str | None:
    try:
        out = subprocess.run(["git", *args], cwd=REPO_DIR, capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.SubprocessError):
        return None
    return out.stdout.strip() if out.returncode == 0 else None


def write_result(result: Result, out_dir: Path) -> Path:
    """Write ``<name>.json`` (full) or ``<name>-quick.json`` (quick), atomically."""
    out_dir.mkdir(parents=True, exist_ok=True)
    suffix = "-quick" if result.mode == "quick" else ""
    path = out_dir / f"{result.benchmark}{suffix}.json"
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text(json.dumps(result.to_json(), indent=2, sort_keys=False) + "\n")
    os.replace(tmp, path)
    return path


def _num(x: float | None) -> str:
    if x is None:
        return "-"
    ax = abs(x)
    if ax >= 1e6:
        return f"{x / 1e6:.2f}M"
    if ax >= 1e4:
        return f"{x / 1e3:.1f}k"
    if ax >= 100:
        return f"{x:.0f}"
    if ax >= 1:
        return f"{x:.2f}"
    return f"{x:.3g}"


def _with_unit(x: float | None, unit: str) -> str:
    if x is None:
        return "-"
    if unit == "s":
        return f"{x * 1e3:.1f} ms" if x < 1 else f"{x:.3f} s"
    return f"{_num(x)} {unit}"


def table_rows(results: Sequence[Result]) -> str:
    """A compact text table of every comparison."""
    header = ("benchmark", "comparison", "value", "baseline", "ratio", "target", "met")
    rows = [header]
    for r in results:
        for c in r.comparisons:
            met = "-" if c.met is None else ("yes" if c.met else "NO")
            rows.append(
                (
                    r.benchmark,
                    c.name,
                    _with_unit(c.value, c.unit),
                    _with_unit(c.baseline, c.unit),
                    "-" if c.ratio is None else f"{c.ratio:.3f}",
                    c.target_text(),
                    met,
                )
            )
    widths = [max(len(row[i]) for row in rows) for i in range(len(header))]
    lines = ["  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip() for row in rows]
    lines.insert(1, "  ".join("-" * w for w in widths))
    return "\n".join(lines)


# -- the metadata encoding, with plain pyarrow + zstandard (the baselines of the metadata benchmarks) ----
_ZSTD_SMALL = 256 << 10  # the same levels as lakefmt: 9 up to 256 KiB of Arrow stream, 3 above


def raw_decode(data: bytes) -> pa.Table:
    """A lakefmt manifest or manifest list decoded with zstandard + pyarrow alone (no validation)."""
    import zstandard

    return pa.ipc.open_stream(zstandard.ZstdDecompressor().decompress(data)).read_all()


def raw_encode(table: pa.Table) -> bytes:
    """An Arrow IPC stream in one zstd frame, as lakefmt encodes metadata files."""
    import zstandard

    sink = pa.BufferOutputStream()
    with pa.ipc.new_stream(sink, table.schema) as w:
        w.write_table(table)
    raw = sink.getvalue()
    level = 9 if raw.size <= _ZSTD_SMALL else 3
    return zstandard.ZstdCompressor(level=level, write_checksum=True).compress(raw)


# -- disk -----------------------------------------------------------------------------------------------
def drop_tree(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True)


# -- synthetic data -------------------------------------------------------------------------------------
def fake_data_files(writer_id: str, count: int, day: int, first_id: int, *, rows_per_file: int = 1_000_000,
                    schema_id: int = 0) -> list[DataFile]:
    """Metadata of ``count`` data files of partition ``dt=day(day)`` of a META_SCHEMA table, as a writer
    task would report them (path, size, rows, partition, min/max/null count of id, ts, dt). No data file is
    written: the metadata benchmarks need many files, not their bytes."""
    dt = day_name(day)
    folder = partition_path(META_PARTITION_KEYS, {"dt": dt})
    day_start = EPOCH_US + day * DAY_US
    ts_step = DAY_US // max(count, 1)
    now = int(time.time() * 1000)
    files = []
    for k in range(count):
        lo = first_id + k * rows_per_file
        t_lo = day_start + k * ts_step
        files.append(
            DataFile(
                path=f"{folder}/data-{writer_id}-{k}.parquet",
                file_size=100_000_000 + (lo * 7919) % 50_000_000,
                row_count=rows_per_file,
                schema_id=schema_id,
                partition={"dt": dt},
                stats={
                    "id": ColumnStats(lo, lo + rows_per_file - 1, 0),
                    "ts": ColumnStats(t_lo, t_lo + ts_step - 1, 0),
                    "dt": ColumnStats(dt, dt, 0),
                },
                creation_time_ms=now,
            )
        )
    return files


# -- fresh processes ------------------------------------------------------------------------------------
def run_child(module: str, args: Sequence[str], timeout: float = 1800) -> dict[str, Any]:
    """Run ``python -m <module> --child <args>`` in a fresh interpreter; return the JSON it prints last."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH")) if p)
    proc = subprocess.run(
        [sys.executable, "-m", module, "--child", *args],
        cwd=REPO_DIR,
        env=env,
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise RuntimeError(f"{module} child failed ({proc.returncode}):\n{proc.stderr[-4000:]}")
    last = proc.stdout.strip().splitlines()[-1]
    out: dict[str, Any] = json.loads(last)
    return out


# -- Spark benchmarks: a child process with its own JVM -------------------------------------------------
#: the log4j2 configuration of the Spark benchmarks' driver JVM: errors only, on stderr
LOG4J = """rootLogger.level = error
rootLogger.appenderRef.stderr.ref = console
appender.console.type = Console
appender.console.name = console
appender.console.target = SYSTEM_ERR
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = %d{HH:mm:ss} %p %c{1}: %m%n%ex
logger.gateway.name = org.apache.spark.api.python.PythonGatewayServer
logger.gateway.level = error
"""


def run_spark_child(name: str, module: str, args: Sequence[str]) -> dict[str, Any]:
    """Run ``python -m <module> <args>`` in a fresh interpreter (its own JVM): lines it prints as
    ``progress: <text>`` are shown as they come (prefixed ``[name]``), and the JSON it prints last is returned."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO_DIR), env.get("PYTHONPATH")) if p)
    with tempfile.TemporaryFile("w+") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", module, *args],
            cwd=REPO_DIR, env=env, stdout=subprocess.PIPE, stderr=err, text=True,
        )
        assert proc.stdout is not None
        last = ""
        for line in proc.stdout:
            if line.startswith("progress: "):
                print(f"[{name}] {line[len('progress: '):].rstrip()}", flush=True)
            elif line.strip():
                last = line
        rc = proc.wait()
        if rc != 0:
            err.seek(0)
            raise RuntimeError(f"{name} child failed ({rc}):\n{err.read()[-4000:]}")
    out: dict[str, Any] = json.loads(last)
    return out


def progress(text: str) -> None:
    """In a Spark benchmark's child: a progress line the parent shows (see :func:`run_spark_child`)."""
    print(f"progress: {text}", flush=True)


def tree_cpu_s() -> float | None:
    """User+system CPU seconds of this process and all its descendants (live ones, plus the children each has
    reaped), from /proc; None where /proc is not available."""
    try:
        tick = os.sysconf("SC_CLK_TCK")
        parent: dict[int, int] = {}
        cpu: dict[int, float] = {}
        for entry in os.listdir("/proc"):
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat") as f:
                    stat = f.read()
            except OSError:
                continue
            fields = stat[stat.rindex(")") + 2 :].split()
            pid = int(entry)
            parent[pid] = int(fields[1])
            cpu[pid] = sum(int(x) for x in fields[11:15]) / tick  # utime stime cutime cstime
    except (OSError, ValueError):
        return None
    me = os.getpid()
    total = 0.0
    for pid, seconds in cpu.items():
        p = pid
        while p > 1 and p != me:
            p = parent.get(p, 0)
        if p == me:
            total += seconds
    return total
