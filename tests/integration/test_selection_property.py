"""Exact row selection, checked differentially (issue 22): whatever the statistics, partition values, time units,
field references or engine, every way of reading a lakefmt table with a filter returns exactly the rows plain
pyarrow selects from the same data, and ``Table.delete(filter)`` leaves exactly the rows the filter does not
select (false or null).

Hypothesis draws a small table per example: a schema over the types the format accepts (every timestamp unit
with and without a zone, time32/time64, date32, decimal128/decimal256, float32/float64, signed and unsigned
integers, bool, string/large_string, binary/large_binary, a struct and a list), data with the extreme values of
each type, NaN, ±0.0, ±inf and nulls (string columns sometimes appended dictionary-encoded), spread over a few
appends (files, snapshots) and, when a drawn column may be a partition key, over partitions; and a few random
filters (comparisons with literals of the column's type and of other types, ``is_in``, ``is_null``, ``is_valid``,
``is_nan``, ``~``, ``&``, ``|``, by name, by position ``pc.field(0)`` and nested ``pc.field("s", "x")``).

The oracle is ``pa.concat_tables(appended).filter(expr)``. A filter plain pyarrow cannot evaluate is skipped; a
filter lakefmt refuses must be refused with a :class:`~lakefmt.errors.LakefmtError`, never answered wrong and
never with a raw pyarrow error. Rows are compared as multisets (floats by their bit pattern, so NaN equals NaN
and -0.0 differs from 0.0). Each table has a unique ``rid`` column, last, so that a delete's survivors can be
told apart from the rows it removed.

Case counts: in CI each test runs a fixed, derandomized set of examples (``CI_EXAMPLES``), several filters each;
``LAKEFMT_PROPERTY_EXAMPLES=N`` runs N examples per test with fresh random seeds instead.
"""

from __future__ import annotations

import collections
import contextlib
import decimal
import math
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import duckdb
import polars as pl
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from hypothesis import HealthCheck, assume, given, note, settings
from hypothesis import strategies as st
from hypothesis.control import currently_in_test_context

import lakefmt
from lakefmt.errors import LakefmtError

D = decimal.Decimal

#: examples per test: derandomized in CI; LAKEFMT_PROPERTY_EXAMPLES=N runs N per test, freshly random
EXAMPLES = int(os.environ.get("LAKEFMT_PROPERTY_EXAMPLES", "0") or 0)
CI_EXAMPLES = {"reads": 150, "engines": 60, "delete": 100}


def _settings(kind: str) -> settings:
    return settings(
        max_examples=EXAMPLES or CI_EXAMPLES[kind],
        derandomize=not EXAMPLES,
        database=None,
        deadline=None,
        print_blob=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much],
    )


# -- types and values ---------------------------------------------------------------------------------------------
I64 = (-(2**63), 2**63 - 1)
DAY = 86_400
NANOS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}


@dataclass(frozen=True)
class Kind:
    """A column type and how to draw its values: ``storage`` types are drawn as integers of their storage type
    (temporal types), the others as Python values."""

    type: pa.DataType
    lo: int | None = None  # integer storage range (integers and temporal types)
    hi: int | None = None
    specials: tuple[Any, ...] = ()

    @property
    def storage(self) -> pa.DataType | None:
        t = self.type
        if pa.types.is_timestamp(t) or pa.types.is_time64(t):
            return pa.int64()
        if pa.types.is_time32(t) or pa.types.is_date32(t):
            return pa.int32()
        return None

    def __repr__(self) -> str:
        return f"Kind({self.type})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


def _ts_kinds() -> list[Kind]:
    out = []
    # seconds are stored in Parquet as milliseconds: beyond +-(2**63 - 1) // 1000 pyarrow cannot write them
    # (test_extreme_values_round_trip covers that edge); year 9999/10000 and year 1 are where a bound stops
    # being a Python datetime
    s_edge = (2**63 - 1) // 1000
    y10k_s, y1_s = 253_402_300_800, -62_135_596_800
    for unit, scale in (("s", 1), ("ms", 10**3), ("us", 10**6), ("ns", 10**9)):
        lo, hi = (-s_edge, s_edge) if unit == "s" else (I64[0] + (unit == "ns"), I64[1])
        specials = (y10k_s * scale - 1, y10k_s * scale, y1_s * scale, y1_s * scale - 1, 300_000_000_000 * scale)
        specials = tuple(v for v in specials if lo <= v <= hi)
        for tz in (None, "UTC", "America/New_York", "+05:30"):
            out.append(Kind(pa.timestamp(unit, tz), lo, hi, specials))
    return out


