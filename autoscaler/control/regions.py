"""RM step + IM arbitration of one region per RM period (paper 004 Sec. 6), realised through the region's
NodeProvider and recorded durably (``RegionTick``: one row per (region, slot); ``RegionNode``: every node).

Policies (the rule when applications disagree). The RM and IM policies of a region are the ones DECLARED by the
applications placed in it (``spec.policies.rm`` / ``spec.policies.im`` with their params; "placed" = the region
is in ``spec.regions`` or an operator's Deployment runs there; deleted applications do not count). When several
applications declare different policies (or params) for the same level, the FIRST DECLARED wins (the oldest
application, by creation time then id) and every step records a warning naming the applications overruled, in
``RegionTick.warnings`` (shown with the region's decisions). A level no application declares uses
``AUTOSCALER_RM_POLICY`` ("simple") / "cheapest-first" with default params. When the policy or its params
change, the RM agent starts afresh (recorded as a warning); otherwise its state carries over from the previous
step bit-exactly.

Period. ``RegionControl.rm_period_s`` (s, per region, editable through the admin or ``set_rm_period``);
unset = the shortest OM period of the running applications placed in the region. Slot ``s`` starts at
``s * period``; the step of slot ``s`` runs once (a duplicate returns the recorded decisions).

Nodes. The provider is ``Region.provider`` (``connectors.providers.build_provider``; ``bookkeeping`` regions use
``autoscaler.control.nodes.LedgerProvider`` over the durable rows). With a bookkeeping provider the nodes that running
replicas without a slot need are adopted as ready (see below); with a real provider every step reconciles:
nodes the provider runs that are not recorded are adopted, recorded nodes it no longer runs become ``lost`` (a
booting node only one RM period after its ready time: new nodes may register with their cluster late).
An acquired node is ``booting`` until ``acquired + Region.provisioningDelayS``, then ``ready``; only ready nodes
host replicas and count as capacity. A release stops only idle nodes: a ready node is busy when the placement
ledger (``autoscaler.control.placement``, reconciled with what runs at every step) puts a replica on it, or when
the provider says so. After the grants the IM proposes consolidations to the AMs
(``autoscaler.control.consolidation``): moves that empty partly used nodes, which the RM/IM releases once they
are idle. Provider failures are recorded (``RegionTick.executed`` / ``RegionControl.last_error``) and the RM is
told what was really done.

State given to the RM: ``active`` = ready nodes per type, ``pending`` = booting, ``idle`` = ready and not busy,
``used_slots``/``total_slots`` = replicas running or granted / slots on ready nodes, ``utilisation`` = used / total
slots, ``unsatisfied`` / ``waiting_slots`` / ``waiting`` (per type) = the scale-outs of running applications
waiting for capacity in this region (``WaitingRequest``, written by the application ticks; the M_r term of the RM
cost) plus replicas without a slot, ``free_slots`` per type.

Node accounting (one source of truth, ``autoscaler.control.capacity``). Each step rebuilds
``RegionControl.capacity`` from the active node rows, the replicas the engines run and the AMs' grants still being
applied (their tick is ``applying``; they hold a slot in the placement ledger like a running replica, so the node
they will run on is neither idle nor released); application ticks grant and reserve within it. It carries the
ready / pending / used / free nodes per type that the RM state, the API and the dashboard show. Replicas that run
without a slot: a bookkeeping region adopts nodes for them (at its first step all of them, later those of
deployments applied since); with a real provider they count as waiting demand for the RM (``unplaced``). The RM
sees per node type what the waiting scale-outs wait for (``RegionState.waiting``) and acquires that type.
A region whose provider reports nodes of types outside its catalog (e.g. a user's own Spark workers,
``managed: false``) publishes no capacity: the AM does not limit grants there (recorded as a warning).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q

from autoscaler.control import capacity, consolidation, placement
from autoscaler.control.json_safe import finite
from autoscaler.control.models import RegionControl, RegionNode, RegionTick, Tick, WaitingRequest
from autoscaler.control.nodes import LedgerProvider, active_nodes, region_provider
from autoscaler.models import Application, Region
from connectors.infrastructure import NodeProvider, NodeSpec, ProviderError
from connectors.providers import ProviderUnavailable
from policies import options, registry
from policies.im.global_policy import RegionQuota
from policies.operator_model import NodeType as PolicyNodeType
from policies.rm.base import RegionState

DEFAULT_RM_PERIOD_S = 60.0
DEFAULT_IM_POLICY = "cheapest-first"


def default_rm_policy() -> str:
    return str(getattr(settings, "AUTOSCALER_RM_POLICY", "simple"))


def rm_period_s() -> float:
    """The default RM period (s) when a region has neither its own period nor applications."""
    return float(getattr(settings, "AUTOSCALER_RM_PERIOD_S", DEFAULT_RM_PERIOD_S))


def placed_applications(region: Region):
    """Applications placed in ``region`` (declared region or a deployment there), oldest first."""
    return (
        Application.objects.filter(Q(regions=region) | Q(operators__deployment__region=region))
        .exclude(state=Application.State.DELETED)
        .distinct()
        .order_by("created_at", "pk")
    )


def region_period_s(region: Region, control: RegionControl | None = None) -> float:
    """The region's RM period (s): its own setting, else the shortest OM period of its running applications."""
    control = control or RegionControl.objects.filter(region=region).first()
    if control is not None and control.rm_period_s:
        return float(control.rm_period_s)
    periods = (
        placed_applications(region)
        .filter(state=Application.State.RUNNING)
        .values_list("om_period_s", flat=True)
    )
    return float(min(periods, default=rm_period_s()))


