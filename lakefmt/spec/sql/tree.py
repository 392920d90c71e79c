"""SQL text as a small tree: sqlglot parses the text (Spark's dialect), and this module keeps the forms lakefmt gives
a meaning to, folding literal arithmetic, casts of literals and date functions into literals. What the tree means
over a table's columns is :mod:`lakefmt.spec.sql.bind`'s job; the rules are written in ``docs/filters.md``.

The tree: a :class:`Ref` (a column, ``t.id`` or ``id``), a :class:`Lit` (a literal, of one :data:`LitKind`) or a
:class:`Call` (an operation on its arguments: ``= != < <= > >=``, ``in``, ``between``, ``and``, ``or``, ``not``,
``is_null``, ``isnan``, ``like``, ``ilike``, ``neg`` and ``+ - * /``).

Where the dialects differ, lakefmt chooses:

* ``'it''s'`` is one literal with a quote (standard SQL, and lakefmt's reading before), where sqlglot's Spark
  dialect reads two adjacent literals; two literals apart (``'a' 'b'``, which Spark joins) are refused.
* A backslash escapes a quote or a backslash only; another escape (``'C:\\temp'``: a tab in Spark, a backslash in
  standard SQL) is refused rather than guessed.
* ``TIMESTAMP '2026-01-01 00:00:00'`` without a zone is a wall-clock time (it compares with a timestamp column
  without a time zone); with one (``...Z``, ``...+02:00``) it is an instant. Spark would read the first in the
  session's time zone, which lakefmt does not have.
* ``current_date()`` is the date in UTC when the text is bound (once, when the filter is checked).

sqlglot is imported when the first SQL text is parsed, not with ``import lakefmt``.
"""

from __future__ import annotations

import datetime
from collections.abc import Iterator
from dataclasses import dataclass
from decimal import Decimal
from math import isfinite
from typing import Any, Literal

from lakefmt.errors import InvalidPredicateError
from lakefmt.spec.sql.literals import EXACT, Stamp, cast_value, number_of, parse_date, parse_stamp

__all__ = ["Call", "Expr", "Lit", "LitKind", "Ref", "Stamp", "columns", "conjuncts", "number_of", "parse_date",
           "parse_sql", "parse_stamp", "refs", "short"]

LitKind = Literal["null", "bool", "int", "decimal", "double", "text", "date", "timestamp"]


@dataclass(frozen=True)
class Ref:
    """A column: ``qualifier.name`` (``t.id``) or a bare ``name``."""

    qualifier: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True)
class Lit:
    """A literal: ``value`` a Python value of its ``kind`` (None, bool, int, Decimal, float, str, date,
    :class:`Stamp`)."""

    value: Any
    kind: LitKind = "null"

    def __str__(self) -> str:
        v = self.value
        if self.kind == "null":
            return "NULL"
        if self.kind == "bool":
            return "TRUE" if v else "FALSE"
        if self.kind == "text":
            return "'" + str(v).replace("'", "''") + "'"
        if self.kind == "date":
            return f"DATE '{v.isoformat()}'"
        if self.kind == "timestamp":
            return f"TIMESTAMP '{v.text}'"
        return repr(v) if self.kind == "double" else str(v)


@dataclass(frozen=True)
class Call:
    """An operation on ``args`` (see the module docstring)."""

    op: str
    args: tuple[Expr, ...]


Expr = Ref | Lit | Call

_COMPARE = {"EQ": "=", "NEQ": "!=", "LT": "<", "LTE": "<=", "GT": ">", "GTE": ">="}
_ARITH = {"Add": "+", "Sub": "-", "Mul": "*", "Div": "/"}
_FUNCTIONS = "isnan(c), current_date(), date_add(d, n), date_sub(d, n), CAST(literal AS type)"


def short(text: str) -> str:
    """``text`` quoted for a message, cut after 200 characters."""
    return repr(text) if len(text) <= 200 else repr(text[:200]) + f"... ({len(text)} characters)"


