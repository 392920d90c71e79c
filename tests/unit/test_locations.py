"""One table, one location: every spelling of a local location (``/x``, ``x``, ``file:/x`` as Spark hands over a
SQL ``LOCATION``, ``file:///x``, ``file://localhost/x``) names the same table in the core, maintenance and the
CLI; other URIs are left as they are; a location that can name no table is a clear error."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pyarrow as pa
import pytest

import lakefmt
from lakefmt.io import file_io_for, normalize_uri

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def spellings(path: Path) -> list[str]:
    """Every way of writing the local folder ``path`` (absolute)."""
    p = str(path)
    return [p, p + "/", f"file:{p}", f"file://{p}", f"file://localhost{p}", f"file://{p}/", "/" + p, p + "/./"]


def test_every_local_spelling_normalizes_to_one_absolute_path(tmp_path: Path) -> None:
    want = str(tmp_path / "ev")
    assert {normalize_uri(u) for u in spellings(tmp_path / "ev")} == {want}
    assert normalize_uri(str(tmp_path / "a" / ".." / "ev")) == want
    assert normalize_uri("file:///") == "/"


def test_relative_and_home_paths_are_made_absolute(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert normalize_uri("ev") == str(tmp_path / "ev")
    assert normalize_uri("./ev/") == str(tmp_path / "ev")
    assert normalize_uri("file:ev") == str(tmp_path / "ev")
    monkeypatch.setenv("HOME", str(tmp_path))
    assert normalize_uri("~/ev") == str(tmp_path / "ev")


@pytest.mark.parametrize(
    "uri",
    ["s3://bucket/events", "s3a://bucket/events", "memory://lakefmt-x", "gs://b/a b/%20", "s3://bucket/a:b/c"],
)
def test_other_uris_are_unchanged(uri: str) -> None:
    assert normalize_uri(uri) == uri
    assert normalize_uri(uri + "/") == uri  # but for trailing slashes


def test_s3a_is_opened_as_s3_with_the_same_root() -> None:
    import s3fs  # noqa: F401  (the dev extra has it: this test must run, not skip)
    for uri in ("s3://bucket/events", "s3a://bucket/events/"):
        io = file_io_for(uri)
        assert (io.uri, io.root) == ("s3://bucket/events", "bucket/events")


@pytest.mark.parametrize(
    ("uri", "says"),
    [
        ("", "is empty"),
        ("   ", "is empty"),
        ("file:", "names no folder"),
        ("file://", "names no folder"),
        ("file://otherhost/data/ev", "names the host 'otherhost'"),
        ("s3:/bucket/ev", "write s3://bucket/ev"),
    ],
)
def test_a_location_that_names_no_table_is_refused(uri: str, says: str, tmp_path: Path) -> None:
    with pytest.raises(lakefmt.InvalidLocationError, match=says):
        normalize_uri(uri)
    with pytest.raises(lakefmt.InvalidLocationError):
        lakefmt.open_table(uri)
    with pytest.raises(lakefmt.InvalidLocationError):
        lakefmt.create_table(uri, SCHEMA)


def test_file_uri_of_another_host_is_not_a_relative_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``file://otherhost/ev`` once opened ``./otherhost/ev``: a table there must not be found through it."""
    monkeypatch.chdir(tmp_path)
    lakefmt.create_table("otherhost/ev", SCHEMA)
    with pytest.raises(lakefmt.InvalidLocationError):
        lakefmt.open_table("file://otherhost/ev")


def test_every_spelling_opens_one_table(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    root = tmp_path / "ev"
    t = lakefmt.create_table(f"file:{root}", SCHEMA, partition_by=["dt"])
    t.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=SCHEMA))
    monkeypatch.chdir(tmp_path)
    for uri in [*spellings(root), "ev", "./ev", "file:ev"]:
        other = lakefmt.open_table(uri)
        assert other.uri == str(root), uri
        assert other.io.root == str(root), uri
        assert sorted(other.to_arrow().column("id").to_pylist()) == [1, 2], uri
    assert t.uri == str(root)
    assert sorted(os.listdir(tmp_path)) == ["ev"]  # no folder created under another spelling


@pytest.mark.parametrize("created_as", ["plain", "file:", "file://", "file://localhost", "relative"])
def test_create_refuses_an_existing_table_under_any_spelling(
    created_as: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    root = tmp_path / "ev"
    first = {
        "plain": str(root),
        "file:": f"file:{root}",
        "file://": f"file://{root}",
        "file://localhost": f"file://localhost{root}",
        "relative": "ev",
    }[created_as]
    lakefmt.create_table(first, SCHEMA)
    for uri in [*spellings(root), "ev"]:
        with pytest.raises(lakefmt.TableAlreadyExistsError):
            lakefmt.create_table(uri, SCHEMA)
    # inside the table, under any spelling: refused (maintenance of the outer table would delete it)
    for uri in [str(root / "sub"), f"file:{root}/sub", f"file://{root}/sub", f"file://localhost{root}/sub", "ev/sub"]:
        with pytest.raises(lakefmt.LocationNotEmptyError, match=f"inside the lakefmt table at {re.escape(str(root))},"):
            lakefmt.create_table(uri, SCHEMA)


def test_maintenance_through_spark_s_spelling_keeps_live_files(tmp_path: Path) -> None:
    """Expire and orphan-clean on a table opened as ``file:/...`` see the same files as under the plain path."""
    root = tmp_path / "ev"
    t = lakefmt.create_table(str(root), SCHEMA)
    for i in range(3):
        t.append(pa.table({"id": [i], "dt": ["a"]}, schema=SCHEMA))
    spark_style = lakefmt.open_table(f"file:{root}")
    expired = spark_style.expire_snapshots(retain_max=1)
    assert expired.expired_snapshots == [1, 2]
    spark_style.io.write("stray.bin", b"x")
    report = spark_style.remove_orphan_files(older_than=0)
    assert report.paths == ["stray.bin"]
    assert sorted(lakefmt.open_table(str(root)).to_arrow().column("id").to_pylist()) == [0, 1, 2]


def test_cli_names_one_table_under_every_spelling(tmp_path: Path) -> None:
    root = tmp_path / "ev"
    lakefmt.create_table(str(root), SCHEMA).append(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    outs = []
    for uri in (f"file:{root}", f"file://{root}", str(root) + "/"):
        cmd = [sys.executable, "-m", "lakefmt.cli", "describe", uri, "--json"]
        r = subprocess.run(cmd, capture_output=True, text=True, check=False)
        assert r.returncode == 0, r.stderr
        outs.append(r.stdout)
    assert outs[0] == outs[1] == outs[2]
    assert f'"{root}"' in outs[0]
    r = subprocess.run(
        [sys.executable, "-m", "lakefmt.cli", "describe", "file://otherhost/ev"], capture_output=True, text=True,
        check=False,
    )
    assert r.returncode == 2 and "names the host 'otherhost'" in r.stderr and "Traceback" not in r.stderr