def set_rm_period(region: Region, period_s: float | None) -> RegionControl:
    """Set (or with None clear) the region's RM period; takes effect at the next dispatch, no restart."""
    if period_s is not None and (not isinstance(period_s, (int, float)) or not period_s > 0):
        raise ValueError(f"rm_period_s: must be a number of seconds > 0, got {period_s!r}")
    control, _ = RegionControl.objects.get_or_create(region=region)
    control.rm_period_s = period_s
    control.save(update_fields=["rm_period_s", "updated_at"])
    return control


def declared_policy(region: Region, level: str, default: str) -> tuple[str, dict[str, Any], str, list[str]]:
    """(name, params, source, warnings) of the ``level`` ("rm"/"im") policy in force (first declared wins)."""
    chosen: tuple[str, dict[str, Any], str] | None = None
    warnings: list[str] = []
    for app in placed_applications(region).only("pk", "name", "policies", "created_at"):
        value = (app.policies or {}).get(level)
        if value is None:
            continue
        name = value if isinstance(value, str) else str(value.get("name"))
        params = {} if isinstance(value, str) else dict(value.get("params") or {})
        if chosen is None:
            chosen = (name, params, f"declared by application {app.name!r}")
        elif (name, params) != chosen[:2]:
            warnings.append(
                f"application {app.name!r} declares {level} policy {name!r} {params or ''}".rstrip()
                + f" but region {region.name!r} runs {chosen[0]!r} {chosen[2]} (first declared wins)"
            )
    if chosen is None:
        return default, {}, "default (no application declares one)", warnings
    return chosen[0], chosen[1], chosen[2], warnings


def catalog_of(region: Region) -> tuple[PolicyNodeType, ...]:
    return tuple(
        PolicyNodeType(t.name, float(t.speedup), float(t.price_per_hour), t.cores, t.memory_mib)
        for t in region.catalog.node_types.order_by("position")
    )


def used_replicas(
    region: Region, names: list[str], running: dict[str, dict[str, int]] | None = None
) -> np.ndarray:
    """Replicas per node type the region's applications run now (``placement.running_replicas``)."""
    used = np.zeros(len(names), dtype=np.int64)
    index = {n: i for i, n in enumerate(names)}
    for per_type in (placement.running_replicas(region) if running is None else running).values():
        for t, n in per_type.items():
            if t in index:
                used[index[t]] += int(n)
    return used


