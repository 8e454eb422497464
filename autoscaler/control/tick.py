"""One control tick of one application: monitor -> OM steps -> rails + AM arbitration -> execute.

A tick is identified by ``(application, slot)``; slot ``s`` starts at ``s * T_OM`` seconds since the epoch and
observes period ``s - 1``. Guarantees:

- idempotent: the ledger row ``Tick(application, slot)`` is created/locked with ``select_for_update``; a tick whose
  row is done is a duplicate and does nothing (no apply, no learning);
- serialised per application: the whole tick holds a PostgreSQL session advisory lock on the application (released
  by the server if the worker dies); other applications are not blocked;
- atomic learning: agent states, decision records, aggregates and the ledger's move to ``applying``/``done``
  commit in one transaction;
- the engine apply happens after that commit, outside any transaction; a tick found ``applying`` (worker died
  during the apply) is reconciled against the engine's ``current()`` instead of being applied again;
- incomplete metrics: "no data" decisions, no action, no learning; when the connector's typed cause says the job
  is failing (``connectors.base.FAILING_CAUSES``) right after a verified reconfiguration, the rollback rail
  restores the deployments before it (the cause, never the reason text: each engine words it its own way);
- learning in order: a tick whose slot starts no later than the newest slot already decided is recorded as
  ``missed`` (reason ``stale``) and learns nothing; a stale or early tick is stopped before this module by the
  task (``autoscaler.control.slots``), ``skip_stale_tick`` records it.
"""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from autoscaler.control import aggregates, consolidation
from autoscaler.control import status as deployment_status
from autoscaler.control.agents import load_policy
from autoscaler.control.app_state import AmConfig, AppMemory
from autoscaler.control.decide import decide_period
from autoscaler.control.json_safe import finite
from autoscaler.control.locks import application_lock
from autoscaler.control.models import (
    AgentState,
    ApplicationControl,
    Decision,
    Tick,
)
from autoscaler.control.om_config import naive_configuration
from autoscaler.control.rails import Rails, effective_rails_data, parse_rails
from autoscaler.control.topology import Topology, topology
from autoscaler.models import Application
from connectors.base import FAILING_CAUSES, ApplyResult, Cause, Connector, Period, PeriodMetrics, ScalingPlan

LATENCY_BUCKETS_S = (0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0)


@dataclass
class TickOutcome:
    application_id: int
    slot: int
    status: str
    duplicate: bool = False
    applied: bool = False
    reconciled: bool = False
    decisions: int = 0


