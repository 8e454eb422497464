"""Slot accounting: the staleness rule and the record of every slot that got no decision.

A slot of an application with control period ``P`` (s) is ``[k * P, (k + 1) * P)`` seconds since the epoch; its
tick is due at its start and must begin within it:

- a tick that begins more than ``AUTOSCALER_STALE_AFTER_PERIODS`` periods (default 1) after its slot began is
  *stale*: its slot is recorded as ``missed`` (reason ``stale``, with its age) and nothing is applied or learned;
- a tick for a slot that has not begun yet (more than ``EARLY_TOLERANCE_S`` ahead) is *early*: it is counted
  (``early_ticks_total``) and dropped without touching the ledger, so the real tick of that slot still runs.

Every slot of a running application ends up with exactly one ledger row (``Tick``): decided (``done``,
``no_data``) or ``missed`` with a reason. The dispatcher records the missed ones: slots it never claimed (a gap
between the last claimed slot and now: nobody dispatched) and claimed slots whose tick never ran. The reason is
its best inference (``infer_reason``) from what this worker process saw (``autoscaler.control.outages``).
"""

from __future__ import annotations

import logging
import math
from collections.abc import Iterable

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from autoscaler.control import outages
from autoscaler.control.models import ApplicationControl, Tick
from autoscaler.models import Application

log = logging.getLogger(__name__)

#: a tick that arrives this much before its slot begins still runs (clock skew between beat and workers, s)
EARLY_TOLERANCE_S = 0.5
#: at most this many missed rows are written per gap (a week-long pause is counted, not written row by row)
MAX_GAP_ROWS = 200
#: claimed slots remembered until their ledger row is checked (``account_lost``)
MAX_PENDING = 32
EPS_S = 1e-6


class Reason:
    """Why a slot has no decision (the ``reason`` of a missed ledger row and the label of the counter)."""

    STALE = "stale"
    WORKER_DOWN = "worker_down"
    BROKER_DOWN = "broker_down"
    DATABASE_DOWN = "database_down"
    PAUSED = "paused"
    ALL = (STALE, WORKER_DOWN, BROKER_DOWN, DATABASE_DOWN, PAUSED)


def stale_after_periods() -> float:
    """``settings.AUTOSCALER_STALE_AFTER_PERIODS`` (1.0; 0 turns the staleness and earliness rules off, e.g. to
    replay recorded slots)."""
    return float(getattr(settings, "AUTOSCALER_STALE_AFTER_PERIODS", 1.0))


def timing(slot: int, period_s: float, now_s: float) -> tuple[str, float]:
    """``("early" | "stale" | "", age_s)`` of a tick of ``slot`` at ``now_s``; age = now - slot start (s)."""
    age = now_s - slot * period_s
    limit = stale_after_periods()
    if limit <= 0:  # the rule is off (replays of recorded slots)
        return "", age
    if age < -EARLY_TOLERANCE_S:
        return "early", age
    if age > limit * period_s:
        return "stale", age
    return "", age


def slot_starts(start_s: float, end_s: float, period_s: float) -> Iterable[int]:
    """Slots (of period ``period_s``) that begin in ``[start_s, end_s)``."""
    first = math.ceil((start_s - EPS_S) / period_s)
    k = first
    while k * period_s < end_s - EPS_S:
        yield k
        k += 1


def infer_reason(control: ApplicationControl, start_s: float, end_s: float, claimed: bool) -> str:
    """The best guess at why slot ``[start_s, end_s)`` got no decision, from what this worker process saw:

    - ``paused``: the application was seen paused before the slot ended;
    - ``database_down`` / ``broker_down``: this process saw the database fail, or failed to publish or received
      no dispatch for a long time (``outages``), during the slot;
    - ``worker_down``: this process was not dispatching yet when the slot began (it was down or starting, and so,
      as far as it can tell, was every worker);
    - otherwise, a slot nobody dispatched while this worker was up: ``broker_down`` (no dispatch arrived); a
      claimed slot whose tick did not begin in time while the workers were up: ``stale`` (queued too long)."""
    if control.paused_since_s is not None and end_s > control.paused_since_s + EPS_S:
        return Reason.PAUSED
    if outages.DATABASE.overlaps(start_s, end_s):
        return Reason.DATABASE_DOWN
    if outages.BROKER.overlaps(start_s, end_s):
        return Reason.BROKER_DOWN
    if outages.first_dispatch_s is None or start_s < outages.first_dispatch_s - EPS_S:
        return Reason.WORKER_DOWN
    return Reason.STALE if claimed else Reason.BROKER_DOWN


