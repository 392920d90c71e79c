"""Per-file column statistics (min, max, null count), gathered one row group at a time."""

from __future__ import annotations

import pyarrow as pa
import pyarrow.compute as pc

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


class StatsCollector:
    """Accumulates min/max/null counts for the stat-able columns of one data file.

    A column's min/max become unknown (None) for the whole file when any chunk has a value they cannot
    represent safely: NaN (NaN compares false with everything, so a range would wrongly exclude it) or a
    string longer than :data:`MAX_STAT_BYTES`. Unknown bounds never prune a file.
    """

    def __init__(self, schema: pa.Schema) -> None:
        self._columns = [f.name for f in schema if is_stats_type(f.type)]
        self._types = {f.name: f.type for f in schema}
        self._mins: dict[str, list[pa.Scalar]] = {c: [] for c in self._columns}
        self._maxs: dict[str, list[pa.Scalar]] = {c: [] for c in self._columns}
        self._nulls: dict[str, int] = {c: 0 for c in self._columns}
        self._unknown: set[str] = set()

    def update(self, table: pa.Table) -> None:
        for name in self._columns:
            col = table.column(name)
            self._nulls[name] += col.null_count
            if name in self._unknown or col.null_count == len(col):
                continue
            if pa.types.is_floating(col.type) and pc.any(pc.is_nan(col)).as_py():
                self._unknown.add(name)
                continue
            mm = pc.min_max(col)
            lo, hi = mm["min"], mm["max"]
            if _too_long(lo) or _too_long(hi):
                self._unknown.add(name)
                continue
            self._mins[name].append(lo)
            self._maxs[name].append(hi)

    def result(self) -> dict[str, ColumnStats]:
        out = {}
        for name in self._columns:
            lo = hi = None
            if name not in self._unknown and self._mins[name]:
                t = self._types[name]
                lo = pc.min(pa.array(self._mins[name], t))
                hi = pc.max(pa.array(self._maxs[name], t))
            out[name] = ColumnStats(lo, hi, self._nulls[name])
        return out
