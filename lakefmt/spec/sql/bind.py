"""SQL text's meaning: the one module that binds the tree of :mod:`lakefmt.spec.sql.tree` to a pyarrow expression
over a table's columns (filters, ``delete``, ``overwrite(where=)`` and ``replaceWhere``, MERGE's conditions and
values). The rules, written for users in ``docs/filters.md``:

* **Comparisons** are pyarrow's (IEEE 754 for floating point): ``-0.0 = 0.0``, NaN equals nothing (``f != x`` is
  true for NaN), a null makes the test unknown, and a row is selected only where the whole predicate is true.
  ``c IN (a, b)`` means ``c = a OR c = b`` exactly, ``c NOT IN (a, b)`` means ``c != a AND c != b``, and
  ``c BETWEEN a AND b`` means ``c >= a AND c <= b``; chains of ``OR``/``AND`` over one column become one set lookup
  with that same meaning. NaN rows are selected with ``isnan(f)``.
* **Literals** are compared in the column's own type, and only where that needs no unit and loses nothing: a
  number with a number column (integers and decimals exactly: ``i > 2.5`` is ``i >= 3``, ``i = 2.5`` holds for no
  row; a floating-point column compares as doubles, a decimal literal read as the nearest double), text with a
  text column, TRUE/FALSE with a boolean column, a date (``DATE '...'`` or ``'yyyy-mm-dd'``) with a date column, a
  timestamp (``TIMESTAMP '...'`` or text) with a timestamp column of the same kind (with or without a time zone),
  compared exactly at the column's unit. Anything else is an :class:`~lakefmt.errors.InvalidPredicateError` naming
  the literal, the column and the fix: a number against a timestamp or a date has a unit, text against a number
  is not a number, a literal outside the column's range matches by accident.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from decimal import Decimal
from fractions import Fraction
from math import ceil, floor, isfinite
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPredicateError
from lakefmt.spec.sql.literals import EXACT
from lakefmt.spec.sql.tree import Call, Expr, Lit, Ref, number_of, parse_date, parse_stamp, short

__all__ = ["MAX_TESTS", "SIMPLIFIED_IN", "Resolver", "any_of", "bind_sql"]

#: resolves a column to its expression and type (or raises :class:`InvalidPredicateError`)
Resolver = Callable[[Ref], tuple[pc.Expression, pa.DataType]]

#: the most tests (comparisons, set lookups, null tests) one predicate binds to: Arrow evaluates an expression
#: recursively, and one of about ten thousand tests overflows its stack (a crash, not an error)
MAX_TESTS = 2000
#: pyarrow's expression simplifier rules files out by an ``IN`` list under min/max only up to about 50 values; a
#: longer list gets its least and greatest value as a range beside it (the same rows)
SIMPLIFIED_IN = 50

_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_COMPARISONS = set(_FLIP)
_ARITHMETIC = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}
_UNIT_NS = {"s": 10**9, "ms": 10**6, "us": 10**3, "ns": 1}
_NULL = pa.scalar(None, pa.bool_())


def bind_sql(expr: Expr, resolve: Resolver, text: str = "", *, values: bool = False,
             condition: bool = True) -> pc.Expression:
    """The pyarrow expression of ``expr``, its columns given by ``resolve``. ``values=False`` (a filter): each
    test compares a column with literals; ``values=True`` (MERGE): columns may be compared with columns and
    computed with ``+ - * /``. ``condition``: the result must be a boolean."""
    binder = _Binder(resolve, text, values)
    try:
        out, t = binder.bind(expr)
    except RecursionError:
        raise InvalidPredicateError(f"{short(text)}: parentheses or NOTs nested too deeply") from None
    if condition:
        binder.check_boolean(expr, t)
    return out


def any_of(items: Sequence[pc.Expression]) -> pc.Expression:
    """``items[0] | items[1] | ...`` as a balanced tree: a chain of thousands is as deep as a dozen, where a
    left-deep one overflows Arrow's stack when evaluated."""
    return _balanced(items, lambda a, b: a | b)


def _balanced(items: Sequence[pc.Expression], op: Any) -> pc.Expression:
    level = list(items)
    if not level:
        raise ValueError("no expressions to combine")
    while len(level) > 1:
        pairs = iter(level)
        level = [op(a, b) for a, b in zip(pairs, pairs, strict=False)] + ([level[-1]] if len(level) % 2 else [])
    return level[0]


