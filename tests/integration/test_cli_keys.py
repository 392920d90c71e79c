"""``lakefmt describe`` and ``lakefmt files`` on format-version-3 tables: the primary key, the buckets and the
deletion vectors, in text and ``--json``; tables without them print what they always printed. The commands run in
this process (``lakefmt.cli.main.main``) on a copy of the golden version-3 table and on small new tables."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest

import lakefmt
from lakefmt.cli.main import main

GOLDEN = Path(__file__).resolve().parents[1] / "data" / "golden_v3"
SCHEMA = pa.schema([("id", pa.int64()), ("name", pa.string()), ("dt", pa.string())])


@pytest.fixture
def golden(tmp_path: Path) -> str:
    shutil.copytree(GOLDEN, tmp_path / "golden")
    return str(tmp_path / "golden")


def _run(capsys: Any, *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0, capsys.readouterr().err
    return str(capsys.readouterr().out)


def _json(capsys: Any, *argv: str) -> Any:
    return json.loads(_run(capsys, *argv, "--json"))


def _text(capsys: Any, *argv: str) -> dict[str, str]:
    """``describe``'s text form: key -> value."""
    lines = _run(capsys, *argv).splitlines()
    return {k: v.strip() for k, _, v in (line.partition(" ") for line in lines)}


def test_describe_shows_the_key_buckets_and_version(golden: str, capsys: Any) -> None:
    info = _json(capsys, "describe", golden)
    assert info["format_version"] == 3
    assert info["primary_key"] == ["dt", "id"] and info["buckets"] == 2
    assert info["partition_keys"] == ["dt"]
    assert info["rows"] == 6 and info["live_files"] == 8  # live rows; data files
    assert info["deletion_vector_files"] == 3 and info["deleted_rows"] == 5
    assert info["fields"][:2] == [
        {"name": "dt", "type": "string", "nullable": False},
        {"name": "id", "type": "int64", "nullable": False},
    ]
    text = _text(capsys, "describe", golden)
    assert text["format_version"] == "3"
    assert text["primary_key"] == "dt, id" and text["buckets"] == "2"
    assert text["deletion_vector_files"] == "3"
    assert text["deleted_rows"] == "5" and text["rows"] == "6"


def test_describe_of_a_table_without_a_key(tmp_path: Path, capsys: Any) -> None:
    """A version-2 table: JSON says there is no key (an empty list, no buckets); the text form says nothing of
    keys, buckets or vectors."""
    t = lakefmt.create_table(str(tmp_path / "plain"), SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1], "name": ["a"], "dt": ["d"]}))
    info = _json(capsys, "describe", t.uri)
    assert info["format_version"] == 2 and info["primary_key"] == [] and info["buckets"] is None
    assert "deletion_vector_files" not in info
    text = _text(capsys, "describe", t.uri)
    assert text["format_version"] == "2"
    assert not {"primary_key", "buckets", "deletion_vector_files", "deleted_rows"} & set(text)


def test_files_lists_content_and_bucket(golden: str, capsys: Any) -> None:
    rows = _json(capsys, "files", golden)
    data = [r for r in rows if r["content"] == "data"]
    vectors = [r for r in rows if r["content"] == "deletion_vectors"]
    assert (len(data), len(vectors), len(rows)) == (8, 3, 11)
    for r in rows:
        dt = r["partition"]["dt"]
        assert r["path"].startswith(f"dt={dt}/bucket-{r['bucket']}/")
        assert r["size"] == (Path(golden) / r["path"]).stat().st_size
    vector_paths = {r["path"] for r in vectors}
    for r in data:
        if r["deleted_rows"]:
            assert r["deletion_vector"] in vector_paths
            assert r["deletion_vector"].rsplit("/", 1)[0] == r["path"].rsplit("/", 1)[0]  # the same bucket folder
        else:
            assert r["deletion_vector"] is None
    assert sum(r["deleted_rows"] for r in data) == sum(r["rows"] for r in vectors) == 5
    assert sum(r["rows"] for r in data) - sum(r["rows"] for r in vectors) == 6
    assert all(r["deleted_rows"] is None and r["deletion_vector"] is None for r in vectors)
    keys = [(r["partition"]["dt"], r["bucket"]) for r in rows]
    assert keys == sorted(keys)  # grouped by partition and bucket
    # an older snapshot: before the upsert, no vectors
    first = _json(capsys, "files", golden, "--snapshot", "1")
    assert [r["content"] for r in first] == ["data"] * 4 and sum(r["rows"] for r in first) == 7
    assert {r["bucket"] for r in first} == {0, 1}
    # text
    lines = _run(capsys, "files", golden).splitlines()
    assert lines[0].split() == ["path", "content", "bucket", "size", "rows", "deleted", "partition"]
    assert len(lines) == 12
    assert sum("deletion vectors" in line for line in lines) == 3
    for line in lines[1:]:
        path, *rest = line.split()
        bucket = rest[2] if rest[:2] == ["deletion", "vectors"] else rest[1]  # a vector file's deleted is blank
        assert rest[0] in ("data", "deletion") and f"/bucket-{bucket}/" in path


def test_files_of_tables_without_a_key(tmp_path: Path, capsys: Any) -> None:
    """A version-2 table lists its data files as before; a merge-on-read table (version 3 without a key) lists its
    vectors too, every file in bucket 0."""
    plain = lakefmt.create_table(str(tmp_path / "plain"), SCHEMA, partition_by=["dt"])
    plain.append(pa.table({"id": [1, 2], "name": ["a", "b"], "dt": ["d", "e"]}))
    assert [set(r) for r in _json(capsys, "files", plain.uri)] == [{"path", "size", "rows", "partition"}] * 2
    assert _run(capsys, "files", plain.uri).splitlines()[0].split() == ["path", "size", "rows", "partition"]
    options = {"write.delete.mode": "merge-on-read", "compaction.auto": "false"}  # the vector stays
    mor = lakefmt.create_table(str(tmp_path / "mor"), SCHEMA, options=options)
    mor.append(pa.table({"id": [1, 2, 3], "name": ["a", "b", "c"], "dt": ["d", "d", "d"]}))
    mor.delete(pc.field("id") == 2)
    rows = _json(capsys, "files", mor.uri)
    assert sorted(r["content"] for r in rows) == ["data", "deletion_vectors"]
    assert {r["bucket"] for r in rows} == {0} and all(r["partition"] == {} for r in rows)
    data = next(r for r in rows if r["content"] == "data")
    assert (data["rows"], data["deleted_rows"]) == (3, 1)
    assert _text(capsys, "describe", mor.uri)["deleted_rows"] == "1"


def test_files_of_an_empty_key_table(tmp_path: Path, capsys: Any) -> None:
    t = lakefmt.create_table(str(tmp_path / "k"), SCHEMA, primary_key=["id"], options={"bucket": "4"})
    assert _json(capsys, "files", t.uri) == []
    assert "(none)" in _run(capsys, "files", t.uri)
    info = _json(capsys, "describe", t.uri)
    assert info["primary_key"] == ["id"] and info["buckets"] == 4 and info["deletion_vector_files"] == 0
