"""A small, well-defined SQL predicate language (what Delta's ``replaceWhere`` users type), parsed into a tree
and bound to a schema as a pyarrow expression.

Grammar (keywords in any case)::

    predicate  := disjunct (OR disjunct)*
    disjunct   := conjunct (AND conjunct)*
    conjunct   := NOT conjunct | '(' predicate ')' | test
    test       := column op literal | literal op column
                | column [NOT] IN '(' literal (',' literal)* ')'
                | column [NOT] BETWEEN literal AND literal
                | column IS [NOT] NULL
    op         := '=' | '==' | '!=' | '<>' | '<' | '<=' | '>' | '>='
    column     := name | `quoted name`            (matched exactly, else case-insensitively)
    literal    := 'text' | "text" | integer | decimal | TRUE | FALSE | DATE 'yyyy-mm-dd'
                | TIMESTAMP 'yyyy-mm-dd[ hh:mm[:ss[.ffffff]]][+hh:mm|Z]'

DATE and TIMESTAMP are keywords only before a text literal: elsewhere they name a column (``date = '2026-11-01'``,
as Spark takes it); numbers are written in ASCII digits. Text literals double a quote to contain it (``'it''s'``)
or escape it with a backslash (``\\\\`` is a backslash; another escape, such as ``\\t``, is refused: Spark reads a
tab, standard SQL a backslash). Evaluation follows SQL: a comparison with a null value is unknown, and only rows
where the predicate is true match. Anything else (column against column, functions, arithmetic, LIKE, NULL inside
IN) is refused with the position named.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc

from lakefmt.errors import InvalidPredicateError

__all__ = [
    "And",
    "Compare",
    "InList",
    "IsNull",
    "Not",
    "Or",
    "Predicate",
    "any_of",
    "bind_predicate",
    "parse_predicate",
]

_OPS = {"=": "=", "==": "=", "!=": "!=", "<>": "!=", "<": "<", "<=": "<=", ">": ">", ">=": ">="}
_FLIP = {"=": "=", "!=": "!=", "<": ">", "<=": ">=", ">": "<", ">=": "<="}
_TOKEN = re.compile(
    r"\s*(?:(?P<num>[+-]?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][+-]?[0-9]+)?)"  # ASCII digits only
    r"|(?P<str>'(?:[^'\\]|\\.|'')*'|\"(?:[^\"\\]|\\.|\"\")*\")"
    r"|(?P<quoted>`(?:[^`]|``)+`)"
    r"|(?P<word>[A-Za-z_][A-Za-z0-9_]*)"
    r"|(?P<op><=|>=|<>|!=|==|=|<|>)"
    r"|(?P<punct>[(),]))"
)
_KEYWORDS = {"and", "or", "not", "in", "is", "null", "true", "false", "between", "date", "timestamp"}
#: keywords only before a text literal (``DATE '2026-11-01'``); elsewhere a column's name
_TYPED = {"date", "timestamp"}


@dataclass(frozen=True)
class Compare:
    """``column op value`` (op one of ``= != < <= > >=``)."""

    column: str
    op: str
    value: Any


@dataclass(frozen=True)
class InList:
    """``column IN (values)``."""

    column: str
    values: tuple[Any, ...]


@dataclass(frozen=True)
class IsNull:
    """``column IS NULL``."""

    column: str


@dataclass(frozen=True)
class Not:
    operand: Predicate


@dataclass(frozen=True)
class And:
    left: Predicate
    right: Predicate


@dataclass(frozen=True)
class Or:
    left: Predicate
    right: Predicate


Predicate = Compare | InList | IsNull | Not | And | Or


@dataclass(frozen=True)
class _Tok:
    kind: str  # num, str, quoted, word, op, punct, end
    text: str
    pos: int

    @property
    def keyword(self) -> str | None:
        return self.text.lower() if self.kind == "word" and self.text.lower() in _KEYWORDS else None


def _tokens(text: str, pattern: re.Pattern[str] = _TOKEN) -> list[_Tok]:
    out = []
    pos = 0
    while True:
        while pos < len(text) and text[pos].isspace():
            pos += 1
        if pos >= len(text):
            break
        m = pattern.match(text, pos)
        if m is None or m.end() == pos:
            raise InvalidPredicateError(f"{text!r}: unexpected {text[pos]!r} at position {pos + 1}")
        kind = m.lastgroup or ""
        out.append(_Tok(kind, m.group(kind), m.start(kind)))
        pos = m.end()
    out.append(_Tok("end", "", len(text)))
    return out


def _unquote(token: str) -> str:
    quote, body = token[0], token[1:-1]
    return re.sub(r"\\(.)|" + re.escape(quote * 2), lambda m: m.group(1) or quote, body)


class _Parser:
    #: the token pattern (:mod:`lakefmt.spec.expression` extends the language with its own)
    pattern = _TOKEN

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _tokens(text, self.pattern)
        self.i = 0

    def fail(self, what: str, tok: _Tok | None = None) -> InvalidPredicateError:
        tok = tok or self.peek()
        found = "the end" if tok.kind == "end" else repr(tok.text)
        return InvalidPredicateError(f"{self.text!r}: {what}, found {found} at position {tok.pos + 1}")

    def peek(self) -> _Tok:
        return self.toks[self.i]

    def take(self) -> _Tok:
        tok = self.toks[self.i]
        self.i += 1
        return tok

    def accept(self, keyword: str) -> bool:
        if self.peek().keyword == keyword or (self.peek().kind == "punct" and self.peek().text == keyword):
            self.i += 1
            return True
        return False

    def expect(self, keyword: str) -> None:
        if not self.accept(keyword):
            raise self.fail(f"expected {keyword.upper() if keyword.isalpha() else repr(keyword)}")

    def parse(self) -> Predicate:
        if self.peek().kind == "end":
            raise InvalidPredicateError("an empty predicate")
        pred = self.disjunction()
        if self.peek().kind != "end":
            raise self.fail("expected AND, OR or the end")
        return pred

    def disjunction(self) -> Predicate:
        pred = self.conjunction()
        while self.accept("or"):
            pred = Or(pred, self.conjunction())
        return pred

    def conjunction(self) -> Predicate:
        pred = self.negation()
        while self.accept("and"):
            pred = And(pred, self.negation())
        return pred

    def negation(self) -> Predicate:
        if self.accept("not"):
            return Not(self.negation())
        if self.accept("("):
            pred = self.disjunction()
            self.expect(")")
            return pred
        return self.test()

    def test(self) -> Predicate:
        tok = self.peek()
        if self._is_column(tok):
            column = self.column()
            return self.column_test(column)
        value = self.literal("a column or a value")
        op_tok = self.take()
        if op_tok.kind != "op":
            raise self.fail("expected a comparison (=, !=, <, <=, >, >=) after a value", op_tok)
        if not self._is_column(self.peek()):
            raise self.fail("expected a column: a test compares a column with a value")
        return Compare(self.column(), _FLIP[_OPS[op_tok.text]], value)

    def column_test(self, column: str) -> Predicate:
        tok = self.peek()
        if tok.kind == "op":
            self.take()
            if self._is_column(self.peek()):
                raise self.fail("expected a value: comparing two columns is not supported")
            return Compare(column, _OPS[tok.text], self.literal("a value"))
        if self.accept("is"):
            negated = self.accept("not")
            self.expect("null")
            return Not(IsNull(column)) if negated else IsNull(column)
        negated = self.accept("not")
        if self.accept("in"):
            self.expect("(")
            values = [self.literal("a value", in_list=True)]
            while self.accept(","):
                values.append(self.literal("a value", in_list=True))
            self.expect(")")
            pred: Predicate = InList(column, tuple(values))
        elif self.accept("between"):
            low = self.literal("a value")
            self.expect("and")
            high = self.literal("a value")
            pred = And(Compare(column, ">=", low), Compare(column, "<=", high))
        else:
            raise self.fail(f"expected a comparison, IN, BETWEEN or IS [NOT] NULL after column {column}")
        return Not(pred) if negated else pred

    def _is_column(self, tok: _Tok) -> bool:
        """Whether ``tok`` (the next token) names a column: a quoted name, a word that is no keyword, or DATE or
        TIMESTAMP not followed by a text literal (a column named ``date`` is common)."""
        if tok.kind == "quoted" or (tok.kind == "word" and tok.keyword is None):
            return True
        if tok.keyword in _TYPED and self.toks[self.i] is tok:
            return self.toks[self.i + 1].kind != "str"
        return False

    def column(self) -> str:
        tok = self.take()
        return tok.text[1:-1].replace("``", "`") if tok.kind == "quoted" else tok.text

    def text_value(self, tok: _Tok) -> str:
        """A text literal's value. A backslash escapes a quote or a backslash only: ``'C:\\temp'`` would
        otherwise mean ``C:temp`` here, a tab in Spark and the backslash itself in standard SQL, so another escape
        is refused rather than guessed."""
        bad = re.search(r"\\([^'\"\\])", re.sub(r"\\\\", "", tok.text))
        if bad is not None:
            raise InvalidPredicateError(
                f"{self.text!r}: the escape \\{bad.group(1)} in the text literal at position {tok.pos + 1} is not "
                "supported: a backslash escapes only a quote or a backslash (write \\\\ for a backslash)"
            )
        return _unquote(tok.text)

    def literal(self, what: str, in_list: bool = False) -> Any:
        tok = self.take()
        if tok.kind == "str":
            return self.text_value(tok)
        if tok.kind == "num":
            if re.fullmatch(r"[+-]?\d+", tok.text):
                return int(tok.text)
            try:
                return Decimal(tok.text) if "e" not in tok.text.lower() else float(tok.text)
            except InvalidOperation:  # pragma: no cover - the token pattern only matches numbers
                raise self.fail("expected a number", tok) from None
        keyword = tok.keyword
        if keyword in ("true", "false"):
            return keyword == "true"
        if keyword == "date":
            inner = self.take()
            if inner.kind != "str":
                raise self.fail("expected a quoted date after DATE", inner)
            try:
                return datetime.date.fromisoformat(self.text_value(inner))
            except ValueError:
                raise self.fail("expected a date as 'yyyy-mm-dd'", inner) from None
        if keyword == "timestamp":
            inner = self.take()
            if inner.kind != "str":
                raise self.fail("expected a quoted timestamp after TIMESTAMP", inner)
            try:
                return datetime.datetime.fromisoformat(self.text_value(inner))
            except ValueError:
                raise self.fail("expected a timestamp as 'yyyy-mm-dd hh:mm:ss[.ffffff][+hh:mm]'", inner) from None
        if keyword == "null":
            hint = "; use IS NULL" if in_list else "; use IS NULL or IS NOT NULL"
            raise InvalidPredicateError(
                f"{self.text!r}: NULL at position {tok.pos + 1} never matches in a comparison{hint}"
            )
        self.i -= 1
        raise self.fail(f"expected {what}")


def parse_predicate(text: str) -> Predicate:
    """Parse ``text`` (see the module's grammar); :class:`InvalidPredicateError` names what is wrong and where."""
    if not isinstance(text, str):
        raise TypeError(f"a predicate must be a string, got {type(text).__name__}")
    try:
        return _Parser(text).parse()
    except RecursionError:  # parentheses or NOTs nested thousands deep
        raise InvalidPredicateError(f"{_short(text)}: parentheses or NOTs nested too deeply") from None


def _short(text: str) -> str:
    return repr(text) if len(text) <= 200 else repr(text[:200]) + f"... ({len(text)} characters)"


def _operands(pred: And | Or) -> list[Predicate]:
    """The operands of a chain of one operator (``a OR b OR c``, parsed as ``(a OR b) OR c``), in order, without
    recursion: a generated predicate may chain thousands."""
    out: list[Predicate] = []
    stack: list[Predicate] = [pred]
    while stack:
        p = stack.pop()
        if type(p) is type(pred):
            assert isinstance(p, And | Or)
            stack += [p.right, p.left]
        else:
            out.append(p)
    return out


def columns(pred: Predicate) -> set[str]:
    """The column names a predicate refers to, as written."""
    out: set[str] = set()
    stack = [pred]
    while stack:
        p = stack.pop()
        if isinstance(p, Compare | InList | IsNull):
            out.add(p.column)
        elif isinstance(p, Not):
            stack.append(p.operand)
        else:
            stack += [p.left, p.right]
    return out


def _resolve(name: str, schema: pa.Schema, text: str) -> pa.Field:
    if name in schema.names:
        return schema.field(name)
    matches = [f for f in schema if f.name.lower() == name.lower()]
    if len(matches) == 1:
        return matches[0]
    raise InvalidPredicateError(
        f"{text!r}: no column {name!r}" + (" (ambiguous in case)" if matches else "")
        + f"; columns: {', '.join(schema.names) or 'none'}"
    )


def _value(value: Any, f: pa.Field, text: str) -> pa.Scalar:
    if (pa.types.is_string(f.type) or pa.types.is_large_string(f.type)) and not isinstance(value, str | bool):
        # Compared as text, '9' > '10' and '2026-1-5' > '2026-02-01', where SQL compares numbers or dates: an
        # overwrite would replace partitions the user never named. The user says which comparison is meant.
        shown = value.isoformat() if isinstance(value, datetime.date) else str(value)
        raise InvalidPredicateError(
            f"{text!r}: {_show(value)} is not text, and column {f.name} is text: quote the value ('{shown}') to "
            "compare as text"
        )
    try:
        if pa.types.is_boolean(f.type) != isinstance(value, bool):
            raise TypeError
        if isinstance(value, int) and not isinstance(value, bool) and pa.types.is_integer(f.type):
            # made in the column's type: inferred first, an int above 2**63 - 1 overflows int64 though uint64's
            # largest values hold it
            return pa.scalar(value, f.type)
        if isinstance(value, int) and not isinstance(value, bool) and pa.types.is_decimal(f.type):
            value = Decimal(value)  # an int64 scalar casts to a decimal only of precision 19 and more
        if isinstance(value, datetime.datetime) and (
            (value.tzinfo is None and _zoned(f.type)) or pa.types.is_date(f.type)  # a date cast would drop the time
        ):
            raise TypeError
        return pa.scalar(value).cast(f.type)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError, pa.ArrowTypeError, TypeError, OverflowError):
        outside = " (outside its range)" if isinstance(value, int) and pa.types.is_integer(f.type) else ""
        if isinstance(value, str | datetime.datetime) and _zoned(f.type):
            outside = ": it has a time zone: give the value one ('...Z' or '...+00:00')"
        raise InvalidPredicateError(
            f"{text!r}: {_show(value)} cannot be compared with column {f.name} of type {f.type}{outside}"
        ) from None


