"""Small helpers the unit and integration tests share (``from helpers import ...``: pytest puts ``tests/`` on
the path, as for ``faults``)."""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Iterator
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow as pa

import lakefmt
from lakefmt.io import FileIO

__all__ = ["clear_read_caches", "create_table_in", "file_listing", "load_tool", "sorted_ids", "stream_until_caught_up"]

REPO = Path(__file__).resolve().parents[1]


def create_table_in(store: Any, schema: pa.Schema, **kwargs: Any) -> lakefmt.Table:
    """A new table at a fresh location of a storage fixture (``store.uri()``, with its storage options)."""
    return lakefmt.create_table(store.uri(), schema, storage_options=store.storage_options, **kwargs)


def sorted_ids(t: lakefmt.Table, snapshot_id: int | None = None, **scan: Any) -> list[int]:
    """The ``id`` column of what a scan of ``t`` reads (the latest snapshot by default), sorted."""
    return sorted(t.scan(snapshot_id=snapshot_id, **scan).to_arrow().column("id").to_pylist())


def file_listing(io: FileIO) -> dict[str, int]:
    """Every file under the table root: path relative to the root -> size in bytes."""
    return {f.path: f.size for f in io.walk()}


def load_tool(name: str) -> ModuleType:
    """The script ``tools/<name>.py`` as a module (the tools are scripts, not a package), loaded once per process."""
    module_name = f"lakefmt_tools_{name}"
    if module_name in sys.modules:
        return sys.modules[module_name]
    spec = importlib.util.spec_from_file_location(module_name, REPO / "tools" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def clear_read_caches() -> Iterator[None]:
    """A fixture body: the decoded-vector and key-index caches emptied before and after a test, so a test that
    damages a vector file reads it again instead of a clean copy cached by an earlier test."""
    from lakefmt.read import masks
    from lakefmt.rewrite.keys.planners import key_cache_clear

    masks._cache.clear()
    key_cache_clear()
    yield
    masks._cache.clear()
    key_cache_clear()


def stream_until_caught_up(spark: Any, source: str, target: str, checkpoint: Path, **options: object) -> Any:
    """Stream the lakefmt table ``source`` into the lakefmt table ``target`` until caught up
    (Trigger.AvailableNow), each option given as text; the finished query."""
    read = spark.readStream.format("lakefmt")
    for key, value in options.items():
        read = read.option(key, str(value))
    query = (
        read.load(source)
        .writeStream.format("lakefmt")
        .option("checkpointLocation", str(checkpoint))
        .option("createTable", "true")
        .trigger(availableNow=True)
        .start(target)
    )
    query.awaitTermination()
    return query
