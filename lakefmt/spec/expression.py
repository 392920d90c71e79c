"""SQL value expressions over qualified columns: MERGE's ON condition, its clauses' conditions and SET values.

The language of :mod:`lakefmt.spec.predicate` (same tokens, literals, keywords and null rules; its parser is
extended here), grown by what a MERGE needs::

    expr       := disjunct (OR disjunct)*
    disjunct   := conjunct (AND conjunct)*
    conjunct   := NOT conjunct | comparison
    comparison := sum [op sum | IS [NOT] NULL | [NOT] IN '(' sum (',' sum)* ')' | [NOT] BETWEEN sum AND sum]
    sum        := product (('+' | '-') product)*
    product    := factor (('*' | '/') factor)*
    factor     := '-' factor | '(' expr ')' | literal | NULL | column
    column     := [alias '.'] name                  (name or alias: a word or a `quoted name`)

So a column may be compared with another column (``t.id = s.id``) and SET values may compute
(``s.x + t.x``). ``/`` divides as real numbers (a double), as SQL engines do for ``/``; ``+ - *`` on integers
fail on overflow rather than wrap. Evaluation follows SQL: an operation on a null is null, and a condition holds
only where it is true. Functions, CASE, LIKE and casts are refused with the position named.

:func:`parse_expression` gives the tree; :func:`bind_expression` turns it into a pyarrow expression, resolving
each column through a caller's function (which knows the aliases).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPredicateError
from lakefmt.spec.predicate import _OPS, _Parser, _short, _value

__all__ = ["Call", "Expr", "Lit", "Ref", "bind_expression", "conjuncts", "parse_expression", "refs"]

_XTOKEN = re.compile(
    r"\s*(?:(?P<num>(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)"  # unsigned: a sign is an operator
    r"|(?P<str>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
    r"|(?P<quoted>`(?:[^`]|``)+`)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=|>=|<>|!=|==|=|<|>)"
    r"|(?P<punct>[(),.+\-*/]))"
)
_COMPARISONS = {"=", "!=", "<", "<=", ">", ">="}
_ARITHMETIC = {"+": "add_checked", "-": "subtract_checked", "*": "multiply_checked"}


@dataclass(frozen=True)
class Ref:
    """A column: ``qualifier.name`` (``t.id``) or a bare ``name``."""

    qualifier: str | None
    name: str

    def __str__(self) -> str:
        return f"{self.qualifier}.{self.name}" if self.qualifier else self.name


@dataclass(frozen=True)
class Lit:
    """A literal (None: NULL)."""

    value: Any


@dataclass(frozen=True)
class Call:
    """An operation: a comparison (``= != < <= > >=``), arithmetic (``+ - * /``), ``and``, ``or``, ``not``,
    ``neg``, ``is_null`` or ``in`` (its first argument tested against the others)."""

    op: str
    args: tuple[Expr, ...]


Expr = Ref | Lit | Call


class _ExprParser(_Parser):
    pattern = _XTOKEN

    def parse_expr(self) -> Expr:
        if self.peek().kind == "end":
            raise InvalidPredicateError("an empty expression")
        out = self.disjunction_x()
        if self.peek().kind != "end":
            raise self.fail("expected an operator or the end")
        return out

    def punct(self, text: str) -> bool:
        tok = self.peek()
        if tok.kind == "punct" and tok.text == text:
            self.i += 1
            return True
        return False

    def disjunction_x(self) -> Expr:
        out = self.conjunction_x()
        while self.accept("or"):
            out = Call("or", (out, self.conjunction_x()))
        return out

    def conjunction_x(self) -> Expr:
        out = self.negation_x()
        while self.accept("and"):
            out = Call("and", (out, self.negation_x()))
        return out

    def negation_x(self) -> Expr:
        if self.accept("not"):
            return Call("not", (self.negation_x(),))
        return self.comparison()

    def comparison(self) -> Expr:
        left = self.sum()
        tok = self.peek()
        if tok.kind == "op":
            self.take()
            return Call(_OPS[tok.text], (left, self.sum()))
        if self.accept("is"):
            negated = self.accept("not")
            self.expect("null")
            test: Expr = Call("is_null", (left,))
            return Call("not", (test,)) if negated else test
        negated = self.accept("not")
        if self.accept("in"):
            self.expect("(")
            values = [self.sum()]
            while self.accept(","):
                values.append(self.sum())
            self.expect(")")
            test = Call("in", (left, *values))
        elif self.accept("between"):
            low = self.sum()
            self.expect("and")
            test = Call("and", (Call(">=", (left, low)), Call("<=", (left, self.sum()))))
        elif negated:
            raise self.fail("expected IN or BETWEEN after NOT")
        else:
            return left
        return Call("not", (test,)) if negated else test

    def sum(self) -> Expr:
        out = self.product()
        while True:
            if self.punct("+"):
                out = Call("+", (out, self.product()))
            elif self.punct("-"):
                out = Call("-", (out, self.product()))
            else:
                return out

    def product(self) -> Expr:
        out = self.factor()
        while True:
            if self.punct("*"):
                out = Call("*", (out, self.factor()))
            elif self.punct("/"):
                out = Call("/", (out, self.factor()))
            else:
                return out

    def factor(self) -> Expr:
        if self.punct("-"):
            inner = self.factor()
            if isinstance(inner, Lit) and isinstance(inner.value, int | float | Decimal) and not isinstance(
                inner.value, bool
            ):
                return Lit(-inner.value)
            return Call("neg", (inner,))
        if self.accept("("):
            out = self.disjunction_x()
            self.expect(")")
            return out
        tok = self.peek()
        if tok.keyword == "null":
            self.take()
            return Lit(None)
        if self._is_column(tok):
            first = self.column()
            if self.peek().kind == "punct" and self.peek().text == "(":
                raise self.fail(f"functions are not supported ({first}(...))")
            if self.punct("."):
                if not self._is_column(self.peek()):
                    raise self.fail(f"expected a column name after {first}.")
                return Ref(first, self.column())
            return Ref(None, first)
        return Lit(self.literal("a column, a value or '('"))


def parse_expression(text: str) -> Expr:
    """Parse ``text`` (see the module's grammar); :class:`InvalidPredicateError` names what is wrong and where."""
    if not isinstance(text, str):
        raise TypeError(f"an expression must be a string, got {type(text).__name__}")
    try:
        return _ExprParser(text).parse_expr()
    except RecursionError:
        raise InvalidPredicateError(f"{_short(text)}: parentheses nested too deeply") from None


def conjuncts(expr: Expr) -> list[Expr]:
    """The operands of a chain of ANDs (``a AND b AND c``), in order; ``[expr]`` for anything else."""
    if isinstance(expr, Call) and expr.op == "and":
        return [c for a in expr.args for c in conjuncts(a)]
    return [expr]


def refs(expr: Expr) -> Iterator[Ref]:
    """Every column ``expr`` refers to."""
    if isinstance(expr, Ref):
        yield expr
    elif isinstance(expr, Call):
        for a in expr.args:
            yield from refs(a)


#: resolves a column to its expression and type (or raises :class:`InvalidPredicateError`)
Resolver = Callable[[Ref], tuple[pc.Expression, pa.DataType]]


def bind_expression(expr: Expr, resolve: Resolver, text: str = "") -> pc.Expression:
    """A pyarrow expression of ``expr``, its columns given by ``resolve``. A literal next to a column takes the
    column's type (a number compared with a text column is refused, as in :mod:`lakefmt.spec.predicate`)."""
    return _Binder(resolve, text).bind(expr)[0]


class _Binder:
    def __init__(self, resolve: Resolver, text: str) -> None:
        self.resolve, self.text = resolve, text

    def bind(self, e: Expr, like: pa.DataType | None = None) -> tuple[pc.Expression, pa.DataType | None]:
        if isinstance(e, Ref):
            return self.resolve(e)
        if isinstance(e, Lit):
            return self.literal(e.value, like), like
        op, args = e.op, e.args
        if op in ("and", "or", "not"):
            bound = [self.boolean(a) for a in args]
            if op == "not":
                return ~bound[0], pa.bool_()
            return (bound[0] & bound[1]) if op == "and" else (bound[0] | bound[1]), pa.bool_()
        if op == "is_null":
            return self.bind(args[0])[0].is_null(), pa.bool_()
        if op == "neg":
            inner, t = self.bind(args[0])
            return pc.Expression._call("negate_checked", [inner]), t
        if op == "in":
            left, t = self.bind(args[0])
            items = [self.pair(args[0], a, "=")[1] if isinstance(a, Lit) else self.bind(a, t)[0] for a in args[1:]]
            return _any([left == item for item in items]), pa.bool_()
        if op in _COMPARISONS:
            left, right = self.pair(args[0], args[1], op)
            return {
                "=": left == right, "!=": left != right, "<": left < right,
                "<=": left <= right, ">": left > right, ">=": left >= right,
            }[op], pa.bool_()
        left, right = self.pair(args[0], args[1], op)
        lt, rt = self.bind(args[0])[1], self.bind(args[1])[1]
        left, right = _widen(left, lt, rt), _widen(right, rt, lt)
        if op == "/":
            return pc.Expression._call("divide", [left.cast(pa.float64()), right.cast(pa.float64())]), pa.float64()
        return pc.Expression._call(_ARITHMETIC[op], [left, right]), self.bind(args[0])[1] or self.bind(args[1])[1]

    def pair(self, a: Expr, b: Expr, op: str) -> tuple[pc.Expression, pc.Expression]:
        """Both operands bound, a literal taking the other side's type."""
        if isinstance(a, Lit) and not isinstance(b, Lit):
            right, t = self.bind(b)
            return self.operand_literal(a.value, t, op, b), right
        left, t = self.bind(a)
        if isinstance(b, Lit):
            return left, self.operand_literal(b.value, t, op, a)
        return left, self.bind(b, t)[0]

    def operand_literal(self, value: Any, t: pa.DataType | None, op: str, other: Expr) -> pc.Expression:
        if value is None or t is None:
            return self.literal(value, None)
        if pa.types.is_integer(t) and isinstance(value, Decimal | float) and value != int(value):
            return self.literal(value, None)  # 1.5 against an integer column: compared as numbers, not truncated
        if op in _COMPARISONS:  # the predicate language's checks: no number against text
            return pc.scalar(_value(value, pa.field(_show(other), t), self.text))
        return self.literal(value, t)

    def literal(self, value: Any, like: pa.DataType | None) -> pc.Expression:
        if value is None:
            return pc.scalar(pa.scalar(None, like or pa.null()))
        if isinstance(value, Decimal) and not (like is not None and pa.types.is_decimal(like)):
            value = float(value)  # a decimal literal next to anything but a decimal column is a double
        elif isinstance(value, int) and not isinstance(value, bool) and like is not None and pa.types.is_decimal(like):
            value = Decimal(value)  # an integer next to a decimal column: a decimal of its own digits
        try:
            return pc.scalar(pa.scalar(value))
        except (pa.ArrowInvalid, pa.ArrowTypeError, OverflowError):
            raise InvalidPredicateError(f"{_short(self.text)}: cannot use the value {value!r}") from None

    def boolean(self, e: Expr) -> pc.Expression:
        bound, t = self.bind(e)
        if t is not None and not pa.types.is_boolean(t) and not pa.types.is_null(t):
            raise InvalidPredicateError(f"{_short(self.text)}: {_show(e)} is of type {t}, not a condition")
        return bound


def _widen(expr: pc.Expression, t: pa.DataType | None, other: pa.DataType | None) -> pc.Expression:
    """An integer operand of arithmetic with a decimal, as a decimal that holds any of its values: pyarrow would
    cast it to the other side's precision and refuse the result's."""
    if t is not None and other is not None and pa.types.is_integer(t) and pa.types.is_decimal(other):
        return expr.cast(pa.decimal128(20, 0))
    return expr


def _any(items: list[pc.Expression]) -> pc.Expression:
    out = items[0]
    for item in items[1:]:
        out = out | item
    return out


def _show(e: Expr) -> str:
    if isinstance(e, Ref):
        return str(e)
    if isinstance(e, Lit):
        return repr(e.value)
    return f"the {e.op} expression"