KINDS: list[Kind] = [
    *(
        Kind(t, -(2 ** (t.bit_width - 1)), 2 ** (t.bit_width - 1) - 1)
        for t in (pa.int8(), pa.int16(), pa.int32(), pa.int64())
    ),
    *(Kind(t, 0, 2**t.bit_width - 1) for t in (pa.uint8(), pa.uint16(), pa.uint32(), pa.uint64())),
    Kind(pa.float32()),
    Kind(pa.float64()),
    Kind(pa.bool_()),
    Kind(pa.string()),
    Kind(pa.large_string()),
    Kind(pa.binary()),
    Kind(pa.large_binary()),
    Kind(pa.date32(), -(2**31), 2**31 - 1, (2_932_896, 2_932_897, -719_162, -719_163)),  # years 10000 and 1
    Kind(pa.time32("s"), 0, DAY - 1),
    Kind(pa.time32("ms"), 0, DAY * 10**3 - 1),
    Kind(pa.time64("us"), 0, DAY * 10**6 - 1),
    Kind(pa.time64("ns"), 0, DAY * 10**9 - 1, (1_000, 1_500, 1_999, 2_000)),
    Kind(pa.decimal128(5, 2)),
    Kind(pa.decimal128(38, 0)),
    Kind(pa.decimal128(38, 10)),
    Kind(pa.decimal256(40, 3)),
    Kind(pa.decimal256(76, 0)),
    *_ts_kinds(),
    Kind(pa.struct([("x", pa.int32()), ("y", pa.string()), ("z", pa.float64())])),
    Kind(pa.list_(pa.int16())),
]
PARTITION_TYPES = (
    pa.types.is_integer,
    pa.types.is_string,
    pa.types.is_large_string,
    pa.types.is_date32,
    pa.types.is_boolean,
)


def _partitionable(t: pa.DataType) -> bool:
    return any(p(t) for p in PARTITION_TYPES)


def _int_values(lo: int, hi: int, specials: tuple[int, ...] = ()) -> st.SearchStrategy[int]:
    edges = [v for v in (lo, lo + 1, -1, 0, 1, 2, hi - 1, hi, *specials) if lo <= v <= hi]
    return st.one_of(st.sampled_from(edges), st.integers(max(lo, -3), min(hi, 3)), st.integers(lo, hi))


FLOAT_SPECIALS = (math.nan, -0.0, 0.0, math.inf, -math.inf, 1.0, -1.0, 3.0, 2.5)
TEXT = st.text(alphabet=st.sampled_from(["a", "b", "z", "é", "\x00", "\uffff", "\U0001d11e", " ", "%"]), max_size=4)


def _decimal_values(t: pa.DataType) -> st.SearchStrategy[D]:
    biggest = 10**t.precision - 1
    edges = [biggest, -biggest, 0, 1, -1, 10**t.scale, biggest - 1]
    return st.one_of(st.sampled_from(edges), st.integers(-biggest, biggest), st.integers(-300, 300)).map(
        lambda v: D(f"{v}e-{t.scale}")  # exact: Decimal arithmetic would round to 28 digits
    )


def _float_values(t: pa.DataType) -> st.SearchStrategy[float]:
    width = t.bit_width
    big = 3.4028234663852886e38 if width == 32 else 1.7976931348623157e308
    return st.one_of(
        st.sampled_from([*FLOAT_SPECIALS, big, -big, 5e-324 if width == 64 else 1e-45]),
        st.floats(width=width, allow_nan=True, allow_infinity=True),
        st.integers(-3, 3).map(float),
    )


def values_of(kind: Kind) -> st.SearchStrategy[Any]:
    """Non-null values of ``kind``: Python values, or integers of the storage type for temporal types."""
    t = kind.type
    if kind.lo is not None:
        return _int_values(kind.lo, kind.hi, kind.specials)  # type: ignore[arg-type]
    if pa.types.is_floating(t):
        return _float_values(t)
    if pa.types.is_boolean(t):
        return st.booleans()
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return st.one_of(TEXT, st.just("é" * 200))  # 400 bytes: too long for a bound
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return st.one_of(st.binary(max_size=3), st.just(b"\xff" * 300))
    if pa.types.is_decimal(t):
        return _decimal_values(t)
    if pa.types.is_struct(t):
        return st.fixed_dictionaries(
            {
                "x": st.one_of(st.none(), _int_values(-(2**31), 2**31 - 1)),
                "y": st.one_of(st.none(), TEXT),
                "z": st.one_of(st.none(), _float_values(pa.float64())),
            }
        )
    if pa.types.is_list(t):
        return st.lists(st.one_of(st.none(), _int_values(-(2**15), 2**15 - 1)), max_size=3)
    raise AssertionError(t)


def to_array(kind: Kind, values: list[Any]) -> pa.Array:
    if kind.storage is not None:
        return pa.array(values, kind.storage).view(kind.type)
    return pa.array(values, kind.type)


def scalar_of(kind: Kind, value: Any) -> pa.Scalar:
    return to_array(kind, [value])[0]


# -- canonical rows -----------------------------------------------------------------------------------------------
def _canon_py(v: Any) -> Any:
    if isinstance(v, float):
        return ("float", v.hex())  # NaN equals NaN; -0.0 differs from 0.0
    if isinstance(v, dict):
        return tuple((k, _canon_py(x)) for k, x in v.items())
    if isinstance(v, list):
        return tuple(_canon_py(x) for x in v)
    return v


