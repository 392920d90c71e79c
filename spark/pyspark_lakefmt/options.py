"""The connector's options: one registry of every option (:data:`OPTIONS`), where the table is (:class:`TableRef`)
and the small parsers every option goes through.

Options are a contract. Each use (a batch read, a batch write, a stream read, a stream write) knows its options;
any other key is refused with the valid ones listed and the closest suggested, so a typo never silently does the
default thing. Spark's own generic options (:data:`SPARK_OPTIONS`, measured on pyspark 4.3: what Spark itself puts
into a Python data source's options for ``save``/``load``/``start``/SQL tables) and ``storage.<key>`` pass.

Spark hands a Python data source its options with lower-cased keys and every value a string: the registry maps a
key back to its documented spelling for messages, and a bad value is an error naming the option and the value.
"""

from __future__ import annotations

import difflib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pyspark.sql.types import StructType

import lakefmt
from lakefmt.options import InvalidOptionError, UnknownOptionError
from lakefmt.read.scan import parse_as_of
from lakefmt.spec.tag import check_tag_name
from lakefmt.units import parse_size

from .catalog import location_from_schema, no_location_error

__all__ = [
    "OPTIONS",
    "SPARK_OPTIONS",
    "Option",
    "Options",
    "TableRef",
    "Use",
    "pairs",
    "parse_options",
]

#: what the options are for: a batch read, a batch write, a streaming read, a streaming write
Use = Literal["read", "write", "stream-read", "stream-write"]
_USES: tuple[Use, ...] = ("read", "write", "stream-read", "stream-write")
_DESCRIBED = {
    "read": "a lakefmt batch read",
    "write": "a lakefmt batch write",
    "stream-read": "a lakefmt streaming read",
    "stream-write": "a lakefmt streaming write",
}

#: Spark's own options, which Spark puts into a Python data source's options itself, in their documented
#: spelling: ``path`` (``save(p)``/``load(p)``/``start(p)``), ``paths`` (``load(p1, p2)``, refused later with a
#: clear message), ``checkpointLocation`` and ``queryName`` (``writeStream``), and what a SQL table hands over
#: (``CREATE TABLE ... USING lakefmt LOCATION ...``: ``location``, ``provider``, ``owner``; ``comment``,
#: ``external``, ``is_managed_location`` and ``collation`` are the catalog's other reserved properties).
SPARK_OPTIONS = (
    "path",
    "paths",
    "checkpointLocation",
    "queryName",
    "location",
    "provider",
    "owner",
    "comment",
    "external",
    "is_managed_location",
    "collation",
)
#: key prefixes that pass: ``storage.<key>`` (fsspec/s3fs storage options) and ``option.<key>`` (a SQL table's
#: ``OPTIONS (k 'v')`` arrive twice, as ``k`` and as ``option.k``; ``k`` is the one checked, and an ``option.k``
#: without its ``k`` is refused as unknown)
_PREFIXES = ("storage.", "option.")
#: a whole number as a user types it (``str.isdigit`` also takes '²' and other digits ``int`` refuses)
_DIGITS = re.compile(r"[0-9]+")


def _bool(value: str, name: str) -> bool:
    text = str(value).strip().lower()
    if text in ("true", "1", "yes"):
        return True
    if text in ("false", "0", "no"):
        return False
    raise InvalidOptionError(f"option {name}: {value!r} is not a boolean; use true or false")


def _snapshot_id(value: str, name: str) -> int:
    text = str(value).strip()
    if not _DIGITS.fullmatch(text) or int(text) < 1:
        raise InvalidOptionError(f"option {name}: {value!r} is not a snapshot id; ids are whole numbers from 1")
    return int(text)


def _starting_snapshot(value: str, name: str) -> int | Literal["latest"]:
    if str(value).strip().lower() == "latest":
        return "latest"
    try:
        return _snapshot_id(value, name)
    except InvalidOptionError:
        raise InvalidOptionError(
            f"option {name}: {value!r} is not a snapshot id (a whole number from 1) or latest"
        ) from None


def _version(value: str, name: str) -> int:
    """Delta's version: a snapshot id, or 0, the table's creation (snapshot ids start at 1)."""
    text = str(value).strip()
    if not _DIGITS.fullmatch(text):
        raise InvalidOptionError(f"option {name}: {value!r} is not a version; versions are whole numbers from 0")
    return int(text)


