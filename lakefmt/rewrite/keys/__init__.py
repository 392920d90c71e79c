"""The upsert's path on key tables: ``Table.upsert`` (:mod:`.upsert`), the planners marking old rows (:mod:`.planners`),
finding them by key (:mod:`.find`, :mod:`.lookup`, :mod:`.stored`, :mod:`.buckets`), merge engines, stored changelogs.
Imports spec (its key hash and index files: :mod:`lakefmt.spec.keys`), io, meta, read, commit, write, rewrite.base."""
