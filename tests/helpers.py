"""Small helpers the unit and integration tests share (``from helpers import ...``: pytest puts ``tests/`` on
the path, as for ``faults``)."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

import lakefmt
from lakefmt.io import FileIO

__all__ = ["create_table_in", "file_listing", "sorted_ids"]


def create_table_in(store: Any, schema: pa.Schema, **kwargs: Any) -> lakefmt.Table:
    """A new table at a fresh location of a storage fixture (``store.uri()``, with its storage options)."""
    return lakefmt.create_table(store.uri(), schema, storage_options=store.storage_options, **kwargs)


def sorted_ids(t: lakefmt.Table, snapshot_id: int | None = None, **scan: Any) -> list[int]:
    """The ``id`` column of what a scan of ``t`` reads (the latest snapshot by default), sorted."""
    return sorted(t.scan(snapshot_id=snapshot_id, **scan).to_arrow().column("id").to_pylist())


def file_listing(io: FileIO) -> dict[str, int]:
    """Every file under the table root: path relative to the root -> size in bytes."""
    return {f.path: f.size for f in io.walk()}
