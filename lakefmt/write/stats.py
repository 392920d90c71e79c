"""Per-file column statistics (min, max, null count) for pruning."""

from __future__ import annotations

from typing import Any

import orjson
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefmt.spec.manifest import ColumnStats, is_stats_type

__all__ = ["StatsCollector"]

#: min/max of longer strings or binaries are not kept (a truncated bound would need care; a missing one is safe)
MAX_STAT_BYTES = 256


def _too_long(scalar: pa.Scalar) -> bool:
    if pa.types.is_string(scalar.type) or pa.types.is_large_string(scalar.type):
        return len(scalar.as_py().encode("utf-8")) > MAX_STAT_BYTES
    if pa.types.is_binary(scalar.type) or pa.types.is_large_binary(scalar.type):
        return len(scalar.as_py()) > MAX_STAT_BYTES
    return False


def _leaf_count(t: pa.DataType) -> int:
    """Number of Parquet leaf columns an Arrow type becomes."""
    if pa.types.is_struct(t):
        return sum(_leaf_count(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_map(t):
        return _leaf_count(t.key_type) + _leaf_count(t.item_type)
    if pa.types.is_list(t) or pa.types.is_large_list(t) or pa.types.is_fixed_size_list(t):
        return _leaf_count(t.value_type)
    return 1


#: Parquet's time units (a TIME or TIMESTAMP logical type's ``timeUnit``) as Arrow's
_UNITS = {"milliseconds": "ms", "microseconds": "us", "nanoseconds": "ns"}


def _temporal(raw: Any, logical: Any, t: pa.DataType) -> pa.Scalar | None:
    """A Parquet bound of a date, time or timestamp column as an Arrow scalar of the column's type ``t``, exactly:
    the raw integer is read in the unit the Parquet column stores (its logical type says which: a ``timestamp[s]``
    column is stored in milliseconds, a ``date64`` in days), then cast to ``t`` without loss. Never through
    Python's ``datetime``, which truncates nanoseconds and stops at year 9999. None when the cast would lose."""
    if isinstance(raw, bool) or not isinstance(raw, int):
        return None
    shape = orjson.loads(logical.to_json())
    kind = shape.get("Type")
    unit = _UNITS.get(shape.get("timeUnit", ""))
    if kind == "Date":
        stored = pa.array([raw], pa.int32()).cast(pa.date32())
    elif kind == "Timestamp" and unit is not None and pa.types.is_timestamp(t):
        stored = pa.array([raw], pa.int64()).cast(pa.timestamp(unit, t.tz))
    elif kind == "Time" and unit == "ms":
        stored = pa.array([raw], pa.int32()).cast(pa.time32(unit))
    elif kind == "Time" and unit is not None:
        stored = pa.array([raw], pa.int64()).cast(pa.time64(unit))
    else:
        return None
    try:
        return stored.cast(t, safe=True)[0]
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError):
        return None


def _from_parquet(stats: Any, which: str, t: pa.DataType) -> pa.Scalar | None:
    """A Parquet row-group bound as an Arrow scalar of the column's type ``t``, or None when it cannot be had
    exactly (then the file's bounds stay unknown, and an unknown bound never prunes a file)."""
    if pa.types.is_date(t) or pa.types.is_time(t) or pa.types.is_timestamp(t):
        return _temporal(stats.min_raw if which == "min" else stats.max_raw, stats.logical_type, t)
    try:  # integers (unsigned ones too), floats, decimals, strings, binaries and booleans convert exactly
        return pa.scalar(stats.min if which == "min" else stats.max, t)
    except (ValueError, OverflowError, TypeError, pa.ArrowInvalid):
        return None


class StatsCollector:
    """Min/max/null counts for the stat-able columns of one data file.

    Min and max come from the Parquet writer's own row-group statistics once the file is closed (no second
    pass over the data); null counts come from Arrow's validity metadata (free). A column's min/max are
    unknown (None) for the whole file when they cannot be trusted: it holds NaN (Parquet leaves NaN out of
    its bounds, and NaN compares false with everything, so a range would wrongly exclude it), a bound is
    longer than :data:`MAX_STAT_BYTES`, or Parquet kept no bounds. Unknown bounds never prune a file.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._types = {f.name: f.type for f in schema}
        self._leaf: dict[str, int] = {}
        leaf = 0
        for f in schema:
            if is_stats_type(f.type):
                self._leaf[f.name] = leaf
            leaf += _leaf_count(f.type)
        self._columns = list(self._leaf)
        self._floats = [c for c in self._columns if pa.types.is_floating(self._types[c])]
        self._nulls: dict[str, int] = {c: 0 for c in self._columns}
        self._rows = 0
        self._unknown: set[str] = set()

    def update(self, table: pa.Table) -> None:
        """Account for rows about to be written (null counts, NaN)."""
        self._rows += table.num_rows
        for name in self._columns:
            self._nulls[name] += table.column(name).null_count
        for name in self._floats:
            if name not in self._unknown and pc.any(pc.is_nan(table.column(name))).as_py():
                self._unknown.add(name)

    def result(self, metadata: pq.FileMetaData) -> dict[str, ColumnStats]:
        """Statistics of the closed file whose Parquet footer is ``metadata``."""
        out = {}
        for name in self._columns:
            t = self._types[name]
            lo = hi = None
            if name not in self._unknown and self._nulls[name] < self._rows:
                mins: list[pa.Scalar] = []
                maxs: list[pa.Scalar] = []
                for g in range(metadata.num_row_groups):
                    chunk = metadata.row_group(g).column(self._leaf[name])
                    st = chunk.statistics
                    if chunk.num_values == 0 or (
                        st is not None and st.has_null_count and st.null_count == chunk.num_values
                    ):
                        continue  # an all-null row group bounds nothing
                    if st is None or not st.has_min_max:
                        mins = []
                        break
                    lo_g, hi_g = _from_parquet(st, "min", t), _from_parquet(st, "max", t)
                    if lo_g is None or hi_g is None:
                        mins = []
                        break
                    mins.append(lo_g)
                    maxs.append(hi_g)
                if len(mins) == 1:  # one row group (most files): its bounds are the file's
                    lo, hi = mins[0], maxs[0]
                elif mins:
                    lo = pc.min(pa.array(mins, t))
                    hi = pc.max(pa.array(maxs, t))
                if lo is not None and hi is not None and (_too_long(lo) or _too_long(hi)):
                    lo = hi = None  # the format keeps no bound longer than MAX_STAT_BYTES
            out[name] = ColumnStats(lo, hi, self._nulls[name])
        return out
