"""Schema evolution rules (format version 2): which changes a schema may take, applied to a :class:`TableSchema`.

Pure: no I/O. :class:`SchemaEditor` applies changes in order to a working copy of a schema and refuses, with
:class:`SchemaEvolutionError`, any change a reader could not follow by field id. Whether files written under one
schema are read whole under another, and what changed between two schemas, is :mod:`lakefmt.spec.evolution.changes`.

The rules (docs/format.md, "Schema evolution"), each with its reason:

* add a nullable column, at the top level or inside a struct: older files have no value for it, so they read
  it as null; a new id, so no older file's column is taken for it;
* drop a column: older files keep it, readers no longer read it; its id is never reused;
* rename: files are matched by id, never by name;
* reorder: files are matched by id, never by position;
* widen int8 -> int16 -> int32 -> int64 (and unsigned the same), float32 -> float64, decimal precision up with
  the same scale: every old value is exactly representable in the new type, so old files and their min/max are
  cast losslessly;
* make a column nullable: every old value is still allowed.

Refused: narrowing or any other type change (old values might not fit), a change to a partition column other
than making it nullable or moving it (its values name the data files' folders and the manifests' partition
ranges, by name and type), dropping a partition column, a name already used by a sibling, a new column that
is not nullable, and changes to a list's element, a map's key or value other than widening and nullability.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import pyarrow as pa

from lakefmt.errors import InvalidOptionError, SchemaEvolutionError, UnsupportedTypeError
from lakefmt.spec.evolution.promotion import Path, as_path, is_promotion, kind_of, show_path
from lakefmt.spec.fields import FieldNode, assign_ids, child_fields, walk, with_children
from lakefmt.spec.keys.merge_engine import check_merge_engine
from lakefmt.spec.schema import TableSchema
from lakefmt.spec.types import DOC_KEY, type_to_json

__all__ = ["SchemaEditor"]

def _check_type(type: object) -> pa.DataType:
    if not isinstance(type, pa.DataType):
        raise UnsupportedTypeError(f"a column type must be a pyarrow DataType (such as pa.string()), got {type!r}")
    return type


def _check_doc(doc: object) -> str | None:
    if doc is not None and not isinstance(doc, str):
        raise SchemaEvolutionError(f"a column's doc must be a string, got {doc!r}")
    return doc


@dataclass
class _Field:
    """A mutable field of the schema being edited."""

    id: int
    name: str
    type: pa.DataType  # for a nested field: its kind (and a map's keys_sorted); children live in ``children``
    nullable: bool
    children: list[_Field] = field(default_factory=list)
    doc: str | None = None

    @classmethod
    def of(cls, node: FieldNode) -> _Field:
        doc = (node.field.metadata or {}).get(DOC_KEY)
        children = [cls.of(c) for c in node.children]
        return cls(node.id, node.name, node.type, node.field.nullable, children, None if doc is None else doc.decode())

    def to_arrow(self) -> pa.Field:
        t = with_children(self.type, [c.to_arrow() for c in self.children]) if self.children else self.type
        return pa.field(self.name, t, nullable=self.nullable, metadata={DOC_KEY: self.doc} if self.doc else None)

    def ids(self) -> list[int]:
        return [self.id, *(i for c in self.children for i in c.ids())]


class SchemaEditor:
    """Applies schema changes, in order, to a copy of ``base``; :meth:`result` is the next schema.

    Each change sees the result of the ones before it (rename a column, then refer to it by its new name).
    Every refused change raises :class:`SchemaEvolutionError` at once and leaves the editor as it was."""

    def __init__(self, base: TableSchema) -> None:
        self.base = base
        self._root = _Field(0, "", pa.struct([]), True, [_Field.of(n) for n in base.nodes])
        self._highest = base.highest_field_id
        self.changes: list[str] = []  #: what each change did, in words

    # -- lookups ----------------------------------------------------------------------------------------
    def resolve(self, path: str | Sequence[str], *, new: bool = False) -> Path:
        """The path of names ``path`` means: a sequence is taken as it is; a string is the top-level column of
        that exact name, else the field whose dotted name it is (``"geo.lat"``: field ``lat`` of struct ``geo``),
        else (``new``: a column to add) the field after the last dot of a struct named before it
        (``"geo.alt"``), else one name, dots included. :class:`SchemaEvolutionError` when a dotted name fits two
        fields (pass a tuple)."""
        if not isinstance(path, str):
            return as_path(path)
        if not path or "." not in path or any(c.name == path for c in self._root.children):
            return as_path(path)
        if new:
            parent, _, last = path.rpartition(".")
            where = self.resolve(parent)
            return (*where, last) if last and self._is_struct(where) else (path,)
        found = [p for p in self._paths(self._root, ()) if ".".join(p) == path]
        if len(found) > 1:
            raise SchemaEvolutionError(
                f"{path!r} names more than one field ({', '.join(map(str, found))}): give a tuple of names"
            )
        return found[0] if found else (path,)

    def _paths(self, parent: _Field, prefix: Path) -> list[Path]:
        """Every field's path of names under ``parent`` (a struct's fields, at any depth)."""
        out = []
        for c in parent.children:
            out.append((*prefix, c.name))
            if kind_of(c.type) == "struct":
                out += self._paths(c, (*prefix, c.name))
        return out

    def _is_struct(self, path: Path) -> bool:
        try:
            return kind_of(self._get(path).type) == "struct"
        except SchemaEvolutionError:
            return False

    def _find(self, path: Path) -> tuple[_Field, int]:
        """The parent of ``path`` and the index of its last part there."""
        parent = self._root
        for depth, name in enumerate(path):
            names = [c.name for c in parent.children]
            if name not in names:
                where = "the table" if depth == 0 else f"{show_path(path[:depth])}"
                known = ", ".join(repr(n) for n in names) or "none"
                raise SchemaEvolutionError(f"{where} has no column {name!r} (its columns: {known})")
            i = names.index(name)
            if depth == len(path) - 1:
                return parent, i
            parent = parent.children[i]
        raise SchemaEvolutionError("an empty column path names no column")

    def _get(self, path: Path) -> _Field:
        parent, i = self._find(path)
        return parent.children[i]

    def _struct(self, path: Path) -> _Field:
        """The struct (or the top level, for ``()``) that holds the columns of ``path``'s level."""
        if not path:
            return self._root
        f = self._get(path)
        if kind_of(f.type) != "struct":
            raise SchemaEvolutionError(f"{show_path(path)} is a {f.type}, not a struct: it holds no columns")
        return f

    def _check_not_element(self, parent: _Field, what: str, path: Path) -> None:
        if parent is not self._root and kind_of(parent.type) != "struct":
            raise SchemaEvolutionError(
                f"cannot {what} {show_path(path)}: it is the element of a list or the key or value of a map, "
                "not a column"
            )

    def _partition(self, path: Path) -> bool:
        return len(path) == 1 and path[0] in self.base.partition_keys

    def _free_name(self, parent: _Field, name: str, what: str) -> None:
        """Refuse ``name`` for a column of ``parent`` unless it is free; ``what``: the change, for the message."""
        if not isinstance(name, str) or not name:
            raise SchemaEvolutionError(f"cannot {what}: a column name must be a non-empty string, got {name!r}")
        if any(c.name == name for c in parent.children):
            where = "the table" if parent is self._root else "its struct"
            raise SchemaEvolutionError(f"cannot {what}: {where} already has a column {name!r}")

    # -- changes ----------------------------------------------------------------------------------------
    def add_column(
        self,
        path: str | Sequence[str],
        field_type: pa.DataType,
        doc: str | None = None,
        required: bool = False,
    ) -> None:
        """Add a nullable column (the last part of ``path``) at the end of its struct (or of the table)."""
        path = self.resolve(path, new=True)
        parent = self._struct(path[:-1])
        self._free_name(parent, path[-1], f"add {show_path(path)}")
        _check_type(field_type)
        doc = _check_doc(doc)
        if required:
            raise SchemaEvolutionError(
                f"cannot add {show_path(path)} as a required column: the files written before it have no value for it; "
                "add it nullable (required=False)"
            )
        try:
            type_to_json(field_type)
        except UnsupportedTypeError as exc:
            raise SchemaEvolutionError(f"cannot add {show_path(path)}: {exc}") from exc
        nodes = assign_ids([pa.field(path[-1], field_type, nullable=True)], start=self._highest + 1)
        self._highest = max(walk(nodes), key=lambda n: n.id).id
        added = _Field.of(nodes[0])
        added.doc = doc
        parent.children.append(added)
        self.changes.append(f"add {show_path(path)} {field_type} (field id {nodes[0].id})")

    def drop_column(self, path: str | Sequence[str]) -> None:
        """Drop a column (files keep it; readers no longer read it)."""
        path = self.resolve(path)
        parent, i = self._find(path)
        self._check_not_element(parent, "drop", path)
        if self._partition(path):
            raise SchemaEvolutionError(
                f"cannot drop partition column {path[0]!r}: the table's files and folders are partitioned by it"
            )
        if len(parent.children) == 1:
            what = "the table's only column" if parent is self._root else "the only field of its struct"
            raise SchemaEvolutionError(f"cannot drop {show_path(path)}: it is {what}")
        gone = parent.children.pop(i)
        self.changes.append(f"drop {show_path(path)} (field id {gone.id})")

    def rename_column(self, path: str | Sequence[str], new_name: str) -> None:
        """Rename a column (files are matched by id: no file changes)."""
        path = self.resolve(path)
        parent, i = self._find(path)
        self._check_not_element(parent, "rename", path)
        if self._partition(path):
            raise SchemaEvolutionError(
                f"cannot rename partition column {path[0]!r}: partition folders and the manifests' partition "
                "values are keyed by its name"
            )
        f = parent.children[i]
        if new_name == f.name:
            return
        self._free_name(parent, new_name, f"rename {show_path(path)} to {new_name!r}")
        f.name = new_name
        self.changes.append(f"rename {show_path(path)} to {new_name!r} (field id {f.id})")

    def update_column(
        self,
        path: str | Sequence[str],
        field_type: pa.DataType | None = None,
        required: bool | None = None,
        doc: str | None = None,
    ) -> None:
        """Widen a column's type (``field_type``): int8 -> int16 -> int32 -> int64 (unsigned likewise),
        float32 -> float64, decimal precision up with the same scale; anything else is refused.
        ``required=False`` makes it nullable (``True`` is refused for a nullable column); ``doc`` sets its doc."""
        path = self.resolve(path)
        f = self._get(path)
        doc = _check_doc(doc)
        if required:
            if f.nullable:
                raise SchemaEvolutionError(
                    f"cannot make {show_path(path)} required: files written before may hold nulls in it"
                )
        elif required is not None:
            self.make_nullable(path)
        if doc is not None and doc != (f.doc or None):
            f.doc = doc or None
            self.changes.append(f"set the doc of {show_path(path)} (field id {f.id})")
        if field_type is None:
            return
        _check_type(field_type)
        if f.type == field_type and not f.children:
            return
        if self._partition(path):
            raise SchemaEvolutionError(
                f"cannot change the type of partition column {path[0]!r} ({f.type} to {field_type}): its values "
                "name the table's folders and the manifests' partition ranges"
            )
        if f.children or not is_promotion(f.type, field_type):
            raise SchemaEvolutionError(
                f"cannot change {show_path(path)} from {f.to_arrow().type} to {field_type}: only widening is allowed "
                "(int8 -> int16 -> int32 -> int64, float32 -> float64, decimal precision up with the same scale)"
            )
        old, f.type = f.type, field_type
        self.changes.append(f"widen {show_path(path)} from {old} to {field_type} (field id {f.id})")

    def make_nullable(self, path: str | Sequence[str]) -> None:
        """Let a column (or a list's element, a map's value) hold nulls."""
        path = self.resolve(path)
        parent, i = self._find(path)
        f = parent.children[i]
        if kind_of(parent.type) == "map" and i == 0:
            raise SchemaEvolutionError(f"cannot make {show_path(path)} nullable: a map's keys are never null")
        if f.nullable:
            return
        f.nullable = True
        self.changes.append(f"make {show_path(path)} nullable (field id {f.id})")

    def move(
        self,
        path: str | Sequence[str],
        *,
        first: bool = False,
        after: str | Sequence[str] | None = None,
        before: str | Sequence[str] | None = None,
    ) -> None:
        """Move a column within its struct (or the table): first, or right after or before a sibling."""
        path = self.resolve(path)
        parent, i = self._find(path)
        self._check_not_element(parent, "move", path)
        other: str | None = None
        given = after if after is not None else before
        if not first:
            theirs = self.resolve(given) if given is not None else ()
            if len(theirs) > 1 and theirs[:-1] != path[:-1]:
                raise SchemaEvolutionError(
                    f"cannot move {show_path(path)} next to {show_path(theirs)}: columns move only within their own "
                    "struct"
                )
            other = theirs[-1] if theirs else None
        f = parent.children.pop(i)
        try:
            if first:
                parent.children.insert(0, f)
                where = "first"
            else:
                names = [c.name for c in parent.children]
                if other not in names:
                    raise SchemaEvolutionError(
                        f"cannot move {show_path(path)} next to {other!r}: "
                        + ("it is the column itself" if other == f.name else "no such column beside it")
                    )
                j = names.index(other) + (1 if after is not None else 0)
                parent.children.insert(j, f)
                where = f"after {other!r}" if after is not None else f"before {other!r}"
        except BaseException:
            parent.children.insert(i, f)
            raise
        self.changes.append(f"move {show_path(path)} {where} (field id {f.id})")

    def union_by_name(self, schema: pa.Schema) -> None:
        """Add the columns of ``schema`` the table lacks, and the fields its struct columns lack (at any depth):
        what a write with ``schema_mode="merge"`` does. Types of existing columns are left as they are."""
        self._union(self._root, (), list(schema))

    def _union(self, parent: _Field, prefix: Path, fields: list[pa.Field]) -> None:
        names = {c.name for c in parent.children}
        folded = {c.name.casefold(): c.name for c in parent.children}
        for f in fields:  # Spark resolves names case-insensitively: it could not tell 'V' from 'v'
            other = folded.get(f.name.casefold())
            if f.name not in names and other is not None:
                raise SchemaEvolutionError(
                    f"the data's column {show_path((*prefix, f.name))} differs from the table's column "
                    f"{show_path((*prefix, other))} only in case; rename it to {other!r} (names are matched exactly)"
                )
        for f in fields:
            mine = next((c for c in parent.children if c.name == f.name), None)
            if mine is None:
                self.add_column((*prefix, f.name), f.type)
            elif kind_of(mine.type) == "struct" and pa.types.is_struct(f.type):
                self._union(mine, (*prefix, f.name), child_fields(f.type))

    # -- result -----------------------------------------------------------------------------------------
    def result(self, *, upgrade: bool = False, time_millis: int | None = None) -> TableSchema | None:
        """The next schema (id + 1, format version 2), or None if nothing changed and no upgrade is asked for
        (a version-1 base is upgraded by any change). Changes that undo each other (a rename and its reverse, a
        column added then dropped) change nothing."""
        upgrading = upgrade and self.base.format_version < 2
        if (not self.changes or self._root.children == [_Field.of(n) for n in self.base.nodes]) and not upgrading:
            return None
        fields = [c.to_arrow() for c in self._root.children]
        ids = [i for c in self._root.children for i in c.ids()]
        keys = self.base.partition_keys
        self._check_primary_key(fields, ids)
        return TableSchema(
            id=self.base.id + 1,
            arrow_schema=pa.schema(fields),
            partition_keys=keys,
            options=dict(self.base.options),
            time_millis=int(time.time() * 1000) if time_millis is None else time_millis,
            field_ids=tuple(ids) if ids else (),
            highest_field_id=self._highest,
            format_version=max(self.base.format_version, 2),
            primary_keys=self.base.primary_keys,
        )

    def _check_primary_key(self, fields: list[pa.Field], ids: list[int]) -> None:
        """A key table's key columns keep their names, ids and non-null (its rows' buckets and identity hang on
        them): dropping, renaming or making one nullable is refused."""
        if not self.base.primary_keys:
            return
        by_name = {f.name: f for f in fields}
        new_ids = {n.name: n.id for n in TableSchema(0, pa.schema(fields), field_ids=tuple(ids)).nodes} if ids else {}
        for key in self.base.primary_keys:
            f = by_name.get(key)
            if f is None or (new_ids and new_ids.get(key) != self.base.column_ids[key]):
                raise SchemaEvolutionError(
                    f"primary key column {key!r} cannot be dropped or renamed: a key table's rows are identified "
                    "and bucketed by it"
                )
            if f.nullable:
                raise SchemaEvolutionError(f"primary key column {key!r} cannot become nullable")
        roles = (
            (self.base.table_options.sequence_field, "sequence.field, which orders the versions of a key"),
            (self.base.table_options.rowkind_field, "rowkind.field, which says what each written row is"),
        )
        for column, role in roles:
            if column is not None and column in self.base.column_ids and (
                column not in by_name or (new_ids and new_ids.get(column) != self.base.column_ids[column])
            ):
                raise SchemaEvolutionError(f"column {column!r} is the table's {role}: it cannot be dropped or renamed")
        _check_engine_columns(self.base, fields, by_name, new_ids)


def _check_engine_columns(
    base: TableSchema, fields: list[pa.Field], by_name: dict[str, pa.Field], new_ids: dict[str, int]
) -> None:
    """A column that names an aggregate function (``fields.<f>.aggregate-function``) keeps its name, and the new
    schema still suits the table's merge engine (a column added under ``fields.default-aggregate-function=sum``
    must be a number)."""
    options = base.table_options
    for column, _ in options.aggregate_functions:
        if column in base.column_ids and (
            column not in by_name or (new_ids and new_ids.get(column) != base.column_ids[column])
        ):
            raise SchemaEvolutionError(
                f"column {column!r} has the option fields.{column}.aggregate-function: it cannot be dropped or "
                "renamed"
            )
    try:
        check_merge_engine(pa.schema(fields), base.primary_keys, options)
    except InvalidOptionError as exc:
        raise SchemaEvolutionError(f"the change does not suit the table's merge engine: {exc}") from None

