"""The decide phase of a tick with complete metrics, in named steps (inside the tick's transaction, the
application's lock held):

1. :func:`observe_and_propose` - every OM observes the period that ended, learns from it and proposes; proposals
   that add replicas in a region that cannot hold them are decided again under the node limit, and node-type
   swaps the node limit blocks are staged (:mod:`autoscaler.control.node_limits`,
   :mod:`autoscaler.control.staged_swap`);
2. :func:`request` - the safety rails screen each proposal (:mod:`autoscaler.control.rails`); every operator's
   decision row is started with what it observed and cost;
3. :func:`grant` - the AM arbitrates within the reconfiguration budget and the regions' capacity, reserving
   the granted scale-outs (re-arbitrating on a concurrent writer, :mod:`autoscaler.control.capacity`);
4. :func:`settle` - each decision gets its outcome and reason; denied agents learn a no-op; scale-outs waiting
   for nodes are recorded for the RMs;
5. :func:`record` - the IM's consolidation, the violation-budget guard, then agent states, decisions, aggregates
   and the application's memory are written (one transaction, the caller's).

:func:`decide_period` runs them in that order and returns the tick's next status (``applying`` when a plan is to
be applied on the engine, else ``done``) and the number of decisions.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.utils import timezone

from autoscaler.control import aggregates, consolidation, node_limits, staged_swap
from autoscaler.control import capacity as region_capacity
from autoscaler.control.agents import load_policy, save_agents
from autoscaler.control.app_state import AppMemory
from autoscaler.control.guard import run_guard
from autoscaler.control.json_safe import finite
from autoscaler.control.models import AgentState, ApplicationControl, Decision, Tick
from autoscaler.control.policy_choice import DEFAULT_AM_POLICY, policy_choice
from autoscaler.control.rails import Rails, check_ineffective, measured_capacity, rail_reason
from autoscaler.control.status import record_drift
from autoscaler.control.topology import Topology
from autoscaler.models import Application
from connectors.base import OperatorMetrics, PeriodMetrics
from policies import options
from policies.am.arbiter import Arbiter, Request, TokenBucket
from policies.am.arbiter import Decision as AMDecision
from policies.am.guard import guard_params
from policies.base import JUMP, Observation, Policy, Proposal


@dataclass
class TickContext:
    """What every step of one tick's decide phase reads: the application, its tick row and control row, the
    topology, the period's metrics, the rails, the control period (s), the operators' memory
    (``ApplicationControl.operator_memory``, per operator) and the application's (typed), the AM's options."""

    app: Application
    tick: Tick
    control: ApplicationControl
    topo: Topology
    metrics: PeriodMetrics
    rails: Rails
    period_s: float
    memory: dict[str, Any]
    app_mem: AppMemory
    am_options: dict[str, Any]

    @property
    def now_s(self) -> float:
        """The slot's start (s since the epoch)."""
        return self.tick.slot * self.period_s

    def operator_metrics(self, name: str) -> OperatorMetrics:
        return self.metrics.operators[name]


@dataclass
class Proposals:
    """Step 1's result, per managed operator (topology order): the OM, what it observed, what it proposes;
    ``node_limited``: operators planning under their region's node limit; ``capacity_read``: the capacity
    document the node-limit check read (None when no proposal adds replicas); ``staged``: operator -> the note of
    its staged node-type swap; ``bounds``: per operator (min, max) replicas under the rails."""

    policies: list[Policy]
    observations: list[Observation]
    proposals: list[Proposal]
    node_limited: set[str]
    capacity_read: region_capacity.Capacity | None
    staged: dict[str, dict[str, Any]]
    bounds: list[tuple[int, int]]


@dataclass
class Requests:
    """Step 2's result: the AM's requests and the decision rows (one per operator), the per-type change each
    proposal makes (> 0 adds, < 0 removes), the rails' denials (operator index -> reason), the period's resource
    cost ($) and whether any operator violated its bound."""

    requests: list[Request]
    decisions: list[Decision]
    changes: list[np.ndarray]
    rail_reasons: dict[int, str]
    cost: float
    violated_any: bool