class _Binder:
    def __init__(self, resolve: Resolver, text: str, values: bool) -> None:
        self.resolve, self.text, self.values, self.tests = resolve, text, values, 0

    def fail(self, what: str) -> InvalidPredicateError:
        return InvalidPredicateError(f"{short(self.text)}: {what}")

    def leaf(self, expr: pc.Expression) -> pc.Expression:
        self.tests += 1
        if self.tests > MAX_TESTS:
            raise self.fail(f"more than {MAX_TESTS} tests; list the values with IN (...) instead")
        return expr

    def check_boolean(self, e: Expr, t: pa.DataType | None) -> None:
        if t is not None and not pa.types.is_boolean(t) and not pa.types.is_null(t):
            raise self.fail(f"{_show(e)} is of type {t}, not a condition")

    def condition(self, e: Expr) -> pc.Expression:
        out, t = self.bind(e)
        self.check_boolean(e, t)
        return out

    def column(self, e: Expr, what: str) -> tuple[pc.Expression, pa.DataType | None]:
        """``e`` bound as the operand of a test: in a filter, a column."""
        if not self.values and not isinstance(e, Ref):
            if isinstance(e, Call) and e.op in ("+", "-", "*", "/", "neg"):
                raise self.fail(f"arithmetic on a column ({_show(e)}) is not supported in a filter")
            raise self.fail(f"{what} takes a column, found {_show(e)}")
        return self.bind(e)

    def bind(self, e: Expr) -> tuple[pc.Expression, pa.DataType | None]:
        if isinstance(e, Ref):
            return self.resolve(e)
        if isinstance(e, Lit):
            if not self.values and e.kind != "bool":
                raise self.fail(f"{e} alone is not a condition: compare a column with it")
            return self.literal(e, None)
        op, args = e.op, e.args
        if op in ("and", "or"):
            return self.chain(e), pa.bool_()
        if op == "not":
            return ~self.condition(args[0]), pa.bool_()
        if op == "is_null":
            return self.leaf(self.column(args[0], "IS NULL")[0].is_null()), pa.bool_()
        if op == "isnan":
            col, t = self.column(args[0], "isnan")
            if t is None or not pa.types.is_floating(t):
                raise self.fail(f"isnan takes a floating-point column; {_show(args[0])} is of type {t}")
            return self.leaf(pc.is_nan(_as_double(col, t))), pa.bool_()
        if op in ("like", "ilike"):
            return self.like(op, args[0], args[1]), pa.bool_()
        if op in _COMPARISONS:
            return self.compare(op, args[0], args[1]), pa.bool_()
        if op == "in":
            return self.member(args[0], list(args[1:])), pa.bool_()
        if op == "between":
            return self.compare(">=", args[0], args[1]) & self.compare("<=", args[0], args[2]), pa.bool_()
        return self.arithmetic(op, args)

    def chain(self, e: Call) -> pc.Expression:
        """An AND or OR chain; over one column, ``c = a OR c = b ...`` is one ``IN`` and ``c != a AND c != b ...``
        one ``NOT IN`` (the same meaning, :meth:`member`): thousands of tests are a few set lookups."""
        is_or = e.op == "or"
        grouped: dict[str, tuple[Ref, list[Lit]]] = {}
        rest: list[Expr] = []
        for o in e.args:
            found = _listed(o) if is_or else (_listed(o.args[0]) if isinstance(o, Call) and _is_not_in(o)
                                              else _unequal(o))
            if found is None:
                rest.append(o)
                continue
            ref, lits = found
            key = str(self.resolve(ref)[0])
            grouped.setdefault(key, (ref, []))[1].extend(lits)
        sets = [self.member(ref, list(lits)) for ref, lits in grouped.values()]
        bound = [*(sets if is_or else [~s for s in sets]), *(self.condition(o) for o in rest)]
        return _balanced(bound, (lambda a, b: a | b) if is_or else (lambda a, b: a & b))

    def like(self, op: str, subject: Expr, pattern: Expr) -> pc.Expression:
        col, t = self.column(subject, op.upper())
        if not (isinstance(pattern, Lit) and pattern.kind == "text"):
            raise self.fail(f"{op.upper()} takes a text pattern ('a%'), found {_show(pattern)}")
        if t is None or not (pa.types.is_string(t) or pa.types.is_large_string(t)):
            raise self.fail(f"{op.upper()} takes a text column; {_show(subject)} is of type {t}")
        if op == "like":
            return self.leaf(pc.match_like(col, pattern.value))
        if not pattern.value.isascii():
            raise self.fail(f"ILIKE {pattern}: ILIKE takes an ASCII pattern (it folds the letters A-Z only); use LIKE "
                            "with the exact characters")
        # A-Z and a-z alike, every other character as it is (pyarrow's ignore_case would fold Unicode)
        return self.leaf(pc.match_like(pc.Expression._call("ascii_lower", [col]), pattern.value.lower()))

    def compare(self, op: str, a: Expr, b: Expr) -> pc.Expression:
        if isinstance(a, Lit) and not isinstance(b, Lit):
            a, b, op = b, a, _FLIP[op]
        if isinstance(a, Lit):
            raise self.fail(f"{a} {op} {b} compares two literals: compare a column with a literal")
        col, t = self.column(a, "a comparison")
        if isinstance(b, Ref):
            self.resolve(b)  # an unknown name is named as such
        if isinstance(b, Lit):
            return self.leaf(_emit(op, *self.convert(b, t, a, col)))
        if not self.values:
            raise self.fail(f"{_show(a)} {op} {_show(b)}: comparing two columns is not supported in a filter")
        other, _ = self.bind(b)
        return self.leaf(_emit(op, "exact", col, other, None))

    def member(self, subject: Expr, items: list[Expr]) -> pc.Expression:
        """``subject IN (items)``: ``subject = item`` for some item, under the rule of :meth:`convert`."""
        if not all(isinstance(i, Lit) for i in items):
            if not self.values:
                other = next(i for i in items if not isinstance(i, Lit))
                raise self.fail(f"IN takes a list of literals; found {_show(other)}")
            return any_of([self.compare("=", subject, i) for i in items])
        col, t = self.column(subject, "IN")
        exact: list[Any] = []
        for lit in items:
            assert isinstance(lit, Lit)
            if lit.kind == "null":
                raise self.fail(f"NULL in an IN list never matches; use {_show(subject)} IS NULL")
            kind, c, s, _ = self.convert(lit, t, subject, col)
            col = c
            if kind == "exact":  # a literal between two values of the column's type equals no row
                exact.append(s.as_py())
        assert t is not None
        set_type = pa.float64() if pa.types.is_floating(t) else t
        if pa.types.is_floating(t) and any(v == 0 for v in exact):
            exact += [0.0, -0.0]  # a set lookup tells -0.0 from 0.0; the comparison does not
        value_set = pc.unique(pa.array(exact, set_type))
        if len(value_set) == 0:
            return self.leaf(col.is_null() & pc.scalar(_NULL))  # false, or unknown for a null
        if len(value_set) == 1:
            return self.leaf(col == pc.scalar(value_set[0]))
        out = pc.if_else(col.is_valid(), pc.is_in(col, value_set=value_set), _NULL)
        if len(value_set) > SIMPLIFIED_IN:  # a range pyarrow's simplifier can prune files by
            bounds = pc.min_max(value_set)
            out = (col >= pc.scalar(bounds["min"])) & (col <= pc.scalar(bounds["max"])) & out
        return self.leaf(out)

    def convert(self, lit: Lit, t: pa.DataType | None, subject: Expr,
                col: pc.Expression) -> tuple[str, pc.Expression, pa.Scalar, pa.Scalar | None]:
        """The literal in the column's type: ``("exact", column, value, None)``, or ``("gap", column, below,
        above)`` where the literal lies strictly between two neighbouring values of the type (``2.5`` for an
        integer column: 2 and 3); the column expression is the one to compare (a float32 column as a double)."""
        if lit.kind == "null":
            raise self.fail(f"NULL never matches in a comparison; use {_show(subject)} IS NULL or IS NOT NULL")
        if t is None:
            return "exact", col, self.literal(lit, None)[0], None
        v, kind = lit.value, lit.kind

        def bad(why: str = "") -> InvalidPredicateError:
            return self.fail(f"{lit} cannot be compared with column {_show(subject)} of type {t}{why}")

        number = kind in ("int", "decimal", "double")
        if kind == "text" and (pa.types.is_integer(t) or pa.types.is_decimal(t) or pa.types.is_floating(t)):
            try:
                parsed = number_of(v)  # text of a number, read exactly (as Spark casts it)
            except InvalidPredicateError as exc:
                raise bad(f": {exc}") from None
            if parsed is None:
                raise bad(": text, not a number")
            v, kind, number = parsed, "double" if isinstance(parsed, float) else "decimal", True
        if pa.types.is_integer(t) or pa.types.is_decimal(t):
            if not number:
                raise bad(f": {_kind_name(kind)}, not a number")
            if kind == "double" and not isfinite(v):
                raise bad(": not a finite number")
            scale = t.scale if pa.types.is_decimal(t) else 0
            exact = Fraction(v) * 10**scale
            lo, hi = floor(exact), ceil(exact)
            if pa.types.is_integer(t):
                bits = t.bit_width
                least, most = (-(2 ** (bits - 1)), 2 ** (bits - 1) - 1) if pa.types.is_signed_integer(t) else (
                    0, 2**bits - 1)
            else:
                least, most = -(10**t.precision - 1), 10**t.precision - 1
            if lo < least or hi > most:
                raise bad(" (outside its range)")

            def make(n: int) -> pa.Scalar:
                if not pa.types.is_decimal(t):
                    return pa.scalar(n, t)
                return pa.scalar(Decimal(n).scaleb(-scale, context=EXACT), t)  # exact: no 28-digit rounding

            return ("exact", col, make(lo), None) if lo == hi else ("gap", col, make(lo), make(hi))
        if pa.types.is_floating(t):
            if not number:
                raise bad(f": {_kind_name(kind)}, not a number")
            try:
                x = float(v)
            except OverflowError:
                x = float("inf")
            if kind != "double" and not isfinite(x):
                raise bad(": it is beyond the range of a double")
            if kind == "int" and x != v:
                raise bad(f": {v} has no exact double (write it as {x!r} to compare with the nearest)")
            if x != x:
                raise bad(f": NaN equals no value; select NaN rows with isnan({_show(subject)})")
            return "exact", _as_double(col, t), pa.scalar(x, pa.float64()), None
        if pa.types.is_string(t) or pa.types.is_large_string(t):
            if kind == "bool":
                raise bad(": a boolean, not text")
            if kind != "text":
                shown = v.isoformat() if kind == "date" else v.text if kind == "timestamp" else str(v)
                raise self.fail(
                    f"{lit} is not text, and column {_show(subject)} is text: quote the value ('{shown}') to compare "
                    "as text (text orders '9' after '10')"
                )
            return "exact", col, pa.scalar(v, t), None
        if pa.types.is_binary(t) or pa.types.is_large_binary(t):
            if kind != "text":
                raise bad(f": {_kind_name(kind)}, not text")
            return "exact", col, pa.scalar(v.encode(), t), None
        if pa.types.is_boolean(t):
            if kind != "bool":
                raise bad(f": {_kind_name(kind)}, not TRUE or FALSE")
            return "exact", col, pa.scalar(v, t), None
        if pa.types.is_date(t):
            day = v if kind == "date" else parse_date(v) if kind == "text" else None
            if day is None:
                why = "a timestamp: compare with DATE 'yyyy-mm-dd'" if kind == "timestamp" else (
                    "expected a date as 'yyyy-mm-dd'" if kind == "text" else f"{_kind_name(kind)}, not a date")
                raise bad(f": {why}")
            return "exact", col, pa.scalar(day, t), None
        if pa.types.is_timestamp(t):
            stamp = v if kind == "timestamp" else parse_stamp(v) if kind == "text" else None
            if kind == "date":
                stamp = parse_stamp(v.isoformat())
            if stamp is None:
                why = ("expected a timestamp as 'yyyy-mm-dd hh:mm:ss[.fffffffff][+hh:mm]'" if kind == "text" else
                       f"{_kind_name(kind)}, not a timestamp (a number would need a unit)")
                raise bad(f": {why}")
            if t.tz is not None and not stamp.zoned:
                raise bad(": it has a time zone: give the value one ('...Z' or '...+00:00')")
            if t.tz is None and stamp.zoned:
                raise bad(": it has no time zone: give the value none ('2026-01-01 00:00:00')")
            k = _UNIT_NS[t.unit]
            lo, hi = stamp.ns // k, -(-stamp.ns // k)
            if lo < -(2**63) or hi > 2**63 - 1:
                raise bad(" (outside its range)")
            return ("exact", col, pa.scalar(lo, t), None) if lo == hi else (
                "gap", col, pa.scalar(lo, t), pa.scalar(hi, t))
        raise bad(": SQL text compares numbers, text, booleans, dates and timestamps; filter this column with a "
                  "pyarrow expression")

    def literal(self, lit: Lit, like: pa.DataType | None) -> tuple[pc.Expression, pa.DataType | None]:
        """A literal outside a comparison (a MERGE value, an operand of arithmetic), of its own type (a decimal
        next to anything but a decimal is a double; an integer next to a decimal, a decimal)."""
        v, kind = lit.value, lit.kind
        if kind == "null":
            s = pa.scalar(None, like or pa.null())
        elif kind == "decimal" and not (like is not None and pa.types.is_decimal(like)):
            s = pa.scalar(float(v))
        elif kind == "int" and like is not None and pa.types.is_decimal(like):
            s = pa.scalar(Decimal(v))
        elif kind == "timestamp":
            s = pa.scalar(v.ns, pa.timestamp("ns", "UTC" if v.zoned else None))
        else:
            try:
                s = pa.scalar(v)
            except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
                raise self.fail(f"cannot use the value {lit}") from None
        return pc.scalar(s), (None if kind == "null" else s.type)

    def arithmetic(self, op: str, args: tuple[Expr, ...]) -> tuple[pc.Expression, pa.DataType | None]:
        if not self.values:
            raise self.fail(f"arithmetic on a column ({_show(Call(op, args))}) is not supported in a filter")
        if op == "neg":
            inner, t = self.bind(args[0])
            return pc.Expression._call("negate_checked", [inner]), t
        a, b = args
        (left, lt), (right, rt) = self.operand(a, b), self.operand(b, a)
        left, right = _widen(left, lt, rt), _widen(right, rt, lt)
        if op == "/":
            return pc.Expression._call("divide", [left.cast(pa.float64()), right.cast(pa.float64())]), pa.float64()
        if op not in _ARITHMETIC:
            raise self.fail(f"the operation {op} is not supported")
        return pc.Expression._call(_ARITHMETIC[op], [left, right]), lt or rt

    def operand(self, e: Expr, other: Expr) -> tuple[pc.Expression, pa.DataType | None]:
        """An operand of arithmetic: a literal takes the other side's type where it can."""
        if isinstance(e, Lit):
            like = None if isinstance(other, Lit) else self.bind(other)[1]
            if like is not None and e.kind == "int" and (pa.types.is_integer(like) or pa.types.is_decimal(like)):
                return self.literal(e, like)[0] if pa.types.is_decimal(like) else pc.scalar(pa.scalar(e.value)), like
            return self.literal(e, like)
        return self.bind(e)


