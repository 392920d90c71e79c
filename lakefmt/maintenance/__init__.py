"""Table maintenance: snapshot expiration and orphan-file removal."""

from lakefmt.maintenance.expire import expire_snapshots, select_expired
from lakefmt.maintenance.orphans import referenced_files, remove_orphan_files
from lakefmt.maintenance.report import FileClass, MaintenanceReport, Progress, classify

__all__ = [
    "FileClass",
    "MaintenanceReport",
    "Progress",
    "classify",
    "expire_snapshots",
    "referenced_files",
    "remove_orphan_files",
    "select_expired",
]