def parse_sql(text: str) -> Expr:
    """The tree of the SQL expression ``text``; :class:`InvalidPredicateError` names what is wrong and where."""
    if not isinstance(text, str):
        raise TypeError(f"SQL text must be a string, got {type(text).__name__}")
    if not text.strip():
        raise InvalidPredicateError("an empty predicate")
    from sqlglot import errors as sg_errors  # imported here: parsing SQL text is rare next to importing lakefmt
    from sqlglot.dialects.dialect import Dialect

    dialect = Dialect.get_or_raise("spark")
    try:
        tokens = _fixed_tokens(text, dialect.tokenize(text))
        trees = dialect.parser().parse(tokens, text)
    except sg_errors.TokenError:
        raise InvalidPredicateError(f"{short(text)}: an unclosed quote or an unknown character") from None
    except sg_errors.ParseError as exc:
        raise InvalidPredicateError(f"{short(text)}: {_parse_error(text, exc)}") from None
    except RecursionError:
        raise InvalidPredicateError(f"{short(text)}: parentheses or NOTs nested too deeply") from None
    if len(trees) != 1 or trees[0] is None:
        raise InvalidPredicateError(f"{short(text)}: one expression expected, found {len(trees)} statements")
    try:
        return _Converter(text).convert(trees[0])
    except RecursionError:
        raise InvalidPredicateError(f"{short(text)}: parentheses or NOTs nested too deeply") from None


def _parse_error(text: str, exc: Any) -> str:
    """sqlglot's first error, with its position in ``text`` (1-based)."""
    errs = getattr(exc, "errors", None) or [{}]
    e = errs[0]
    what = str(e.get("description") or exc).split(". Line")[0]
    if what.startswith("Required keyword"):
        what = "expected a value"
    elif what.startswith("Invalid expression / Unexpected token"):
        what = "expected AND, OR or the end"
    line, col, found = e.get("line"), e.get("col"), e.get("highlight") or ""
    if not isinstance(line, int) or not isinstance(col, int):
        return what
    offset = sum(len(s) + 1 for s in text.split("\n")[: line - 1]) + col - len(found)
    at = "the end" if offset >= len(text.rstrip()) and not found else repr(found)
    return f"{what}, at {at} (position {offset + 1})"


def _fixed_tokens(text: str, tokens: list[Any]) -> list[Any]:
    """The tokens with lakefmt's reading of text literals: each literal's value from its source text (escapes
    checked), and a quote doubled inside a literal (two literals with nothing between) as one literal."""
    out: list[Any] = []
    for tok in tokens:
        if tok.token_type.name not in ("STRING", "RAW_STRING", "NATIONAL_STRING", "BYTE_STRING", "HEX_STRING"):
            out.append(tok)
            continue
        raw = text[tok.start : tok.end + 1]
        if tok.token_type.name != "STRING" or raw[:1] not in ("'", '"') or raw[-1:] != raw[:1]:
            raise InvalidPredicateError(
                f"{short(text)}: the literal {raw} at position {tok.start + 1} is not supported: write text as "
                "'text' or \"text\""
            )
        value = _unquote(text, raw, tok.start)
        prev = out[-1] if out else None
        if prev is not None and prev.token_type.name == "STRING":
            prev_raw = text[prev.start : prev.end + 1]
            if prev.end + 1 == tok.start and prev_raw[0] == raw[0]:  # 'it''s': one literal, a quote inside
                prev.text = prev.text + raw[0] + value
                prev.end = tok.end
                continue
            raise InvalidPredicateError(
                f"{short(text)}: two text literals in a row at position {tok.start + 1} (Spark joins them): "
                "write one literal"
            )
        tok.text = value
        out.append(tok)
    return out


def _unquote(text: str, raw: str, start: int) -> str:
    """The value of the text literal ``raw`` (quotes included): a backslash escapes a quote or a backslash."""
    body, out, i = raw[1:-1], [], 0
    while i < len(body):
        ch = body[i]
        if ch == "\\" and i + 1 < len(body):
            nxt = body[i + 1]
            if nxt not in "\\'\"":
                raise InvalidPredicateError(
                    f"{short(text)}: the escape \\{nxt} in the text literal at position {start + 1} is not "
                    "supported: a backslash escapes only a quote or a backslash (write \\\\ for a backslash)"
                )
            out.append(nxt)
            i += 2
            continue
        out.append(ch)
        i += 1
    return "".join(out)