def _emit(op: str, kind: str, col: pc.Expression, s: Any, above: Any) -> pc.Expression:
    """``col op literal``; ``kind == "gap"``: the literal lies strictly between ``s`` and ``above``, neighbouring
    values of the column's type."""
    s = s if isinstance(s, pc.Expression) else pc.scalar(s)
    if kind == "exact":
        return {"=": col == s, "!=": col != s, "<": col < s, "<=": col <= s, ">": col > s, ">=": col >= s}[op]
    hi = pc.scalar(above)
    if op in ("=", "!="):
        between = (col > s) & (col < hi)  # false for every value, unknown for a null
        return between if op == "=" else ~between
    return col <= s if op in ("<", "<=") else col >= hi


def _as_double(col: pc.Expression, t: pa.DataType) -> pc.Expression:
    """A floating-point column compared as doubles."""
    return col if pa.types.is_float64(t) else col.cast(pa.float64())


def _widen(expr: pc.Expression, t: pa.DataType | None, other: pa.DataType | None) -> pc.Expression:
    """An integer operand of arithmetic with a decimal, as a decimal that holds any of its values: pyarrow would
    cast it to the other side's precision and refuse the result's."""
    if t is not None and other is not None and pa.types.is_integer(t) and pa.types.is_decimal(other):
        return expr.cast(pa.decimal128(20, 0))
    return expr