def _canon_column(col: pa.ChunkedArray | pa.Array) -> list[Any]:
    arr = col.combine_chunks() if isinstance(col, pa.ChunkedArray) else col
    t = arr.type
    if pa.types.is_dictionary(t):
        arr = arr.dictionary_decode()
        t = arr.type
    if pa.types.is_temporal(t) and t.bit_width in (32, 64):  # exact integers: years beyond datetime, nanoseconds
        raw = arr.view(pa.int64() if t.bit_width == 64 else pa.int32()).to_pylist()
        per = DAY * 10**9 if pa.types.is_date(t) else NANOS[getattr(t, "unit", "ns")]  # one unit: engines convert
        return [None if v is None else v * per for v in raw]
    if pa.types.is_struct(t):
        children = [_canon_column(arr.field(i)) for i in range(t.num_fields)]
        valid = arr.is_valid().to_pylist()
        return [tuple(c[i] for c in children) if valid[i] else None for i in range(len(arr))]
    return [_canon_py(v) for v in arr.to_pylist()]


def rows(table: pa.Table | pa.RecordBatch) -> collections.Counter[tuple[Any, ...]]:
    """The table's rows as a multiset (column names ignored: engines may spell them alike)."""
    cols = [_canon_column(c) for c in table.columns]
    return collections.Counter(zip(*cols, strict=True)) if cols else collections.Counter()


def assert_same_rows(what: str, got: pa.Table, want: pa.Table) -> None:
    g, w = rows(got), rows(want)
    if g != w:
        missing, extra = list((w - g).elements())[:5], list((g - w).elements())[:5]
        raise AssertionError(
            f"{what}: {sum(g.values())} rows, pyarrow selects {sum(w.values())}; "
            f"missing {missing}; extra (not selected by pyarrow) {extra}"
        )


# -- filters ------------------------------------------------------------------------------------------------------
@dataclass(frozen=True)
class Ref:
    """A column reference: ``path`` of names, or of positions (``positional``)."""

    names: tuple[str, ...]
    positions: tuple[int, ...]
    positional: bool
    kind: Kind

    def expr(self) -> pc.Expression:
        return pc.field(*(self.positions if self.positional else self.names))

    def __repr__(self) -> str:
        args = self.positions if self.positional else self.names
        return f"pc.field({', '.join(map(repr, args))})"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


@dataclass(frozen=True)
class Node:
    op: str  # == != < <= > >= is_in is_null is_valid is_nan ~ & |
    ref: Ref | None = None
    literal: Any = None  # a Python value or a pa.Scalar; for is_in a list or a pa.Array
    args: tuple[Node, ...] = ()

    def expr(self) -> pc.Expression:
        op = self.op
        if op == "~":
            return ~self.args[0].expr()
        if op in ("&", "|"):
            a, b = (n.expr() for n in self.args)
            return (a & b) if op == "&" else (a | b)
        assert self.ref is not None
        f = self.ref.expr()
        if op == "is_null":
            return f.is_null()
        if op == "is_valid":
            return f.is_valid()
        if op == "is_nan":
            return f.is_nan()
        if op == "is_in":
            return f.isin(self.literal)
        lit = self.literal if isinstance(self.literal, pa.Scalar) else pc.scalar(self.literal)
        return {"==": f == lit, "!=": f != lit, "<": f < lit, "<=": f <= lit, ">": f > lit, ">=": f >= lit}[op]

    def __repr__(self) -> str:
        try:
            text = str(self.expr())
        except Exception as exc:
            text = f"{self.op} (not an expression: {exc})"
        return f"Node<{text}; literal {_lit_repr(self.literal)}>" if self.ref else f"Node<{text}>"

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))


def _lit_repr(v: Any) -> str:
    """A literal as Python source (temporal values by their storage integer: they may lie beyond datetime)."""
    if isinstance(v, pa.Scalar | pa.Array) and pa.types.is_temporal(v.type):
        storage = pa.int64() if v.type.bit_width == 64 else pa.int32()
        if isinstance(v, pa.Scalar):
            return f"pa.scalar({pa.array([v]).view(storage)[0].as_py()}, pa.{storage}()).cast({_type_src(v.type)})"
        return f"pa.array({v.view(storage).to_pylist()}, pa.{storage}()).view({_type_src(v.type)})"
    if isinstance(v, pa.Scalar):
        return f"pa.scalar({v.as_py()!r}, {_type_src(v.type)})"
    if isinstance(v, pa.Array):
        return f"pa.array({v.to_pylist()!r}, {_type_src(v.type)})"
    return repr(v)


def _type_src(t: pa.DataType) -> str:
    if pa.types.is_timestamp(t):
        return f"pa.timestamp({t.unit!r}, {t.tz!r})"
    if pa.types.is_time32(t) or pa.types.is_time64(t):
        return f"pa.time{t.bit_width}({t.unit!r})"
    if pa.types.is_decimal(t):
        return f"pa.decimal{t.bit_width}({t.precision}, {t.scale})"
    if pa.types.is_date32(t):
        return "pa.date32()"
    return f"pa.{t}()".replace("pa.string()", "pa.string()").replace("pa.bool()", "pa.bool_()")


COMPARISONS = ("==", "!=", "<", "<=", ">", ">=")