def region_step(
    region_id: int, slot: int, provider: NodeProvider | None = None, now_s: float | None = None
) -> dict[str, Any]:
    """Run the RM step and IM arbitration of the region for ``slot`` once (a duplicate returns the record).

    ``provider`` replaces the region's declared provider (tests); ``now_s`` (s since the epoch) defaults to the
    start of the slot."""
    region = Region.objects.select_related("catalog").get(pk=region_id)
    control, _ = RegionControl.objects.get_or_create(region=region)
    period_s = region_period_s(region, control)
    now_s = slot * period_s if now_s is None else float(now_s)
    with transaction.atomic():
        try:
            row, _ = RegionTick.objects.select_for_update().get_or_create(region=region, slot=slot)
        except IntegrityError:
            row = RegionTick.objects.select_for_update().get(region=region, slot=slot)
        if row.policy:
            return {"duplicate": True, "decisions": row.decisions}
        control = RegionControl.objects.select_for_update().get(pk=control.pk)
        return _step(StepScope(region, control, row, slot, period_s, now_s), provider)


@dataclass
class StepScope:
    """The region step in progress: its region and control row (locked), its RegionTick row, the slot, the RM's
    period (s) and the step's time (s since the epoch)."""

    region: Region
    control: RegionControl
    row: RegionTick
    slot: int
    period_s: float
    now_s: float


@dataclass
class Policies:
    """The region's RM and IM policies as declared (name, params, where the choice came from)."""

    rm_name: str
    rm_params: dict[str, Any]
    rm_source: str
    im_name: str
    im_params: dict[str, Any]
    im_source: str


@dataclass
class Observed:
    """What a region step observed before its RM decides: the catalog (names, slots per node, rows), the node rows
    and the ready ones, the replicas running and granted (``occupied``: the placement ledger's input) and their
    counts per type, the replicas without a slot (``unplaced``), the busy nodes, the RM's state and the provider's
    actions so far (``executed``)."""

    catalog: tuple[PolicyNodeType, ...]
    names: list[str]
    cores: np.ndarray
    specs: dict[str, Any]
    provider: NodeProvider
    rows: list[RegionNode]
    ready: list[RegionNode]
    running: Any
    kept: list[dict[str, Any]]
    used: np.ndarray
    needed: np.ndarray
    unplaced: dict[str, int]
    busy_ids: set[str]
    state: RegionState
    executed: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class Decided:
    """What the RM proposed and the IM granted in a step, what the provider did of it (``done``: per proposal
    ``id``, the nodes added or released) and the IM's consolidation proposals."""

    rm: Any
    proposals: list[Any]
    decisions: list[Any]
    done: dict[int, int]
    consolidations: list[Any]


def _step(scope: StepScope, provider: NodeProvider | None) -> dict[str, Any]:
    """observe -> RM proposes, IM grants -> realise through the provider -> record (see module doc)."""
    region, control, row = scope.region, scope.control, scope.row
    rm_name, rm_params, rm_source, warnings = declared_policy(region, "rm", default_rm_policy())
    im_name, im_params, im_source, im_warnings = declared_policy(region, "im", DEFAULT_IM_POLICY)
    warnings += im_warnings
    chosen = Policies(rm_name, rm_params, rm_source, im_name, im_params, im_source)
    row.period_s = scope.period_s
    seen = _observe(scope, provider)
    if isinstance(seen, str):
        return _no_action(row, control, rm_name, seen, warnings)
    rm, proposals, im, decisions = _propose_and_grant(scope, chosen, seen, warnings)
    done = _realise(scope, seen, decisions)
    rm.granted(proposals, [done.get(id(p), 0) for p in proposals])
    # the IM's post-reconfiguration step: consolidation proposals for the applications' AMs
    ready_after = [r for r in seen.rows if r.state == RegionNode.State.READY]
    consolidations = consolidation.propose(region, im, seen.catalog, ready_after, scope.slot)
    decided = Decided(rm, proposals, decisions, done, consolidations)
    return _record(scope, chosen, seen, decided, warnings)


