"""Which schema a commit records, and whether the writers' files may be committed under it.

A schema change publishes ``schema/schema-<n>`` and then a snapshot that records it (no files added or removed:
:class:`~lakefmt.commit.schema_change.SchemaChangeProducer`), so every committer, which reads the latest snapshot
anyway, learns of the change without listing the schema folder. A data commit records the newest schema it knows
of: its own table's (cached), the latest snapshot's, or that of the files it commits, whichever is newest, so a
snapshot's schema id never goes back. Files written under an older schema are committed as they are (readers map
them by field id) when every column they hold is still in the recorded schema; a column that was dropped while
they were written would lose its values without a word, so such a commit fails with
:class:`~lakefmt.errors.SchemaConflictError` and commits nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from lakefmt.errors import SchemaConflictError
from lakefmt.meta.store import MetaStore
from lakefmt.spec import ManifestFileMeta, Snapshot, TableSchema
from lakefmt.spec.evolution.changes import readable_under

__all__ = ["commit_schema"]


def commit_schema(store: MetaStore, latest: Snapshot | None, added: Sequence[ManifestFileMeta]) -> TableSchema:
    """The schema a snapshot built on ``latest`` with the writers' manifests ``added`` records (see the module
    docstring); :class:`SchemaConflictError` if some of their files cannot be read whole under it."""
    schema = store.schema_for(latest)
    written = {m.schema_id for m in added}
    if written and max(written) > schema.id:  # a writer that knew a newer schema than this process
        schema = store.latest_schema(refresh=True)
        if max(written) > schema.id:
            schema = store.schema(max(written))
    for sid in sorted(written - {schema.id}):
        reason = readable_under(store.schema(sid), schema)
        if reason is not None:
            raise SchemaConflictError(
                f"the table's schema changed to schema {schema.id} while files were written under schema {sid}: "
                f"{reason}, so committing them would lose its values; nothing was committed (write again with the "
                "current schema)"
            )
    return schema
