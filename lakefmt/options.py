"""Table options: string key/values stored in the schema file, parsed into typed settings here.

:class:`TableOptions` is the registry: every key lakefmt interprets, its typed field and the parser of its value. An
unknown key is refused where options are set (:meth:`TableOptions.check_keys`), except under ``user.``
(:data:`USER_PREFIX`), the users' own; unknown keys already stored are kept but never interpreted. Sizes and
durations are read by :mod:`lakefmt.units`, the key tables' options by :mod:`lakefmt.key_options`.
"""

from __future__ import annotations

import difflib
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar

from lakefmt.errors import InvalidOptionError, UnknownOptionError
from lakefmt.key_options import (
    DEFAULT_FUNCTION,
    FIELD_FUNCTION,
    MAX_BUCKETS,
    parse_aggregate_function,
    parse_changelog_producer,
    parse_merge_engine,
    parse_rowkind_format,
)
from lakefmt.units import parse_duration_ms, parse_size

__all__ = ["USER_PREFIX", "InvalidOptionError", "TableOptions", "UnknownOptionError"]


def _int(text: str, key: str) -> int:
    try:
        return int(str(text).strip())
    except ValueError as exc:
        raise InvalidOptionError(f"{key}: {text!r} is not an integer") from exc


def _bool(text: str, key: str) -> bool:
    value = str(text).strip().lower()
    if value not in ("true", "false"):
        raise InvalidOptionError(f"{key}: {text!r} is not true or false")
    return value == "true"


def _text(text: str, key: str) -> str:
    value = str(text).strip()
    if not value:
        raise InvalidOptionError(f"option {key} must not be empty")
    return value


def _ratio(text: str, key: str) -> float:
    """A share: a number in (0, 1]."""
    try:
        value = float(str(text).strip())
    except ValueError as exc:
        raise InvalidOptionError(f"{key}: {text!r} is not a number") from exc
    if not 0 < value <= 1:
        raise InvalidOptionError(f"option {key} is a share of rows, more than 0 and at most 1, got {text!r}")
    return value


