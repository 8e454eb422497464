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

import contextlib
import datetime as dt
import time
from dataclasses import dataclass
from typing import Any

import numpy as np
from django.db import connection, transaction
from django.db.models import F
from django.utils import timezone

from autoscaler.control import aggregates, consolidation
from autoscaler.control import capacity as region_capacity
from autoscaler.control import status as deployment_status
from autoscaler.control.models import (
    AGENT_STATE_FORMAT,
    AgentState,
    ApplicationControl,
    Decision,
    Tick,
    WaitingRequest,
)
from autoscaler.control.rails import Rails, effective_rails_data, parse_rails
from autoscaler.control.topology import (
    DEFAULT_AM_POLICY,
    DEFAULT_OM_POLICY,
    Topology,
    finite,
    guarded_weights,
    naive_configuration,
    operator_spec,
    policy_choice,
    topology,
)
from autoscaler.models import Application
from connectors.base import FAILING_CAUSES, ApplyResult, Cause, Connector, Period, PeriodMetrics, ScalingPlan
from policies import options, registry
from policies.am.arbiter import Arbiter, Request, TokenBucket
from policies.am.guard import GuardParams, ViolationBudgetGuard, guard_params
from policies.am.naive import EQUAL_WEIGHTS
from policies.base import JUMP, Observation, Policy, Proposal
from policies.model import CostWeights

LOCK_NAMESPACE = 0x5CA1  # first key of pg_advisory_lock(int, int); the second is the application id
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


@contextlib.contextmanager
def application_lock(application_id: int):
    """Serialise ticks of one application across processes (PostgreSQL session advisory lock; on other databases
    the database's own write lock serialises the transactions)."""
    if connection.vendor != "postgresql":
        yield
        return
    with connection.cursor() as cur:
        cur.execute("SELECT pg_advisory_lock(%s, %s)", [LOCK_NAMESPACE, application_id])
    try:
        yield
    finally:
        with connection.cursor() as cur:
            cur.execute("SELECT pg_advisory_unlock(%s, %s)", [LOCK_NAMESPACE, application_id])


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
        from connectors.factory import build_connector

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
        if deadline_s is not None and time.time() > deadline_s:
            period = float(period_s or app.om_period_s)
            status = _skip_stale(app, slot, period, time.time() - slot * period)
            return TickOutcome(app.pk, slot, status)
        topo, connector = definitions(app, connector)
        reconciled = False
        for stale in Tick.objects.filter(application=app, status=Tick.Status.APPLYING).order_by("slot"):
            _finish_apply(app, stale.pk, connector, started, reconcile=True, same_slot=stale.slot == slot)
            reconciled = reconciled or stale.slot == slot
        outcome = _decide(app, topo, slot, connector, started, period_s)
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
    period_s: float | None = None,
) -> TickOutcome:
    period_s = float(period_s or app.om_period_s)
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
        if slot * period_s <= control.learned_slot_start_s + 1e-6:  # learning consumes periods in order only
            _record_out_of_order(tick, control, slot * period_s)
            return TickOutcome(app.pk, slot, tick.status)
        control.learned_slot_start_s = slot * period_s
        rails = parse_rails(effective_rails_data(app, control), [op.name for op in topo.all_operators])
        if not control.am_config.get("bounds_ms"):
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
        status, n = _learn_and_arbitrate(app, tick, control, topo, metrics, rails, period_s)
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


def load_policy(agent: AgentState | None, op, topo, control, rails: Rails) -> Policy:
    """The operator's OM policy as the tick builds it: the application's choice and params, the spec with the
    rails' replica bounds and the AM's configuration, the stored agent state when it is the same policy."""
    name, params = policy_choice(topo.application, "om", DEFAULT_OM_POLICY)
    lo, hi = rails.bounds(op.name, op.max_parallelism)
    spec = operator_spec(topo, op, control.am_config, k_min=lo, k_max=hi)
    cls = registry.load("om", name)
    policy = cls(spec, params, seed=op.pk)
    if agent is not None and agent.policy == name and agent.blob:
        policy.load_state(bytes(agent.blob))
        policy.spec.k_min, policy.spec.k_max = spec.k_min, spec.k_max
        if agent.am_config_version != control.am_config_version:
            policy.reconfigure(spec.weights, spec.r_max_s)
    return policy