def _observe(scope: StepScope, provider: NodeProvider | None) -> Observed | str:
    """The provider's nodes reconciled with the durable record, booting nodes that became ready, replicas
    placed (a bookkeeping region adopts nodes for replicas without one), and the RM's state; a string (the
    error) when the provider cannot be reached."""
    region, control, slot, now_s = scope.region, scope.control, scope.slot, scope.now_s
    catalog = catalog_of(region)
    names = [t.name for t in catalog]
    cores = np.array([max(t.cores, 1) for t in catalog], dtype=np.int64)
    specs = {t.name: t for t in region.catalog.node_types.all()}
    executed: list[dict[str, Any]] = []
    rows = active_nodes(region)
    running = placement.running_replicas(region)
    kept = pending_grants(control.capacity or {})
    occupied = placement.with_grants(running, kept)
    used = used_replicas(region, names, occupied)
    needed = np.ceil(used / cores).astype(np.int64)
    slots_per_type = {n: int(c) for n, c in zip(names, cores, strict=True)}
    try:
        provider = provider or region_provider(region, rows, slot)
    except (ProviderUnavailable, ValueError) as exc:  # unknown kind, or the provider rejects its settings
        return f"provider unavailable: {exc}"
    seen = None
    if not isinstance(provider, LedgerProvider):
        try:
            seen = {n.node_id: n for n in provider.nodes()}
        except ProviderError as exc:
            return f"provider failed to list nodes: {exc}"
        rows, changes = _reconcile(region, rows, seen, slot, now_s, provider.kind, grace_s=scope.period_s)
        executed += changes
    # a booting node becomes capacity at its ready time, and (real providers) once the provider lists it
    became_ready = [
        r
        for r in rows
        if r.state == RegionNode.State.BOOTING
        and r.ready_at_s <= now_s
        and (seen is None or r.node_id in seen)
    ]
    for r in became_ready:
        r.state = RegionNode.State.READY
    RegionNode.objects.filter(pk__in=[r.pk for r in became_ready]).update(state=RegionNode.State.READY)
    ready = [r for r in rows if r.state == RegionNode.State.READY]
    unplaced = placement.reconcile(ready, occupied, slots_per_type)
    if isinstance(provider, LedgerProvider) and unplaced:
        # bookkeeping: replicas that run (or were granted) without a node have one -- at the first step all of
        # them, later those of deployments applied since (a new application, a manifest): adopt the nodes
        adopted = _adopt(region, provider, unplaced, slots_per_type, slot, now_s, specs)
        executed.append({"adopted": [r.node_id for r in adopted]})
        rows += adopted
        ready += adopted
        unplaced = placement.reconcile(ready, occupied, slots_per_type)
    busy_ids = _busy(ready, unplaced, provider)
    state = _rm_state(region, names, cores, rows, ready, used, unplaced, busy_ids)
    return Observed(
        catalog,
        names,
        cores,
        specs,
        provider,
        rows,
        ready,
        running,
        kept,
        used,
        needed,
        unplaced,
        busy_ids,
        state,
        executed,
    )


def _rm_state(region, names, cores, rows, ready, used, unplaced, busy_ids) -> RegionState:
    """The RM's view (module doc): nodes per type ready, booting and idle, slots used and free, and the demand
    waiting for capacity (the waiting scale-outs of running applications plus replicas without a slot)."""
    booting = [r for r in rows if r.state == RegionNode.State.BOOTING]
    active = np.array([sum(r.node_type == n for r in ready) for n in names], dtype=np.int64)
    pending = np.array([sum(r.node_type == n for r in booting) for n in names], dtype=np.int64)
    idle = np.array(
        [sum(r.node_type == n and r.node_id not in busy_ids for r in ready) for n in names], dtype=np.int64
    )
    free_slots = np.array(
        [
            0 if unplaced.get(n) else sum(c - len(r.replicas or []) for r in ready if r.node_type == n)
            for n, c in zip(names, cores, strict=True)
        ],
        dtype=np.int64,
    )
    waiting_rows = WaitingRequest.objects.filter(region=region, application__state=Application.State.RUNNING)
    waiting_by_type = dict.fromkeys(names, 0)
    for t, n in waiting_rows.values_list("node_type", "slots"):
        if t in waiting_by_type:
            waiting_by_type[t] += int(n)
    for t, n in unplaced.items():  # replicas without a slot need one as much as a waiting scale-out
        if t in waiting_by_type:
            waiting_by_type[t] += int(n)
    waiting = np.array([waiting_by_type[n] for n in names], dtype=np.int64)
    unsatisfied = waiting_rows.count() + int(sum(unplaced.values()) > 0)
    total_slots = int((active * cores).sum())
    return RegionState(
        region.name,
        active,
        pending,
        idle,
        int(used.sum()),
        total_slots,
        float(min(used.sum() / total_slots, 1.0)) if total_slots else 0.0,
        unsatisfied,
        int(waiting.sum()),
        waiting=waiting,
        free_slots=free_slots,
    )