@st.composite
def literals(draw: st.DrawFn, kind: Kind, seen: list[Any]) -> Any:
    """A literal to compare a column of ``kind`` with: a value of the data, a neighbour of one, an extreme of the
    type, a fresh value, or a value of another type pyarrow may compare it with."""
    t = kind.type
    base = draw(st.sampled_from(seen)) if seen and draw(st.booleans()) else draw(values_of(kind))
    if kind.lo is not None and draw(st.booleans()):
        base = min(max(base + draw(st.sampled_from([-1, 1])), kind.lo), kind.hi)  # type: ignore[type-var]
    how = draw(st.sampled_from(["same", "same", "same", "other"]))
    if kind.storage is not None:
        s = scalar_of(kind, base)
        if how == "same":
            return s
        if pa.types.is_timestamp(t):
            unit = draw(st.sampled_from(["s", "ms", "us", "ns"]))
            tz = draw(st.sampled_from([t.tz, t.tz, None, "UTC"]))
            return (
                s.cast(pa.timestamp(unit, tz), safe=False)
                if draw(st.booleans())
                else pa.scalar(base, pa.int64()).cast(pa.timestamp(unit, tz))
            )
        if pa.types.is_time32(t) or pa.types.is_time64(t):
            other = draw(st.sampled_from([pa.time32("s"), pa.time32("ms"), pa.time64("us"), pa.time64("ns")]))
            return s.cast(other, safe=False)
        return draw(
            st.sampled_from(
                [
                    pa.scalar(base, pa.int32()).cast(pa.date32()),
                    pa.scalar(base * DAY, pa.int64()).cast(pa.timestamp("s")),
                ]
            )
        )
    if how == "same":
        return base
    if pa.types.is_integer(t):
        return draw(
            st.sampled_from(
                [
                    float(base) + 0.5,
                    float(base),
                    math.nan,
                    math.inf,
                    -(2**63),
                    2**64 - 1,
                    pa.scalar(base, pa.int64()) if -(2**63) <= base < 2**63 else base,
                ]
            )
        )
    if pa.types.is_floating(t):
        v = base if isinstance(base, float) else 0.0
        return draw(
            st.sampled_from(
                [
                    int(v) if math.isfinite(v) else 0,
                    pa.scalar(v, pa.float32()),
                    pa.scalar(v, pa.float64()),
                    math.nan,
                    -0.0,
                ]
            )
        )
    if pa.types.is_string(t) or pa.types.is_large_string(t):
        return draw(st.sampled_from([pa.scalar(base, pa.large_string()), pa.scalar(base, pa.string())]))
    if pa.types.is_binary(t) or pa.types.is_large_binary(t):
        return draw(st.sampled_from([pa.scalar(base, pa.large_binary()), pa.scalar(base, pa.binary())]))
    if pa.types.is_decimal(t):
        return draw(
            st.sampled_from(
                [
                    int(base),
                    float(base),
                    base.fma(1, D("0.0001"), decimal.Context(prec=100)),
                    pa.scalar(base.scaleb(0), pa.decimal256(76, 20)) if t.precision - t.scale <= 56 else int(base),
                ]
            )
        )
    if pa.types.is_boolean(t):
        return draw(st.sampled_from([int(base), pa.scalar(base)]))
    return base


def _refs(schema: pa.Schema, kinds: dict[str, Kind]) -> list[tuple[tuple[str, ...], tuple[int, ...], Kind]]:
    out = []
    for i, f in enumerate(schema):
        out.append(((f.name,), (i,), kinds[f.name]))
        if pa.types.is_struct(f.type):
            for j, child in enumerate(f.type):
                ckind = {"x": Kind(pa.int32(), -(2**31), 2**31 - 1), "y": Kind(pa.string()), "z": Kind(pa.float64())}
                out.append(((f.name, child.name), (i, j), ckind[child.name]))
    return out


@st.composite
def filters(draw: st.DrawFn, schema: pa.Schema, kinds: dict[str, Kind], data: pa.Table, depth: int = 0) -> Node:
    if depth < 2 and draw(st.integers(0, 3)) == 0:
        op = draw(st.sampled_from(["~", "&", "|"]))
        n = 1 if op == "~" else 2
        return Node(op, args=tuple(draw(filters(schema, kinds, data, depth + 1)) for _ in range(n)))
    names, positions, kind = draw(st.sampled_from(_refs(schema, kinds)))
    ref = Ref(names, positions, draw(st.integers(0, 4)) == 0, kind)
    t = kind.type
    ops = ["is_null", "is_valid"]
    if not (pa.types.is_struct(t) or pa.types.is_list(t)):
        ops += [*COMPARISONS, *COMPARISONS, "is_in", "is_in"]
    if pa.types.is_floating(t):
        ops += ["is_nan", "is_nan"]
    op = draw(st.sampled_from(ops))
    if op in ("is_null", "is_valid", "is_nan"):
        return Node(op, ref)
    col = data.column(names[0])
    if len(names) > 1:
        col = pc.struct_field(col, names[1])
    seen = [v for v in (_storage_values(col)) if v is not None]
    if op == "is_in":
        vals = draw(
            st.lists(literals(kind, seen).filter(lambda v: not isinstance(v, pa.Scalar)), min_size=1, max_size=3)
        )
        if kind.storage is not None:
            return Node(op, ref, to_array(kind, vals))
        if draw(st.booleans()):
            try:
                return Node(op, ref, pa.array(vals, t))
            except (pa.ArrowException, TypeError, ValueError, OverflowError):
                pass  # a literal of another type, or out of range: the list as it is
        return Node(op, ref, vals)
    return Node(op, ref, draw(literals(kind, seen)))