def _add_batch_fields(obs: Observation, m: Any, period_s: float) -> None:
    """A micro-batch engine's measurements (``OperatorMetrics``; Spark: batch duration and size, partitions,
    trigger interval, backlog) onto the policy's observation, for ``policies.engine_model``; nothing for other
    engines. ``period_s``: the control period (s)."""
    if m.batch_duration_s is None:
        return
    obs.batch_duration_s, obs.batch_records = m.batch_duration_s, m.batch_records
    obs.partitions, obs.batch_interval_s = m.partitions, m.batch_interval_s
    obs.backlog, obs.period_s = m.backlog, float(period_s)


def _learn_and_arbitrate(app, tick, control, topo: Topology, metrics: PeriodMetrics, rails: Rails, period_s):
    now_s = tick.slot * period_s
    when = dt.datetime.fromtimestamp(now_s, tz=dt.UTC)
    agents = {a.operator_id: a for a in AgentState.objects.filter(operator__in=topo.operators)}
    memory: dict[str, Any] = dict(control.operator_memory or {})
    app_mem = dict(memory.get("__app__", {}))
    reconfigured = app_mem.get("last_apply_slot") == tick.slot - 1
    _record_drift(app, topo, metrics, app_mem, reconfigured)
    am_name, am_params = policy_choice(app, "am", DEFAULT_AM_POLICY)
    am_options = options.resolve("am", am_name, am_params)  # bucket, reserve, batching, hold, guard
    policies: list[Policy] = []
    proposals = []
    requests: list[Request] = []
    rail_reasons: dict[int, str] = {}
    bounds: list[tuple[int, int]] = []
    violated_any = False
    waiting: dict[int, tuple[int, str, int, str]] = {}  # operator id -> (region id, node type, slots, reason)
    changes: list[np.ndarray] = []  # replicas each proposal adds (> 0) or removes (< 0) per node type
    bucket_cap = am_options["bucket_capacity"]  # tokens; the bucket starts full
    held = bucket_cap if control.bucket_tokens is None else min(max(control.bucket_tokens, 0.0), bucket_cap)
    budget_wait = TokenBucket(app.eta_r, bucket_cap, held).wait_after_one()
    cost_total = 0.0
    decisions: list[Decision] = []
    # operators whose scale-out waited last period in a region that cannot hold it (Observation.node_limited)
    node_limited = set(app_mem.get("node_limited") or ())
    observations: list[Observation] = []
    for op in topo.operators:
        m = metrics.operators[op.name]
        policy = load_policy(agents.get(op.pk), op, topo, control, rails)
        rt = m.response_time_s
        violated = rt is None or not np.isfinite(rt) or rt > policy.spec.r_max_s
        violated_any = violated_any or violated
        obs = Observation(
            topo.vector(m.deployment),
            float(m.input_rate),
            rt,
            violated,
            m.utilisation,
            processing_rate=m.processing_rate,
            budget_wait_periods=budget_wait,
            node_limited=op.name in node_limited,
        )
        _add_batch_fields(obs, m, period_s)
        policies.append(policy)
        proposals.append(policy.step(obs))
        observations.append(obs)
    revised, capacity_read = _revise_for_node_limits(topo, policies, proposals, observations)
    node_limited |= revised
    for i, op in enumerate(topo.operators):
        m = metrics.operators[op.name]
        obs, proposal = observations[i], proposals[i]
        k, violated = obs.deployment, bool(obs.violated)
        lo, hi = rails.bounds(op.name, op.max_parallelism)
        bounds.append((lo, hi))
        _check_ineffective(rails, memory, op.name, m, now_s)
        change = proposal.deployment - k
        changes.append(change)
        reason = _rail_reason(rails, when, now_s, memory.get(op.name, {}), proposal.action, change, m)
        if reason:
            rail_reasons[i] = reason
        jump = proposal.action == JUMP and not reason
        requests.append(
            Request(
                i,
                k,
                0 if reason else proposal.action,
                violated,
                float(m.utilisation or 0.0),
                proposal.deployment if jump else None,
            )
        )
        cost = float(np.dot(k, topo.prices_per_hour)) * period_s / 3600.0
        cost_total += cost
        decisions.append(
            Decision(
                tick=tick,
                application=app,
                operator=op,
                slot=tick.slot,
                observed=finite(m.to_dict()),
                deployment=topo.as_dict(k),
                resource_cost=cost,
                violated=violated,
                reconfigured=reconfigured,
            )
        )
    # the application-level violation: any path above its bound (R_max or its override), else any operator
    if metrics.path_response_time_s:
        violated_app = any(
            (v is None or not np.isfinite(v) or v * 1000.0 > app.r_max_ms)
            for v in metrics.path_response_time_s.values()
        )
    else:
        violated_app = violated_any
    for attempt in range(region_capacity.RETRIES + 1):
        # the AM grants within the provisioned capacity; scale-outs are reserved (re-arbitrate on a conflict)
        # (the first attempt reuses the document the node-limit check read in this tick, when it read one)
        capacity = (
            capacity_read
            if attempt == 0 and capacity_read is not None
            else region_capacity.read(
                topo, [r.k for r in requests], freeze=attempt == region_capacity.RETRIES
            )
        )
        arbiter = Arbiter(
            app.eta_r,
            am_options["bucket_capacity"],
            k_max=[b[1] for b in bounds] or 1,
            k_min=[b[0] for b in bounds] or 1,
            node_capacity=capacity.slots,
            node_type_names=topo.type_names,
            batching=am_options["batching"],
            scale_in_reserve=am_options["scale_in_reserve"],
            hold_scale_ins=am_options["hold_scale_ins"],
            defer_for_nodes=am_options["defer_for_nodes"],
        )
        if control.bucket_tokens is not None:
            # refill for the periods without a tick since the last one (arbitrate() adds this period's share)
            skipped = max(tick.slot - control.last_tick_slot - 1, 0) if control.last_tick_slot >= 0 else 0
            tokens = control.bucket_tokens + min(skipped, 10**6) * arbiter.bucket.rate
            arbiter.bucket.tokens = min(max(tokens, 0.0), arbiter.bucket.capacity)
        granted = arbiter.arbitrate(requests) if requests else []
        if capacity.reserve(topo, requests, granted, slot=tick.slot):
            break
    plan: dict[str, dict[str, int]] = {}
    before: dict[str, dict[str, int]] = {}
    names = topo.type_names
    # node types the operators waited for until this period: a scale-out that still asks for them keeps waiting
    # when the AM denies it for another reason (the reconfiguration budget), so the RM keeps the nodes it
    # provisioned for it instead of releasing them as idle (seen on bench_loop's ramp: 16 A3 nodes released
    # in the one period a type change waited for a token, then requested again). Read only when the
    # application had waiting requests (``app_mem["waiting"]``) and a change was denied.
    denied = any(p.action != 0 and not a.granted for p, a in zip(proposals, granted, strict=True))
    awaited_before = (
        dict(WaitingRequest.objects.filter(application=app).values_list("operator_id", "node_type"))
        if denied and app_mem.get("waiting")
        else {}
    )
    for i, (op, policy, proposal, decision, am) in enumerate(
        zip(topo.operators, policies, proposals, decisions, granted, strict=True)
    ):
        explanation = finite(proposal.explanation)
        decision.proposal = {
            "action": int(proposal.action),
            "target": topo.as_dict(proposal.deployment),
            "explanation": explanation,
        }
        if i in rail_reasons:
            decision.granted, decision.reason = False, rail_reasons[i]
        else:
            decision.granted = proposal.action != 0 and am.granted
            decision.reason = am.reason
            if not decision.granted and am.waits_for_capacity:
                region = op.deployment.region
                decision.reason = (
                    f"waiting for capacity in region {region.name}: {am.reason.removeprefix('denied: ')}"
                )
                awaited = names[am.short_type]
                slots = int(changes[i][names.index(awaited)])
                waiting[op.pk] = (region.pk, awaited, max(slots, 1), decision.reason)
            elif not decision.granted and _still_awaits(changes[i], names, awaited_before.get(op.pk)):
                awaited = awaited_before[op.pk]
                slots = int(changes[i][names.index(awaited)])
                waiting[op.pk] = (op.deployment.region.pk, awaited, slots, decision.reason)
        grown = explanation.get("calibration")  # the OM re-ranged its rate levels in this step: say so
        if grown and grown.get("event") == "rate range grown":
            old_hi, new_hi = grown["old_range_tuples_s"][1], grown["new_range_tuples_s"][1]
            decision.reason = (
                f"{decision.reason}; {grown['event']}: [0, {old_hi:.6g}) -> [0, {new_hi:.6g}) tuples/s"
            ).lstrip("; ")
        if proposal.action != 0 and not decision.granted:
            policy.override_last_action(0)
            control.denied_total += 1
        elif decision.granted and app.dry_run:
            policy.override_last_action(0)  # nothing changes on the engine: learn what really happens
        if decision.granted:
            target = topo.as_dict(proposal.deployment)
            plan[op.name] = target
            before[op.name] = decision.deployment
            decision.outcome = Decision.Outcome.DRY_RUN if app.dry_run else Decision.Outcome.APPLYING
            model = policy.planning_model()  # what the OM learned (or was told) of the operator
            if (changes[i] > 0).any() and model is not None:
                spec = policy.spec
                k_old = topo.vector(decision.deployment)
                gain = model.capacity(proposal.deployment, spec.speedups) - model.capacity(
                    k_old, spec.speedups
                )
                m = metrics.operators[op.name]
                memory.setdefault(op.name, {}).update(
                    pending_check={
                        "slot": tick.slot,
                        "capacity_before": _measured_capacity(m),
                        "expected_gain": float(gain),
                    }
                )
        else:
            decision.outcome = Decision.Outcome.DENIED if proposal.action != 0 else Decision.Outcome.NO_CHANGE
            decision.applied = decision.deployment
            decision.finished_at = timezone.now()
    if waiting or app_mem.get("waiting"):
        _record_waiting(app, topo, waiting, tick.slot)
        app_mem["waiting"] = len(waiting)
    # an operator stays node-limited while its scale-out waits: the region's demand with its fewer-replica
    # request may fit, and going back to the request that did not would wait for nodes that never come
    waiting_names = {op.name for op in topo.operators if op.pk in waiting}
    limited = _node_limited(topo, waiting, capacity.snapshots) | (node_limited & waiting_names)
    if limited or node_limited:
        app_mem["node_limited"] = sorted(limited)
    # the IM's pending consolidation: in this period's batched reconfiguration, or its own if a token is left
    consolidation.take(app, tick, decisions, plan, before, arbiter.bucket)
    control.bucket_tokens = arbiter.bucket.tokens
    _run_guard(app, tick, control, app_mem, policies, violated_app, guard_params(am_options))
    # persist: agent states, decisions, aggregates, ledger -- one transaction (the caller's)
    _save_agents(topo, policies, agents, tick.slot, control.am_config_version)
    Decision.objects.bulk_create(decisions)
    aggregates.record_period(
        control,
        violated=violated_app,
        reconfigured=reconfigured,
        cost=cost_total,
        seconds=period_s,
        at_s=tick.slot * period_s,
    )
    control.decisions_total += len(decisions)
    memory["__app__"] = app_mem
    control.operator_memory = memory
    if plan and not app.dry_run:
        tick.plan, tick.before = plan, before
        return Tick.Status.APPLYING, len(decisions)
    tick.plan = plan or None
    return Tick.Status.DONE, len(decisions)


