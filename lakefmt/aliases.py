"""The peers' spellings of lakefmt's keywords, accepted where they mean the same thing: deltalake's ``filters=``
(DNF: a list of ``(column, op, value)`` tuples, AND-ed, or a list of such lists, OR-ed), pyiceberg's
``row_filter=`` (SQL text) and ``selected_fields=``, deltalake's ``delete(predicate=...)``, pyiceberg's
``upsert(join_cols=...)``, pypaimon's ``primary_keys=``. Each is translated to lakefmt's keyword, exactly, or
refused with an error that names lakefmt's keyword.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pyarrow.compute as pc
import pyarrow.parquet as pq

from lakefmt.errors import InvalidPredicateError, KeyTableError
from lakefmt.read.tasks import split_scan_kwargs as _split
from lakefmt.spec import TableSchema

__all__ = [
    "PEER_SCAN_KEYWORDS", "check_join_cols", "dnf_filter", "either", "iceberg_row_filter", "required", "scan_filter",
    "split_scan_kwargs",
]

#: the peers' scan keywords :meth:`lakefmt.Table.scan` accepts
PEER_SCAN_KEYWORDS = frozenset({"row_filter", "filters", "selected_fields"})


def either(name: str, value: Any, alias: str, alias_value: Any) -> Any:
    """``value`` (lakefmt's keyword ``name``) or ``alias_value`` (a peer's keyword ``alias`` for the same thing);
    ``TypeError`` when both are given."""
    if alias_value is None:
        return value
    if value is not None:
        raise TypeError(f"pass {name}= or {alias}= (the same thing, another library's name), not both")
    return alias_value


def required(name: str, value: Any, alias: str, alias_value: Any, *, what: str, takes: str) -> Any:
    """As :func:`either`, and one of the two must be given (``TypeError`` naming both, and what they ``takes``,
    otherwise)."""
    out = either(name, value, alias, alias_value)
    if out is None:
        raise TypeError(f"{what} needs {name}=: {takes} (or {alias}=, another library's name for it)")
    return out


def dnf_filter(filters: Any) -> str | pc.Expression:
    """deltalake's and pyarrow's ``filters=``: SQL text or a pyarrow expression as they are; a DNF list converted
    by pyarrow's own ``filters_to_expression`` (the meaning deltalake gives it). A list it cannot convert is an
    :class:`InvalidPredicateError` naming lakefmt's ``filter=``."""
    if isinstance(filters, str | pc.Expression):
        return filters
    if not isinstance(filters, Sequence) or not filters:
        raise InvalidPredicateError(
            f"filters= takes a non-empty list of (column, op, value) tuples (deltalake's DNF), got {filters!r}; "
            "lakefmt's keyword is filter= (SQL text or a pyarrow expression)"
        )
    try:
        return pq.filters_to_expression(list(filters))
    except (TypeError, ValueError, NotImplementedError, OverflowError) as exc:  # 2**64 as a value: OverflowError
        raise InvalidPredicateError(
            f"filters={filters!r} is not a DNF filter pyarrow can convert ({exc}); lakefmt's keyword is filter= "
            "(SQL text such as \"x > 1 AND dt = 'a'\" or a pyarrow expression)"
        ) from None


def iceberg_row_filter(value: Any) -> str | pc.Expression:
    """pyiceberg's ``row_filter=``: SQL text (or a pyarrow expression) as lakefmt's ``filter=``; a pyiceberg
    ``BooleanExpression`` is refused with a ``TypeError`` naming ``filter=``."""
    if isinstance(value, str | pc.Expression):
        return value
    raise TypeError(
        f"row_filter= takes SQL text here (\"x > 1\"), not a {type(value).__name__}; lakefmt's keyword is filter= "
        "(SQL text or a pyarrow expression)"
    )


def scan_filter(filter: Any, *, row_filter: Any = None, filters: Any = None) -> Any:
    """A scan's ``filter``, or the same given as pyiceberg's ``row_filter`` or deltalake's ``filters``."""
    if row_filter is not None:
        filter = either("filter", filter, "row_filter", iceberg_row_filter(row_filter))
    if filters is not None:
        filter = either("filter", filter, "filters", dnf_filter(filters))
    return filter


def split_scan_kwargs(kwargs: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """``kwargs`` split into a scan's keywords (the peers' spellings included) and the rest (``to_pandas``'s)."""
    scan, rest = _split(kwargs)
    for peer in PEER_SCAN_KEYWORDS & set(rest):
        scan[peer] = rest.pop(peer)
    return scan, rest


def check_join_cols(join_cols: Sequence[str] | None, schema: TableSchema) -> None:
    """pyiceberg's ``upsert(join_cols=...)``: accepted when it names the key table's primary-key columns (in any
    order); otherwise :class:`KeyTableError` (a key table upserts by its key; ``merge`` joins on any columns)."""
    if join_cols is None:
        return
    cols = [join_cols] if isinstance(join_cols, str) else list(join_cols)
    if not schema.has_primary_key:
        raise KeyTableError(
            f"upsert(join_cols={cols}) needs a key table (create_table(..., primary_key=[...])); on a table without "
            "one, join on any columns with merge(...).when_matched_update_all().when_not_matched_insert_all()"
        )
    if sorted(cols) != sorted(schema.primary_keys):
        raise KeyTableError(
            f"join_cols={cols}: a key table upserts by its primary key {list(schema.primary_keys)}, which join_cols "
            "may name (or leave out); to join on other columns, use merge(...)"
        )