def slot_of(now_s: float, period_s: float) -> int:
    """The slot index containing time ``now_s`` (s since the epoch) for a period of ``period_s`` seconds."""
    return int(now_s // period_s)


#: definitions cache: application id -> (updated_at, expiry (monotonic s), topology, connector)
_DEFINITIONS: dict[int, tuple[Any, float, Topology, Connector]] = {}
DEFINITIONS_TTL_S = 30.0


def definitions(app: Application, connector: Connector | None = None) -> tuple[Topology, Connector]:
    """The application's topology and connector, cached per process for ``DEFINITIONS_TTL_S`` seconds or until
    the Application row changes (deployment edits are picked up within the TTL)."""
    now = time.monotonic()
    cached = _DEFINITIONS.get(app.pk)
    if cached is not None and cached[0] == app.updated_at and cached[1] > now and connector is None:
        return cached[2], cached[3]
    topo = topology(app)
    if connector is None:
        from autoscaler.control.connectors import build_connector

        connector = build_connector(app)
        _DEFINITIONS[app.pk] = (app.updated_at, now + DEFINITIONS_TTL_S, topo, connector)
    return topo, connector


def forget_definitions(application_id: int | None = None) -> None:
    if application_id is None:
        _DEFINITIONS.clear()
    else:
        _DEFINITIONS.pop(application_id, None)


def control_of(application: Application) -> ApplicationControl:
    control, _ = ApplicationControl.objects.get_or_create(application=application)
    return control


def run_tick(
    application_id: int,
    slot: int,
    connector: Connector | None = None,
    enqueued_at: float | None = None,
    period_s: float | None = None,
    deadline_s: float | None = None,
) -> TickOutcome:
    """Run tick ``slot`` of the application (see module doc); ``period_s`` is T_OM (s) the slot was dispatched
    with (default: the application's current one). A tick that gets the application's lock only after
    ``deadline_s`` (s since the epoch: its slot start + the staleness limit) is stale: recorded, nothing applied.
    Connector errors propagate (the task retries)."""
    started = time.time() if enqueued_at is None else enqueued_at
    with application_lock(application_id):
        app = Application.objects.get(pk=application_id)
        began = time.time()
        if deadline_s is not None and began > deadline_s:
            period = float(period_s or app.om_period_s)
            status = _skip_stale(app, slot, period, began - slot * period)
            return TickOutcome(app.pk, slot, status)
        topo, connector = definitions(app, connector)
        reconciled = False
        for stale in Tick.objects.filter(application=app, status=Tick.Status.APPLYING).order_by("slot"):
            _finish_apply(app, stale.pk, connector, started, reconcile=True, same_slot=stale.slot == slot)
            reconciled = reconciled or stale.slot == slot
        outcome = _decide(app, topo, slot, connector, started, period_s, began)
        outcome.reconciled = reconciled
        if outcome.status == Tick.Status.APPLYING:
            tick_id = outcome_tick_id(app, slot)
            outcome.applied = _finish_apply(app, tick_id, connector, started)
            outcome.status = Tick.objects.only("status").get(pk=tick_id).status
        return outcome


def outcome_tick_id(app: Application, slot: int) -> int:
    return Tick.objects.only("pk").get(application=app, slot=slot).pk


# ---- phase 1: observe, learn, decide (one transaction) -------------------------------------------------------
def _decide(
    app: Application,
    topo: Topology,
    slot: int,
    connector: Connector,
    started: float,
    period_s: float | None,
    began_s: float,
) -> TickOutcome:
    """Phase 1; ``began_s`` (s since the epoch) is when the tick passed its staleness check (``Tick.began_at``)."""
    period_s = float(period_s or app.om_period_s)
    began_at = dt.datetime.fromtimestamp(began_s, tz=dt.UTC)
    with transaction.atomic():
        # the application lock is held: no other process creates this row concurrently (no savepoint needed)
        tick = Tick.objects.select_for_update().filter(application=app, slot=slot).first()
        created = tick is None
        if created:
            tick = Tick.objects.create(application=app, slot=slot, period_s=period_s, dry_run=app.dry_run)
        if not created and tick.status != Tick.Status.RUNNING:
            ApplicationControl.objects.filter(application=app).update(
                duplicate_ticks_total=F("duplicate_ticks_total") + 1
            )
            status = Tick.Status.DONE if tick.status == Tick.Status.APPLYING else tick.status
            return TickOutcome(app.pk, slot, status, duplicate=True)
        control = ApplicationControl.objects.select_for_update().get_or_create(application=app)[0]
        tick.attempts += 1
        tick.began_at = began_at
        if slot * period_s <= control.learned_slot_start_s + 1e-6:  # learning consumes periods in order only
            _record_out_of_order(tick, control, slot * period_s)
            return TickOutcome(app.pk, slot, tick.status)
        control.learned_slot_start_s = slot * period_s
        rails = parse_rails(effective_rails_data(app, control), [op.name for op in topo.all_operators])
        if not AmConfig.of(control).bounds_ms:
            control.am_config = naive_configuration(topo)
            control.am_config_version += 1
        period = Period(slot - 1, (slot - 1) * period_s, slot * period_s)
        metrics = connector.monitor.collect(period)
        if any(op.deployment.status_replicas is None for op in topo.operators):  # cached: no query once seen
            deployment_status.observe(app, metrics)  # a deployment's status: the engine's, once first seen
        tick.metrics = finite(metrics.to_dict())
        tick.decided_at = timezone.now()
        missing, cause = _missing_reason(metrics, topo)
        if missing:
            n = _record_no_data(app, tick, control, topo, metrics, missing, rails, cause)
            _count_tick(control, started)
            control.save()
            return TickOutcome(app.pk, slot, tick.status, decisions=n)
        status, n = decide_period(app, tick, control, topo, metrics, rails, period_s)
        if status == Tick.Status.DONE:
            _count_tick(control, started)
            tick.finished_at = timezone.now()
            tick.latency_s = time.time() - started
        control.last_tick_slot = max(control.last_tick_slot, slot)
        control.save()
        tick.status = status
        tick.save()
        return TickOutcome(app.pk, slot, status, decisions=n)


def _record_out_of_order(tick: Tick, control: ApplicationControl, start_s: float) -> None:
    _mark_stale(
        tick,
        control,
        f"skipped: stale (out of order: slot starting at {start_s:.3f} s, a slot starting at "
        f"{control.learned_slot_start_s:.3f} s was already decided); nothing applied, nothing learned",
    )


def _mark_stale(tick: Tick, control: ApplicationControl, detail: str) -> None:
    """Record ``tick`` as ``missed`` (reason ``stale``, ``detail`` as its error) and count it (locks held)."""
    from autoscaler.control.slots import Reason, count_missed

    tick.status, tick.reason, tick.error = Tick.Status.MISSED, Reason.STALE, detail
    tick.finished_at = timezone.now()
    tick.save()
    count_missed(control, {Reason.STALE: 1})
    control.save()


def skip_stale_tick(application_id: int, slot: int, period_s: float, age_s: float) -> str:
    """Record a stale tick of ``slot`` (it began ``age_s`` s after its slot did) and apply nothing: a slot without
    a row becomes ``missed`` (reason ``stale``); a tick left ``applying`` by a dead worker is only reconciled with
    the engine (kept if the engine runs its plan, else abandoned), never applied. Returns the ledger status."""
    with application_lock(application_id):
        return _skip_stale(Application.objects.get(pk=application_id), slot, period_s, age_s)


def _skip_stale(app: Application, slot: int, period_s: float, age_s: float) -> str:
    """``skip_stale_tick`` with the application's lock held."""
    detail = (
        f"skipped: stale (the tick began {age_s:.1f} s after its slot began; period {period_s:g} s); "
        "nothing applied, nothing learned"
    )
    with transaction.atomic():
        tick = Tick.objects.select_for_update().filter(application=app, slot=slot).first()
        control = ApplicationControl.objects.select_for_update().get_or_create(application=app)[0]
        if tick is not None and tick.status not in (Tick.Status.RUNNING, Tick.Status.APPLYING):
            control.duplicate_ticks_total += 1
            control.save(update_fields=["duplicate_ticks_total", "updated_at"])
            return tick.status
        if tick is None or tick.status == Tick.Status.RUNNING:
            tick = tick or Tick(application=app, slot=slot, period_s=period_s, dry_run=app.dry_run)
            _mark_stale(tick, control, detail)
            return tick.status
    _, connector = definitions(app)
    _finish_apply(app, tick.pk, connector, time.time(), reconcile=True, same_slot=False)
    return Tick.objects.only("status").get(pk=tick.pk).status


def _missing_reason(metrics: PeriodMetrics, topo: Topology) -> tuple[str, Cause]:
    """Why the period cannot be learned from ("" when it can), and the connector's typed cause."""
    if not metrics.complete:
        return metrics.reason or "metrics incomplete", metrics.cause
    for op in topo.operators:
        m = metrics.operators.get(op.name)
        if m is None:
            return f"no metrics for operator {op.name!r}", Cause.METRICS_MISSING
        if not m.complete or m.input_rate is None:
            return f"operator {op.name!r}: {m.reason or 'metrics incomplete'}", m.cause
    return "", Cause.NONE


def _record_no_data(
    app, tick, control, topo, metrics, reason, rails: Rails, cause: Cause = Cause.NONE
) -> int:
    now = timezone.now()
    rows = [
        Decision(
            tick=tick,
            application=app,
            operator=op,
            slot=tick.slot,
            outcome=Decision.Outcome.NO_DATA,
            observed=finite(metrics.operators[op.name].to_dict()) if op.name in metrics.operators else {},
            deployment=metrics.operators[op.name].deployment if op.name in metrics.operators else {},
            reason=f"no data: {reason}; no action, no learning",
            finished_at=now,
        )
        for op in topo.operators
    ]
    Decision.objects.bulk_create(rows)
    tick.status = Tick.Status.NO_DATA
    tick.error = reason
    tick.finished_at = now
    tick.latency_s = None
    # rollback rail: the period after a reconfiguration shows the job failing -> restore the previous deployment
    last = (
        Tick.objects.filter(application=app, slot__lt=tick.slot, status=Tick.Status.DONE, plan__isnull=False)
        .order_by("-slot")
        .first()
    )
    if (
        rails.rollback_on_failure
        and last is not None
        and last.slot == tick.slot - 1
        and (last.result or {}).get("ok")
        and last.before
        and not app.dry_run
        and cause in FAILING_CAUSES
    ):
        tick.plan = {name: last.before[name] for name in last.plan if name in last.before}
        tick.before = (last.result or {}).get("deployments")
        tick.status = Tick.Status.APPLYING
        tick.error = f"{reason}; rolling back the reconfiguration of slot {last.slot}"
    tick.save()
    control.no_data_periods += 1
    aggregates.record_no_data_period(control, tick.slot * float(tick.period_s))
    control.decisions_total += len(rows)
    control.last_tick_slot = max(control.last_tick_slot, tick.slot)
    return len(rows)


def _count_tick(control: ApplicationControl, started: float) -> None:
    latency = max(time.time() - started, 0.0)
    control.last_tick_at = timezone.now()
    control.ticks_total += 1
    control.latency_sum_s += latency
    buckets = dict(control.latency_buckets or {})
    for b in (*LATENCY_BUCKETS_S, "+Inf"):
        if b == "+Inf" or latency <= b:
            buckets[str(b)] = buckets.get(str(b), 0) + 1
    control.latency_buckets = buckets


# ---- phase 2: execute outside any transaction, then record -------------------------------------------------
def _finish_apply(
    app: Application,
    tick_id: int,
    connector: Connector,
    started: float,
    reconcile: bool = False,
    same_slot: bool = True,
) -> bool:
    """Apply the plan of an ``applying`` tick (or reconcile it with the engine) and record the result.
    Returns whether the engine now runs the plan."""
    tick = Tick.objects.get(pk=tick_id)
    plan: dict[str, dict[str, int]] = tick.plan or {}
    current = connector.realizer.current()
    matches = all(_same(current.get(name), target) for name, target in plan.items())
    if reconcile and matches:
        result = ApplyResult(True, current, details={"reconciled": "engine already runs the plan"})
    elif reconcile and not same_slot:
        result = ApplyResult(
            False, current, error="abandoned: the worker stopped before applying and a later tick arrived"
        )
    else:
        result = connector.realizer.apply(ScalingPlan(plan, tick.slot, reason="control tick"))
        if reconcile:
            result.details["reconciled"] = "engine did not run the plan: applied on redelivery"
        if not result.ok and not result.rolled_back and tick.before:
            rollback = connector.realizer.apply(ScalingPlan(tick.before, tick.slot, reason="rollback"))
            result.rolled_back = rollback.ok
            result.details["rollback"] = {"ok": rollback.ok, "error": rollback.error}
            result.deployments = rollback.deployments
    return _record_apply(app, tick_id, result, started)


def _same(a: dict[str, int] | None, b: dict[str, int]) -> bool:
    return {t: n for t, n in (a or {}).items() if n} == {t: n for t, n in b.items() if n}


def _swaps_a_node_type(before: dict[str, dict[str, int]] | None, after: dict[str, dict[str, int]]) -> bool:
    """Whether an applied change moved some operator onto a node type it did not run on or off one it did (a
    *swap*), rather than only changing replica counts (a *resize*): ``before`` / ``after`` map operator ->
    {node type: replicas}."""
    for op, now in after.items():
        was = (before or {}).get(op)
        if was is not None and {t for t, n in was.items() if n} != {t for t, n in now.items() if n}:
            return True
    return False


def _record_apply(app: Application, tick_id: int, result: ApplyResult, started: float) -> bool:
    with transaction.atomic():
        tick = Tick.objects.select_for_update().get(pk=tick_id)
        if tick.status != Tick.Status.APPLYING:
            return False
        control = ApplicationControl.objects.select_for_update().get(application=app)
        now = timezone.now()
        is_rollback = (
            tick.status == Tick.Status.APPLYING
            and not tick.decisions.filter(outcome=Decision.Outcome.APPLYING).exists()
        )
        tick.result = finite(
            {
                "ok": result.ok,
                "deployments": result.deployments,
                "downtime_s": result.downtime_s,
                "error": result.error,
                "rolled_back": result.rolled_back,
                "details": result.details,
            }
        )
        deployment_status.record_apply(app, tick, result)  # the deployments' status: what the engine runs now
        tick.finished_at = now
        tick.latency_s = time.time() - started
        memory = dict(control.operator_memory or {})
        if is_rollback:
            tick.status = Tick.Status.NO_DATA
            tick.error += f"; rollback {'applied' if result.ok else 'failed: ' + result.error}"
            tick.save()
            return result.ok
        decisions = list(tick.decisions.select_related("operator").filter(outcome=Decision.Outcome.APPLYING))
        consolidation.finish(app, tick, result.ok, result.error or "")
        outcome = (
            Decision.Outcome.APPLIED
            if result.ok
            else (Decision.Outcome.ROLLED_BACK if result.rolled_back else Decision.Outcome.FAILED)
        )
        for d in decisions:
            d.outcome = outcome
            d.applied = result.deployments.get(d.operator.name, d.deployment)
            d.finished_at = now
            d.downtime_s = float(result.downtime_s)
            if not result.ok:
                d.reason = f"{d.reason}; connector: {result.error}"
            elif d.proposal.get("action", 0) and _is_scale_up(d):
                memory.setdefault(d.operator.name, {})["last_scale_up_s"] = tick.slot * tick.period_s
        Decision.objects.bulk_update(decisions, ["outcome", "applied", "finished_at", "downtime_s", "reason"])
        if not result.ok:
            _forget_actions(app, decisions, control)
            for d in decisions:
                memory.get(d.operator.name, {}).pop("pending_check", None)
            tick.error = result.error
            control.tick_errors_total += 1
            control.last_error = f"slot {tick.slot}: {result.error}"
        else:
            control.reconfigurations_applied_total += 1
            applied = AppMemory.of(memory)
            applied.last_apply_slot = tick.slot
            applied.last_downtime_s = float(result.downtime_s)
            if _swaps_a_node_type(tick.before, result.deployments):
                applied.swap_downtime_s = float(result.downtime_s)
            else:
                applied.resize_downtime_s = float(result.downtime_s)
            applied.store_in(memory)
        control.operator_memory = memory
        _count_tick(control, started)
        control.save()
        tick.status = Tick.Status.DONE
        tick.save()
        return result.ok


def _is_scale_up(d: Decision) -> bool:
    return sum(d.proposal.get("target", {}).values()) > sum((d.deployment or {}).values())


def _forget_actions(app: Application, decisions: list[Decision], control: ApplicationControl) -> None:
    """The plan was not applied: make every affected agent learn a no-op transition instead of its proposal."""
    topo = topology(app)
    rails = parse_rails(effective_rails_data(app, control))
    by_op = {d.operator_id for d in decisions}
    agents = {a.operator_id: a for a in AgentState.objects.select_for_update().filter(operator_id__in=by_op)}
    for op in topo.operators:
        if op.pk in agents:
            policy = load_policy(agents[op.pk], op, topo, control, rails)
            policy.override_last_action(0)
            agent = agents[op.pk]
            agent.blob = policy.state_bytes()
            agent.save(update_fields=["blob", "updated_at"])


def record_failure(application_id: int, slot: int, error: str, final: bool) -> None:
    """Surface a connector failure of tick ``slot`` in the ledger; when ``final`` (retries exhausted) the tick
    becomes "no data" with one decision per operator saying why."""
    with transaction.atomic():
        app = Application.objects.get(pk=application_id)
        tick, _ = Tick.objects.select_for_update().get_or_create(
            application=app, slot=slot, defaults={"period_s": app.om_period_s, "dry_run": app.dry_run}
        )
        if tick.status not in (Tick.Status.RUNNING, Tick.Status.FAILED):
            return
        control = ApplicationControl.objects.select_for_update().get_or_create(application=app)[0]
        control.tick_errors_total += 1
        control.last_error = f"slot {slot}: {error}"
        tick.attempts += 1
        tick.error = error
        if final:
            topo = topology(app)
            metrics = PeriodMetrics(Period(slot - 1, 0.0, 0.0), {}, complete=False, reason=error)
            _record_no_data(app, tick, control, topo, metrics, f"connector failed: {error}", Rails())
        else:
            tick.status = Tick.Status.RUNNING
            tick.save()
        control.save()
