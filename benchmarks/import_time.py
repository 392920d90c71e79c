"""Import time: the CPU a fresh process spends on ``import lakefmt`` and on ``lakefmt --help``, against the library
imported whole (``import lakefmt.table``: what ``import lakefmt`` cost when the package imported every layer, and
what a command that opens a table still imports) and against a bare interpreter (``python -c pass``).

Every ``lakefmt`` command is a new process, and a scheduler's maintenance job runs many: their start-up is paid
every time. ``import lakefmt`` imports the errors and nothing else; the public names come with their modules on
first use (``lakefmt.open_table`` imports the table layer). ``lakefmt --help`` builds the parser without importing
the commands' modules. Targets: ``lakefmt --help`` under :data:`HELP_TARGET_MS` of CPU, stated as its ratio to the
whole library's import (at most :data:`TARGET_RATIO`); none of pyarrow, numpy, pandas, fsspec, zstandard, pyroaring,
duckdb, polars, sqlglot loaded (``tests/unit/test_import_cost.py`` checks that on every run).

Each command runs 9 times (3 in quick mode), interleaved; the least CPU (user + system, from the child's
``getrusage``) of each is compared: the least is the cost, the rest is the machine's load.
"""

from __future__ import annotations

import resource
import subprocess
import sys
from pathlib import Path

from benchmarks.common import Comparison, Result

NAME = "import_time"
TARGET_RATIO = 0.25
HELP_TARGET_MS = 150.0
COMMANDS = {
    "interpreter": ["-c", "pass"],
    "import lakefmt": ["-c", "import lakefmt"],
    "lakefmt --help": ["-m", "lakefmt.cli", "--help"],
    "import lakefmt.table": ["-c", "import lakefmt.table"],
}
REPO = Path(__file__).resolve().parents[1]


def _cpu_ms(args: list[str]) -> float:
    """CPU milliseconds (user + system) of one fresh ``python args`` process."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    subprocess.run([sys.executable, *args], cwd=REPO, check=True, stdout=subprocess.DEVNULL)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return ((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)) * 1000


def run(quick: bool, workdir: Path) -> Result:
    reps = 3 if quick else 9
    times: dict[str, list[float]] = {name: [] for name in COMMANDS}
    for _ in range(reps):
        for name, args in COMMANDS.items():
            times[name].append(_cpu_ms(args))
    best = {name: min(values) for name, values in times.items()}
    whole, bare = best["import lakefmt.table"], best["interpreter"]
    result = Result(NAME, "quick" if quick else "full", {"reps": reps})
    result.metrics = {f"{name} cpu_ms": round(v, 1) for name, v in best.items()}
    result.metrics["lakefmt --help under target"] = best["lakefmt --help"] <= HELP_TARGET_MS
    result.comparisons = [
        Comparison(
            "lakefmt --help CPU vs the whole library's import", best["lakefmt --help"], whole, "ms",
            best["lakefmt --help"] / whole, TARGET_RATIO, "ratio<=",
            note=f"target: under {HELP_TARGET_MS:.0f} ms of CPU",
        ),
        Comparison(
            "import lakefmt CPU vs the whole library's import", best["import lakefmt"], whole, "ms",
            best["import lakefmt"] / whole, TARGET_RATIO, "ratio<=",
        ),
        Comparison(
            "import lakefmt CPU vs a bare interpreter", best["import lakefmt"], bare, "ms",
            best["import lakefmt"] / bare,
        ),
    ]  # fmt: skip
    return result
