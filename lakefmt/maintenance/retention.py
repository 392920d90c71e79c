"""Which retention rules an expiration applies, where each came from, and why it kept what it kept.

Every rule not given as an argument comes from the table's options, and an option absent from the table takes
its default (:class:`lakefmt.options.TableOptions`): ``snapshot.num-retained.min`` 10,
``snapshot.num-retained.max`` no limit, ``snapshot.time-retained`` 1 hour, as in Paimon. So
``Table.expire_snapshots()`` and ``lakefmt expire T`` with no argument do what a commit's automatic expiration
does, and say why they kept what they kept (:func:`explain`).

A ``retain_max`` given as an argument below the table's ``snapshot.num-retained.min`` lowers the minimum to it
(the caller asked for at most that many); given below a ``retain_min`` also given, it is refused.
"""

from __future__ import annotations

import time
import weakref
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from lakefmt.errors import InvalidOptionError
from lakefmt.io import FileIO
from lakefmt.maintenance.expire import ExpirationPlan, apply_expiration, plan_expiration
from lakefmt.maintenance.report import MaintenanceReport, Progress
from lakefmt.meta.store import MetaStore
from lakefmt.options import TableOptions
from lakefmt.spec import Snapshot, layout
from lakefmt.units import format_duration_ms

__all__ = [
    "Retention",
    "Rule",
    "expiration_due",
    "expire_with_retention",
    "explain",
    "note_automatic_run",
    "resolve_retention",
]

#: where a rule's value came from
Source = Literal["argument", "option", "default"]


@dataclass(frozen=True)
class Rule:
    """One retention rule: its table option key, its value (None: no limit) and where the value came from."""

    option: str
    value: int | None
    source: Source

    def label(self) -> str:
        """``snapshot.time-retained=1h (default)``."""
        shown = "none" if self.value is None else self.shown()
        return f"{self.option}={shown} ({'table option' if self.source == 'option' else self.source})"

    def shown(self) -> str:
        if self.value is None:
            return "none"
        return format_duration_ms(self.value) if self.option == "snapshot.time-retained" else str(self.value)

    def to_dict(self) -> dict[str, Any]:
        return {"option": self.option, "value": self.value, "shown": self.shown(), "source": self.source}


@dataclass(frozen=True)
class Retention:
    """The three rules an expiration applies (``older_than`` in milliseconds)."""

    retain_min: Rule
    retain_max: Rule
    older_than: Rule

    def to_dict(self) -> dict[str, Any]:
        return {
            "retain_min": self.retain_min.to_dict(),
            "retain_max": self.retain_max.to_dict(),
            "older_than_ms": self.older_than.to_dict(),
        }


