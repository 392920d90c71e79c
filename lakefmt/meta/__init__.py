"""The metadata layer under commit, read and maintenance: the store of a table's metadata files (snapshots,
schemas, manifest lists, manifests) and the entries algebra every layer shares. Knows the format, does I/O
only through a FileIO."""

from lakefmt.meta.store import MetaStore

__all__ = ["MetaStore"]