def _run_guard(
    app: Application,
    tick: Tick,
    control: ApplicationControl,
    app_mem: dict[str, Any],
    policies: list[Policy],
    violated_app: bool,
    params: GuardParams | None,
) -> None:
    """The AM's violation-budget guard (:mod:`policies.am.guard`): it sees this period's application violation;
    when it changes its scale, ``am_config["guard_scale"]`` changes, the event (with its reason) joins the AM
    history, the OMs of this tick are reconfigured to the new weights and the configuration version moves on (so
    every OM loads them from the next tick on). Its state lives in the application's durable memory. Turned off
    while its scale is below 1, it gives the tuned weights back."""
    from autoscaler.control.am import HISTORY_KEPT

    scale = float(control.am_config.get("guard_scale", 1.0))
    if params is not None:
        state = app_mem.get("guard")
        if state and state.get("eta_v") == app.eta_v and state.get("params") == vars(params):
            guard = ViolationBudgetGuard.from_dict(state)
        else:  # first period, or the budget or the parameters changed: count afresh from the scale in place
            guard = ViolationBudgetGuard(app.eta_v, params, scale=scale)
        change = guard.update(violated_app)
        app_mem["guard"] = guard.to_dict()
        if change is None:
            return
        new, why = change
    else:
        app_mem.pop("guard", None)
        if scale == 1.0:
            return
        new, why = 1.0, "guard turned off: the tuned weights are back"
    event = {"am_slot": f"period {tick.slot}", "policy": "guard", "outcome": why, "wall_s": 0.0}
    history = list(control.am_config.get("history", []))[-(HISTORY_KEPT - 1) :] + [event]
    control.am_config = {**control.am_config, "guard_scale": new, "history": history}
    control.am_config_version += 1
    w = control.am_config.get("weights")
    tuned = CostWeights(float(w["perf"]), float(w["res"]), float(w["rcf"])) if w else EQUAL_WEIGHTS
    for policy in policies:
        policy.reconfigure(guarded_weights(tuned, control.am_config))


