"""Comparing two schemas of a table by field id: whether files written under one are read whole under another
(:func:`readable_under`: a writer whose schema was replaced while it ran), and what changed from one to the other,
in words (:func:`describe_changes`: ``lakefmt schema --history``). Pure: no I/O."""

from __future__ import annotations

from collections.abc import Sequence

from lakefmt.spec.evolution.promotion import Path, is_promotion, kind_of, show_path
from lakefmt.spec.fields import FieldNode
from lakefmt.spec.schema import TableSchema
from lakefmt.spec.types import DOC_KEY

__all__ = ["describe_changes", "readable_under"]


def readable_under(old: TableSchema, new: TableSchema) -> str | None:
    """None when files written under ``old`` are read whole under ``new`` (every field they hold is still in it,
    by id, with the same type or a widening of it); else why not (a field they hold was dropped). Used when a
    writer's schema was replaced while it ran: committing files whose columns the table no longer has would drop
    their values without a word."""
    if old.id == new.id:
        return None
    for fid, (path, node) in old.by_id.items():
        now = new.by_id.get(fid)
        if now is None:
            return f"column {show_path(path)} (field id {fid}) that they hold is not in schema {new.id}"
        t_old, t_new = node.type, now[1].type
        if kind_of(t_old) != kind_of(t_new) or (
            kind_of(t_old) == "primitive" and t_old != t_new and not is_promotion(t_old, t_new)
        ):
            return (
                f"column {show_path(path)} (field id {fid}) is a {t_old} in their schema and a {t_new} in schema "
                f"{new.id}"
            )
    return None


def describe_changes(old: TableSchema | None, new: TableSchema) -> list[str]:
    """What changed from ``old`` to ``new``, by field id, in words (``lakefmt schema --history``)."""
    if old is None:
        return [f"created with {len(new.arrow_schema)} column(s)"]
    out = []
    if old.format_version < new.format_version:
        out.append(f"upgraded to format version {new.format_version} (field ids assigned in column order)")
    before, after = old.by_id, new.by_id
    for fid, (path, node) in after.items():
        if fid not in before:
            parent = _parent_id(new, path)
            if parent is not None and parent not in before:
                continue  # inside a column added at the same time
            out.append(f"added {show_path(path)} {node.type} (field id {fid})")
            continue
        old_path, old_node = before[fid]
        if old_path[-1] != path[-1]:
            out.append(f"renamed {show_path(old_path)} to {path[-1]!r} (field id {fid})")
        if kind_of(node.type) == "primitive" and node.type != old_node.type:
            out.append(f"widened {show_path(path)} from {old_node.type} to {node.type} (field id {fid})")
        if node.field.nullable and not old_node.field.nullable:
            out.append(f"made {show_path(path)} nullable (field id {fid})")
        if (node.field.metadata or {}).get(DOC_KEY) != (old_node.field.metadata or {}).get(DOC_KEY):
            out.append(f"set the doc of {show_path(path)} (field id {fid})")
    for fid, (path, _node) in before.items():
        if fid not in after and (len(path) == 1 or _parent_id(old, path) in after):
            out.append(f"dropped {show_path(path)} (field id {fid})")
    old_order = [n.id for n in old.nodes if n.id in after]
    new_order = [n.id for n in new.nodes if n.id in before]
    if old_order != new_order:
        out.append("reordered columns: " + ", ".join(repr(n.name) for n in new.nodes))
    return out


def _parent_id(schema: TableSchema, path: Path) -> int | None:
    node: FieldNode | None = None
    nodes: Sequence[FieldNode] = schema.nodes
    for name in path[:-1]:
        node = next((n for n in nodes if n.name == name), None)
        if node is None:
            return None
        nodes = node.children
    return None if node is None else node.id