@dataclass
class Grants:
    """Step 3's result: the AM's answer per request, the capacity it granted within, and the arbiter (its bucket
    goes on to the consolidation and the control row)."""

    granted: list[AMDecision]
    capacity: region_capacity.Capacity
    arbiter: Arbiter


@dataclass
class Settled:
    """Step 4's result: the plan to apply (operator -> deployment) and the deployments before it."""

    plan: dict[str, dict[str, int]] = field(default_factory=dict)
    before: dict[str, dict[str, int]] = field(default_factory=dict)


def decide_period(
    app: Application,
    tick: Tick,
    control: ApplicationControl,
    topo: Topology,
    metrics: PeriodMetrics,
    rails: Rails,
    period_s: float,
) -> tuple[str, int]:
    """Steps 1-5 (module doc); returns the tick's next status and the number of decisions written."""
    memory: dict[str, Any] = dict(control.operator_memory or {})
    app_mem = AppMemory.of(memory)
    am_name, am_params = policy_choice(app, "am", DEFAULT_AM_POLICY)
    am_options = options.resolve("am", am_name, am_params)  # bucket, reserve, batching, hold, guard
    p = TickContext(app, tick, control, topo, metrics, rails, float(period_s), memory, app_mem, am_options)
    reconfigured = app_mem.last_apply_slot == tick.slot - 1
    record_drift(app, topo, metrics, app_mem, reconfigured)
    agents = {a.operator_id: a for a in AgentState.objects.filter(operator__in=topo.operators)}
    proposed = observe_and_propose(p, agents)
    requested = request(p, proposed, reconfigured)
    grants = grant(p, proposed, requested)
    settled = settle(p, proposed, requested, grants)
    return record(p, agents, proposed, requested, grants, settled, reconfigured)


# ---- 1. observe, learn, propose ------------------------------------------------------------------------------
def observe_and_propose(p: TickContext, agents: dict[int, AgentState]) -> Proposals:
    """Every OM learns from the period that ended and proposes; then the node-limit revision and staging."""
    topo = p.topo
    bucket_cap = p.am_options["bucket_capacity"]  # tokens; the bucket starts full
    tokens = p.control.bucket_tokens
    held = bucket_cap if tokens is None else min(max(tokens, 0.0), bucket_cap)
    budget_wait = TokenBucket(p.app.eta_r, bucket_cap, held).wait_after_one()
    # operators whose scale-out waited last period in a region that cannot hold it (Observation.node_limited)
    node_limited = set(p.app_mem.node_limited or ())
    # periods since the application's latest applied change (Observation.periods_since_change; None: none yet)
    last = p.app_mem.last_apply_slot
    since_change = None if last is None else p.tick.slot - last
    policies: list[Policy] = []
    observations: list[Observation] = []
    proposals: list[Proposal] = []
    for op in topo.operators:
        m = p.operator_metrics(op.name)
        policy = load_policy(agents.get(op.pk), op, topo, p.control, p.rails)
        rt = m.response_time_s
        violated = rt is None or not np.isfinite(rt) or rt > policy.spec.r_max_s
        obs = Observation(
            topo.vector(m.deployment),
            float(m.input_rate),
            rt,
            violated,
            m.utilisation,
            processing_rate=m.processing_rate,
            budget_wait_periods=budget_wait,
            node_limited=op.name in node_limited,
            period_s=p.period_s,
            restart_s=p.app_mem.last_downtime_s,
            resize_restart_s=p.app_mem.resize_downtime_s,
            swap_restart_s=p.app_mem.swap_downtime_s,
            periods_since_change=since_change,
        )
        _add_batch_fields(obs, m, p.period_s)
        policies.append(policy)
        proposals.append(policy.step(obs))
        observations.append(obs)
    revised, capacity_read = node_limits.revise(topo, policies, proposals, observations)
    bounds = [p.rails.bounds(op.name, op.max_parallelism) for op in topo.operators]
    staged: dict[str, dict[str, Any]] = {}
    if capacity_read is not None:
        # a node-type swap the region cannot hold make-before-break within its node limit goes in stages
        staged = staged_swap.stage_swaps(
            topo, policies, proposals, observations, capacity_read.snapshots, bounds
        )
    return Proposals(policies, observations, proposals, node_limited | revised, capacity_read, staged, bounds)


