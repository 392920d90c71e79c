"""Table maintenance: snapshot expiration and orphan-file removal."""

from lakefmt.maintenance.expire import (
    ExpirationPlan,
    PlannedDeletion,
    apply_expiration,
    expire_snapshots,
    plan_expiration,
    select_expired,
)
from lakefmt.maintenance.orphans import referenced_files, remove_orphan_files
from lakefmt.maintenance.report import FileClass, MaintenanceReport, Progress, classify

__all__ = [
    "ExpirationPlan",
    "FileClass",
    "MaintenanceReport",
    "PlannedDeletion",
    "Progress",
    "apply_expiration",
    "classify",
    "expire_snapshots",
    "plan_expiration",
    "referenced_files",
    "remove_orphan_files",
    "select_expired",
]
