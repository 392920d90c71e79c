"""Every exception lakefmt raises on purpose.

The type carries the outcome, so callers can act on it without parsing messages:

* :class:`CommitConflictError` and :class:`CommitRetriesExhaustedError` mean the commit did **not** land:
  the files it wrote are garbage and it is safe to clean them up or to retry.
* :class:`CommitStateUnknownError` means lakefmt could not tell whether the commit landed: never delete the
  files it wrote; re-open the table and retry with the same commit user and identifier (dedup makes the
  retry a no-op if the first attempt had landed).
"""

from __future__ import annotations

from collections.abc import Sequence

__all__ = [
    "BucketNotFoundError",
    "CommitConflictError",
    "CommitError",
    "CommitRetriesExhaustedError",
    "CommitStateUnknownError",
    "ConsumerNotFoundError",
    "CorruptMetadataError",
    "DeletionVectorsError",
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
    "KeyTableError",
    "LakefmtError",
    "LocationNotEmptyError",
    "MergeError",
    "MergeMultipleMatchesError",
    "MissingDependencyError",
    "MissingMetadataError",
    "NonAtomicStorageError",
    "NotATableError",
    "PathOutsideTableError",
    "RewriteConflictError",
    "SchemaConflictError",
    "SchemaEvolutionError",
    "SchemaMismatchError",
    "SnapshotNotFoundError",
    "StorageCredentialsError",
    "StorageError",
    "StorageUnreachableError",
    "TableAlreadyExistsError",
    "TagAlreadyExistsError",
    "TagNotFoundError",
    "UnknownOptionError",
    "UnsupportedFilterError",
    "UnsupportedFormatVersionError",
    "UnsupportedTypeError",
]


class LakefmtError(Exception):
    """Base class of every error lakefmt raises on purpose."""


class NotATableError(LakefmtError):
    """The location holds no lakefmt table (no schema file)."""


class InvalidLocationError(LakefmtError, ValueError):
    """A table location that can name no table: empty, a ``file://`` URI naming another host, or a scheme
    written with one slash (``s3:/bucket``)."""


class TableAlreadyExistsError(LakefmtError):
    """``create_table`` was asked to create a table where one already exists."""


class LocationNotEmptyError(LakefmtError):
    """``create_table`` was pointed at a location that already holds other files."""


class SchemaMismatchError(LakefmtError, ValueError):
    """Data does not match the table schema (missing, extra or mistyped columns, nulls in a required one)."""


class UnsupportedTypeError(LakefmtError, TypeError):
    """An Arrow type lakefmt cannot store, or cannot use for the purpose asked (e.g. as a partition key)."""


class InvalidPartitionError(LakefmtError, ValueError):
    """A partition specification names unknown columns or values that cannot be used."""


class InvalidOptionError(LakefmtError, ValueError):
    """An option (a table option, or an engine's read or write option) whose value cannot be parsed or is out
    of range; the message names the option and the value."""


class UnknownOptionError(InvalidOptionError):
    """An option key that is not known: a typo would otherwise silently leave the default in force. The message
    names the key, the closest known one and the valid ones."""


class InvalidPredicateError(LakefmtError, ValueError):
    """A predicate (an overwrite's ``where``, Spark's ``replaceWhere``) that is not in lakefmt's small SQL subset,
    names an unknown column, or compares a column with a value of another type."""


class CorruptMetadataError(LakefmtError):
    """A metadata file (schema, snapshot, manifest list, manifest) is malformed, truncated or empty."""


class MissingMetadataError(CorruptMetadataError):
    """A metadata file that committed metadata names does not exist. For a snapshot that is no longer the
    latest this can be a concurrent expiration rather than damage: re-read the latest snapshot and retry."""


class UnsupportedFormatVersionError(LakefmtError):
    """A metadata file was written by a newer format version than this library understands."""


class PathOutsideTableError(LakefmtError):
    """A path stored in metadata, or given by a caller, would resolve outside the table root."""


class SnapshotNotFoundError(LakefmtError, LookupError):
    """The requested snapshot does not exist (never created, or expired)."""


class CommitError(LakefmtError):
    """Base class of commit failures."""


class InvalidCommitError(CommitError, ValueError):
    """A commit was refused before anything was written: a bad identifier, commit user or commit message (one
    given twice, or one whose files are already in the table)."""


class NonAtomicStorageError(CommitError):
    """The table's storage has no atomic put-if-absent, and its options do not accept the risk of committing
    there (``commit.allow-non-atomic-publish``). Nothing was written."""


class CommitConflictError(CommitError):
    """A concurrent commit changed what this commit depends on; this commit did not land."""


class CommitRetriesExhaustedError(CommitError):
    """Lost the race for the next snapshot id too many times; this commit did not land."""