def _storage_values(col: pa.ChunkedArray) -> list[Any]:
    arr = col.combine_chunks()
    if pa.types.is_temporal(arr.type):
        return arr.view(pa.int64() if arr.type.bit_width == 64 else pa.int32()).to_pylist()
    return arr.to_pylist()


# -- tables -------------------------------------------------------------------------------------------------------
@dataclass
class Case:
    schema: pa.Schema
    kinds: dict[str, Kind]
    partition_by: list[str]
    batches: list[pa.Table]  # as appended (string columns may be dictionary-encoded)
    options: dict[str, str] = field(default_factory=dict)

    def __repr__(self) -> str:
        lines = [
            f"schema={self.schema!r}".replace("\n", "; "),
            f"partition_by={self.partition_by}",
            f"options={self.options}",
        ]
        for b in self.batches:
            lines.append(
                f"batch {b.num_rows} rows: "
                + repr({n: _storage_values(c) for n, c in zip(b.column_names, b.columns, strict=True)})
            )
        return "\n".join(lines)

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        p.text(repr(self))

    def oracle(self, batches: list[pa.Table] | None = None) -> pa.Table:
        return pa.concat_tables([_decode(b, self.schema) for b in (self.batches if batches is None else batches)])


def _decode(b: pa.Table, schema: pa.Schema) -> pa.Table:
    return pa.table([c.cast(f.type) for c, f in zip(b.columns, schema, strict=True)], schema=schema)


@st.composite
def cases(draw: st.DrawFn, pool: list[Kind] | None = None) -> Case:
    picked = draw(st.lists(st.sampled_from(pool or KINDS), min_size=1, max_size=4))
    kinds = {f"c{i}": k for i, k in enumerate(picked)}
    kinds["rid"] = Kind(pa.int64(), *I64)
    nullable = {n: draw(st.booleans()) or True for n in kinds}
    schema = pa.schema([pa.field(n, k.type, nullable[n]) for n, k in kinds.items()])
    candidates = [n for n, k in kinds.items() if _partitionable(k.type)]
    partition_by = [draw(st.sampled_from(candidates))] if candidates and draw(st.booleans()) else []
    options = {"write.fsync": "false"}
    if draw(st.booleans()):
        options["write.row-group-rows"] = str(draw(st.integers(1, 3)))  # several row groups, each its own bounds
    batches = []
    rid = 0
    for _ in range(draw(st.integers(1, 3))):
        n = draw(st.integers(1, 6))
        cols = []
        for name, kind in kinds.items():
            if name == "rid":
                continue
            null_rate = draw(st.sampled_from([0, 0, 1, 3]))  # in 4: none, some, most
            vals = [None if draw(st.integers(0, 3)) < null_rate else draw(values_of(kind)) for _ in range(n)]
            if partition_by == [name]:
                if pa.types.is_date32(kind.type):  # beyond years 1..9999: test_extreme_values_round_trip_...
                    vals = [None if v is None else min(max(v, -719_162), 2_932_896) for v in vals]
                if draw(st.booleans()):  # few distinct partition values
                    vals = [vals[0]] * n
            arr = to_array(kind, vals)
            if pa.types.is_string(kind.type) and draw(st.booleans()):
                arr = arr.dictionary_encode()
            cols.append(arr)
        cols.append(pa.array(range(rid, rid + n), pa.int64()))
        rid += n
        batches.append(pa.table(cols, names=schema.names))
    return Case(schema, kinds, partition_by, batches, options)


# -- engine-side predicates (DuckDB SQL, Polars expressions) --------------------------------------------------------
def _sql_literal(v: Any) -> str | None:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, int):
        return str(v)
    if isinstance(v, float):
        if math.isnan(v):
            return "'nan'::DOUBLE"
        if math.isinf(v):
            return "'inf'::DOUBLE" if v > 0 else "'-inf'::DOUBLE"
        return f"{v!r}::DOUBLE"
    if isinstance(v, str) and "\x00" not in v:
        return "'" + v.replace("'", "''") + "'"
    if isinstance(v, D):
        return format(v, "f")
    return None


def to_sql(node: Node) -> str | None:
    """The filter as a DuckDB SQL predicate, or None when it has a part this translation leaves out."""
    if node.op in ("~", "&", "|"):
        parts = [to_sql(a) for a in node.args]
        if any(p is None for p in parts):
            return None
        return (
            f"(NOT ({parts[0]}))"
            if node.op == "~"
            else f"(({parts[0]}) {'AND' if node.op == '&' else 'OR'} ({parts[1]}))"
        )
    assert node.ref is not None
    if len(node.ref.names) != 1 or node.ref.kind.storage is not None:
        return None
    col = f'"{node.ref.names[0]}"'
    if node.op in ("is_null", "is_valid"):
        return f"({col} IS {'NOT ' if node.op == 'is_valid' else ''}NULL)"
    if node.op == "is_nan":
        return f"isnan({col})"
    if node.op == "is_in":
        vals = node.literal.to_pylist() if isinstance(node.literal, pa.Array) else node.literal
        lits = [_sql_literal(v) for v in vals]
        return None if any(x is None for x in lits) else f"({col} IN ({', '.join(lits)}))"  # type: ignore[arg-type]
    lit = _sql_literal(node.literal)
    return None if lit is None else f"({col} {'<>' if node.op == '!=' else '=' if node.op == '==' else node.op} {lit})"


