"""The fault suite's audit of what the control plane recorded (never of wall-clock windows).

For an application and a time range it checks, from the ledger (``Tick``), the decision log and the engine:

- every slot is accounted for: consecutive ledger rows leave no whole slot uncovered (a period change may leave
  less than one new period between the old slot's end and the new boundary) and never overlap;
- each row is final: decided (``done`` / ``no_data``) or ``missed`` with a known reason; none left running;
- exactly one decision per (operator, slot) of a decided row, none for a missed one;
- no stale decision: every decided row's tick began (``Tick.began_at``: it got the application's lock and passed
  the staleness check) within its slot (start + one period), as the tick recorded it, not within a wall-clock
  allowance; the engine received no more reconfigurations than the ledger has plans.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.db.models import Count

from autoscaler.control.models import Decision, SimulatedEngine, Tick
from autoscaler.control.slots import Reason
from autoscaler.models import Application

EPS_S = 1e-6


@dataclass
class Audit:
    rows: list[Tick]
    problems: list[str] = field(default_factory=list)
    missed: dict[str, int] = field(default_factory=dict)
    decided: int = 0
    stale_applies: int = 0

    def recovery(self, fault_end_s: float) -> tuple[int, float]:
        """(slots, seconds) from the fault's end to the first slot decided after it: slots from the one in which
        the fault ended, counted in the decided slot's period; seconds from the fault's end to the decision."""
        for r in self.rows:
            if r.status in ("done", "no_data") and r.created_at.timestamp() >= fault_end_s:
                return r.slot - int(fault_end_s // r.period_s), r.created_at.timestamp() - fault_end_s
        return 10**9, float("inf")


def audit(app: Application, start_s: float, end_s: float) -> Audit:
    """Audit the ledger rows of ``app`` whose slot begins in ``[start_s, end_s)`` (s since the epoch)."""
    rows = sorted(
        (r for r in Tick.objects.filter(application=app) if start_s - EPS_S <= r.slot * r.period_s < end_s),
        key=lambda r: r.slot * r.period_s,
    )
    out = Audit(rows)
    n_ops = app.operators.exclude(kind="source").exclude(kind="sink").count()
    counts = dict(
        Decision.objects.filter(tick__in=rows)
        .values_list("tick_id")
        .annotate(n=Count("id"))
        .values_list("tick_id", "n")
    )
    dup = (
        Decision.objects.filter(tick__in=rows)
        .values("slot", "operator")
        .annotate(n=Count("id"))
        .filter(n__gt=1)
        .count()
    )
    if dup:
        out.problems.append(f"{dup} (operator, slot) pairs with more than one decision")
    prev = None
    for r in rows:
        start, period = r.slot * r.period_s, r.period_s
        if prev is not None:
            prev_end = (prev.slot + 1) * prev.period_s
            if start < prev_end - EPS_S:
                out.problems.append(f"slot {r.slot} ({start}) overlaps slot {prev.slot}")
            elif start - prev_end >= period - EPS_S:
                out.problems.append(f"no ledger row for [{prev_end}, {start}): a slot is unaccounted for")
        prev = r
        if r.status == Tick.Status.MISSED:
            if r.reason not in Reason.ALL:
                out.problems.append(f"slot {r.slot} missed without a known reason: {r.reason!r}")
            out.missed[r.reason] = out.missed.get(r.reason, 0) + 1
            if counts.get(r.pk):
                out.problems.append(f"missed slot {r.slot} has decisions")
            continue
        if r.status not in (Tick.Status.DONE, Tick.Status.NO_DATA):
            out.problems.append(f"slot {r.slot} left {r.status}")
            continue
        out.decided += 1
        if counts.get(r.pk, 0) != n_ops:
            out.problems.append(f"slot {r.slot}: {counts.get(r.pk, 0)} decisions for {n_ops} operators")
        if r.began_at is None:
            out.problems.append(f"slot {r.slot} decided without a recorded start (began_at)")
            continue
        late = r.began_at.timestamp() - (start + period)
        if late > EPS_S:
            out.stale_applies += int(bool(r.plan))
            out.problems.append(
                f"slot {r.slot} decided by a tick that began {late:.3f} s after its slot ended (stale)"
            )
    engine = SimulatedEngine.objects.filter(application=app).first()
    plans = Tick.objects.filter(application=app, plan__isnull=False).count()
    if engine is not None and engine.applies > plans:
        out.problems.append(f"the engine received {engine.applies} reconfigurations for {plans} plans")
    return out