def _propose_and_grant(scope: StepScope, chosen: Policies, seen: Observed, warnings: list[str]):
    """The RM learns from the period that ended (its state carried over bit-exactly while its policy and params
    stay) and proposes; the IM grants within the region's quota. Returns (rm, proposals, im, decisions)."""
    region, control, slot = scope.region, scope.control, scope.slot
    rm_name, rm_params = chosen.rm_name, chosen.rm_params
    rm = registry.load("rm", rm_name)(
        region.name,
        seen.catalog,
        k_max=region.max_nodes,
        params=options.resolve("rm", rm_name, rm_params),
        seed=region.pk,
    )
    prev = (
        RegionTick.objects.filter(region=region, slot__lt=slot).exclude(policy="").order_by("-slot").first()
    )
    same = control.rm_policy == rm_name and control.rm_params == rm_params
    if prev is not None and prev.agent_state and prev.policy == rm_name and same:
        rm.load_state(bytes(prev.agent_state))
    elif prev is not None and prev.policy and not same:
        warnings.append(
            f"RM policy changed from {control.rm_policy!r} {control.rm_params} to {rm_name!r} {rm_params}: "
            "the RM agent starts afresh"
        )
    proposals = rm.propose(seen.state)
    im = registry.load("im", chosen.im_name)(
        {region.name: seen.catalog},
        {region.name: RegionQuota(region.max_nodes, region.max_new_nodes_per_period)},
        params=options.resolve("im", chosen.im_name, chosen.im_params),
    )
    decisions = im.decide(proposals, {region.name: seen.state}) if proposals else []
    return rm, proposals, im, decisions


def _realise(scope: StepScope, seen: Observed, decisions) -> dict[int, int]:
    """Acquire and release the granted nodes through the provider; returns, per proposal (``id``), the nodes
    really added (> 0) or released (< 0)."""
    region, slot, now_s = scope.region, scope.slot, scope.now_s
    done: dict[int, int] = {}
    for d in decisions:
        t = d.proposal.node_type
        rows, executed = seen.rows, seen.executed
        if d.granted > 0:
            n = _acquire(
                region, seen.provider, seen.specs[t], d.granted, slot, now_s, d.reason, rows, executed
            )
        elif d.granted < 0:
            n = -_release(
                region, seen.provider, t, -d.granted, seen.busy_ids, slot, now_s, d.reason, rows, executed
            )
        else:
            n = 0
        done[id(d.proposal)] = n
    return done


