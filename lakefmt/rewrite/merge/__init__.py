"""MERGE INTO: the statement (:mod:`.run`), its reads (:mod:`.reads`), the rows each clause produces (:mod:`.rows`),
its join keys and its commit (:mod:`.commit`: copy-on-write, or deletion vectors through the key path's planners).
Imports spec, io, meta, read, commit, write, rewrite.base and rewrite.keys; never compact."""
