"""lakefmt: a lakehouse table format of immutable Parquet files and atomic snapshots.

>>> import lakefmt, pyarrow as pa
>>> t = lakefmt.create_table("/tmp/events", pa.schema([("id", pa.int64()), ("dt", pa.string())]),
...                          partition_by=["dt"])
>>> t.append(pa.table({"id": [1, 2], "dt": ["2026-11-01", "2026-11-02"]}))
>>> t.scan().to_arrow()
>>> lakefmt.write_table("/tmp/other", pa.table({"id": [1, 2]}))  # creates the table from the data's schema
"""

from __future__ import annotations

import importlib
import importlib.util
from typing import TYPE_CHECKING, Any

from lakefmt.errors import (
    BucketNotFoundError,
    CommitConflictError,
    CommitError,
    CommitRetriesExhaustedError,
    CommitStateUnknownError,
    ConsumerNotFoundError,
    CorruptMetadataError,
    InvalidCommitError,
    InvalidConsumerIdError,
    InvalidLocationError,
    InvalidOptionError,
    InvalidPartitionError,
    InvalidPredicateError,
    InvalidRowKindError,
    InvalidSnapshotIdError,
    InvalidStorageOptionError,
    InvalidTagNameError,
    InvalidTimestampError,
    LakefmtError,
    LocationNotEmptyError,
    MergeError,
    MergeMultipleMatchesError,
    MissingDependencyError,
    MissingMetadataError,
    NonAtomicStorageError,
    NotATableError,
    PathOutsideTableError,
    RewriteConflictError,
    SchemaConflictError,
    SchemaEvolutionError,
    SchemaMismatchError,
    SnapshotNotFoundError,
    StorageCredentialsError,
    StorageError,
    StorageUnreachableError,
    TableAlreadyExistsError,
    TagAlreadyExistsError,
    TagNotFoundError,
    UnknownOptionError,
    UnsupportedFilterError,
    UnsupportedFormatVersionError,
    UnsupportedTypeError,
)

if TYPE_CHECKING:
    from lakefmt.commit.committer import Committer
    from lakefmt.commit.restore import RestorePlan
    from lakefmt.commit.schema_change import UpdateSchema
    from lakefmt.commit.types import CommitOutcome, CommitResult
    from lakefmt.io.paths import normalize_uri
    from lakefmt.oneliner import write_table
    from lakefmt.read.changes import CHANGE_TYPE, COMMIT_SNAPSHOT, COMMIT_TIMESTAMP, ROW_KIND, change_schema
    from lakefmt.read.scan import FileTask, ReadTask, Scan
    from lakefmt.rewrite.compact.plan import plan_compaction
    from lakefmt.rewrite.compact.run import commit_compaction, rewrite_group
    from lakefmt.rewrite.compact.types import CompactionGroup, CompactionPlan, CompactionReport
    from lakefmt.rewrite.merge.run import MergeReport, TableMerger
    from lakefmt.spec import FORMAT_VERSION, CommitKind, CommitMessage, Consumer, Snapshot, TableSchema
    from lakefmt.spec.scope import OverwriteScope
    from lakefmt.spec.tag import Tag
    from lakefmt.table import Table, create_table, open_table
    from lakefmt.write.writer import TableWriter

__version__ = "0.1.0"