def _zoned(t: pa.DataType) -> bool:
    """Whether ``t`` is a timestamp type with a time zone."""
    return pa.types.is_timestamp(t) and t.tz is not None


def _show(value: Any) -> str:
    """A literal as it is written."""
    if isinstance(value, str):
        return "'" + value.replace("'", "''") + "'"
    if isinstance(value, bool):
        return "TRUE" if value else "FALSE"
    if isinstance(value, datetime.datetime):
        return f"TIMESTAMP '{value.isoformat(sep=' ')}'"
    if isinstance(value, datetime.date):
        return f"DATE '{value.isoformat()}'"
    return str(value)


def bind_predicate(pred: Predicate, schema: pa.Schema, text: str = "") -> pc.Expression:
    """A pyarrow expression of ``pred`` over the columns of ``schema`` (names resolved, literals cast to the
    column's type); :class:`InvalidPredicateError` for an unknown column or a value of the wrong type."""

    tests = 0

    def leaf(expr: pc.Expression) -> pc.Expression:
        nonlocal tests
        tests += 1
        if tests > MAX_TESTS:
            raise InvalidPredicateError(
                f"{_short(text)}: more than {MAX_TESTS} tests; list the values with IN (...) instead"
            )
        return expr

    def one_of(name: str, values: Sequence[Any]) -> pc.Expression:
        f = _resolve(name, schema, text)
        col = pc.field(f.name)
        value_set = pa.array([_value(v, f, text).as_py() for v in values], f.type)
        # one set lookup, however long the list; SQL: a null column value is unknown, not false
        return leaf(pc.if_else(col.is_valid(), pc.is_in(col, value_set=value_set), pa.scalar(None, pa.bool_())))

    def chain(p: And | Or) -> pc.Expression:
        """``c = 1 OR c = 2 ...`` as ``c IN (1, 2, ...)`` and ``c != 1 AND c != 2 ...`` as ``c NOT IN (1, 2,
        ...)`` (the same under SQL's null rules): a generated predicate of thousands of tests is a few set
        lookups; the rest of the chain is a balanced tree."""
        op = "=" if isinstance(p, Or) else "!="
        grouped: dict[str, list[Any]] = {}
        rest = []
        for o in _operands(p):
            if isinstance(o, Compare) and o.op == op:
                grouped.setdefault(_resolve(o.column, schema, text).name, []).append(o.value)
            elif isinstance(o, InList) and op == "=":
                grouped.setdefault(_resolve(o.column, schema, text).name, []).extend(o.values)
            else:
                rest.append(o)
        sets = [one_of(name, values) for name, values in grouped.items()]
        if isinstance(p, Or):
            return any_of([*sets, *(go(o) for o in rest)])
        return _balanced([*(~s for s in sets), *(go(o) for o in rest)], lambda a, b: a & b)

    def go(p: Predicate) -> pc.Expression:
        if isinstance(p, Compare):
            f = _resolve(p.column, schema, text)
            col, value = pc.field(f.name), _value(p.value, f, text)
            return leaf({
                "=": col == value, "!=": col != value, "<": col < value,
                "<=": col <= value, ">": col > value, ">=": col >= value,
            }[p.op])
        if isinstance(p, InList):
            return one_of(p.column, p.values)
        if isinstance(p, IsNull):
            return leaf(pc.field(_resolve(p.column, schema, text).name).is_null())
        if isinstance(p, Not):
            return ~go(p.operand)
        return chain(p)

    try:
        return go(pred)
    except RecursionError:
        raise InvalidPredicateError(f"{_short(text)}: parentheses or NOTs nested too deeply") from None


#: the most tests (comparisons, set lookups, null tests) one predicate binds to: Arrow evaluates an expression
#: recursively, and one of about ten thousand tests overflows its stack (a crash, not an error)
MAX_TESTS = 2000


def any_of(items: Sequence[pc.Expression]) -> pc.Expression:
    """``items[0] | items[1] | ...`` as a balanced tree: a chain of thousands is as deep as a dozen, where a
    left-deep one overflows Arrow's stack when evaluated."""
    return _balanced(items, lambda a, b: a | b)


def _balanced(items: Sequence[pc.Expression], op: Any) -> pc.Expression:
    level = list(items)
    if not level:
        raise ValueError("no expressions to combine")
    while len(level) > 1:
        pairs: Iterator[pc.Expression] = iter(level)
        level = [op(a, b) for a, b in zip(pairs, pairs, strict=False)] + ([level[-1]] if len(level) % 2 else [])
    return level[0]