def _add_batch_fields(obs: Observation, m: OperatorMetrics, period_s: float) -> None:
    """A micro-batch engine's measurements (``OperatorMetrics``; Spark: batch duration and size, partitions,
    trigger interval, backlog) onto the policy's observation, for ``policies.engine_model``; nothing for other
    engines. ``period_s``: the control period (s)."""
    if m.batch_duration_s is None:
        return
    obs.batch_duration_s, obs.batch_records = m.batch_duration_s, m.batch_records
    obs.partitions, obs.batch_interval_s = m.partitions, m.batch_interval_s
    obs.backlog, obs.period_s = m.backlog, float(period_s)


# ---- 2. the rails screen the proposals; the decision rows --------------------------------------------------------
def request(p: TickContext, proposed: Proposals, reconfigured: bool) -> Requests:
    """The AM's request per operator (the rails' denials become no-ops) and the operator's decision row."""
    topo = p.topo
    when = dt.datetime.fromtimestamp(p.now_s, tz=dt.UTC)
    out = Requests([], [], [], {}, 0.0, False)
    for i, op in enumerate(topo.operators):
        m = p.operator_metrics(op.name)
        obs, proposal = proposed.observations[i], proposed.proposals[i]
        k, violated = obs.deployment, bool(obs.violated)
        out.violated_any = out.violated_any or violated
        check_ineffective(p.rails, p.memory, op.name, m, p.now_s)
        change = proposal.deployment - k
        out.changes.append(change)
        reason = rail_reason(p.rails, when, p.now_s, p.memory.get(op.name, {}), proposal.action, change, m)
        if reason:
            out.rail_reasons[i] = reason
        jump = proposal.action == JUMP and not reason
        out.requests.append(
            Request(
                i,
                k,
                0 if reason else proposal.action,
                violated,
                float(m.utilisation or 0.0),
                proposal.deployment if jump else None,
                for_scale_out=op.name in proposed.staged,
            )
        )
        cost = float(np.dot(k, topo.prices_per_hour)) * p.period_s / 3600.0
        out.cost += cost
        out.decisions.append(
            Decision(
                tick=p.tick,
                application=p.app,
                operator=op,
                slot=p.tick.slot,
                observed=finite(m.to_dict()),
                deployment=topo.as_dict(k),
                resource_cost=cost,
                violated=violated,
                reconfigured=reconfigured,
            )
        )
    return out


# ---- 3. the AM grants within the budget and the capacity -------------------------------------------------------
def grant(p: TickContext, proposed: Proposals, requested: Requests) -> Grants:
    """Arbitrate the requests; the granted scale-outs are reserved in the regions' capacity documents (on a
    concurrent writer: re-read and re-arbitrate, at last with no scale-out in managed regions). The first attempt
    reuses the document the node-limit check read in this tick, when it read one."""
    topo, control, opts = p.topo, p.control, p.am_options
    requests, bounds = requested.requests, proposed.bounds
    for attempt in range(region_capacity.RETRIES + 1):
        capacity = (
            proposed.capacity_read
            if attempt == 0 and proposed.capacity_read is not None
            else region_capacity.read(
                topo, [r.k for r in requests], freeze=attempt == region_capacity.RETRIES
            )
        )
        arbiter = Arbiter(
            p.app.eta_r,
            opts["bucket_capacity"],
            k_max=[b[1] for b in bounds] or 1,
            k_min=[b[0] for b in bounds] or 1,
            node_capacity=capacity.slots,
            node_type_names=topo.type_names,
            batching=opts["batching"],
            scale_in_reserve=opts["scale_in_reserve"],
            hold_scale_ins=opts["hold_scale_ins"],
            defer_for_nodes=opts["defer_for_nodes"],
        )
        if control.bucket_tokens is not None:
            # refill for the periods without a tick since the last one (arbitrate() adds this period's share)
            last = control.last_tick_slot
            skipped = max(p.tick.slot - last - 1, 0) if last >= 0 else 0
            tokens = control.bucket_tokens + min(skipped, 10**6) * arbiter.bucket.rate
            arbiter.bucket.tokens = min(max(tokens, 0.0), arbiter.bucket.capacity)
        granted = arbiter.arbitrate(requests) if requests else []
        if capacity.reserve(topo, requests, granted, slot=p.tick.slot):
            break
    return Grants(granted, capacity, arbiter)


