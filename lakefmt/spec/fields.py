"""Field ids (format version 2): every field of a schema, at any depth, has an id that is never reused.

A schema's fields form a tree: a struct's children are its fields, a list's child is its element, a map's
children are its key and value. Ids are stored in a schema file next to each field, and in data files as the
Parquet field id (Arrow field metadata ``PARQUET:field_id``), so that a reader can match a file's columns to
the table's by id: a rename never touches data files, and a column dropped then added again under the same name
is a different column.

Fresh ids are assigned as Iceberg assigns them: all the fields of a struct first, in order, then each field's
children, depth first. For the top level that is column order (1, 2, 3, ...), which is also how a version-1
schema's *implied* ids are defined (a version-1 schema file stores no ids).
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import pyarrow as pa

__all__ = [
    "FIELD_ID_KEY",
    "FieldNode",
    "annotate",
    "assign_ids",
    "child_fields",
    "count_fields",
    "flat_ids",
    "index_nodes",
    "make_nodes",
    "walk",
    "with_children",
]

#: the Arrow field metadata key pyarrow maps to (and from) the Parquet field id
FIELD_ID_KEY = b"PARQUET:field_id"


def child_fields(t: pa.DataType) -> list[pa.Field]:
    """The child fields of a type: a struct's fields, a list's element, a map's key and value; else none."""
    if pa.types.is_struct(t):
        return [t.field(i) for i in range(t.num_fields)]
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return [t.value_field]
    if pa.types.is_map(t):
        return [t.key_field, t.item_field]
    return []


def with_children(t: pa.DataType, children: Sequence[pa.Field]) -> pa.DataType:
    """``t`` with its child fields replaced (same kind of type; see :func:`child_fields`)."""
    if pa.types.is_struct(t):
        return pa.struct(list(children))
    if pa.types.is_large_list(t):
        return pa.large_list(children[0])
    if pa.types.is_list(t):
        return pa.list_(children[0])
    if pa.types.is_map(t):
        return pa.map_(children[0], children[1], t.keys_sorted)
    if children:
        raise TypeError(f"type {t} has no child fields")
    return t


def count_fields(f: pa.Field) -> int:
    """How many fields ``f`` is, itself included (each needs an id)."""
    return 1 + sum(count_fields(c) for c in child_fields(f.type))


@dataclass(frozen=True)
class FieldNode:
    """One field of a schema and its id, with its children's nodes (same order as :func:`child_fields`)."""

    id: int
    field: pa.Field
    children: tuple[FieldNode, ...] = ()

    @property
    def name(self) -> str:
        return str(self.field.name)

    @property
    def type(self) -> pa.DataType:
        return self.field.type

    def child(self, name: str) -> FieldNode | None:
        """The child node named ``name`` (a struct field, ``item``/``element`` of a list, ``key``/``value``)."""
        return next((c for c in self.children if c.name == name), None)


def make_nodes(fields: Iterable[pa.Field], ids: Sequence[int]) -> tuple[FieldNode, ...]:
    """The nodes of ``fields`` given their ids in pre-order (a field, then its children's subtrees, in order):
    the order a schema file lists them in. ``ValueError`` if the count does not match."""
    it = iter(ids)

    def build(f: pa.Field) -> FieldNode:
        try:
            fid = next(it)
        except StopIteration:
            raise ValueError("fewer field ids than fields") from None
        return FieldNode(fid, f, tuple(build(c) for c in child_fields(f.type)))

    nodes = tuple(build(f) for f in fields)
    if next(it, None) is not None:
        raise ValueError("more field ids than fields")
    return nodes


def assign_ids(fields: Sequence[pa.Field], start: int = 1) -> tuple[FieldNode, ...]:
    """Fresh ids from ``start`` on: the fields of a struct (or the top level) first, then each one's children."""
    counter = itertools.count(start)

    def level(fs: Sequence[pa.Field]) -> list[FieldNode]:
        ids = [next(counter) for _ in fs]
        return [FieldNode(i, f, tuple(level(child_fields(f.type)))) for i, f in zip(ids, fs, strict=True)]

    return tuple(level(list(fields)))


def walk(nodes: Iterable[FieldNode]) -> Iterator[FieldNode]:
    """Every node, pre-order."""
    for n in nodes:
        yield n
        yield from walk(n.children)


def flat_ids(nodes: Iterable[FieldNode]) -> list[int]:
    """The ids in pre-order (as a schema file stores them)."""
    return [n.id for n in walk(nodes)]


def index_nodes(nodes: Iterable[FieldNode]) -> dict[int, tuple[tuple[str, ...], FieldNode]]:
    """Every node by id, with its path of names from the top level."""
    out: dict[int, tuple[tuple[str, ...], FieldNode]] = {}

    def visit(ns: Iterable[FieldNode], prefix: tuple[str, ...]) -> None:
        for n in ns:
            out[n.id] = ((*prefix, n.name), n)
            visit(n.children, (*prefix, n.name))

    visit(nodes, ())
    return out


def annotate(nodes: Sequence[FieldNode]) -> pa.Schema:
    """The Arrow schema of ``nodes`` with each field's id as ``PARQUET:field_id`` metadata, at every depth (what a
    data file is written with)."""

    def field(n: FieldNode) -> pa.Field:
        t = with_children(n.type, [field(c) for c in n.children]) if n.children else n.type
        meta = dict(n.field.metadata or {})
        meta[FIELD_ID_KEY] = str(n.id).encode()
        return pa.field(n.name, t, nullable=n.field.nullable, metadata=meta)

    return pa.schema([field(n) for n in nodes])
