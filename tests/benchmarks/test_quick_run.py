"""The benchmark suite's smoke run: ``python -m benchmarks --quick`` end to end, as a user runs it.

Benchmarks are part of the product and rot like any code when nothing runs them. This runs every benchmark but
:data:`SKIPPED` at its quick sizes (about 2 minutes on 2 cores) in a fresh process and checks what it wrote: one
well-formed JSON result per benchmark, every comparison with a measured value and baseline and the ratio between them.
Speed targets are not asserted here (timings on a shared CI machine are the benchmarks' business, not a
test's); the request-count target is, because a count does not depend on the machine. The peers
(pypaimon, deltalake, pyiceberg) are compared only where ``tools/bench-setup.sh`` installed them.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from benchmarks import BENCHMARKS

REPO = Path(__file__).resolve().parents[2]
#: left out of the smoke run: each starts a Spark application of its own (tens of seconds); the sink, the
#: streaming source and the chain they measure are tested by tests/spark (test_spark_io.py, test_stream_source.py,
#: test_chain.py; streaming upserts by test_spark_cdc.py and test_chain_cdc.py; native reads, spark_read at 1M rows
#: (90 s), by test_native_read.py)
SKIPPED = ("spark_sink", "stream_source", "chain_latency", "stream_upserts", "spark_read")
RUN = tuple(name for name in BENCHMARKS if name not in SKIPPED)

pytestmark = [pytest.mark.slow, pytest.mark.spark]


@pytest.fixture(scope="module")
def quick_results(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], Path]:
    out = tmp_path_factory.mktemp("bench-results")
    work = tmp_path_factory.mktemp("bench-work")
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH",)}
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks", "--quick", "--out", str(out), "--workdir", str(work),
         *(f"--skip={name}" for name in SKIPPED)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=1800,
    )
    return proc, out


def _load(out: Path, name: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((out / f"{name}-quick.json").read_text())
    return data


def test_the_quick_run_completes_and_writes_one_result_per_benchmark(quick_results: Any) -> None:
    proc, out = quick_results
    assert proc.returncode == 0, proc.stdout[-4000:] + proc.stderr[-4000:]
    assert "all done in" in proc.stdout
    assert sorted(p.name for p in out.glob("*.json")) == sorted(f"{name}-quick.json" for name in RUN)
    for name in RUN:
        result = _load(out, name)
        assert result["benchmark"] == name and result["mode"] == "quick"
        assert result["duration_s"] > 0
        env = result["environment"]
        assert env["python"] and env["pyarrow"] and env["cpu_count"] >= 1
        assert result["comparisons"], f"{name} compared nothing"


@pytest.mark.parametrize("name", RUN)
def test_every_comparison_has_a_measured_value_a_baseline_and_their_ratio(quick_results: Any, name: str) -> None:
    _, out = quick_results
    for c in _load(out, name)["comparisons"]:
        assert isinstance(c["value"], int | float) and math.isfinite(c["value"]) and c["value"] > 0, c
        assert isinstance(c["baseline"], int | float) and math.isfinite(c["baseline"]) and c["baseline"] > 0, c
        # a ratio of costs or of rates (value / baseline), or of times measured as rates (baseline / value)
        assert c["ratio"] in (pytest.approx(c["value"] / c["baseline"]), pytest.approx(c["baseline"] / c["value"])), c
        if c["target"] is None:
            assert c["met"] is None, c
        else:
            assert c["check"] in ("ratio<=", "ratio>=", "value>="), c
            assert isinstance(c["met"], bool), c


def test_the_request_count_target_is_met(quick_results: Any) -> None:
    """S3 requests per append do not depend on the machine's speed: 8 for a warm writer, the same at 200
    snapshots as at 40."""
    _, out = quick_results
    counted = [c for c in _load(out, "s3_requests")["comparisons"] if c["unit"] == "req" and c["target"] is not None]
    assert len(counted) >= 3
    assert all(c["met"] for c in counted), counted


def test_the_summary_table_names_every_benchmark(quick_results: Any) -> None:
    proc, _ = quick_results
    summary = proc.stdout.split("all done in", 1)[1]
    for name in RUN:
        assert name in summary