def _starting_version(value: str, name: str) -> int | Literal["latest"]:
    """Delta's ``startingVersion``: inclusive; 0 (the table's creation) reads from the first snapshot, 1."""
    if str(value).strip().lower() == "latest":
        return "latest"
    try:
        return max(_version(value, name), 1)
    except InvalidOptionError:
        raise InvalidOptionError(
            f"option {name}: {value!r} is not a version (a whole number from 0, the table's creation) or latest"
        ) from None


def _instant(value: str, name: str) -> int:
    try:
        return parse_as_of(str(value))
    except (lakefmt.InvalidTimestampError, ValueError, OverflowError):
        raise InvalidOptionError(
            f"option {name}: {value!r} is not a snapshot time; use ISO-8601 or epoch milliseconds"
        ) from None


def _positive_int(value: str, name: str) -> int:
    text = str(value).strip()
    if not _DIGITS.fullmatch(text) or int(text) < 1:
        raise InvalidOptionError(f"option {name}: {value!r} is not a positive whole number")
    return int(text)


def _size(value: str, name: str) -> int:
    try:
        size = parse_size(str(value), name)
    except InvalidOptionError:
        raise InvalidOptionError(
            f"option {name}: {value!r} is not a size (examples: 1048576, 512kb, 64mb, 1gb)"
        ) from None
    if size < 1:
        raise InvalidOptionError(f"option {name}: {value!r} must be positive")
    return size


def _text(value: str, name: str) -> str:
    text = str(value).strip()
    if not text:
        raise InvalidOptionError(f"option {name}: an empty value; leave the option out instead")
    return text


def _tag(value: str, name: str) -> str:
    try:
        return check_tag_name(str(value).strip())
    except lakefmt.InvalidTagNameError as exc:
        raise InvalidOptionError(f"option {name}: {exc}") from None


def _columns(value: str, name: str) -> list[str]:
    return [c.strip() for c in str(value).split(",") if c.strip()]


def _pairs(value: str, name: str) -> dict[str, str]:
    return pairs(str(value), name)


def _overwrite_mode(value: str, name: str) -> str:
    text = str(value).strip().lower()
    if text not in ("static", "dynamic"):
        raise InvalidOptionError(f"option {name}: {value!r} is not an overwrite mode; use static or dynamic")
    return text


@dataclass(frozen=True)
class Option:
    """One option: its documented ``name``, the ``uses`` it belongs to, its ``parse(value, spelled_name)``
    and a one-line ``doc``. ``alias_of`` names the option a Delta spelling stands for."""

    name: str
    uses: frozenset[Use]
    parse: Callable[[str, str], Any]
    doc: str
    alias_of: str | None = None

    @property
    def canonical(self) -> str:
        return self.alias_of or self.name


def _opt(name: str, uses: str, parse: Callable[[str, str], Any], doc: str, alias_of: str | None = None) -> Option:
    return Option(name, frozenset(u for u in _USES if u in uses.split()), parse, doc, alias_of)