def _delete_mode(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value not in ("copy-on-write", "merge-on-read"):
        raise InvalidOptionError(f"option {key} is copy-on-write or merge-on-read, got {text!r}")
    return value


def _compression(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value not in ("zstd", "snappy", "gzip", "lz4", "brotli", "none"):
        raise InvalidOptionError(f"{key}: {text!r} is not a Parquet codec (zstd, snappy, gzip, lz4, brotli, none)")
    return value


def _stored_duration_ms(text: str, key: str) -> int:
    """A duration table option as stored: the format reads plain digits as milliseconds (Paimon's rule, and what
    tables created before units were required hold); :meth:`TableOptions.check_keys` refuses them when set."""
    s = str(text).strip()
    return int(s) if s.isdigit() else parse_duration_ms(text, key)


#: Table option keys under this prefix are the users' own: stored with the table, never interpreted, never refused.
USER_PREFIX = "user."


@dataclass(frozen=True)
class TableOptions:
    """Typed view of the options that lakefmt interprets. Keys follow Paimon's naming where one exists."""

    target_file_size: int = 128 << 20  #: ``target-file-size``: roll data files at this size
    row_group_rows: int = 1 << 20  #: ``write.row-group-rows``: buffer rows into row groups this large
    row_group_size: int = 128 << 20  #: ``write.row-group-size``: ... or this many in-memory bytes
    write_buffer_size: int = 256 << 20  #: ``write.buffer-size``: flush the largest partition above this
    #: ``write.sync-ahead-bytes``: with ``write.fsync``, a data file still being written is synced in the
    #: background each time this many more bytes of it are written, so the disk writes back while the next row
    #: groups are encoded and the fsync at close only waits for the tail. ``0`` turns it off (each file is
    #: synced once, at close); so, in effect, does any value of at least ``target-file-size``.
    sync_ahead_bytes: int = 16 << 20
    compression: str = "zstd"  #: ``file.compression``
    #: ``write.fsync``: on local disk, fsync every data and metadata file before a snapshot can reference it,
    #: and the snapshot folder after a publish. ``false`` keeps atomicity and exactly-once (a killed process
    #: loses nothing: the page cache survives it) but not durability across a power loss.
    fsync: bool = True
    manifest_target_size: int = 8 << 20  #: ``manifest.target-file-size``
    manifest_merge_min_count: int = 30  #: ``manifest.merge-min-count``: merge small manifests at this count
    manifest_full_merge_threshold: int = 1000  #: ``manifest.full-compaction-threshold``: DELETE entries
    commit_max_retries: int = 20  #: ``commit.max-retries``: lost races before giving up
    commit_user_retention_ms: int = 30 * 86_400_000  #: ``commit.user-retention``: dedup memory per user
    commit_user_max: int = 10_000  #: ``commit.user-max``: most users remembered for dedup
    #: ``commit.allow-non-atomic-publish``: commit on storage whose put-if-absent is not atomic (a generic
    #: fsspec filesystem), accepting that two racing committers could both win; only with one committer
    allow_non_atomic_publish: bool = False
    #: ``snapshot.num-retained.min`` / ``.max`` and ``snapshot.time-retained``: every commit through a Table
    #: expires old snapshots afterwards (as Paimon does; not a ``write-only`` one): at least min (10) are kept,
    #: at most max (default: no limit), and of the others those older than the time (default 1 hour) go.
    #: ``Table.expire_snapshots()`` and ``lakefmt expire`` use them for every rule not given as an argument.
    snapshot_retained_min: int = 10
    snapshot_retained_max: int | None = None
    snapshot_time_retained_ms: int = 3_600_000
    #: ``consumer.expiration-time``: a consumer whose record has not been written for this long no longer
    #: holds snapshots back from expiration (and expiration deletes its record); unset = consumers never expire
    consumer_expiration_ms: int | None = None
    #: ``compaction.min.file-num``: a partition is compacted once it holds this many small data files (files
    #: under 3/4 of ``target-file-size``); also the least number of files one automatic compaction merges
    compaction_min_file_num: int = 5
    #: ``compaction.max.file-num``: a partition holding this many small files is compacted whole, however
    #: small they are (automatic compaction merges size tiers below it)
    compaction_max_file_num: int = 50
    #: ``compaction.auto``: after each commit through a Table, compact the partitions it touched that hold
    #: ``compaction.min.file-num`` small files, as a separate COMPACT snapshot (best effort). On by default (as
    #: Paimon's writers compact unless ``write-only``); ``false`` leaves compaction to ``lakefmt compact``
    compaction_auto: bool = True
    #: ``compaction.async``: with ``compaction.auto``, the compaction after a commit runs in a worker thread of
    #: the table object instead of the committing thread, so ``Table.append`` returns as soon as its commit
    #: lands (``Table.wait_for_compaction`` waits for the worker; the Spark sink always compacts in place)
    compaction_async: bool = False
    #: ``write-only``: commits never compact nor expire snapshots automatically (Paimon's name and meaning: the
    #: writers of a table that one dedicated maintenance job serves); per writer,
    #: ``Table.new_committer(write_only=True)``
    write_only: bool = False
    #: ``bucket``: a key table's number of buckets (rows go to ``hash(key) mod bucket``; files are per partition and
    #: bucket). Fixed when the table is created. Paimon recommends 200 MB to 1 GB of data per bucket.
    bucket: int = 1
    #: ``sequence.field``: on a key table, the column that orders the versions of a key: of the rows for one key,
    #: the one with the largest value wins, within an upsert and against the live row (ties: the later row)
    sequence_field: str | None = None
    #: ``rowkind.field``: on a key table, a string column saying what each written row is, a change of its key
    #: (insert, update, update's old row, delete: :mod:`lakefmt.spec.keys.rowkind`); Paimon's name
    rowkind_field: str | None = None
    #: ``rowkind.format``: the spellings ``rowkind.field`` accepts: ``paimon`` (``+I -U +U -D``), ``delta``
    #: (``insert update_preimage update_postimage delete``), ``debezium`` (``c r u d``), or ``any`` of them
    rowkind_format: str = "any"
    #: ``write.delete.mode``: ``copy-on-write`` rewrites the files a row-level delete touches; ``merge-on-read``
    #: marks the deleted rows in deletion vectors (format version 3; always so on a key table). Iceberg's name.
    delete_mode: str = "copy-on-write"
    #: ``num-sorted-run.compaction-trigger``: a key table's bucket is compacted (its files merged, deleted rows
    #: dropped, vectors folded) once it holds this many data files
    sorted_run_compaction_trigger: int = 5
    #: ``num-sorted-run.stop-trigger``: past this many files in a bucket, a commit through a Table compacts the
    #: bucket in place before returning (writes slow down rather than reads); default: the trigger plus 3
    sorted_run_stop_trigger: int | None = None
    #: ``compaction.bucket.delete-ratio-threshold``: automatic compaction merges a key table's bucket whole (into one
    #: run, its deleted rows dropped) once the rows its files' deletion vectors delete reach this share of the rows
    #: in its files, and the bucket is at the trigger; else its oldest run waits for the newer files to hold half
    #: its rows, and every read masks the rows upserts replaced in it meanwhile
    bucket_delete_ratio_threshold: float = 0.1
    #: ``merge-engine``: how the rows written for one key combine: ``deduplicate`` (the last row wins),
    #: ``partial-update`` (a new row's non-null fields replace the old row's), ``aggregation`` (per field,
    #: ``fields.<f>.aggregate-function``) or ``first-row`` (the first row of a key stays). Paimon's names.
    merge_engine: str = "deduplicate"
    #: ``fields.default-aggregate-function``: the function of the ``aggregation`` engine for a field that names
    #: none (Paimon's key; unset: ``last_non_null_value``)
    default_aggregate_function: str | None = None
    #: ``fields.<f>.aggregate-function``: per field, the function of the ``aggregation`` engine, as (field, name)
    aggregate_functions: tuple[tuple[str, str], ...] = ()
    #: ``changelog-producer`` (Paimon's name): what a commit stores for the change feed. ``none`` (the default)
    #: stores nothing: :meth:`lakefmt.Table.changes` derives a commit's changes from its files and deletion vectors,
    #: reading each replaced row out of the older file it was in. ``lookup``: a commit that replaces or deletes rows
    #: by deletion vector stores its change rows in a changelog file when it is made (the key lookup already found
    #: every replaced row; rewrite.keys.changelog), and the feed reads that file alone. ``input``: a commit
    #: on a key table stores the rows it was given, as they were written, each with its own row kind (the
    #: ``rowkind.field`` value, else an insert; a delete by key as its key). ``full-compaction`` is refused.
    changelog_producer: str = "none"
    #: whether the table sets ``snapshot.num-retained.max`` or ``snapshot.time-retained`` itself (not an option:
    #: read from the keys present); see :attr:`auto_expire`
    retention_set: bool = False

    _KEYS: ClassVar[dict[str, tuple[str, Callable[[str, str], Any]]]] = {
        "target-file-size": ("target_file_size", parse_size),
        "write.row-group-rows": ("row_group_rows", _int),
        "write.row-group-size": ("row_group_size", parse_size),
        "write.buffer-size": ("write_buffer_size", parse_size),
        "write.sync-ahead-bytes": ("sync_ahead_bytes", parse_size),
        "file.compression": ("compression", _compression),
        "write.fsync": ("fsync", _bool),
        "manifest.target-file-size": ("manifest_target_size", parse_size),
        "manifest.merge-min-count": ("manifest_merge_min_count", _int),
        "manifest.full-compaction-threshold": ("manifest_full_merge_threshold", _int),
        "commit.max-retries": ("commit_max_retries", _int),
        "commit.user-retention": ("commit_user_retention_ms", _stored_duration_ms),
        "commit.user-max": ("commit_user_max", _int),
        "commit.allow-non-atomic-publish": ("allow_non_atomic_publish", _bool),
        "snapshot.num-retained.min": ("snapshot_retained_min", _int),
        "snapshot.num-retained.max": ("snapshot_retained_max", _int),
        "snapshot.time-retained": ("snapshot_time_retained_ms", _stored_duration_ms),
        "consumer.expiration-time": ("consumer_expiration_ms", _stored_duration_ms),
        "compaction.min.file-num": ("compaction_min_file_num", _int),
        "compaction.max.file-num": ("compaction_max_file_num", _int),
        "compaction.auto": ("compaction_auto", _bool),
        "compaction.async": ("compaction_async", _bool),
        "write-only": ("write_only", _bool),
        "bucket": ("bucket", _int),
        "sequence.field": ("sequence_field", _text),
        "rowkind.field": ("rowkind_field", _text),
        "rowkind.format": ("rowkind_format", parse_rowkind_format),
        "write.delete.mode": ("delete_mode", _delete_mode),
        "num-sorted-run.compaction-trigger": ("sorted_run_compaction_trigger", _int),
        "num-sorted-run.stop-trigger": ("sorted_run_stop_trigger", _int),
        "compaction.bucket.delete-ratio-threshold": ("bucket_delete_ratio_threshold", _ratio),
        "merge-engine": ("merge_engine", parse_merge_engine),
        DEFAULT_FUNCTION: ("default_aggregate_function", parse_aggregate_function),
        "changelog-producer": ("changelog_producer", parse_changelog_producer),
    }
    #: keys whose value may be 0 (sizes, never negative; every other integer must be positive)
    _ZERO_ALLOWED: ClassVar[frozenset[str]] = frozenset({"write.sync-ahead-bytes"})

    @classmethod
    def check_keys(cls, options: Mapping[str, str]) -> None:
        """Refuse a key lakefmt does not know (:class:`UnknownOptionError`, naming the closest known key and every
        known one), so that a typo never silently leaves the default in force. Keys under :data:`USER_PREFIX`
        (``user.``) are the users' own: stored, never interpreted. Checked where options are set (creating a
        table); a table whose stored options hold unknown keys still opens, reads and commits. A duration option
        written as a bare number is refused here too (its unit must be written: ``"7d"``, ``"PT1H"``), though the
        format reads one already stored as milliseconds."""
        for key, value in options.items():
            spec = cls._KEYS.get(key)
            if spec is not None and spec[1] is _stored_duration_ms:
                parse_duration_ms(value, f"option {key}")
            if key in cls._KEYS or key.startswith(USER_PREFIX) or FIELD_FUNCTION.match(key):
                continue
            close = difflib.get_close_matches(key, list(cls._KEYS), n=1, cutoff=0.6)
            hint = f" (did you mean {close[0]}?)" if close else ""
            raise UnknownOptionError(
                f"unknown table option {key!r}{hint}. Known options: {', '.join(cls._KEYS)}, "
                "fields.<field>.aggregate-function; keys under "
                f"{USER_PREFIX!r} are free for your own use"
            )

    @classmethod
    def from_map(cls, options: Mapping[str, str]) -> TableOptions:
        """Parse the options lakefmt knows (unknown keys are skipped: see :meth:`check_keys`);
        :class:`InvalidOptionError` names a bad key and value."""
        values: dict[str, Any] = {}
        functions: list[tuple[str, str]] = []
        for key, raw in options.items():
            spec = cls._KEYS.get(key)
            field_function = FIELD_FUNCTION.match(key) if spec is None and key != DEFAULT_FUNCTION else None
            if field_function is not None:
                functions.append((field_function.group("field"), parse_aggregate_function(raw, key)))
                continue
            if spec is None:
                continue
            attr, parse = spec
            value = parse(raw, key)
            if isinstance(value, int) and not isinstance(value, bool) and value < 1 and key not in cls._ZERO_ALLOWED:
                raise InvalidOptionError(f"option {key} must be positive, got {raw!r}")
            values[attr] = value
        values["retention_set"] = "snapshot.num-retained.max" in options or "snapshot.time-retained" in options
        return cls(**values, aggregate_functions=tuple(sorted(functions)))

    def check(self) -> TableOptions:
        """Refuse options that contradict each other (checked when a table is created; a table whose options
        predate the check still commits, and its automatic expiration is skipped)."""
        if self.snapshot_retained_max is not None and self.snapshot_retained_min > self.snapshot_retained_max:
            raise InvalidOptionError(
                f"snapshot.num-retained.min ({self.snapshot_retained_min}) must not be larger than "
                f"snapshot.num-retained.max ({self.snapshot_retained_max}); set both (the default min is 10)"
            )
        if self.compaction_min_file_num > self.compaction_max_file_num:
            raise InvalidOptionError(
                f"compaction.min.file-num ({self.compaction_min_file_num}) must not be larger than "
                f"compaction.max.file-num ({self.compaction_max_file_num})"
            )
        if self.rowkind_field is not None and self.merge_engine != "deduplicate":
            raise InvalidOptionError(
                f"rowkind.field needs merge-engine=deduplicate, got {self.merge_engine}: a change stream's deletes "
                "remove whole rows, which the other engines do not fold"
            )
        if self.bucket > MAX_BUCKETS:
            raise InvalidOptionError(
                f"bucket: {self.bucket} buckets is more than {MAX_BUCKETS}, the most a manifest entry can number "
                "(a bucket is a 32-bit integer); Paimon's advice is a bucket per 200 MB to 1 GB of data"
            )
        stop = self.sorted_run_stop_trigger
        if stop is not None and stop < self.sorted_run_compaction_trigger:
            raise InvalidOptionError(
                f"num-sorted-run.stop-trigger ({self.sorted_run_stop_trigger}) must not be smaller than "
                f"num-sorted-run.compaction-trigger ({self.sorted_run_compaction_trigger})"
            )
        return self

    @property
    def stop_trigger(self) -> int:
        """``num-sorted-run.stop-trigger``, or its default: the compaction trigger plus 3 (Paimon's)."""
        return self.sorted_run_stop_trigger or self.sorted_run_compaction_trigger + 3

    @property
    def auto_expire(self) -> bool:
        """Whether a commit checks, after its publish, that an expiration did not free its snapshot id (format
        §14.2; one more read): when the table sets ``snapshot.num-retained.max`` or ``snapshot.time-retained``
        itself. The defaults (at least 10 snapshots, an hour) expire nothing a commit in flight still builds on,
        so a table that keeps them is checked no more than it was before they existed (every table is expired
        after its commits unless ``write-only``)."""
        return self.retention_set