# ---- 4. outcomes, reasons, learning from denials, waiting scale-outs ------------------------------------------
def settle(p: TickContext, proposed: Proposals, requested: Requests, grants: Grants) -> Settled:
    """Each decision's outcome and reason; a denied agent learns a no-op (so does a dry run's); the granted ones
    form the plan (a scale-up remembers its expected capacity gain for the ineffective-scale-up rail); the
    scale-outs that wait for nodes become the RMs' waiting requests."""
    app, topo = p.app, p.topo
    names = topo.type_names
    out = Settled()
    waiting: dict[int, tuple[int, str, int, str]] = {}  # operator id -> (region id, node type, slots, reason)
    # node types the operators waited for until this period: a scale-out that still asks for them keeps waiting
    # when the AM denies it for another reason (the reconfiguration budget), so the RM keeps the nodes it
    # provisioned for it instead of releasing them as idle (seen on bench_loop's ramp: 16 A3 nodes released
    # in the one period a type change waited for a token, then requested again). Read only when the
    # application had waiting requests (``AppMemory.waiting``) and a change was denied.
    denied = any(
        x.action != 0 and not a.granted for x, a in zip(proposed.proposals, grants.granted, strict=True)
    )
    awaited_before = node_limits.awaited(app) if denied and p.app_mem.waiting else {}
    rows = zip(
        topo.operators,
        proposed.policies,
        proposed.proposals,
        requested.decisions,
        grants.granted,
        strict=True,
    )
    for i, (op, policy, proposal, decision, am) in enumerate(rows):
        change = requested.changes[i]
        explanation = finite(proposal.explanation)
        decision.proposal = {
            "action": int(proposal.action),
            "target": topo.as_dict(proposal.deployment),
            "explanation": explanation,
        }
        if i in requested.rail_reasons:
            decision.granted, decision.reason = False, requested.rail_reasons[i]
        else:
            decision.granted = proposal.action != 0 and am.granted
            decision.reason = am.reason
            if op.name in proposed.staged:
                note = proposed.staged[op.name]
                decision.reason += f"; a staged node-type swap ({note['swap']}): {note['this_step']} first"
            if not decision.granted and am.waits_for_capacity:
                region = op.deployment.region
                decision.reason = (
                    f"waiting for capacity in region {region.name}: {am.reason.removeprefix('denied: ')}"
                )
                awaited = names[am.short_type]
                slots = int(change[names.index(awaited)])
                waiting[op.pk] = (region.pk, awaited, max(slots, 1), decision.reason)
            elif not decision.granted and node_limits.still_awaits(change, names, awaited_before.get(op.pk)):
                awaited = awaited_before[op.pk]
                slots = int(change[names.index(awaited)])
                waiting[op.pk] = (op.deployment.region.pk, awaited, slots, decision.reason)
        grown = explanation.get("calibration")  # the OM re-ranged its rate levels in this step: say so
        if grown and grown.get("event") == "rate range grown":
            old_hi, new_hi = grown["old_range_tuples_s"][1], grown["new_range_tuples_s"][1]
            decision.reason = (
                f"{decision.reason}; {grown['event']}: [0, {old_hi:.6g}) -> [0, {new_hi:.6g}) tuples/s"
            ).lstrip("; ")
        if proposal.action != 0 and not decision.granted:
            policy.override_last_action(0)
            p.control.denied_total += 1
        elif decision.granted and app.dry_run:
            policy.override_last_action(0)  # nothing changes on the engine: learn what really happens
        if decision.granted:
            out.plan[op.name] = topo.as_dict(proposal.deployment)
            out.before[op.name] = decision.deployment
            decision.outcome = Decision.Outcome.DRY_RUN if app.dry_run else Decision.Outcome.APPLYING
            _expect_gain(p, op.name, policy, proposal, decision, change)
        else:
            decision.outcome = Decision.Outcome.DENIED if proposal.action != 0 else Decision.Outcome.NO_CHANGE
            decision.applied = decision.deployment
            decision.finished_at = timezone.now()
    if waiting or p.app_mem.waiting:
        node_limits.record_waiting(app, waiting, p.tick.slot)
        p.app_mem.waiting = len(waiting)
    # an operator stays node-limited while its scale-out waits: the region's demand with its fewer-replica
    # request may fit, and going back to the request that did not would wait for nodes that never come
    waiting_names = {op.name for op in topo.operators if op.pk in waiting}
    limited = node_limits.limited(topo, waiting, grants.capacity.snapshots) | (
        proposed.node_limited & waiting_names
    )
    if limited or proposed.node_limited:
        p.app_mem.node_limited = sorted(limited)
    return out


