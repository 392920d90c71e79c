"""Procedures in SQL: compaction, expiration, restore and row-level delete, as Python UDTFs that do the work and
return one row saying what they did (registered by :func:`pyspark_lakefmt.register`)::

    SELECT * FROM lakefmt_compact('/data/events')
    SELECT * FROM lakefmt_expire('/data/events', '7d')                    -- older_than, retain_min, retain_max, dry_run
    SELECT * FROM lakefmt_expire('/data/events', retain_max => 10)
    SELECT * FROM lakefmt_restore('/data/events', 3)
    SELECT * FROM lakefmt_delete('/data/events', 'dt < ''2026-01-01''')

Each runs lakefmt's public API (:meth:`lakefmt.Table.compact`, :meth:`~lakefmt.Table.expire_snapshots`,
:meth:`~lakefmt.Table.plan_restore` then :meth:`~lakefmt.Table.apply_restore_plan`, :meth:`~lakefmt.Table.delete`)
in the Python worker of the one Spark task that evaluates the call, so on one machine, as the library does: for
tables too big for one, use :func:`pyspark_lakefmt.compact` and :func:`pyspark_lakefmt.delete` from PySpark.

A SQL query runs when its result is used, and again each time it is used: ``spark.sql("SELECT * FROM
lakefmt_compact(...)")`` does nothing until ``.show()``/``.collect()``, and a second ``.show()`` of the same
DataFrame compacts again. Every procedure is safe to repeat (a second compaction finds nothing to do, a second
restore of the same snapshot commits nothing, a second delete matches no row), and Spark never retries one on its
own: the functions are registered non-deterministic and the call is a single task.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from .sql_common import TableFunction, check_count, check_snapshot, check_text, open_uri, reported

__all__ = [
    "COMPACT_SCHEMA",
    "DELETE_SCHEMA",
    "EXPIRE_SCHEMA",
    "RESTORE_SCHEMA",
    "Compact",
    "Delete",
    "Expire",
    "Restore",
]

#: ``lakefmt_compact(uri[, target_file_size[, min_files]])``: one row (``snapshot_id`` NULL: nothing to compact)
COMPACT_SCHEMA = (
    "snapshot_id BIGINT, rewritten_files BIGINT, rewritten_bytes BIGINT, written_files BIGINT, written_bytes BIGINT, "
    "files_before BIGINT, files_after BIGINT, partitions BIGINT, partitions_given_up BIGINT"
)
#: ``lakefmt_expire(uri[, older_than[, retain_min[, retain_max[, dry_run]]]])``: one row
EXPIRE_SCHEMA = (
    "dry_run BOOLEAN, expired_snapshots BIGINT, earliest_snapshot BIGINT, latest_snapshot BIGINT, "
    "deleted_data_files BIGINT, deleted_files BIGINT, deleted_bytes BIGINT"
)
#: ``lakefmt_restore(uri, snapshot_id)``: one row (``snapshot_id`` NULL: the table already held the target's files)
RESTORE_SCHEMA = (
    "snapshot_id BIGINT, restored_snapshot_id BIGINT, removed_files BIGINT, added_files BIGINT, rows_removed BIGINT, "
    "rows_added BIGINT"
)
#: ``lakefmt_delete(uri, predicate)``: one row (``snapshot_id`` NULL: no row matched)
DELETE_SCHEMA = "snapshot_id BIGINT, deleted_rows BIGINT, remaining_rows BIGINT"


class Compact(TableFunction):
    """``lakefmt_compact``: :data:`COMPACT_SCHEMA`. ``target_file_size`` in bytes (default: the table option
    ``target-file-size``); ``min_files``: the small files a partition needs (default ``compaction.min.file-num``)."""

    def eval(self, uri: str, target_file_size: Any = None, min_files: Any = None) -> Iterator[tuple[Any, ...]]:
        shown = [a for a in (uri, target_file_size, min_files) if a is not None]
        with reported("lakefmt_compact", *shown):
            table = open_uri(uri, self.storage_options)
            report = table.compact(
                target_file_size=check_count(target_file_size, "target_file_size", minimum=1),
                min_files=check_count(min_files, "min_files", minimum=1),
            )
        snap = report.snapshot
        yield (
            snap.id if snap else None, report.rewritten_files, report.rewritten_bytes, report.written_files,
            report.written_bytes, report.files_before, report.files_after, len(report.partitions),
            len(report.given_up),
        )


class Expire(TableFunction):
    """``lakefmt_expire``: :data:`EXPIRE_SCHEMA`. ``older_than``: a duration with its unit (``'7d'``, ``'12h'``,
    ``'PT1H'``); ``retain_min`` (default 1) and ``retain_max`` snapshot counts; ``dry_run``: report, delete nothing.
    With neither ``older_than`` nor ``retain_max``, nothing expires (as :meth:`lakefmt.Table.expire_snapshots`)."""

    def eval(
        self, uri: str, older_than: Any = None, retain_min: Any = None, retain_max: Any = None, dry_run: Any = None
    ) -> Iterator[tuple[Any, ...]]:
        shown = [a for a in (uri, older_than, retain_min, retain_max, dry_run) if a is not None]
        with reported("lakefmt_expire", *shown):
            table = open_uri(uri, self.storage_options)
            if dry_run is not None and not isinstance(dry_run, bool):
                raise ValueError(f"dry_run must be true or false, got {dry_run!r}")
            report = table.expire_snapshots(
                retain_min=check_count(retain_min, "retain_min", minimum=1) or 1,
                retain_max=check_count(retain_max, "retain_max", minimum=1),
                older_than=None if older_than is None else check_text(older_than, "older_than"),
                dry_run=bool(dry_run),
            )
        kept = report.kept_snapshots or (None, None)
        data = sum(1 for kind, files in report.deleted.items() for _ in files if kind.value == "data_files")
        yield (
            report.dry_run, len(report.expired_snapshots), kept[0], kept[1], data, report.total_files,
            report.total_bytes,
        )


class Restore(TableFunction):
    """``lakefmt_restore``: :data:`RESTORE_SCHEMA`. A new snapshot holding exactly snapshot ``snapshot_id``'s rows
    (newer snapshots stay, so it can be undone by restoring again)."""

    def eval(self, uri: str, snapshot_id: Any = None) -> Iterator[tuple[Any, ...]]:
        shown = [a for a in (uri, snapshot_id) if a is not None]
        with reported("lakefmt_restore", *shown):
            table = open_uri(uri, self.storage_options)
            plan = table.plan_restore(check_snapshot(snapshot_id, "snapshot_id"))
            snap = table.apply_restore_plan(plan)
        yield (
            snap.id if snap else None, plan.target.id, plan.removed.num_rows, plan.added.num_rows,
            plan.rows_removed, plan.rows_added,
        )


class Delete(TableFunction):
    """``lakefmt_delete``: :data:`DELETE_SCHEMA`. ``predicate``: SQL text in lakefmt's predicate language (a
    column compared with a literal, ``[NOT] IN``, ``BETWEEN``, ``IS [NOT] NULL``, ``AND``/``OR``/``NOT``), on
    any column; a row where it is NULL stays, as in SQL."""

    def eval(self, uri: str, predicate: Any = None) -> Iterator[tuple[Any, ...]]:
        shown = [a for a in (uri, predicate) if a is not None]
        with reported("lakefmt_delete", *shown):
            table = open_uri(uri, self.storage_options)
            snap = table.delete(check_text(predicate, "predicate"))
            latest = snap or table.latest_snapshot()
        if snap is None:
            yield None, 0, latest.total_record_count if latest else 0
        else:
            yield snap.id, -snap.delta_record_count, snap.total_record_count