class CommitStateUnknownError(CommitError):
    """The outcome of publishing is unknown: do not delete this commit's files; retry with the same identifier."""


class InvalidSnapshotIdError(SnapshotNotFoundError, ValueError):
    """A snapshot id that can name no snapshot: ids are whole numbers that start at 1 (0 only as the start of
    an incremental range)."""


class InvalidTimestampError(LakefmtError, ValueError):
    """A point in time (``as_of``) that is none of a datetime (naive = UTC), an ISO-8601 string or whole epoch
    milliseconds; a float (seconds or milliseconds? it cannot be told) is refused too."""


class InvalidConsumerIdError(LakefmtError, ValueError):
    """A consumer id that cannot name a consumer file: 1 to 200 characters of ``A-Z a-z 0-9 . _ -``, the first
    a letter, a digit or ``_`` (so no ``/``, ``..``, empty id, control character or hidden file)."""


class ConsumerNotFoundError(LakefmtError, LookupError):
    """The table records no consumer with this id."""


class InvalidTagNameError(LakefmtError, ValueError):
    """A tag name that cannot name a tag file: the rules of consumer ids (1 to 200 characters of
    ``A-Z a-z 0-9 . _ -``, the first a letter, a digit or ``_``)."""


class TagAlreadyExistsError(LakefmtError):
    """A tag of this name exists already (created before, or by a racing ``create_tag``): nothing was written."""


class TagNotFoundError(LakefmtError, LookupError):
    """The table has no tag of this name (never created, deleted, or past its ``retain`` time)."""


class RewriteConflictError(CommitConflictError):
    """A rewrite (compaction, row-level delete, restore) lost a race: a concurrent commit removed files it
    rewrites. ``gone`` lists them. Nothing was committed."""

    def __init__(self, message: str, *, gone: Sequence[str] = ()) -> None:
        super().__init__(message)
        self.gone: tuple[str, ...] = tuple(gone)


class MissingDependencyError(LakefmtError, ImportError):
    """An optional dependency a method needs (duckdb, polars, pandas) is not installed; the message names the
    extra that installs it (``pip install 'lakefmt[duckdb]'``)."""


class UnsupportedFilterError(LakefmtError, ValueError):
    """A scan's filter that the form of read asked for cannot apply exactly: ``Scan.to_dataset()`` refuses a
    filter on a floating-point column (or with a NaN literal), which pyarrow's Parquet scan would get wrong for
    NaN rows; the message names the forms that apply it exactly."""


class SchemaEvolutionError(LakefmtError, ValueError):
    """A schema change the format does not allow (narrowing a type, changing or dropping a partition column, a
    name already used, ...; docs/format.md lists the rules). Raised before anything is written: the table is
    unchanged."""


class SchemaConflictError(CommitConflictError):
    """The table's schema changed concurrently in a way this commit cannot follow: a schema change whose changes
    no longer apply to the new schema, or a write whose files hold a column the new schema dropped. Nothing was
    committed."""


class InvalidStorageOptionError(InvalidOptionError):
    """A storage option the table's filesystem does not take (a typo, a key of another library lakefmt cannot
    translate), or two spellings of one option with different values. The message names the key, never its
    value."""


class StorageError(LakefmtError):
    """The storage behind a table location cannot be used as configured (credentials, endpoint, bucket)."""


class StorageCredentialsError(StorageError):
    """No usable credentials for the storage (botocore's ``NoCredentialsError``/``PartialCredentialsError``)."""


class StorageUnreachableError(StorageError, ConnectionError):
    """The storage endpoint refuses connections or does not answer in time."""


class BucketNotFoundError(StorageError, NotATableError):
    """The bucket a table location names does not exist. A :class:`NotATableError` too, so code that creates a
    table it cannot open learns why it cannot create it either."""


class KeyTableError(LakefmtError, ValueError):
    """An operation a key table cannot do as asked (an upsert without the key columns, a key moved to another
    partition, ``upsert`` on a table without a primary key); the message says what to call instead."""


class DeletionVectorsError(LakefmtError, ValueError):
    """A form of read that cannot apply deletion vectors was asked for a snapshot that has them (``Scan.to_dataset``
    on a key table's snapshot, say); the message names the reads that do."""


class MergeError(LakefmtError, ValueError):
    """A MERGE was asked for something it cannot do (no clause, a clause referring to the wrong side, an
    ON condition without an equality between a target and a source column); nothing was committed."""


class MergeMultipleMatchesError(MergeError):
    """A MERGE found a target row matched by more than one source row, where a matched clause would change it
    (SQL MERGE refuses to pick one); nothing was committed."""


class InvalidRowKindError(LakefmtError, ValueError):
    """A row of change-data input (a key table with ``rowkind.field``) whose row kind is null or not one the table
    accepts (``rowkind.format``); nothing was written."""
