"""Compaction: groups of small files planned (:mod:`.plan`, :mod:`.buckets`), rewritten and committed as one COMPACT
snapshot (:mod:`.run`) with the deletion vectors of the buckets it rewrote (:mod:`.vectors`); plan and report types.
Imports spec, io, meta, read, commit, write, rewrite.base and the key buckets (rewrite.keys.buckets); never merge."""