def _polars_literal(node: Node, value: Any) -> Any:
    kind = node.ref.kind  # type: ignore[union-attr]
    t = kind.type
    if isinstance(value, pa.Scalar):
        if kind.storage is None or value.type != t or not value.is_valid:
            return None
        raw = pa.array([value]).view(kind.storage)[0].as_py()
        if pa.types.is_timestamp(t) and t.unit != "s" and (t.tz is None or t.tz == "UTC"):
            return pl.lit(raw, pl.Int64).cast(pl.Datetime(t.unit, t.tz))
        if pa.types.is_time64(t):
            return pl.lit(raw * (1 if t.unit == "ns" else 1000), pl.Int64).cast(pl.Time)
        if pa.types.is_date32(t):
            return pl.lit(raw, pl.Int32).cast(pl.Date)
        return None
    if isinstance(value, bool | int | float | str | bytes | D):
        return pl.lit(value)
    return None


def to_polars_expr(node: Node) -> Any:
    """The filter as a Polars expression, or None when it has a part this translation leaves out."""
    if node.op in ("~", "&", "|"):
        parts = [to_polars_expr(a) for a in node.args]
        if any(p is None for p in parts):
            return None
        return ~parts[0] if node.op == "~" else (parts[0] & parts[1]) if node.op == "&" else (parts[0] | parts[1])
    ref = node.ref
    assert ref is not None
    col = pl.col(ref.names[0])
    if len(ref.names) > 1:
        col = col.struct.field(ref.names[1])
    if node.op == "is_null":
        return col.is_null()
    if node.op == "is_valid":
        return col.is_not_null()
    if node.op == "is_nan":
        return col.is_nan()
    if node.op == "is_in":
        if isinstance(node.literal, pa.Array) or not all(
            isinstance(v, int | float | str | bytes) for v in node.literal
        ):
            return None
        return col.is_in(node.literal)
    lit = _polars_literal(node, node.literal)
    if lit is None:
        return None
    return {"==": col == lit, "!=": col != lit, "<": col < lit, "<=": col <= lit, ">": col > lit, ">=": col >= lit}[
        node.op
    ]


# -- running a case -----------------------------------------------------------------------------------------------
_MISMATCH: dict[str, type[AssertionError]] = {}


def mismatch(path: str) -> type[AssertionError]:
    """One exception class per read path, so that Hypothesis reports (and shrinks) a failure of each path as a
    bug of its own instead of stopping at the first."""
    if path not in _MISMATCH:
        _MISMATCH[path] = type(f"WrongRows_{path}", (AssertionError,), {})
    return _MISMATCH[path]


def check_rows(path: str, got: pa.Table, want: pa.Table) -> None:
    try:
        assert_same_rows(path, got, want)
    except AssertionError as exc:
        raise mismatch(path)(str(exc)) from None


REFUSED = object()


def lake(path: str, fn: Callable[[], Any]) -> Any:
    """``fn()``, lakefmt's answer; a LakefmtError is a refusal (allowed), any other error fails the test."""
    try:
        return fn()
    except LakefmtError as exc:
        if currently_in_test_context():
            note(f"{path}: refused with {type(exc).__name__}: {exc}")
        return REFUSED
    except Exception as exc:
        error = mismatch(f"{path}_raw_error")
        raise error(f"{path}: raw {type(exc).__name__} instead of a LakefmtError: {exc}") from exc


def engine(fn: Callable[[], Any]) -> Any:
    """An engine's answer over plain Arrow (the oracle side); None when the engine itself cannot run it (Polars
    panics, a BaseException, on some types)."""
    try:
        return fn()
    except (KeyboardInterrupt, SystemExit):
        raise
    except BaseException:
        return None


def oracle_filter(table: pa.Table, node: Node) -> pa.Table | None:
    """Plain pyarrow's selection, or None for a filter pyarrow cannot evaluate (skipped)."""
    try:
        return table.filter(node.expr())
    except (pa.ArrowException, TypeError, ValueError, OverflowError, KeyError, IndexError) as exc:
        note(f"skipped {node!r}: pyarrow cannot evaluate it ({type(exc).__name__}: {exc})")
        return None


@dataclass
class Built:
    table: lakefmt.Table
    root: str
    snapshots: list[int]
    all_rows: pa.Table


def build(case: Case, where: str) -> Built:
    root = os.path.join(where, "t")
    t = lakefmt.create_table(root, case.schema, partition_by=case.partition_by, options=case.options)
    snaps = []
    for b in case.batches:
        s = lake("append", lambda: t.append(b))  # noqa: B023
        assume(s is not REFUSED)
        snaps.append(s.id)
    all_rows = case.oracle()
    check_rows("read_back", t.to_arrow(), all_rows)
    return Built(t, root, snaps, all_rows)


@st.composite
def cases_with_filters(draw: st.DrawFn) -> tuple[Case, list[Node]]:
    case = draw(cases())
    data = case.oracle()
    nodes = draw(st.lists(filters(case.schema, case.kinds, data), min_size=1, max_size=4))
    return case, nodes


@contextlib.contextmanager
def tempdir() -> Iterator[str]:
    """A local temporary folder per example (Hypothesis and function-scoped fixtures do not mix)."""
    d = tempfile.mkdtemp(prefix="lakefmt-selection-")
    try:
        yield d
    finally:
        shutil.rmtree(d, ignore_errors=True)