def _record_drift(
    app: Application, topo: Topology, metrics: PeriodMetrics, app_mem: dict[str, Any], reconfigured: bool
) -> None:
    """The engine's deployments that changed since the previous period without an apply between them (the
    observed period did not begin with a change) become the deployments' status (``status.drifted``); what was
    seen is kept in ``app_mem["seen"]`` for the next period. Costs a query only when something drifted."""
    seen = app_mem.get("seen") or {}
    now = {
        op.name: deployment_status.positive_replicas(metrics.operators[op.name].deployment)
        for op in topo.operators
        if metrics.operators[op.name].deployment
    }
    if not reconfigured:
        changed = {name: dep for name, dep in now.items() if name in seen and dep != seen[name]}
        if changed:
            deployment_status.drifted(app, changed)
    app_mem["seen"] = now


def _revise_for_node_limits(
    topo: Topology, policies: list[Policy], proposals: list[Proposal], observations: list[Observation]
) -> tuple[set[str], region_capacity.Capacity | None]:
    """Before the AM arbitrates: in each region that cannot hold, within its node limit, what runs or is granted
    there plus the replicas this period's proposals add (:func:`autoscaler.control.capacity.over_node_limit`),
    the operators whose proposals add replicas decide again under the node limit
    (:meth:`policies.base.Policy.revise_for_node_limit`; ``proposals`` updated in place). Without this an
    operator learned of the limit only from the denial of the request that did not fit, a period later, and the
    region spent that period provisioning for it (bench_loop's shortage). Returns the names revised and the
    capacity read for the check (None when no proposal adds replicas: nothing was read)."""
    adds: dict[int, dict[str, int]] = {}
    names = topo.type_names
    for op, proposal, obs in zip(topo.operators, proposals, observations, strict=True):
        rise = np.maximum(np.asarray(proposal.deployment) - np.asarray(obs.deployment), 0)
        for t in np.flatnonzero(rise).tolist():
            per_type = adds.setdefault(op.deployment.region_id, {})
            per_type[names[t]] = per_type.get(names[t], 0) + int(rise[t])
    if not adds:
        return set(), None
    capacity = region_capacity.read(topo, [o.deployment for o in observations])
    full = _over_node_limit(topo, adds, capacity.snapshots)
    revised: set[str] = set()
    for i, (op, policy, obs) in enumerate(zip(topo.operators, policies, observations, strict=True)):
        if op.deployment.region_id not in full or not (proposals[i].deployment > obs.deployment).any():
            continue
        revision = policy.revise_for_node_limit(obs)
        if revision is not None:
            proposals[i] = revision
            revised.add(op.name)
    return revised, capacity


