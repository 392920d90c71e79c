"""Spark reads by tag (the ``tag`` read option): a tag reads after its snapshot expired; an unknown tag, a bad
name and a tag with another time-travel option are refused with clear errors."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pyarrow as pa
import pytest
from pyspark_lakefmt.options import TableRef, parse_options
from pyspark_lakefmt.reader import Reader

import lakefmt

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])


def test_read_by_tag(spark: Any, tmp_path: Path) -> None:
    uri = str(tmp_path / "tagged")
    table = lakefmt.create_table(uri, SCHEMA, partition_by=["dt"])
    table.append(pa.table({"id": [1, 2], "dt": ["a", "b"]}, schema=SCHEMA))
    table.create_tag("first")
    table.overwrite(pa.table({"id": [3], "dt": ["a"]}, schema=SCHEMA))
    table.expire_snapshots(retain_max=1)
    table.remove_orphan_files(older_than=0)
    read = spark.read.format("lakefmt")
    assert sorted(r.id for r in read.load(uri).collect()) == [3]
    assert sorted(r.id for r in read.option("tag", "first").load(uri).collect()) == [1, 2]
    with pytest.raises(Exception) as exc:
        spark.read.format("lakefmt").option("tag", "nope").load(uri).collect()
    assert "has no tag 'nope' (its tags: 'first')" in " ".join(str(exc.value).split())
    # what Spark does with these options, without a Spark job: parse them, then plan the read
    with pytest.raises(lakefmt.InvalidOptionError, match=r"option tag: tag name '\.\./x' is invalid"):
        parse_options({"path": uri, "tag": "../x"}, "read")
    options = {"path": uri, "tag": "first", "versionAsOf": "2"}
    reader = Reader(TableRef.from_options(options), parse_options(options, "read"))
    with pytest.raises(lakefmt.InvalidOptionError, match="options versionAsOf and tag: give one"):
        reader.partitions()