#: the public names not imported with the package, and their modules: imported on first use (PEP 562), so
#: that ``import lakefmt`` (and the ``lakefmt`` command's ``--help``) loads no reader, writer or storage client
_LAZY = {
    "Committer": "lakefmt.commit.committer",
    "RestorePlan": "lakefmt.commit.restore",
    "UpdateSchema": "lakefmt.commit.schema_change",
    "CommitOutcome": "lakefmt.commit.types",
    "CommitResult": "lakefmt.commit.types",
    "normalize_uri": "lakefmt.io.paths",
    "write_table": "lakefmt.oneliner",
    "CHANGE_TYPE": "lakefmt.read.changes",
    "COMMIT_SNAPSHOT": "lakefmt.read.changes",
    "COMMIT_TIMESTAMP": "lakefmt.read.changes",
    "ROW_KIND": "lakefmt.read.changes",
    "change_schema": "lakefmt.read.changes",
    "FileTask": "lakefmt.read.scan",
    "ReadTask": "lakefmt.read.scan",
    "Scan": "lakefmt.read.scan",
    "commit_compaction": "lakefmt.rewrite.compact.run",
    "rewrite_group": "lakefmt.rewrite.compact.run",
    "plan_compaction": "lakefmt.rewrite.compact.plan",
    "CompactionGroup": "lakefmt.rewrite.compact.types",
    "CompactionPlan": "lakefmt.rewrite.compact.types",
    "CompactionReport": "lakefmt.rewrite.compact.types",
    "MergeReport": "lakefmt.rewrite.merge.run",
    "TableMerger": "lakefmt.rewrite.merge.run",
    "FORMAT_VERSION": "lakefmt.spec",
    "CommitKind": "lakefmt.spec",
    "CommitMessage": "lakefmt.spec",
    "Consumer": "lakefmt.spec",
    "Snapshot": "lakefmt.spec",
    "TableSchema": "lakefmt.spec",
    "OverwriteScope": "lakefmt.spec.scope",
    "Tag": "lakefmt.spec.tag",
    "Table": "lakefmt.table",
    "create_table": "lakefmt.table",
    "open_table": "lakefmt.table",
    "TableWriter": "lakefmt.write.writer",
}

__all__ = [
    "CHANGE_TYPE",
    "COMMIT_SNAPSHOT",
    "COMMIT_TIMESTAMP",
    "FORMAT_VERSION",
    "ROW_KIND",
    "BucketNotFoundError",
    "CommitConflictError",
    "CommitError",
    "CommitKind",
    "CommitMessage",
    "CommitOutcome",
    "CommitResult",
    "CommitRetriesExhaustedError",
    "CommitStateUnknownError",
    "Committer",
    "CompactionGroup",
    "CompactionPlan",
    "CompactionReport",
    "Consumer",
    "ConsumerNotFoundError",
    "CorruptMetadataError",
    "FileTask",
    "InvalidCommitError",
    "InvalidConsumerIdError",
    "InvalidLocationError",
    "InvalidOptionError",
    "InvalidPartitionError",
    "InvalidPredicateError",
    "InvalidRowKindError",
    "InvalidSnapshotIdError",
    "InvalidStorageOptionError",
    "InvalidTagNameError",
    "InvalidTimestampError",
    "LakefmtError",
    "LocationNotEmptyError",
    "MergeError",
    "MergeMultipleMatchesError",
    "MergeReport",
    "MissingDependencyError",
    "MissingMetadataError",
    "NonAtomicStorageError",
    "NotATableError",
    "OverwriteScope",
    "PathOutsideTableError",
    "ReadTask",
    "RestorePlan",
    "RewriteConflictError",
    "Scan",
    "SchemaConflictError",
    "SchemaEvolutionError",
    "SchemaMismatchError",
    "Snapshot",
    "SnapshotNotFoundError",
    "StorageCredentialsError",
    "StorageError",
    "StorageUnreachableError",
    "Table",
    "TableAlreadyExistsError",
    "TableMerger",
    "TableSchema",
    "TableWriter",
    "Tag",
    "TagAlreadyExistsError",
    "TagNotFoundError",
    "UnknownOptionError",
    "UnsupportedFilterError",
    "UnsupportedFormatVersionError",
    "UnsupportedTypeError",
    "UpdateSchema",
    "change_schema",
    "commit_compaction",
    "create_table",
    "normalize_uri",
    "open_table",
    "plan_compaction",
    "rewrite_group",
    "write_table",
]


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:  # a subpackage (``lakefmt.table.X`` after ``import lakefmt``), as when it was imported eagerly
        if name.startswith("_") or importlib.util.find_spec(f"{__name__}.{name}") is None:
            raise AttributeError(f"module 'lakefmt' has no attribute {name!r}")
        return importlib.import_module(f"{__name__}.{name}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # once: later lookups find it without calling here
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *__all__})
