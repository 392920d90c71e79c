"""A MERGE's snapshot records its own counts (issue 36): history's ``operation_metrics`` holds the MergeReport's
rows updated, inserted, deleted, copied and output (deltalake's ``operationMetrics``), and
``operation_parameters`` the ON condition, on copy-on-write tables, tables with deletion vectors and key tables."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.cli import main
from lakefmt.spec import operations

SCHEMA = pa.schema([("id", pa.int64()), ("x", pa.int64())])
COUNTED = ("num_source_rows", "num_target_rows_inserted", "num_target_rows_updated", "num_target_rows_deleted",
           "num_target_rows_copied", "num_output_rows")


def make(path: Path, mode: str) -> lakefmt.Table:
    opts = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"} if mode == "dv" else {}
    if mode == "key":
        opts = {"bucket": "1", "compaction.auto": "false"}
    return lakefmt.create_table(str(path), SCHEMA, options=opts, primary_key=["id"] if mode == "key" else None)


@pytest.mark.parametrize("mode", ["cow", "dv", "key"])
def test_history_shows_the_merge_counts(tmp_path: Path, mode: str) -> None:
    t = make(tmp_path / "t", mode)
    t.append(pa.table({"id": [1, 2, 3, 4, 5], "x": [1, 2, 3, 4, 5]}, schema=SCHEMA))
    source = pa.table({"id": [2, 3, 4, 9, 10], "x": [20, 0, 40, 90, 100]}, schema=SCHEMA)
    report = (
        t.merge(source, "t.id = s.id", source_alias="s", target_alias="t")
        .when_matched_delete("s.x = 0")
        .when_matched_update_all()
        .when_not_matched_insert_all("s.id < 10")
        .execute()
    )
    (h,) = t.history(limit=1)
    assert h["operation"] == "MERGE" and h["version"] == report.snapshot_id
    assert h["operation_parameters"] == {"predicate": "t.id = s.id"}
    assert h["operation_metrics"] == {name: report[name] for name in COUNTED}
    assert (report.num_target_rows_updated, report.num_target_rows_inserted, report.num_target_rows_deleted) == (
        2, 1, 1)
    # the copy-on-write table rewrote its one file: the two rows left as they were are copied
    assert report.num_target_rows_copied == (2 if mode == "cow" else 0)
    assert h["operation_metrics"]["num_output_rows"] == 3 + report.num_target_rows_copied
    # the other operations record no counts
    assert all(r["operation_metrics"] == {} for r in t.history()[1:])


def test_cli_history_json_carries_the_metrics(tmp_path: Path, capsys: Any) -> None:
    t = make(tmp_path / "t", "dv")
    t.append(pa.table({"id": [1, 2], "x": [1, 2]}, schema=SCHEMA))
    t.merge(pa.table({"id": [2, 3], "x": [0, 3]}, schema=SCHEMA), "t.id = s.id", source_alias="s",
            target_alias="t").when_matched_update_all().when_not_matched_insert_all().execute()
    assert main(["history", t.uri, "--json", "--limit", "1"]) == 0
    (rec,) = json.loads(capsys.readouterr().out)
    assert rec["operation_metrics"]["num_target_rows_updated"] == 1
    assert rec["operation_metrics"]["num_target_rows_inserted"] == 1


def test_metrics_round_trip_and_ignore_foreign_values() -> None:
    props = operations.metrics({"num_target_rows_updated": 3, "num_source_rows": 7})
    assert props == {"lakefmt.metric.num_target_rows_updated": "3", "lakefmt.metric.num_source_rows": "7"}
    props["lakefmt.metric.other_tool"] = "n/a"  # another writer's property: left out, not an error
    assert operations.metrics_of(props) == {"num_source_rows": 7, "num_target_rows_updated": 3}
    assert operations.parameters_of(props) == {}  # metrics are not parameters
