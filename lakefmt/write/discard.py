"""Deleting what a write produced when its commit is known never to land (a replayed batch that dedup skipped, a
job given up on, a commit refused before its publish). Best effort: orphan-clean is the backstop. Never for a
commit that may have landed: its files may be referenced by a snapshot."""

from __future__ import annotations

import contextlib
from collections.abc import Sequence

from lakefmt.errors import LakefmtError
from lakefmt.io import FileIO
from lakefmt.meta import entries as ents
from lakefmt.meta.store import MetaStore
from lakefmt.spec import CommitMessage, layout
from lakefmt.write.writer import TableWriter

__all__ = ["discard_messages", "discard_written"]


def discard_messages(io: FileIO, store: MetaStore, messages: Sequence[CommitMessage]) -> None:
    """Delete the data files and per-task manifests of ``messages`` (read from their manifests, every path checked
    to be inside the table)."""
    for message in messages:
        for meta in message.manifests:
            with contextlib.suppress(LakefmtError, OSError):
                entries = store.manifest(meta.file_name)
                ents.check_data_paths(entries, f"manifest {meta.file_name}")
                store.forget_manifest(meta.file_name)  # a later commit of it must find it gone
                for path in ents.paths(entries):
                    io.delete(path)
                    if path.endswith(".parquet"):
                        io.delete(layout.key_index_path(path))  # its key index, if it has one
                io.delete(layout.manifest_path(meta.file_name))


def discard_written(io: FileIO, message: CommitMessage, writer: TableWriter) -> None:
    """Delete the files ``writer`` wrote and the manifests of its ``message`` (the writer knows its files: no
    manifest needs reading)."""
    paths = writer.begun_paths + [layout.manifest_path(m.file_name) for m in message.manifests]
    for path in paths:
        with contextlib.suppress(Exception):
            io.delete(path)
