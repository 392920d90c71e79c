"""Table maintenance: snapshot expiration (and what holds it back: consumers), orphan-file removal."""

from lakefmt.maintenance.expire import (
    ExpirationPlan,
    PlannedDeletion,
    apply_expiration,
    expire_snapshots,
    plan_expiration,
    select_expired,
)
from lakefmt.maintenance.holds import HeldBack, Hold, TableHolds, apply_holds, table_holds
from lakefmt.maintenance.orphans import referenced_files, remove_orphan_files
from lakefmt.maintenance.report import FileClass, MaintenanceReport, Progress, classify
from lakefmt.meta.consumers import ConsumerListing, UnreadableConsumer, list_consumers

__all__ = [
    "ConsumerListing",
    "ExpirationPlan",
    "FileClass",
    "HeldBack",
    "Hold",
    "MaintenanceReport",
    "PlannedDeletion",
    "Progress",
    "TableHolds",
    "UnreadableConsumer",
    "apply_expiration",
    "apply_holds",
    "classify",
    "expire_snapshots",
    "list_consumers",
    "plan_expiration",
    "referenced_files",
    "remove_orphan_files",
    "select_expired",
    "table_holds",
]