def resolve_retention(
    options: Mapping[str, str],
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
) -> Retention:
    """The rules for an expiration: each argument given, else the table's option, else its default."""
    parsed = TableOptions.from_map(options)
    for name, value in (("retain_min", retain_min), ("retain_max", retain_max)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
            raise InvalidOptionError(f"{name} must be a whole number of at least 1, got {value!r}")

    def src(key: str, given: object) -> Source:
        return "argument" if given is not None else ("option" if key in options else "default")

    low_key, high_key, age_key = "snapshot.num-retained.min", "snapshot.num-retained.max", "snapshot.time-retained"
    high_value = retain_max if retain_max is not None else parsed.snapshot_retained_max
    high = Rule(high_key, high_value, src(high_key, retain_max))
    low_value = retain_min if retain_min is not None else parsed.snapshot_retained_min
    low_source = src(low_key, retain_min)
    if high.value is not None and low_value > high.value:
        # a maximum given below the table's minimum, or a table maximum below the default minimum (options that
        # predate the check) lowers the minimum to it; two given, or both the table's own, contradict each other
        if retain_min is not None or (retain_max is None and low_source == "option"):
            raise InvalidOptionError(
                f"{low_key} ({low_value}) must not be larger than {high_key} ({high.value}); set both"
                if retain_min is None
                else f"retain_min ({low_value}) must not be larger than retain_max ({high.value})"
            )
        low_value, low_source = high.value, high.source
    low = Rule(low_key, low_value, low_source)
    age_value = older_than_ms if older_than_ms is not None else parsed.snapshot_time_retained_ms
    return Retention(low, high, Rule(age_key, age_value, src(age_key, older_than_ms)))


#: the earliest snapshot each store was last seen to have, for :func:`expiration_due` (snapshots are immutable,
#: and the earliest only ever moves forward: a remembered one can only make the check say "due" too early)
_EARLIEST: weakref.WeakKeyDictionary[MetaStore, Snapshot] = weakref.WeakKeyDictionary()

#: the automatic expiration waits until the oldest snapshot is older than ``snapshot.time-retained`` by this
#: share of it (at most :data:`MAX_SLACK_MS`), so that one run expires a batch of snapshots instead of one per
#: commit; ``lakefmt expire`` and ``Table.expire_snapshots`` apply the rule exactly
SLACK_SHARE = 0.1
#: until when (epoch milliseconds) the automatic expiration of a store is skipped: its last run expired nothing
_QUIET: weakref.WeakKeyDictionary[MetaStore, int] = weakref.WeakKeyDictionary()
MAX_SLACK_MS = 600_000


def expiration_due(store: MetaStore, retention: Retention, latest: Snapshot, now_ms: int) -> bool:
    """Whether the automatic expiration after a commit should run: more than ``retain_min`` snapshots and either
    more than ``retain_max`` or the oldest older than ``snapshot.time-retained`` (plus a tenth of it, at most 10
    minutes: :data:`SLACK_SHARE`). Cheap: nothing is read while the earliest snapshot seen last says "not due";
    otherwise the EARLIEST hint and that one snapshot. True when unsure. Holds only ever keep more, so they need
    no reading here."""
    low, high, age = retention.retain_min.value or 1, retention.retain_max.value, retention.older_than.value
    slack = 0 if age is None else min(int(age * SLACK_SHARE), MAX_SLACK_MS)
    # a run found nothing to expire by age a moment ago (a consumer holds the snapshots back): wait the slack
    quiet = now_ms < _QUIET.get(store, 0)

    def due(earliest_id: int, earliest: Snapshot | None) -> bool:
        count = latest.id - earliest_id + 1
        if count <= low:
            return False
        if high is not None and count > high:
            return True
        if age is None or quiet:
            return False
        return earliest is None or earliest.time_millis < now_ms - age - slack

    seen = _EARLIEST.get(store)
    if seen is not None and seen.id <= latest.id and not due(seen.id, seen):
        return False
    earliest_id = store.read_hint(layout.EARLIEST) or 1
    if earliest_id > latest.id:
        return True
    earliest = seen if seen is not None and seen.id == earliest_id else store.try_snapshot(earliest_id)
    if earliest is not None:
        _EARLIEST[store] = earliest
    return due(earliest_id, earliest)


def note_automatic_run(store: MetaStore, report: object, retention: Retention, now_ms: int) -> None:
    """After an automatic expiration: if it expired nothing (a consumer holds the snapshots back), the next
    commits skip the age check for the slack time (a tenth of ``snapshot.time-retained``, at most 10 minutes)
    rather than plan the same empty run after each commit (``snapshot.num-retained.max`` is still checked)."""
    if isinstance(report, MaintenanceReport) and not report.expired_snapshots:
        age = retention.older_than.value
        _QUIET[store] = now_ms + (0 if age is None else min(int(age * SLACK_SHARE), MAX_SLACK_MS))


def expire_with_retention(
    io: FileIO,
    store: MetaStore,
    *,
    retain_min: int | None = None,
    retain_max: int | None = None,
    older_than_ms: int | None = None,
    now_ms: int | None = None,
    dry_run: bool = False,
    progress: Progress | None = None,
) -> MaintenanceReport:
    """Expire by the rules :func:`resolve_retention` gives; the report carries them and :func:`explain`'s
    sentence (``report.retention``, ``report.kept_reason``)."""
    now = int(time.time() * 1000) if now_ms is None else now_ms
    retention = resolve_retention(
        store.latest_schema(refresh=True).options,
        retain_min=retain_min,
        retain_max=retain_max,
        older_than_ms=older_than_ms,
    )
    plan = plan_expiration(
        store,
        retain_min=retention.retain_min.value or 1,
        retain_max=retention.retain_max.value,
        older_than_ms=retention.older_than.value,
        now_ms=now,
    )
    report = apply_expiration(io, store, plan, dry_run=dry_run, progress=progress)
    report.retention = retention.to_dict()
    report.kept_reason = explain(retention, plan, now)
    return report


def explain(retention: Retention, plan: ExpirationPlan, now_ms: int) -> str:
    """Why ``plan`` keeps what it keeps, in one sentence (the same for a dry run): ``kept 10 snapshots (6..15):
    at least snapshot.num-retained.min=10 (default); none older than snapshot.time-retained=1h (default)``."""
    if plan.kept is None:
        return "the table has no snapshot"
    first, last = plan.kept
    kept = last - first + 1
    head = f"kept {kept} snapshot{'' if kept == 1 else 's'} ({first}..{last})"
    low, high, age = retention.retain_min, retention.retain_max, retention.older_than
    reasons: list[str] = []
    holds = [h for h in plan.held if h.snapshots]
    reasons.append(f"at least {low.label()}" if kept <= (low.value or 1) else f"more than {low.label()}")
    if high.value is not None:
        reasons.append(f"at most {high.label()}")
    if age.value is not None:
        horizon = now_ms - age.value
        old = sum(1 for t in plan.kept_times if t < horizon)
        reasons.append(f"none older than {age.label()}" if old == 0 else f"{old} older than {age.label()}")
    for h in holds:
        reasons.append(f"{h.hold.kind} {h.hold.name!r} holds {h.snapshots} more (from snapshot {h.hold.snapshot_id})")
    return f"{head}: {'; '.join(reasons)}"