def _record(
    scope: StepScope, chosen: Policies, seen: Observed, decided: Decided, warnings: list[str]
) -> dict[str, Any]:
    """The step's row (state, proposals, decisions, warnings, what the provider did, the RM's state) and the
    region's capacity document (:mod:`autoscaler.control.capacity`)."""
    region, control, row, slot, period_s = scope.region, scope.control, scope.row, scope.slot, scope.period_s
    proposals, decisions, done = decided.proposals, decided.decisions, decided.done
    names, cores, state, provider = seen.names, seen.cores, seen.state, seen.provider
    rows, unplaced, busy_ids, executed = seen.rows, seen.unplaced, seen.busy_ids, seen.executed
    ready_after = [r for r in rows if r.state == RegionNode.State.READY]
    row.policy = chosen.rm_name
    row.state = {
        "node_types": names,
        "active": state.active.tolist(),
        "pending": state.pending.tolist(),
        "idle": state.idle.tolist(),
        "used_replicas": seen.used.tolist(),
        "needed_nodes": seen.needed.tolist(),
        "used_slots": state.used_slots,
        "total_slots": state.total_slots,
        "utilisation": state.utilisation,
        "unsatisfied": state.unsatisfied,
        "waiting_slots": state.waiting_slots,
        "waiting": state.waiting.tolist(),
        "free_slots": state.free_slots.tolist(),
        "period_s": period_s,
        "rm": {"policy": chosen.rm_name, "params": chosen.rm_params, "source": chosen.rm_source},
        "im": {"policy": chosen.im_name, "params": chosen.im_params, "source": chosen.im_source},
        "provider": provider.kind,
        "placement": placement.layout(ready_after),
        "unplaced": unplaced,
        "consolidation": [
            {"application": c.application_id, "moves": c.moves, "frees": c.frees, "reason": c.reason}
            for c in decided.consolidations
        ],
    }
    row.proposals = [
        {
            "node_type": p.node_type,
            "delta": p.delta,
            "reason": p.reason,
            "explanation": finite(p.explanation),
        }
        for p in proposals
    ]
    row.decisions = [
        {
            "node_type": d.proposal.node_type,
            "requested": d.proposal.delta,
            "granted": d.granted,
            "executed": done.get(id(d.proposal), 0),
            "reason": d.reason,
        }
        for d in decisions
    ]
    row.warnings = warnings
    row.executed = executed
    row.agent_state = decided.rm.state_bytes()
    row.save()
    control.rm_policy, control.rm_params = chosen.rm_name, chosen.rm_params
    control.im_policy, control.im_params = chosen.im_name, chosen.im_params
    control.policy_source = f"rm: {chosen.rm_source}; im: {chosen.im_source}"
    foreign = sorted({r.node_type for r in ready_after if r.node_type not in names})
    if foreign:
        warnings.append(
            f"nodes of types outside the catalog ({', '.join(foreign)}): the AM's capacity is not enforced in "
            f"region {region.name!r}"
        )
        row.warnings = warnings
        row.save(update_fields=["warnings"])
    booting_after = [r for r in rows if r.state == RegionNode.State.BOOTING]
    control.capacity = (
        {}
        if foreign
        else capacity.build(
            int((control.capacity or {}).get("version", 0)) + 1,
            slot,
            {
                n: {
                    "cores": int(c),
                    "ready": sum(r.node_type == n for r in ready_after),
                    "pending": sum(r.node_type == n for r in booting_after),
                    "idle": sum(r.node_type == n and r.node_id not in busy_ids for r in ready_after),
                }
                for n, c in zip(names, cores, strict=True)
            },
            placement.replicas_by_application(seen.running, names),
            seen.kept,
            unplaced,
        )
    )
    if control.capacity:
        row.state["nodes"] = capacity.node_counts(control.capacity)
        row.save(update_fields=["state"])
    errors = [e["error"] for e in executed if "error" in e]
    control.last_error = f"slot {slot}: {errors[-1]}" if errors else ""
    control.save()
    provider.close()
    return {"duplicate": False, "decisions": row.decisions, "warnings": warnings}


def _no_action(row, control, rm_name, error, warnings) -> dict[str, Any]:
    row.policy = rm_name
    row.warnings = warnings
    row.executed = [{"error": error}]
    row.decisions = []
    row.save()
    control.last_error = f"slot {row.slot}: {error}"
    control.save(update_fields=["last_error", "updated_at"])
    return {"duplicate": False, "decisions": [], "error": error, "warnings": warnings}


def _adopt(region, provider, unplaced, cores, slot, now_s, specs) -> list[RegionNode]:
    """Bookkeeping regions: the nodes that replicas without a slot run on exist (adopted as ready)."""
    rows = []
    for name, n in sorted(unplaced.items()):
        count = math.ceil(int(n) / max(cores.get(name, 1), 1))
        if count <= 0 or name not in specs:
            continue
        t = specs[name]
        for node in provider.acquire(
            NodeSpec(name, t.cores, t.memory_mib, t.speedup, t.price_per_hour), count
        ):
            rows.append(
                RegionNode(
                    region=region,
                    node_id=node.node_id,
                    node_type=name,
                    state=RegionNode.State.READY,
                    provider=provider.kind,
                    acquired_slot=slot,
                    acquired_at_s=now_s,
                    ready_at_s=now_s,
                    reason=f"adopted: hosts {int(n)} running replica(s) of {name} that had no node",
                )
            )
    return RegionNode.objects.bulk_create(rows)


def pending_grants(doc: dict[str, Any]) -> list[dict[str, Any]]:
    """The grants of ``doc`` whose tick is still applying them (the others run now, or failed)."""
    grants = [g for g in doc.get("grants") or [] if isinstance(g, dict) and g.get("app") is not None]
    if not grants:
        return []
    applying = set(
        Tick.objects.filter(
            application_id__in={int(g["app"]) for g in grants},
            status=Tick.Status.APPLYING,
            application__state=Application.State.RUNNING,
        ).values_list("application_id", "slot")
    )
    apps_applying = {a for a, _ in applying}
    return [
        g
        for g in grants
        if (int(g["app"]), g.get("slot")) in applying
        or (g.get("slot") is None and int(g["app"]) in apps_applying)
    ]


