"""The ``lakefmt schema`` and ``lakefmt upgrade`` commands: a table's schema with field ids, the changes per
schema id, and the upgrade of a format-version-1 table to version 2."""

from __future__ import annotations

import argparse
from typing import Any

import lakefmt
from lakefmt.cli.output import _emit, _iso, _when
from lakefmt.spec.evolution.changes import describe_changes
from lakefmt.spec.fields import FieldNode
from lakefmt.spec.types import DOC_KEY

__all__ = ["cmd_schema", "cmd_upgrade"]


def _fields(schema: lakefmt.TableSchema) -> list[dict[str, Any]]:
    """Every field, nested ones too, pre-order: id, path, type, nullable (and doc, if it has one)."""
    rows: list[dict[str, Any]] = []

    def visit(nodes: tuple[FieldNode, ...], prefix: str) -> None:
        for n in nodes:
            path = f"{prefix}{n.name}"
            row = {
                "id": n.id,
                "path": path,
                "type": _type_text(n),
                "nullable": n.field.nullable,
                "partition_key": not prefix and n.name in schema.partition_keys,
            }
            doc = (n.field.metadata or {}).get(DOC_KEY)
            if doc:
                row["doc"] = doc.decode("utf-8", "replace")
            rows.append(row)
            visit(n.children, f"{path}.")

    visit(schema.nodes, "")
    return rows


def _type_text(node: FieldNode) -> str:
    """A leaf's type; for a nested field only its kind (its children are listed after it)."""
    if not node.children:
        return str(node.type)
    return str(node.type).split("<", 1)[0]


def _header(schema: lakefmt.TableSchema) -> dict[str, Any]:
    return {
        "schema_id": schema.id,
        "format_version": schema.format_version,
        "highest_field_id": schema.highest_field_id,
        "partition_keys": list(schema.partition_keys),
        "created_millis": schema.time_millis,
        "created": _iso(schema.time_millis),
    }


def cmd_schema(table: lakefmt.Table, args: argparse.Namespace) -> None:
    """The current schema with field ids, or (``--history``) what changed in each schema id."""
    if args.history:
        rows = []
        previous = None
        for s in table.schemas():
            changes = describe_changes(previous, s)
            previous = s
            if args.json:
                rows.append(
                    {
                        "schema_id": s.id,
                        "format_version": s.format_version,
                        "time_millis": s.time_millis,
                        "time": _iso(s.time_millis),
                        "changes": changes,
                    }
                )
            else:
                rows.append(
                    {
                        "schema": s.id,
                        "version": s.format_version,
                        "created": _when(s.time_millis),
                        "changes": "; ".join(changes) or "(none)",
                    }
                )
        _emit(rows, args.json)
        return
    schema = table.table_schema()
    fields = _fields(schema)
    if args.json:
        _emit({**_header(schema), "fields": fields}, True)
        return
    keys = ", ".join(schema.partition_keys) or "none"
    ids = "field ids implied by column order" if schema.format_version < 2 else "highest field id"
    print(
        f"schema {schema.id} (format version {schema.format_version}, {ids} {schema.highest_field_id}, "
        f"partition keys: {keys})"
    )
    _emit(
        [
            {
                "id": f["id"],
                "column": f["path"],
                "type": f["type"],
                "nullable": "yes" if f["nullable"] else "no",
                "partition": "yes" if f["partition_key"] else "",
                **({"doc": f.get("doc", "")} if any("doc" in g for g in fields) else {}),
            }
            for f in fields
        ],
        False,
    )


def cmd_upgrade(table: lakefmt.Table, args: argparse.Namespace) -> None:
    """Upgrade a format-version-1 table to version 2 (``--dry-run``: say what would be written)."""
    before = table.table_schema()
    after = table.upgrade(dry_run=args.dry_run)
    upgraded = after.format_version > before.format_version
    if args.json:
        _emit(
            {
                "upgraded": upgraded and not args.dry_run,
                "dry_run": args.dry_run,
                "from_format_version": before.format_version,
                **_header(after),
                "fields": _fields(after),
            },
            True,
        )
        return
    if not upgraded:
        print(f"{table.uri} is already format version {before.format_version} (schema {before.id}): nothing to do")
        return
    verb = "would publish" if args.dry_run else "published"
    print(
        f"{verb} schema {after.id}: format version {before.format_version} -> {after.format_version}, field ids "
        "assigned in column order; version-1 readers cannot read the table's new snapshots"
        + (" (nothing written)" if args.dry_run else "")
    )
    _emit([{"id": f["id"], "column": f["path"], "type": f["type"]} for f in _fields(after)], False)
