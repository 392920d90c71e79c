"""Bad input to compaction and row-level delete, beyond the cases of their own tests: each is refused with an
error that names the mistake in one line, and the table is left exactly as it was (the same files, byte for
byte in size, and the same latest snapshot). On local disk one case per test; on S3 (moto) every case on one
table."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from helpers import create_table_in, file_listing

import lakefmt
from lakefmt.errors import InvalidOptionError, InvalidPartitionError, InvalidPredicateError

SCHEMA = pa.schema([("id", pa.int64()), ("dt", pa.string())])

Case = tuple[str, Callable[[lakefmt.Table], Any], type[Exception], str]
CASES: list[Case] = [
    # compaction: the partition (a string is a sequence too; one unknown partition among known ones)
    ("partition as text", lambda t: t.compact("dt=a"), InvalidPartitionError, "must be a mapping"),
    ("partition list of text", lambda t: t.compact(["dt=a"]), InvalidPartitionError, "must be a mapping"),
    ("one unknown among known", lambda t: t.compact([{"dt": "a"}, {"dt": "zz"}]), InvalidPartitionError, "dt=zz"),
    ("null partition absent", lambda t: t.compact({"dt": None}), InvalidPartitionError, "no live file"),
    ("partition of another type", lambda t: t.compact({"dt": 5}), InvalidPartitionError, "no live file in partition"),
    ("not a partition key", lambda t: t.compact({"id": 1}), InvalidPartitionError, "not a partition key"),
    # compaction: sizes and counts
    ("target true", lambda t: t.compact(target_file_size=True), InvalidOptionError, "target_file_size must be"),
    ("target float", lambda t: t.compact(target_file_size=1.5), InvalidOptionError, "target_file_size must be"),
    ("target text", lambda t: t.compact(target_file_size="128MiB"), InvalidOptionError, "target_file_size must be"),
    ("target negative", lambda t: t.compact(target_file_size=-1), InvalidOptionError, "target_file_size must be"),
    ("min files negative", lambda t: t.compact(min_files=-1), InvalidOptionError, "min_files must be"),
    # refused whether or not there is anything to compact (partition b holds one file: nothing to do there)
    ("parallelism, no work", lambda t: t.compact({"dt": "b"}, parallelism=-1), ValueError, "parallelism must be"),
    ("sort by missing", lambda t: t.compact(sort_by="nope"), lakefmt.LakefmtError, "unknown column"),
    # delete: the filter
    ("partition column, int", lambda t: t.delete(pc.field("dt") == 5), InvalidPredicateError, "another type"),
    ("is_in of text on int", lambda t: t.delete(pc.field("id").isin(["x"])), InvalidPredicateError, "int64"),
    (
        "missing column in one branch",
        lambda t: t.delete((pc.field("id") == 1) | (pc.field("nope") == 2)),
        InvalidPredicateError,
        "no column 'nope'",
    ),
    ("a column, not a test", lambda t: t.delete(pc.field("dt")), InvalidPredicateError, "must evaluate to bool"),
    ("sql text cut short", lambda t: t.delete("dt = "), InvalidPredicateError, "expected a value"),
    ("sql text, unknown column", lambda t: t.delete("nope = 'a'"), InvalidPredicateError, "no column 'nope'"),
]


def build(table: lakefmt.Table) -> lakefmt.Table:
    """Six one-row files in dt=a (enough to compact), one in dt=b."""
    for i in range(6):
        table.append(pa.table({"id": [i], "dt": ["a"]}, schema=SCHEMA))
    table.append(pa.table({"id": [10], "dt": ["b"]}, schema=SCHEMA))
    return table


@pytest.fixture(scope="module")
def local_table(tmp_path_factory: pytest.TempPathFactory) -> lakefmt.Table:
    uri = str(tmp_path_factory.mktemp("rewrite-bad-input") / "t")
    return build(lakefmt.create_table(uri, SCHEMA, partition_by=["dt"]))


def refused_and_unchanged(table: lakefmt.Table, case: Case) -> None:
    _, call, error, words = case
    listing, latest = file_listing(table.io), table.latest_snapshot()
    with pytest.raises(error, match=words) as refused:
        call(table)
    assert "\n" not in str(refused.value), f"a message of several lines: {refused.value}"
    assert file_listing(table.io) == listing, "the refused call changed the table's files"
    assert table.latest_snapshot() == latest


@pytest.mark.parametrize("case", CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_refused_and_the_table_is_unchanged(local_table: lakefmt.Table, case: Case) -> None:
    refused_and_unchanged(local_table, case)


@pytest.mark.s3
def test_bad_input_on_s3(s3_store: Any) -> None:
    table = build(create_table_in(s3_store, SCHEMA, partition_by=["dt"]))
    for case in CASES:
        refused_and_unchanged(table, case)


def test_a_partition_given_to_an_unpartitioned_table_is_refused(tmp_path: Any) -> None:
    table = lakefmt.create_table(str(tmp_path / "t"), SCHEMA)
    table.append(pa.table({"id": [1], "dt": ["a"]}, schema=SCHEMA))
    refused_and_unchanged(
        table, ("", lambda t: t.compact({"dt": "a"}), InvalidPartitionError, "the table is not partitioned")
    )
