"""The commit message: what a writer task hands the committer. Small and picklable by design."""

from __future__ import annotations

from dataclasses import dataclass

from lakefmt.spec.manifest import ManifestFileMeta

__all__ = ["CommitMessage"]


@dataclass(frozen=True)
class CommitMessage:
    """The per-task manifests a writer produced (usually one; none if it wrote no rows).

    It carries only manifest metadata (name, size, counts, partition ranges), never per-file entries, so the
    driver's work does not grow with the number of files a task wrote.
    """

    writer_id: str
    manifests: tuple[ManifestFileMeta, ...] = ()

    @property
    def num_rows(self) -> int:
        return sum(m.num_added_rows for m in self.manifests)
