"""What a maintenance run deleted (or, in a dry run, would delete): counts and bytes per kind of file."""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from lakefmt.io.paths import is_temp
from lakefmt.maintenance.holds import HeldBack
from lakefmt.progress import Progress  # (re-exported: maintenance takes it too)

__all__ = ["FileClass", "MaintenanceReport", "Progress", "classify"]



class FileClass(enum.Enum):
    """Kinds of files under a table root, as maintenance reports them."""

    SNAPSHOT = "snapshots"
    MANIFEST_LIST = "manifest_lists"
    MANIFEST = "manifests"
    DATA = "data_files"
    DELETION_VECTORS = "deletion_vector_files"
    KEY_INDEX = "key_index_files"
    CHANGELOG = "changelog_files"
    CONSUMER = "consumers"
    TAG = "tags"
    TEMP = "temp_files"
    OTHER = "other_files"


def classify(rel_path: str) -> FileClass:
    """The kind of a file from its path relative to the root."""
    name = rel_path.rsplit("/", 1)[-1]
    if is_temp(rel_path):
        return FileClass.TEMP
    if rel_path.startswith("snapshot/") and name.startswith("snapshot-"):
        return FileClass.SNAPSHOT
    if rel_path.startswith("consumer/") and name.startswith("consumer-"):
        return FileClass.CONSUMER
    if rel_path.startswith("tag/") and name.startswith(("tag-", "pin-")):
        return FileClass.TAG
    if rel_path.startswith("manifest/"):
        return FileClass.MANIFEST_LIST if name.startswith("manifest-list-") else FileClass.MANIFEST
    if rel_path.startswith("changelog/") and name.startswith("changelog-"):
        return FileClass.CHANGELOG
    if name.endswith(".parquet"):
        return FileClass.DATA
    if name.endswith(".puffin"):
        return FileClass.DELETION_VECTORS
    if name.endswith(".keyindex"):
        return FileClass.KEY_INDEX
    return FileClass.OTHER


@dataclass
class MaintenanceReport:
    """Files deleted (or that would be, with ``dry_run``), by kind; plus the snapshot ids expired."""

    operation: str
    dry_run: bool
    deleted: dict[FileClass, list[tuple[str, int]]] = field(default_factory=dict)
    expired_snapshots: list[int] = field(default_factory=list)
    kept_snapshots: tuple[int, int] | None = None  #: (earliest, latest) retained
    held_back: list[HeldBack] = field(default_factory=list)  #: expire: every hold and what it kept
    expired_consumers: list[str] = field(default_factory=list)  #: expire: consumers whose records went
    expired_tags: list[str] = field(default_factory=list)  #: expire: tags past their retain time, deleted
    #: expire: the rules applied (per rule: its option key, value, shown value and source: argument, option or
    #: default) and why the kept snapshots were kept, in one sentence
    retention: dict[str, Any] | None = None
    kept_reason: str | None = None

    def add(self, kind: FileClass, path: str, size: int) -> None:
        self.deleted.setdefault(kind, []).append((path, size))

    def count(self, kind: FileClass) -> int:
        return len(self.deleted.get(kind, []))

    def bytes(self, kind: FileClass) -> int:
        return sum(s for _, s in self.deleted.get(kind, []))

    @property
    def total_files(self) -> int:
        return sum(len(v) for v in self.deleted.values())

    @property
    def total_bytes(self) -> int:
        return sum(s for v in self.deleted.values() for _, s in v)

    @property
    def paths(self) -> list[str]:
        return sorted(p for v in self.deleted.values() for p, _ in v)

    def __repr__(self) -> str:
        what = f"{self.operation}{' (dry run)' if self.dry_run else ''}"
        expired = f", expired_snapshots={len(self.expired_snapshots)}" if self.operation == "expire" else ""
        kept = f", kept={self.kept_snapshots[0]}..{self.kept_snapshots[1]}" if self.kept_snapshots else ""
        verb = "would delete" if self.dry_run else "deleted"
        return f"MaintenanceReport({what}{expired}{kept}, {verb} {self.total_files} file(s), {self.total_bytes} bytes)"

    def to_dict(self) -> dict[str, Any]:
        """A JSON-ready summary (``--json``)."""
        out: dict[str, Any] = {
            "operation": self.operation,
            "dry_run": self.dry_run,
            "expired_snapshots": self.expired_snapshots,
            "kept_snapshots": list(self.kept_snapshots) if self.kept_snapshots else None,
        }
        if self.operation == "expire":
            out["held_back"] = [h.to_dict() for h in self.held_back]
            out["expired_consumers"] = self.expired_consumers
            out["expired_tags"] = self.expired_tags
            out["retention"] = self.retention
            out["kept_reason"] = self.kept_reason
        out.update(
            {
                "files": {k.value: {"count": self.count(k), "bytes": self.bytes(k)} for k in FileClass},
                "total_files": self.total_files,
                "total_bytes": self.total_bytes,
                "paths": self.paths,
            }
        )
        return out
