"""What ``import lakefmt`` and ``lakefmt --help`` load: none of the heavy libraries (readers, writers, storage
clients, engines, the SQL parser), which the modules that use them import. Checked by listing ``sys.modules`` in a
fresh process, not by timing (benchmarks/import_time.py measures the time)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
#: loaded only where used; pyarrow brings numpy with it
HEAVY = (
    "pyarrow", "numpy", "pandas", "fsspec", "s3fs", "zstandard", "pyroaring", "duckdb", "polars", "sqlglot", "orjson",
)
PRINT_MODULES = "import sys, json; print(json.dumps(sorted(sys.modules)))"


def _modules(code: str) -> list[str]:
    out = subprocess.run(
        [sys.executable, "-c", f"{code}\n{PRINT_MODULES}"], cwd=REPO, check=True, capture_output=True, text=True
    ).stdout
    loaded: list[str] = json.loads(out.splitlines()[-1])
    return loaded


def _heavy(modules: list[str]) -> list[str]:
    return [m for m in modules if m.split(".")[0] in HEAVY]


@pytest.mark.parametrize(
    "code",
    [
        "import lakefmt",
        "import lakefmt, lakefmt.errors; lakefmt.NotATableError, lakefmt.__version__",
        "import contextlib, io\nfrom lakefmt.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): main(['--help'])",
        "import contextlib, io\nfrom lakefmt.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()): main(['compact', '--help'])",
    ],
)
def test_no_heavy_module_is_loaded(code: str) -> None:
    modules = _modules(code)
    assert "lakefmt" in modules
    assert _heavy(modules) == []


def test_the_public_names_still_import_their_modules() -> None:
    """The check above can fail: the names are there, and using one loads what it needs."""
    modules = _modules("import lakefmt\nlakefmt.open_table, lakefmt.Table, lakefmt.write_table")
    assert {"pyarrow", "lakefmt.table", "lakefmt.oneliner"} <= set(modules)
    import lakefmt

    assert set(lakefmt.__all__) <= set(dir(lakefmt))
    for name in lakefmt.__all__:
        assert getattr(lakefmt, name) is not None, name
