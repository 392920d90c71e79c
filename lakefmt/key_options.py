"""The table options of key tables: their values and how each is read (Paimon's names).

The merge engines and their aggregate functions (``merge-engine``, ``fields.<f>.aggregate-function``), the row-kind
spellings (``rowkind.format``), the change-feed producers (``changelog-producer``) and the most buckets a table may
have; :class:`lakefmt.options.TableOptions` registers them. Imports only :mod:`lakefmt.errors`.
"""

from __future__ import annotations

import re

from lakefmt.errors import InvalidOptionError

__all__ = [
    "AGGREGATE_FUNCTIONS",
    "CHANGELOG_PRODUCERS",
    "DEFAULT_FUNCTION",
    "FIELD_FUNCTION",
    "MAX_BUCKETS",
    "MERGE_ENGINES",
    "ROWKIND_FORMATS",
    "parse_aggregate_function",
    "parse_changelog_producer",
    "parse_merge_engine",
    "parse_rowkind_format",
]

#: the most buckets a key table may have: manifest entries number a bucket in 32 bits
MAX_BUCKETS = (1 << 31) - 1


#: ``merge-engine``: how the rows written for one key of a key table combine (Paimon's names)
MERGE_ENGINES = ("deduplicate", "partial-update", "aggregation", "first-row")
#: ``fields.<f>.aggregate-function``: the functions of the ``aggregation`` merge engine (Paimon's names)
AGGREGATE_FUNCTIONS = ("sum", "min", "max", "count", "last_value", "last_non_null_value")
#: ``fields.<f>.aggregate-function``: a key naming one field's function (the field is its ``field`` group)
FIELD_FUNCTION = re.compile(r"^fields\.(?P<field>.+)\.aggregate-function$")
#: the key of the function for a field that names none
DEFAULT_FUNCTION = "fields.default-aggregate-function"


def parse_merge_engine(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value not in MERGE_ENGINES:
        raise InvalidOptionError(f"option {key}: unknown merge engine {text!r} (known: {', '.join(MERGE_ENGINES)})")
    return value


def parse_aggregate_function(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value not in AGGREGATE_FUNCTIONS:
        raise InvalidOptionError(
            f"option {key}: unknown aggregate function {text!r} (known: {', '.join(AGGREGATE_FUNCTIONS)})"
        )
    return value


#: the values of the table option ``rowkind.format`` (:mod:`lakefmt.spec.keys.rowkind`)
ROWKIND_FORMATS = ("any", "paimon", "delta", "debezium")


def parse_rowkind_format(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value not in ROWKIND_FORMATS:
        raise InvalidOptionError(f"option {key} is one of {', '.join(ROWKIND_FORMATS)}, got {text!r}")
    return value


#: ``changelog-producer`` values (Paimon's names) that lakefmt takes, and those it refuses for now
CHANGELOG_PRODUCERS = ("none", "input", "lookup")
_CHANGELOG_LATER = ("full-compaction",)


def parse_changelog_producer(text: str, key: str) -> str:
    value = str(text).strip().lower()
    if value in _CHANGELOG_LATER:
        raise InvalidOptionError(
            f"option {key}: {value} is not supported yet; use none (the change feed is derived from each commit's "
            "files and deletion vectors), lookup (commits store their change rows) or input (commits store the "
            "rows given), see docs/changes.md"
        )
    if value not in CHANGELOG_PRODUCERS:
        raise InvalidOptionError(f"option {key} is none, input or lookup, got {text!r}")
    return value
