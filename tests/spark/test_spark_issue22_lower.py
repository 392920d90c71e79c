"""Issue 22, item 5, from PySpark: a compaction or a delete whose input files were overwritten and expired before
its Spark tasks read them. The tasks raised pyarrow's FileNotFoundError, which failed the Spark job."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pyspark_lakefmt
import pytest
from pyspark_lakefmt import rewrites

import lakefmt
from lakefmt.rewrite import delete as deletion

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def _table(path: Path) -> lakefmt.Table:
    """Six commits of one file of two rows in partitions a and b."""
    t = lakefmt.create_table(str(path), SCHEMA, partition_by=["dt"], options={"compaction.auto": "false"})
    for i in range(6):
        t.append(pa.table({"id": [100 * i, 100 * i + 1, 100 * i + 10, 100 * i + 11], "dt": ["a", "a", "b", "b"]}))
    return t


def _after_first(monkeypatch: pytest.MonkeyPatch, module: Any, name: str, t: lakefmt.Table) -> None:
    """After the first plan of ``module.name``, partition a is overwritten and every older snapshot expired."""
    original = getattr(module, name)
    calls: list[int] = []

    def plan(*args: Any, **kwargs: Any) -> Any:
        out = original(*args, **kwargs)
        if not calls:
            calls.append(1)
            other = lakefmt.open_table(t.uri)
            other.overwrite(pa.table({"id": [999], "dt": ["a"]}), partition={"dt": "a"})
            other.expire_snapshots(retain_max=1)
        return out

    monkeypatch.setattr(module, name, plan)


def _ids(t: lakefmt.Table) -> list[int]:
    return sorted(t.to_arrow().column("id").to_pylist())


def test_spark_compaction_whose_inputs_are_gone_replans_them(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path / "t")
    _after_first(monkeypatch, rewrites, "plan_compaction", t)
    report = pyspark_lakefmt.compact(spark, t.uri)
    assert report.snapshot is not None and report.partitions == [{"dt": "b"}]
    assert report.replanned == [{"dt": "a"}] and report.given_up == []
    b = [n for i in range(6) for n in (100 * i + 10, 100 * i + 11)]
    assert _ids(t) == sorted([999, *b])


def test_spark_delete_whose_inputs_are_gone_is_a_conflict(
    spark: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    t = _table(tmp_path / "t")
    _after_first(monkeypatch, deletion, "plan_delete", t)
    before = t.latest_snapshot()
    with pytest.raises(lakefmt.RewriteConflictError) as exc:
        pyspark_lakefmt.delete(spark, t.uri, "id IN (0, 10, 100, 110, 200, 210, 300, 310, 400, 410, 500, 510)")
    assert exc.value.gone and all(p.startswith("dt=a/") for p in exc.value.gone)
    assert exc.value.gone[0] in str(exc.value)
    latest = t.latest_snapshot()
    assert before is not None and latest is not None and latest.id == before.id + 1  # only the overwrite landed
    b = [n for i in range(6) for n in (100 * i + 10, 100 * i + 11)]
    assert _ids(t) == sorted([999, *b])
    live = {f.path for f in t.files()}
    on_disk = {str(p.relative_to(tmp_path / "t")) for p in (tmp_path / "t").glob("dt=*/*.parquet")}
    assert on_disk == live  # the tasks' rewritten files of b were deleted