def _expect_gain(
    p: TickContext, name: str, policy: Policy, proposal: Proposal, decision: Decision, change: np.ndarray
) -> None:
    """A granted scale-up: remember the capacity before it and the gain the OM's model expects (tuples/s), for
    the ineffective-scale-up rail of the next period (:func:`autoscaler.control.rails.check_ineffective`)."""
    model = policy.planning_model()  # what the OM learned (or was told) of the operator
    if not (change > 0).any() or model is None:
        return
    spec = policy.spec
    k_old = p.topo.vector(decision.deployment)
    gain = model.capacity(proposal.deployment, spec.speedups) - model.capacity(k_old, spec.speedups)
    p.memory.setdefault(name, {}).update(
        pending_check={
            "slot": p.tick.slot,
            "capacity_before": measured_capacity(p.operator_metrics(name)),
            "expected_gain": float(gain),
        }
    )


# ---- 5. consolidation, guard, persistence ------------------------------------------------------------------------
def record(
    p: TickContext,
    agents: dict[int, AgentState],
    proposed: Proposals,
    requested: Requests,
    grants: Grants,
    settled: Settled,
    reconfigured: bool,
) -> tuple[str, int]:
    """The IM's pending consolidation joins the plan (or spends its own token), the guard sees the period, then
    agent states, decisions, aggregates and the memory are written; returns the tick's next status and the
    number of decisions."""
    app, tick, control = p.app, p.tick, p.control
    decisions = requested.decisions
    # the application-level violation: any path above its bound (R_max or its override), else any operator
    if p.metrics.path_response_time_s:
        violated_app = any(
            (v is None or not np.isfinite(v) or v * 1000.0 > app.r_max_ms)
            for v in p.metrics.path_response_time_s.values()
        )
    else:
        violated_app = requested.violated_any
    # the IM's pending consolidation: in this period's batched reconfiguration, or its own if a token is left
    consolidation.take(app, tick, decisions, settled.plan, settled.before, grants.arbiter.bucket)
    control.bucket_tokens = grants.arbiter.bucket.tokens
    run_guard(app, tick, control, p.app_mem, proposed.policies, violated_app, guard_params(p.am_options))
    # persist: agent states, decisions, aggregates, ledger -- one transaction (the caller's)
    save_agents(p.topo, proposed.policies, agents, tick.slot, control.am_config_version)
    Decision.objects.bulk_create(decisions)
    aggregates.record_period(
        control,
        violated=violated_app,
        reconfigured=reconfigured,
        cost=requested.cost,
        seconds=p.period_s,
        at_s=p.now_s,
    )
    control.decisions_total += len(decisions)
    p.app_mem.store_in(p.memory)
    control.operator_memory = p.memory
    if settled.plan and not app.dry_run:
        tick.plan, tick.before = settled.plan, settled.before
        return Tick.Status.APPLYING, len(decisions)
    tick.plan = settled.plan or None
    return Tick.Status.DONE, len(decisions)