def _reconcile(
    region, rows, seen, slot, now_s, kind, grace_s
) -> tuple[list[RegionNode], list[dict[str, Any]]]:
    """Adopt what the provider runs unrecorded; a recorded node the provider does not report is lost, except a
    booting node until one period after its ready time (a new node may register with its cluster late)."""
    changes = []
    kept = []
    for r in rows:
        if r.node_id in seen or (r.state == RegionNode.State.BOOTING and now_s < r.ready_at_s + grace_s):
            kept.append(r)
            continue
        r.state, r.released_slot, r.released_at_s = RegionNode.State.LOST, slot, now_s
        r.reason += "; lost: the provider no longer runs it"
        r.save()
        changes.append({"lost": r.node_id})
    known = {r.node_id for r in rows}
    for node_id, node in seen.items():
        if node_id in known:
            continue
        kept.append(
            RegionNode.objects.create(
                region=region,
                node_id=node_id,
                node_type=node.node_type,
                state=RegionNode.State.READY,
                provider=kind,
                acquired_slot=slot,
                acquired_at_s=now_s,
                ready_at_s=now_s,
                reason="adopted: found running at the provider",
                details=finite(node.details),
            )
        )
        changes.append({"adopted": node_id})
    return kept, changes


def _busy(ready: list[RegionNode], unplaced: dict[str, int], provider: NodeProvider) -> set[str]:
    """Ready nodes that host replicas in the placement ledger (all of a type with unplaced replicas), plus
    those the provider calls busy."""
    busy = placement.busy_nodes(ready, unplaced)
    if isinstance(provider, LedgerProvider):
        provider.mark_busy(busy)
    else:
        try:
            busy.update(n.node_id for n in provider.nodes() if n.busy)
        except ProviderError:
            busy.update(r.node_id for r in ready)  # cannot tell: release nothing
    return busy


def _acquire(region, provider, t, n, slot, now_s, reason, rows, executed) -> int:
    spec = NodeSpec(t.name, t.cores, t.memory_mib, t.speedup, t.price_per_hour)
    try:
        started = provider.acquire(spec, n)
    except ProviderError as exc:
        executed.append({"acquire": t.name, "count": n, "error": f"acquire failed: {exc}"})
        return 0
    delay = float(region.provisioning_delay_s or 0.0)
    new = []
    for node in started:
        new.append(
            RegionNode(
                region=region,
                node_id=node.node_id,
                node_type=t.name,
                state=RegionNode.State.READY if delay <= 0 else RegionNode.State.BOOTING,
                provider=provider.kind,
                acquired_slot=slot,
                acquired_at_s=now_s,
                ready_at_s=now_s + delay,
                reason=reason,
                details=finite(node.details),
            )
        )
    rows += RegionNode.objects.bulk_create(new)
    executed.append({"acquired": [node.node_id for node in started], "node_type": t.name})
    return len(started)


def _release(region, provider, name, n, busy_ids, slot, now_s, reason, rows, executed) -> int:
    idle = [
        r
        for r in rows
        if r.node_type == name and r.state == RegionNode.State.READY and r.node_id not in busy_ids
    ]
    chosen = [r.node_id for r in reversed(idle)][:n]  # newest first
    if not chosen:
        return 0
    try:
        stopped = set(provider.release(chosen))
    except ProviderError as exc:
        executed.append({"release": chosen, "error": f"release failed: {exc}"})
        return 0
    gone = [r for r in rows if r.node_id in stopped and r.state == RegionNode.State.READY]
    for r in gone:
        r.state, r.released_slot, r.released_at_s = RegionNode.State.RELEASED, slot, now_s
        r.reason = f"{r.reason}; released: {reason}"
    RegionNode.objects.bulk_update(gone, ["state", "released_slot", "released_at_s", "reason"])
    refused = [i for i in chosen if i not in stopped]
    executed.append(
        {"released": sorted(stopped), "node_type": name, **({"refused": refused} if refused else {})}
    )
    return len(stopped)