class _Converter:
    """sqlglot's tree to lakefmt's (:func:`parse_sql`)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def fail(self, what: str) -> InvalidPredicateError:
        return InvalidPredicateError(f"{short(self.text)}: {what}")

    def convert(self, node: Any) -> Expr:
        from sqlglot import exp

        kind = type(node).__name__
        if isinstance(node, exp.And | exp.Or):
            return Call(kind.lower(), tuple(self.convert(n) for n in _chain(node, type(node))))
        if isinstance(node, exp.Paren):
            return self.convert(node.this)
        if kind in _COMPARE:
            return Call(_COMPARE[kind], (self.convert(node.this), self.convert(node.expression)))
        if isinstance(node, exp.Column):
            if node.args.get("db") or node.args.get("catalog"):
                raise self.fail(f"{node.sql(dialect='spark')}: a name of more than two parts is not supported")
            if not isinstance(node.this, exp.Identifier):
                raise self.fail(f"{node.sql(dialect='spark')} is not supported")
            return Ref(node.table or None, node.this.this)
        if isinstance(node, exp.Not):
            return Call("not", (self.convert(node.this),))
        if isinstance(node, exp.Literal | exp.Boolean | exp.Null):
            try:
                return _literal(node)
            except InvalidPredicateError as exc:
                raise self.fail(str(exc)) from None
        if isinstance(node, exp.Neg):
            inner = self.convert(node.this)
            if isinstance(inner, Lit) and inner.kind in ("int", "decimal", "double"):
                v = inner.value
                return Lit(v.copy_negate() if isinstance(v, Decimal) else -v, inner.kind)  # no context: exact
            return Call("neg", (inner,))
        if isinstance(node, exp.In):
            if node.args.get("query") or node.args.get("unnest") or node.args.get("field"):
                raise self.fail("IN takes a list of values, not a query")
            if not node.expressions:
                raise self.fail("an empty IN list")
            return Call("in", (self.convert(node.this), *(self.convert(e) for e in node.expressions)))
        if isinstance(node, exp.Between):
            if node.args.get("symmetric"):
                raise self.fail("BETWEEN SYMMETRIC is not supported: order the bounds")
            return Call("between", (self.convert(node.this), self.convert(node.args["low"]),
                                    self.convert(node.args["high"])))
        if isinstance(node, exp.Is):
            if not isinstance(node.expression, exp.Null):
                raise self.fail(f"IS {node.expression.sql(dialect='spark')}: only IS [NOT] NULL is supported")
            return Call("is_null", (self.convert(node.this),))
        if isinstance(node, exp.Like | exp.ILike):
            out: Expr = Call(kind.lower(), (self.convert(node.this), self.convert(node.expression)))
            return Call("not", (out,)) if node.args.get("negate") else out
        if isinstance(node, exp.IsNan):
            return Call("isnan", (self.convert(node.this),))
        if kind in _ARITH:
            return self.arithmetic(_ARITH[kind], self.convert(node.this), self.convert(node.expression))
        if isinstance(node, exp.Cast):  # TryCast too
            return self.cast(node)
        if isinstance(node, exp.CurrentDate):
            return Lit(datetime.datetime.now(datetime.UTC).date(), "date")
        if isinstance(node, exp.TsOrDsAdd | exp.DateAdd | exp.DateSub):
            return self.date_add(node)
        if isinstance(node, exp.Func):
            raise self.fail(f"{node.sql(dialect='spark')}: functions are not supported, except {_FUNCTIONS}")
        raise self.fail(
            f"{node.sql(dialect='spark')} is not supported (SQL text takes columns, literals, comparisons, "
            f"[NOT] IN, [NOT] BETWEEN, [NOT] LIKE, IS [NOT] NULL, AND, OR, NOT, arithmetic and {_FUNCTIONS})"
        )

    def arithmetic(self, op: str, a: Expr, b: Expr) -> Expr:
        """``a op b``, folded when both are numbers (``/`` gives a double, as in Spark), or a date and a number of
        days (``+ -``)."""
        numbers = ("int", "decimal", "double")
        if isinstance(a, Lit) and isinstance(b, Lit) and a.kind in numbers and b.kind in numbers:
            shown = f"{a} {op} {b}"
            if op == "/" or "double" in (a.kind, b.kind):
                x, y = self.double(a, shown), self.double(b, shown)
                if op == "/" and y == 0:
                    raise self.fail(f"{shown}: a division by zero")
                out = {"+": x + y, "-": x - y, "*": x * y, "/": x / y if y else 0.0}[op]
                if isfinite(x) and isfinite(y) and not isfinite(out):
                    raise self.fail(f"{shown} is beyond the range of a double")
                return Lit(out, "double")
            kind: LitKind = "int" if a.kind == b.kind == "int" else "decimal"
            try:
                x2, y2 = Decimal(a.value), Decimal(b.value)
                v = {"+": EXACT.add, "-": EXACT.subtract, "*": EXACT.multiply}[op](x2, y2)
            except ArithmeticError:
                raise self.fail(f"{shown} has more than {EXACT.prec} digits") from None
            return Lit(int(v) if kind == "int" else v, kind)
        if isinstance(a, Lit) and a.kind == "date" and isinstance(b, Lit) and b.kind == "int" and op in "+-":
            return self.shift(a, b.value if op == "+" else -b.value)
        return Call(op, (a, b))

    def double(self, lit: Lit, shown: str) -> float:
        """A number literal as the nearest double; one beyond a double's range is refused."""
        try:
            x = float(lit.value)
        except OverflowError:
            x = float("inf")
        if lit.kind != "double" and not isfinite(x):
            raise self.fail(f"{shown}: {lit} is beyond the range of a double")
        return x

    def shift(self, day: Lit, days: int) -> Lit:
        try:
            return Lit(day.value + datetime.timedelta(days=days), "date")
        except OverflowError:
            raise self.fail(f"{day} moved by {days} days is outside years 1..9999") from None

    def date_add(self, node: Any) -> Expr:
        base, days = self.convert(node.this), self.convert(node.expression)
        unit = node.args.get("unit")
        if unit is not None and str(unit.name).upper() != "DAY":
            raise self.fail(f"{node.sql(dialect='spark')}: only a number of days can be added to a date")
        if type(node).__name__ == "DateSub" and isinstance(days, Lit) and days.kind == "int":
            days = Lit(-days.value, "int")
        if not (isinstance(base, Lit) and base.kind == "date" and isinstance(days, Lit) and days.kind == "int"):
            raise self.fail(f"{node.sql(dialect='spark')}: date_add and date_sub take a date literal (DATE "
                            "'yyyy-mm-dd' or current_date()) and an integer")
        return self.shift(base, days.value)

    def cast(self, node: Any) -> Lit:
        """``CAST(literal AS type)`` folded with Spark's meaning, or refused (:func:`~lakefmt.spec.sql.literals
        .cast_value`)."""
        inner = self.convert(node.this)
        to = node.to.this.name  # sqlglot's DType
        shown = node.sql(dialect="spark")
        if not isinstance(inner, Lit) or inner.kind == "null":
            raise self.fail(f"{shown}: CAST takes a literal here; compare the column with a literal of its type")
        params = [int(p.this.this) for p in node.to.expressions if str(getattr(p.this, "this", "")).isdigit()]
        value, kind = cast_value(inner.value, inner.kind, to, params, lambda why: self.fail(f"{shown}: {why}"))
        return Lit(value, kind)  # type: ignore[arg-type]