def _rids(table: pa.Table) -> collections.Counter[int]:
    return collections.Counter(table.column("rid").to_pylist())


# -- the properties -----------------------------------------------------------------------------------------------
@_settings("reads")
@given(cases_with_filters(), st.data())
def test_scan_reads_select_what_pyarrow_selects(drawn: tuple[Case, list[Node]], data: st.DataObject) -> None:
    """to_arrow, count, to_batches, the Arrow stream, to_pandas, to_dataset and incremental reads return exactly
    the rows plain pyarrow selects."""
    case, nodes = drawn
    with tempdir() as where:
        b = build(case, where)
        t = b.table
        for node in nodes:
            note(f"filter {node!r}")
            want = oracle_filter(b.all_rows, node)
            if want is None:
                continue
            expr = node.expr()
            got = lake("to_arrow", lambda: t.scan(filter=expr).to_arrow())  # noqa: B023
            if got is not REFUSED:
                check_rows("to_arrow", got, want)
            n = lake("count", lambda: t.scan(filter=expr).count())  # noqa: B023
            if n is not REFUSED and n != want.num_rows:
                raise mismatch("count")(f"count() = {n}, pyarrow selects {want.num_rows}")
            batches = lake("to_batches", lambda: list(t.scan(filter=expr).to_batches()))  # noqa: B023
            if batches is not REFUSED:
                check_rows("to_batches", pa.Table.from_batches(batches, schema=b.all_rows.schema), want)
            stream = lake("arrow_c_stream", lambda: pa.table(t.scan(filter=expr)))  # noqa: B023
            if stream is not REFUSED:
                check_rows("arrow_c_stream", stream, want)
            dataset = lake("to_dataset", lambda: t.scan(filter=expr).to_dataset().to_table())  # noqa: B023
            if dataset is not REFUSED:
                check_rows("to_dataset", dataset, want)
            # to_pandas: pandas cannot hold every value (time64[ns] with nanoseconds): compared where it can
            frame = None
            if engine(want.to_pandas) is not None:
                frame = lake("to_pandas", lambda: t.scan(filter=expr).to_pandas())  # noqa: B023
            if frame is not None and frame is not REFUSED:
                got_rids = collections.Counter(int(r) for r in frame["rid"])
                if got_rids != _rids(want):
                    raise mismatch("to_pandas")(f"to_pandas() rids {sorted(got_rids)}, pyarrow {sorted(_rids(want))}")
            # incremental: the rows appended by snapshots first..last
            first = data.draw(st.integers(0, len(b.snapshots) - 1), label="first append")
            last = data.draw(st.integers(first, len(b.snapshots) - 1), label="last append")
            start = b.snapshots[first - 1] if first else 0
            inc_want = oracle_filter(case.oracle(case.batches[first : last + 1]), node)
            inc = lake(
                "incremental",
                lambda: t.scan(filter=expr, from_snapshot=start, to_snapshot=b.snapshots[last]).to_arrow(),  # noqa: B023
            )
            if inc is not REFUSED and inc_want is not None:
                check_rows("incremental", inc, inc_want)


@_settings("engines")
@given(cases_with_filters())
def test_engines_select_what_they_select_over_plain_arrow(drawn: tuple[Case, list[Node]]) -> None:
    """DuckDB and Polars over a scan (the scan's filter, or the engine's own predicate pushed into the scan) return
    exactly the rows the same engine returns over the same rows held as plain Arrow."""
    case, nodes = drawn
    con = duckdb.connect()
    try:
        with tempdir() as where:
            b = build(case, where)
            t = b.table
            # Polars panics (it does not raise) on a fixed-offset zone such as "+05:30": left to the other paths
            polars_ok = not any(pa.types.is_timestamp(f.type) and (f.type.tz or "x")[0] in "+-" for f in case.schema)
            for node in nodes:
                note(f"filter {node!r}")
                want = oracle_filter(b.all_rows, node)
                if want is None:
                    continue
                expr = node.expr()
                # the scan's filter, then the engine's select *
                want_duck = engine(lambda: con.from_arrow(want).arrow().read_all())  # noqa: B023
                if want_duck is not None:
                    got = lake("to_duckdb", lambda: t.scan(filter=expr).to_duckdb(con).arrow().read_all())  # noqa: B023
                    if got is not REFUSED:
                        check_rows("to_duckdb", got, want_duck)
                want_pl = engine(lambda: pl.from_arrow(want).to_arrow()) if polars_ok else None  # noqa: B023
                if want_pl is not None:
                    got = lake("to_polars", lambda: t.scan(filter=expr).to_polars().collect().to_arrow())  # noqa: B023
                    if got is not REFUSED:
                        check_rows("to_polars", got, want_pl)
                # the engine's own predicate over an unfiltered scan
                sql = to_sql(node)
                if sql is not None:
                    note(f"DuckDB: where {sql}")
                    want_sql = engine(lambda: con.from_arrow(b.all_rows).filter(sql).arrow().read_all())  # noqa: B023
                    if want_sql is not None:
                        got = lake("duckdb_where", lambda: t.scan().to_duckdb(con).filter(sql).arrow().read_all())  # noqa: B023
                        if got is not REFUSED:
                            check_rows("duckdb_where", got, want_sql)
                pexpr = engine(lambda: to_polars_expr(node))  # noqa: B023
                if pexpr is not None and polars_ok:
                    note(f"Polars: filter {pexpr}")
                    want_pf = engine(lambda: pl.from_arrow(b.all_rows).lazy().filter(pexpr).collect().to_arrow())  # noqa: B023
                    if want_pf is not None:
                        got = lake("polars_filter", lambda: t.scan().to_polars().filter(pexpr).collect().to_arrow())  # noqa: B023
                        if got is not REFUSED:
                            check_rows("polars_filter", got, want_pf)
    finally:
        con.close()


