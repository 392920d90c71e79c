"""The format's data model and codecs. Pure: no I/O here."""

from lakefmt.spec.codec import FORMAT_VERSION
from lakefmt.spec.consumer import Consumer
from lakefmt.spec.manifest import ColumnStats, DataFile, FileKind, ManifestFileMeta
from lakefmt.spec.message import CommitMessage
from lakefmt.spec.schema import TableSchema
from lakefmt.spec.snapshot import CommitKind, Snapshot, UserMark
from lakefmt.spec.tag import Tag

__all__ = [
    "FORMAT_VERSION",
    "ColumnStats",
    "CommitKind",
    "CommitMessage",
    "Consumer",
    "DataFile",
    "FileKind",
    "ManifestFileMeta",
    "Snapshot",
    "TableSchema",
    "Tag",
    "UserMark",
]