def record_missed(app: Application, slots: list[tuple[int, float, str, str]]) -> int:
    """Write ``missed`` ledger rows for ``(slot, period_s, reason, detail)`` where the slot has no row yet and
    count them per reason. Returns the number of rows written."""
    if not slots:
        return 0
    written: dict[str, int] = {}
    now = timezone.now()
    with transaction.atomic():
        control = ApplicationControl.objects.select_for_update().get(application=app)
        for slot, period_s, reason, detail in slots:
            _, created = Tick.objects.get_or_create(
                application=app,
                slot=slot,
                defaults={
                    "period_s": period_s,
                    "status": Tick.Status.MISSED,
                    "reason": reason,
                    "error": detail,
                    "dry_run": app.dry_run,
                    "finished_at": now,
                },
            )
            if created:
                written[reason] = written.get(reason, 0) + 1
        if written:
            count_missed(control, written)
            control.save(update_fields=["missed_slots", "updated_at"])
    if written:
        log.warning("application %s: missed slots %s", app.pk, written)
    return sum(written.values())


def count_missed(control: ApplicationControl, by_reason: dict[str, int]) -> None:
    counts = dict(control.missed_slots or {})
    for reason, n in by_reason.items():
        counts[reason] = counts.get(reason, 0) + n
    control.missed_slots = counts


def account_gap(app: Application, control: ApplicationControl, new_start_s: float, period_s: float) -> int:
    """Record the slots between the end of the last claimed slot and ``new_start_s`` (nobody dispatched them)."""
    if control.last_dispatched_start_s is None:
        return 0
    prev_end = control.last_dispatched_start_s + (control.last_dispatched_period_s or period_s)
    gap = list(slot_starts(prev_end, new_start_s, period_s))
    if not gap:
        return 0
    rows = []
    for k in gap[-MAX_GAP_ROWS:]:
        start = k * period_s
        reason = infer_reason(control, start, start + period_s, claimed=False)
        rows.append((k, period_s, reason, f"missed: no tick was dispatched ({reason.replace('_', ' ')})"))
    written = record_missed(app, rows)
    if len(gap) > MAX_GAP_ROWS:  # counted, not written
        reason = infer_reason(control, gap[0] * period_s, gap[0] * period_s + period_s, claimed=False)
        with transaction.atomic():
            locked = ApplicationControl.objects.select_for_update().get(pk=control.pk)
            count_missed(locked, {reason: len(gap) - MAX_GAP_ROWS})
            locked.save(update_fields=["missed_slots", "updated_at"])
    return written


def remember_claim(control: ApplicationControl, slot: int, period_s: float) -> None:
    """Remember a claimed slot until ``account_lost`` has seen its ledger row (or recorded it as missed)."""
    with transaction.atomic():
        locked = ApplicationControl.objects.select_for_update().get(pk=control.pk)
        locked.pending_slots = (list(locked.pending_slots or []) + [[slot, period_s]])[-MAX_PENDING:]
        locked.save(update_fields=["pending_slots", "updated_at"])


def account_lost(app: Application, control: ApplicationControl, now_s: float) -> int:
    """Record claimed slots whose tick never ran: once a claimed slot began two periods ago (its tick could no
    longer begin in time: a late redelivery would be stale) and it still has no ledger row, the tick was lost with
    a worker or the broker; a row still ``running`` (failed attempts whose retry never came) is closed as missed."""
    if not any(now_s >= (int(k) + 2) * float(p) for k, p in control.pending_slots or []):
        return 0  # the common case, read from the row the dispatcher holds: no lock, no query
    lost = []
    stuck = 0
    with transaction.atomic():
        locked = ApplicationControl.objects.select_for_update().get(pk=control.pk)
        pending = [(int(k), float(p)) for k, p in locked.pending_slots or []]
        due = [(k, p) for k, p in pending if now_s >= (k + 2) * p]
        if not due:
            return 0
        have = dict(
            Tick.objects.filter(application=app, slot__in=[k for k, _ in due]).values_list("slot", "status")
        )
        for k, p in due:
            reason = infer_reason(locked, k * p, (k + 2) * p, claimed=True)
            if k not in have:
                lost.append((k, p, reason, f"missed: the tick never ran ({reason.replace('_', ' ')})"))
            elif have[k] == Tick.Status.RUNNING and Tick.objects.filter(
                application=app, slot=k, status=Tick.Status.RUNNING
            ).update(
                status=Tick.Status.MISSED,
                reason=reason,
                error=f"missed: the tick's retries did not finish in time ({reason.replace('_', ' ')})",
                finished_at=timezone.now(),
            ):
                stuck += 1
                count_missed(locked, {reason: 1})
        locked.pending_slots = [[k, p] for k, p in pending if (k, p) not in due]
        locked.save(update_fields=["pending_slots", "missed_slots", "updated_at"])
    return stuck + record_missed(app, lost)