def _literal(node: Any) -> Lit:
    from sqlglot import exp

    if isinstance(node, exp.Null):
        return Lit(None, "null")
    if isinstance(node, exp.Boolean):
        return Lit(bool(node.this), "bool")
    if node.is_string:
        return Lit(node.this, "text")
    number = number_of(node.this)
    if number is None:  # pragma: no cover - sqlglot's number tokens are numbers
        raise InvalidPredicateError(f"not a number: {node.this}")
    return Lit(number, "int" if isinstance(number, int) else "decimal" if isinstance(number, Decimal) else "double")


def _chain(node: Any, kind: Any) -> list[Any]:
    """The operands of a chain of one operator, in order, without recursion (thousands may be chained)."""
    out: list[Any] = []
    stack: list[Any] = [node]
    while stack:
        n = stack.pop()
        if type(n) is kind:
            stack += [n.expression, n.this]
        else:
            out.append(n)
    return out


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of a chain of ANDs (``a AND b AND c``), in order; ``[expr]`` for anything else."""
    if isinstance(expr, Call) and expr.op == "and":
        return [c for a in expr.args for c in conjuncts(a)]
    return [expr]


def refs(expr: Expr) -> Iterator[Ref]:
    """Every column ``expr`` refers to."""
    stack = [expr]
    while stack:
        e = stack.pop()
        if isinstance(e, Ref):
            yield e
        elif isinstance(e, Call):
            stack += reversed(e.args)


def columns(expr: Expr) -> set[str]:
    """The column names ``expr`` refers to, as written."""
    return {r.name for r in refs(expr)}