def _node_limited(topo: Topology, waiting: dict, snapshots: dict[int, dict]) -> set[str]:
    """Names of the operators waiting for nodes in a region that cannot hold what runs there plus what this
    application's operators wait for (:func:`autoscaler.control.capacity.over_node_limit`)."""
    per_region: dict[int, dict[str, int]] = {}
    for region_id, node_type, slots, _ in waiting.values():
        per_type = per_region.setdefault(region_id, {})
        per_type[node_type] = per_type.get(node_type, 0) + int(slots)
    full = _over_node_limit(topo, per_region, snapshots)
    return {op.name for op in topo.operators if op.pk in waiting and waiting[op.pk][0] in full}


def _over_node_limit(
    topo: Topology, per_region: dict[int, dict[str, int]], snapshots: dict[int, dict]
) -> set[int]:
    """Ids of the application's regions that cannot hold, within their node limit, what runs or is granted there
    plus ``per_region`` (region id -> node type -> replicas more; :func:`autoscaler.control.capacity.over_node_limit`)."""
    regions = {op.deployment.region_id: op.deployment.region for op in topo.operators}
    return {
        rid
        for rid, per_type in per_region.items()
        if region_capacity.over_node_limit(snapshots.get(rid), regions[rid].max_nodes, per_type)
    }


def _still_awaits(change, names: list[str], node_type: str | None) -> bool:
    """Whether a proposal's per-type ``change`` still adds replicas of the ``node_type`` it waited for."""
    return node_type is not None and node_type in names and int(change[names.index(node_type)]) > 0


