"""lakefmt: a lakehouse table format of immutable Parquet files and atomic snapshots.

>>> import lakefmt, pyarrow as pa
>>> t = lakefmt.create_table("/tmp/events", pa.schema([("id", pa.int64()), ("dt", pa.string())]),
...                          partition_by=["dt"])
>>> t.append(pa.table({"id": [1, 2], "dt": ["2026-11-01", "2026-11-02"]}))
>>> t.scan().to_arrow()
>>> lakefmt.write_table("/tmp/other", pa.table({"id": [1, 2]}))  # creates the table from the data's schema
"""

from lakefmt.commit.committer import Committer
from lakefmt.commit.restore import RestorePlan
from lakefmt.commit.schema_change import UpdateSchema
from lakefmt.commit.types import CommitOutcome, CommitResult
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
from lakefmt.io.paths import normalize_uri
from lakefmt.oneliner import write_table
from lakefmt.read.changes import CHANGE_TYPE, COMMIT_SNAPSHOT, COMMIT_TIMESTAMP, ROW_KIND, change_schema
from lakefmt.read.scan import FileTask, ReadTask, Scan
from lakefmt.rewrite.compact import commit_compaction, rewrite_group
from lakefmt.rewrite.compact_plan import plan_compaction
from lakefmt.rewrite.compact_types import CompactionGroup, CompactionPlan, CompactionReport
from lakefmt.rewrite.merge import MergeReport, TableMerger
from lakefmt.spec import FORMAT_VERSION, CommitKind, CommitMessage, Consumer, Snapshot, TableSchema
from lakefmt.spec.scope import OverwriteScope
from lakefmt.spec.tag import Tag
from lakefmt.table import Table, create_table, open_table
from lakefmt.write.writer import TableWriter

__version__ = "0.1.0"

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