#: Every option the connector knows, in the order the docs list them.
OPTIONS: tuple[Option, ...] = (
    _opt("snapshotId", "read", _snapshot_id, "time travel to a snapshot id"),
    _opt("versionAsOf", "read", _snapshot_id, "Delta's spelling of snapshotId", "snapshotId"),
    _opt("asOf", "read", _instant, "time travel to the snapshot current at an instant (ISO-8601 or epoch ms)"),
    _opt("timestampAsOf", "read", _instant, "Delta's spelling of asOf", "asOf"),
    _opt("pushFilters", "read", _bool, "true: prune files with Spark's filters (also set "
         "spark.sql.python.filterPushdown.enabled=true)"),
    _opt("tag", "read", _tag, "time travel to a tag (it reads after its snapshot expired)"),
    _opt("readChangeFeed", "read stream-read", _bool, "true: read the change data feed (the rows each snapshot "
         "inserted, updated and deleted, with _change_type, _commit_snapshot, _commit_version, _commit_timestamp)"),
    _opt("startingSnapshot", "read stream-read", _starting_snapshot, "the first snapshot a new stream reads, or "
         "latest (only what is committed from now on); with readChangeFeed, the first snapshot whose changes are read"),
    _opt("startingVersion", "read stream-read", _starting_version, "Delta's spelling of startingSnapshot (0: from "
         "the table's creation)", "startingSnapshot"),
    _opt("endingVersion", "read", _version, "with readChangeFeed: the last snapshot whose changes are read (0: "
         "the table's creation, which changed no row)"),
    _opt("endingSnapshot", "read", _snapshot_id, "lakefmt's spelling of endingVersion", "endingVersion"),
    _opt("startingTimestamp", "read stream-read", _instant, "a new stream reads the snapshots committed at or after "
         "this instant (ISO-8601 or epoch ms); with readChangeFeed, the changes committed at or after it"),
    _opt("endingTimestamp", "read", _instant, "with readChangeFeed: the changes committed at or before this "
         "instant"),
    _opt("maxFilesPerTrigger", "stream-read", _positive_int, "admission control: at most this many files per "
         "micro-batch"),
    _opt("maxBytesPerTrigger", "stream-read", _size, "admission control: about this many bytes per micro-batch"),
    _opt("skipChangeCommits", "stream-read", _bool, "true: skip snapshots that deleted or replaced rows, not fail"),
    _opt("failOnDataLoss", "stream-read", _bool, "false: a next snapshot that has expired is skipped, not an error"),
    _opt("consumerId", "stream-read", _text, "record the stream's position in the table, so expiration keeps what "
         "it still needs"),
    _opt("commitUser", "stream-write", _text, "the commit user (default: derived from the query id in the "
         "checkpoint)"),
    _opt("createTable", "write stream-write", _bool, "true: create a missing table from the data's schema"),
    _opt("partitionBy", "write stream-write", _columns, "with createTable: comma-separated partition columns"),
    _opt("tableOptions", "write stream-write", _pairs, "with createTable: table options as key=value,key=value"),
    _opt("overwritePartition", "write", _pairs, "overwrite exactly one partition: dt=2026-11-01[,k=v]"),
    _opt("replaceWhere", "write", _text, "overwrite the rows matching a predicate on partition columns"),
    _opt("partitionOverwriteMode", "write", _overwrite_mode, "dynamic: overwrite exactly the partitions present in "
         "the written rows (static, the default: the whole table)"),
    _opt("mergeSchema", "write stream-write", _bool, "true: add the data's columns the table lacks (and fields "
         "its struct columns lack) as nullable columns, in a schema change committed before the write"),
    _opt("writeOnly", "write stream-write", _bool, "true: this writer's commits never compact nor expire snapshots "
         "automatically (one dedicated job serves many writers), whatever the table's options say"),
    _opt("write-only", "write stream-write", _bool, "Paimon's spelling of writeOnly", "writeOnly"),
)

_BY_KEY: dict[str, Option] = {o.name.lower(): o for o in OPTIONS}
_SPARK_BY_KEY: dict[str, str] = {name.lower(): name for name in SPARK_OPTIONS}


def valid_names(use: Use) -> list[str]:
    """The documented names of the options valid for ``use`` (aliases included), in registry order."""
    return [o.name for o in OPTIONS if use in o.uses]


def spelling(key: str) -> str:
    """The documented spelling of an option key as Spark hands it (lower-cased): ``replacewhere`` ->
    ``replaceWhere``; an unknown key is returned as it is."""
    low = key.lower()
    if low in _BY_KEY:
        return _BY_KEY[low].name
    return _SPARK_BY_KEY.get(low, key)


def _unknown(key: str, use: Use) -> UnknownOptionError:
    names = valid_names(use)
    elsewhere = [o.name for o in OPTIONS if o.name.lower() == key.lower() and use not in o.uses]
    if elsewhere:
        opt = _BY_KEY[key.lower()]
        where = ", ".join(_DESCRIBED[u] for u in _USES if u in opt.uses)
        return UnknownOptionError(f"option {opt.name} is not an option of {_DESCRIBED[use]} (it is for {where})")
    close = difflib.get_close_matches(key.lower(), [n.lower() for n in names], n=1, cutoff=0.6)
    hint = f" (did you mean {spelling(close[0])}?)" if close else ""
    return UnknownOptionError(
        f"unknown option {key!r} for {_DESCRIBED[use]}{hint}. Valid options: {', '.join(names)}; Spark's own "
        "options (path, checkpointLocation, ...) and storage.<key> (fsspec/s3fs) pass too"
    )


@dataclass(frozen=True)
class Options:
    """Checked options for one use: values parsed, keyed by the documented name (an alias by the name it
    stands for, so ``versionAsOf`` is read as ``snapshotId``). :meth:`spelled` gives the name the user wrote,
    for messages."""

    use: Use
    values: dict[str, Any] = field(default_factory=dict)
    spelled_as: dict[str, str] = field(default_factory=dict)

    def get(self, name: str, default: Any = None) -> Any:
        return self.values.get(name, default)

    def __contains__(self, name: object) -> bool:
        return name in self.values

    def __iter__(self) -> Iterator[str]:
        return iter(self.values)

    def spelled(self, name: str) -> str:
        """How the user spelled option ``name`` (``timestampAsOf`` for ``asOf`` given by its alias)."""
        return self.spelled_as.get(name, name)