@_settings("delete")
@given(cases_with_filters())
def test_delete_leaves_what_pyarrow_does_not_select(drawn: tuple[Case, list[Node]]) -> None:
    """``Table.delete(filter)`` removes exactly the rows for which the filter is true: the rows left are the
    rows plain pyarrow does not select (false or null); a scan with the filter then finds none."""
    case, nodes = drawn
    with tempdir() as where:
        b = build(case, where)
        for i, node in enumerate(nodes):
            note(f"filter {node!r}")
            selected = oracle_filter(b.all_rows, node)
            if selected is None:
                continue
            expr = node.expr()
            root = os.path.join(where, f"copy{i}")
            shutil.copytree(b.root, root)
            t = lakefmt.open_table(root)
            if lake("delete", lambda: t.delete(expr)) is REFUSED:  # noqa: B023
                continue
            gone = pa.array(sorted(set(selected.column("rid").to_pylist())), pa.int64())
            check_rows("delete", t.to_arrow(), b.all_rows.filter(~pc.field("rid").isin(gone)))
            n = lake("count_after_delete", lambda: t.scan(filter=expr).count())  # noqa: B023
            if n is not REFUSED and n != 0:
                raise mismatch("count_after_delete")(f"after delete, scan(filter).count() = {n}, not 0")


# -- extreme values, each type on its own -----------------------------------------------------------------------
def _extremes(kind: Kind) -> list[Any]:
    t = kind.type
    if kind.lo is not None:
        assert kind.hi is not None
        return sorted({kind.lo, kind.hi, *(v for v in (0, *kind.specials) if kind.lo <= v <= kind.hi)})
    if pa.types.is_floating(t):
        return [math.nan, -0.0, 0.0, math.inf, -math.inf]
    if pa.types.is_decimal(t):
        biggest = D(f"{10**t.precision - 1}e-{t.scale}")
        return [biggest, biggest.copy_negate(), D(0)]
    return []


EXTREME_KINDS = [
    *[k for k in KINDS if _extremes(k)],
    # beyond what Parquet stores for seconds, and the ns NaT sentinel: either kept exactly or refused clearly
    Kind(pa.timestamp("s"), *I64),
    Kind(pa.timestamp("ns"), *I64),
    Kind(pa.timestamp("ns", "UTC"), *I64),
]


EXTREME_CASES = [(k, False) for k in EXTREME_KINDS] + [(k, True) for k in EXTREME_KINDS if _partitionable(k.type)]


@pytest.mark.parametrize(
    ("kind", "partitioned"), EXTREME_CASES, ids=[f"{k.type}{'-partition' * p}" for k, p in EXTREME_CASES]
)
def test_extreme_values_round_trip_and_are_found(kind: Kind, partitioned: bool) -> None:
    """Each extreme value of each type in a file of its own (a partition of its own when partitioned): the table
    reads back exactly, or the append is refused with a LakefmtError; comparisons with each value select exactly
    what pyarrow selects, and a delete removes exactly those rows (catches bounds off by a unit, truncated,
    wrapped or in the wrong unit)."""
    values = _extremes(kind)
    schema = pa.schema([("c", kind.type), ("rid", pa.int64())])
    with tempdir() as where:
        root = os.path.join(where, "t")
        options = {"write.fsync": "false"}
        t = lakefmt.create_table(root, schema, partition_by=["c"] if partitioned else None, options=options)
        batches = [
            pa.table([to_array(kind, [v]), pa.array([i], pa.int64())], schema=schema) for i, v in enumerate(values)
        ]
        for batch in batches:
            if lake("append", lambda: t.append(batch)) is REFUSED:  # noqa: B023
                return
        all_rows = pa.concat_tables(batches)
        check_rows("read_back", t.to_arrow(), all_rows)
        for i, v in enumerate(values):
            lit = scalar_of(kind, v)
            for j, expr in enumerate((pc.field("c") == lit, pc.field("c") < lit, pc.field("c") > lit)):
                want = all_rows.filter(expr)
                got = lake("to_arrow", lambda: t.scan(filter=expr).to_arrow())  # noqa: B023
                if got is not REFUSED:
                    check_rows(f"to_arrow {expr}", got, want)
                copy = os.path.join(where, f"copy{i}-{j}")
                shutil.copytree(root, copy)
                deleted = lakefmt.open_table(copy)
                if lake("delete", lambda: deleted.delete(expr)) is not REFUSED:  # noqa: B023
                    gone = pa.array(want.column("rid").to_pylist(), pa.int64())
                    check_rows(f"delete {expr}", deleted.to_arrow(), all_rows.filter(~pc.field("rid").isin(gone)))