def _record_waiting(app: Application, topo: Topology, waiting: dict, slot: int) -> None:
    """Scale-outs waiting for capacity become ``WaitingRequest`` rows (the RM's unsatisfied requests; ``slots``:
    the replicas of the awaited type the step adds, several for a multi-replica step); the application's other
    operators stop waiting."""
    WaitingRequest.objects.filter(application=app).exclude(operator_id__in=list(waiting)).delete()
    for op_id, (region_id, node_type, slots, reason) in waiting.items():
        row, created = WaitingRequest.objects.get_or_create(
            operator_id=op_id,
            defaults={
                "region_id": region_id,
                "application": app,
                "node_type": node_type,
                "slots": slots,
                "since_slot": slot,
                "last_slot": slot,
                "reason": reason,
            },
        )
        if not created:
            row.region_id, row.node_type, row.last_slot, row.reason = region_id, node_type, slot, reason
            row.slots = slots
            row.save(update_fields=["region", "node_type", "slots", "last_slot", "reason"])


def _save_agents(
    topo: Topology, policies: list[Policy], agents: dict[int, AgentState], slot: int, version: int
):
    new, changed = [], []
    for op, policy in zip(topo.operators, policies, strict=True):
        blob = policy.state_bytes()
        agent = agents.get(op.pk)
        if agent is None:
            new.append(
                AgentState(
                    operator=op,
                    policy=policy.name,
                    format_version=AGENT_STATE_FORMAT,
                    blob=blob,
                    steps=policy.t,
                    last_slot=slot,
                    am_config_version=version,
                )
            )
        else:
            agent.policy, agent.blob, agent.steps, agent.last_slot = policy.name, blob, policy.t, slot
            agent.am_config_version, agent.format_version = version, AGENT_STATE_FORMAT
            agent.updated_at = timezone.now()
            changed.append(agent)
    fields = ["policy", "blob", "steps", "last_slot", "am_config_version", "format_version", "updated_at"]
    # one INSERT .. ON CONFLICT (operator) DO UPDATE for every agent (bulk_update's CASE form is much slower)
    for agent in changed:
        agent.pk = None
    AgentState.objects.bulk_create(
        new + changed, update_conflicts=True, unique_fields=["operator"], update_fields=fields
    )


def _measured_capacity(m) -> float | None:
    """Capacity estimate (tuples/s) from a period's metrics: processing rate / utilisation."""
    if m.processing_rate is None or not m.utilisation or m.utilisation < 0.05:
        return None
    return float(m.processing_rate) / float(m.utilisation)


def _check_ineffective(rails: Rails, memory: dict, name: str, m, now_s: float) -> None:
    """After a scale-up, compare the measured capacity rise with the model's expected rise."""
    mem = memory.get(name)
    if not mem or "pending_check" not in mem:
        return
    check = mem.pop("pending_check")
    if rails.ineffective_scale_up_ratio <= 0:
        return
    after, before, gain = _measured_capacity(m), check.get("capacity_before"), check.get("expected_gain", 0.0)
    if after is None or before is None or gain <= 0:
        return
    rise = after - before
    if rise < rails.ineffective_scale_up_ratio * gain:
        mem["blocked_until"] = now_s + rails.ineffective_block_s
        mem["blocked_reason"] = (
            f"ineffective scale-up at slot {check['slot']}: capacity rose {rise:.1f} tuples/s, "
            f"expected {gain:.1f}"
        )


def _rail_reason(
    rails: Rails, when: dt.datetime, now_s: float, mem: dict, action: int, change: np.ndarray, m
) -> str:
    """Why a safety rail denies ``action`` (``change``: replicas added/removed per node type); "" if none does."""
    if action == 0:
        return ""
    window = rails.frozen(when)
    if window is not None:
        return f"denied by safety rail: freeze window {window.start}-{window.end} UTC"
    d = 1 if (change > 0).any() else -1 if (change < 0).any() else 0
    if d < 0 and rails.scale_down_delay_s > 0 and "last_scale_up_s" in mem:
        since = now_s - mem["last_scale_up_s"]
        if since < rails.scale_down_delay_s:
            return (
                f"denied by safety rail: scale-down delay ({since:.0f} s since the last scale-up "
                f"< {rails.scale_down_delay_s:.0f} s)"
            )
    if d > 0 and mem.get("blocked_until", -1) > now_s:
        return f"denied by safety rail: {mem.get('blocked_reason', 'ineffective scale-up')}"
    return ""


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
            app_mem = dict(memory.get("__app__", {}))
            app_mem["last_apply_slot"] = tick.slot
            memory["__app__"] = app_mem
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
