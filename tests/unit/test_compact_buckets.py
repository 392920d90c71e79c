"""The planning of a key-table bucket's compaction (:func:`lakefmt.rewrite.compact.buckets.plan_bucket`) and its
``compaction.bucket.delete-ratio-threshold`` option: automatic compaction merges the whole bucket once the rows
its vectors delete reach the share, only when the bucket is at the trigger."""

from __future__ import annotations

import pytest

from lakefmt.errors import InvalidOptionError
from lakefmt.options import TableOptions
from lakefmt.rewrite.compact.buckets import Files, plan_bucket

TRIGGER = 5
MAX_FILES = 50
BASE_ROWS = 1000
NEWER_ROWS = 10


def bucket(base_deleted: int, newer: int = TRIGGER - 1, newer_deleted: int = 0) -> Files:
    """A bucket of one base file (its last full merge) of :data:`BASE_ROWS` rows, ``base_deleted`` of them
    deleted, and ``newer`` files of :data:`NEWER_ROWS` rows committed after it (the first with ``newer_deleted``
    deleted rows): too few live rows in the newer files to merge the bucket whole by size."""
    n = 1 + newer
    counts = [BASE_ROWS] + [NEWER_ROWS] * newer
    deleted = [base_deleted] + [newer_deleted] + [0] * (newer - 1) if newer else [base_deleted]
    return Files(
        rows=[100 + i for i in range(n)],
        sizes=[c * 20 for c in counts],
        counts=counts,
        order=[(i, f"f{i}") for i in range(n)],
        deleted=deleted,
    )


def total(files: Files) -> int:
    """All rows in the bucket's files, deleted or not."""
    return sum(files.counts)


def test_below_the_share_only_the_newer_files_merge() -> None:
    files = bucket(base_deleted=50)  # 50 of 1040 rows: under 10%
    assert plan_bucket(files, TRIGGER, MAX_FILES, True, 0.1) == [[101, 102, 103, 104]]


def test_at_the_share_the_whole_bucket_merges() -> None:
    files = bucket(base_deleted=104)
    assert 0.1 * total(files) == 104
    assert plan_bucket(files, TRIGGER, MAX_FILES, True, 0.1) == [[100, 101, 102, 103, 104]]
    assert plan_bucket(bucket(base_deleted=103), TRIGGER, MAX_FILES, True, 0.1) == [[101, 102, 103, 104]]


def test_above_the_share_the_whole_bucket_merges() -> None:
    assert plan_bucket(bucket(base_deleted=250), TRIGGER, MAX_FILES, True, 0.1) == [[100, 101, 102, 103, 104]]


def test_rows_deleted_in_the_newer_files_count_towards_the_share() -> None:
    files = bucket(base_deleted=100, newer_deleted=5)  # 105 of 1040
    assert plan_bucket(files, TRIGGER, MAX_FILES, True, 0.1) == [[100, 101, 102, 103, 104]]


def test_without_a_share_deleted_rows_never_merge_the_base() -> None:
    files = bucket(base_deleted=250)  # under the per-file ratio (0.3): the base file is not heavy
    assert plan_bucket(files, TRIGGER, MAX_FILES, True) == [[101, 102, 103, 104]]
    assert plan_bucket(files, TRIGGER, MAX_FILES, True, None) == [[101, 102, 103, 104]]


def test_deleted_rows_alone_never_start_an_automatic_compaction() -> None:
    files = bucket(base_deleted=250, newer=2)  # 3 files: under the trigger
    assert plan_bucket(files, TRIGGER, MAX_FILES, True, 0.1) == []


def test_compact_on_request_is_unchanged() -> None:
    files = bucket(base_deleted=0)
    assert plan_bucket(files, TRIGGER, MAX_FILES, False, 0.1) == [[100, 101, 102, 103, 104]]
    assert plan_bucket(bucket(base_deleted=250, newer=2), TRIGGER, MAX_FILES, False, 0.1) == []


def test_the_option_is_parsed_with_its_default() -> None:
    assert TableOptions.from_map({}).bucket_delete_ratio_threshold == 0.1
    parsed = TableOptions.from_map({"compaction.bucket.delete-ratio-threshold": " 0.05 "})
    assert parsed.bucket_delete_ratio_threshold == 0.05
    assert TableOptions.from_map({"compaction.bucket.delete-ratio-threshold": "1"}).bucket_delete_ratio_threshold == 1
    TableOptions.check_keys({"compaction.bucket.delete-ratio-threshold": "0.2"})


@pytest.mark.parametrize("value", ["0", "-0.1", "1.5", "ten", "", "nan"])
def test_the_option_refuses_what_is_not_a_share(value: str) -> None:
    with pytest.raises(InvalidOptionError, match=r"compaction\.bucket\.delete-ratio-threshold"):
        TableOptions.from_map({"compaction.bucket.delete-ratio-threshold": value})


def test_a_full_compaction_merges_any_bucket_that_is_not_one_clean_file() -> None:
    """``min_files`` 1 without ``tiered`` (``Table.compact()``'s default on a key table): every bucket of two files
    or more is merged whole, a lone file only when it has deleted rows."""
    assert plan_bucket(bucket(base_deleted=0, newer=2), 1, MAX_FILES, False, 0.1) == [[100, 101, 102]]
    assert plan_bucket(bucket(base_deleted=0, newer=1), 1, MAX_FILES, False) == [[100, 101]]
    assert plan_bucket(bucket(base_deleted=1, newer=0), 1, MAX_FILES, False) == [[100]]
    assert plan_bucket(bucket(base_deleted=0, newer=0), 1, MAX_FILES, False) == []
    assert plan_bucket(bucket(base_deleted=1, newer=0), 1, MAX_FILES, True) == []  # automatic: never one light file