def parse_options(options: Mapping[str, str], use: Use) -> Options:
    """Check every key of ``options`` (as Spark hands them: any case) for ``use`` and parse its value.

    Raises :class:`UnknownOptionError` for an unknown key (naming it, the closest valid one and every valid
    one), :class:`InvalidOptionError` for a bad value (naming the option and the value) or for an option given
    twice under two spellings with two values."""
    values: dict[str, Any] = {}
    spelled: dict[str, str] = {}
    keys = {str(k).lower() for k in options}
    for key, raw in options.items():
        low = str(key).lower()
        if low.startswith("option.") and low[len("option.") :] not in keys:
            raise _unknown(str(key), use)  # alone, not beside its own key as a SQL table's OPTIONS: never ignored
        if low in _SPARK_BY_KEY or low.startswith(_PREFIXES):
            continue
        opt = _BY_KEY.get(low)
        if opt is None or use not in opt.uses:
            raise _unknown(str(key), use)
        value = opt.parse(raw, opt.name)
        name = opt.canonical
        if name in values and values[name] != value:
            raise InvalidOptionError(
                f"options {spelled[name]} and {opt.name} name the same setting with different values "
                f"({values[name]!r} and {value!r}); give one"
            )
        values[name] = value
        spelled[name] = opt.name
    return Options(use, values, spelled)


# -- small parsers also used on their own -----------------------------------------------------------------------
def pairs(text: str, what: str) -> dict[str, str]:
    """``k=v,k=v`` as a dict; an item that is not ``key=value``, or a key given twice, is an error naming the
    option."""
    out = {}
    for item in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise InvalidOptionError(f"option {what}: {item!r} is not key=value")
        if key.strip() in out:
            raise InvalidOptionError(f"option {what}: {key.strip()} is given twice")
        out[key.strip()] = value.strip()
    return out


@dataclass(frozen=True)
class TableRef:
    """Where the table is and how to reach it: picklable, travels to executors and the commit worker.

    ``path`` is normalized on the driver (:func:`lakefmt.normalize_uri`): Spark's ``file:/x``, ``file:///x`` and
    ``/x`` are one table, and a relative path means the driver's working folder, not an executor's.
    ``sql_table``: the location came from a SQL table's schema (see :mod:`.catalog`), for clearer errors."""

    path: str
    storage_options: dict[str, str] = field(default_factory=dict)
    sql_table: bool = False

    def __repr__(self) -> str:  # storage options (credentials) never printed
        return f"TableRef({self.path!r})"

    @classmethod
    def from_options(
        cls, options: Mapping[str, str], *, read_schema: StructType | None = None, write: bool = False
    ) -> TableRef:
        """The table the options name (``path``); for a read without one, the location a SQL table's schema
        carries (``read_schema``, as Spark hands it to ``reader(schema)``). A write never takes its location
        from a schema: Spark hands a writer the query's schema, which may carry another table's."""
        path = options.get("path")
        if not path and options.get("paths"):
            raise lakefmt.LakefmtError(
                f"a lakefmt read takes one table, not several paths ({', '.join(json.loads(options['paths']))}); "
                "read each with its own load(uri) and union them"
            )
        storage = {k[len("storage.") :]: v for k, v in options.items() if k.lower().startswith("storage.")}
        if path:
            return cls(lakefmt.normalize_uri(str(path)), storage)
        location = None if write else location_from_schema(read_schema)
        if location is None:
            raise no_location_error(options, write=write)
        return cls(lakefmt.normalize_uri(location), storage, sql_table=True)

    def open(self) -> lakefmt.Table:
        try:
            return lakefmt.open_table(self.path, storage_options=self.storage_options)
        except lakefmt.NotATableError as exc:
            if not self.sql_table:
                raise
            raise lakefmt.NotATableError(
                f"{exc}: the LOCATION of a SQL table declared with CREATE TABLE ... USING lakefmt holds no lakefmt "
                "table (moved or deleted? ALTER TABLE ... SET LOCATION does not reach lakefmt: DROP TABLE, then "
                "CREATE TABLE ... USING lakefmt LOCATION 'new uri')"
            ) from None