def _listed(e: Expr) -> tuple[Ref, list[Lit]] | None:
    """``c = lit``, ``lit = c`` or ``c IN (lits)`` as the column and its literals."""
    if isinstance(e, Call) and e.op == "=" and len(e.args) == 2:
        a, b = e.args
        if isinstance(a, Lit) and isinstance(b, Ref):
            a, b = b, a
        if isinstance(a, Ref) and isinstance(b, Lit):
            return a, [b]
    if isinstance(e, Call) and e.op == "in" and isinstance(e.args[0], Ref) and all(
        isinstance(x, Lit) for x in e.args[1:]
    ):
        return e.args[0], [x for x in e.args[1:] if isinstance(x, Lit)]
    return None


def _is_not_in(e: Expr) -> bool:
    return isinstance(e, Call) and e.op == "not" and isinstance(e.args[0], Call) and e.args[0].op == "in"


def _unequal(e: Expr) -> tuple[Ref, list[Lit]] | None:
    if isinstance(e, Call) and e.op == "!=":
        return _listed(Call("=", e.args))
    return None


def _kind_name(kind: str) -> str:
    return {"null": "NULL", "bool": "a boolean", "int": "a number", "decimal": "a number", "double": "a number",
            "text": "text", "date": "a date", "timestamp": "a timestamp"}[kind]


def _show(e: Expr) -> str:
    if isinstance(e, Ref | Lit):
        return str(e)
    return f"the {e.op} expression"
