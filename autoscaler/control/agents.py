"""The OM agents of an application: built from their stored state as the control loop runs them (:func:`load_policy`),
reset, exported and imported (pre-train on a simulator, ship to production).

Export document (JSON)::

    {"format": 1, "application": "<name>", "agents": {"<operator>": {"policy": "ql", "formatVersion": 1,
     "steps": 1234, "state": "<base64 of Policy.state_bytes()>"}}}
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.db import transaction
from django.utils import timezone

from autoscaler.control.locks import application_lock
from autoscaler.control.models import AGENT_STATE_FORMAT, AgentState, ApplicationControl
from autoscaler.control.om_config import operator_spec
from autoscaler.control.policy_choice import DEFAULT_OM_POLICY, policy_choice
from autoscaler.control.rails import Rails
from autoscaler.control.topology import Topology
from autoscaler.models import Application, Operator
from policies import registry
from policies.base import Policy, decode_state

EXPORT_FORMAT = 1


def load_policy(
    agent: AgentState | None, op: Operator, topo: Topology, control: ApplicationControl, rails: Rails
) -> Policy:
    """The operator's OM policy as the tick builds it: the application's choice and params, the spec with the
    rails' replica bounds and the AM's configuration, the stored agent state when it is the same policy."""
    name, params = policy_choice(topo.application, "om", DEFAULT_OM_POLICY)
    lo, hi = rails.bounds(op.name, op.max_parallelism)
    spec = operator_spec(topo, op, control.am_config, k_min=lo, k_max=hi)
    cls = registry.load("om", name)
    policy = cls(spec, slo_params(cls, params, topo), seed=op.pk)
    if agent is not None and agent.policy == name and agent.blob:
        policy.load_state(bytes(agent.blob))
        policy.spec.k_min, policy.spec.k_max = spec.k_min, spec.k_max
        if agent.am_config_version != control.am_config_version:
            policy.reconfigure(spec.weights, spec.r_max_s)
    return policy


def slo_params(cls: type[Policy], params: dict[str, Any], topo: Topology) -> dict[str, Any]:
    """``params`` with the policy's SLO parameters (``Policy.SLO_PARAMS``) the user did not set taken from the
    application's SLO. ``violation_budget`` (a fraction of periods) is eta_V divided among the controlled
    operators of the longest source-to-sink path: a path exceeds R_max only in a period in which one of its
    operators exceeds its share of it, so operators within their budgets keep the path within eta_V (a union
    bound). eta_V = 1 (no SLO on violations) gives 0, the policy's "no budget"."""
    if "violation_budget" not in cls.SLO_PARAMS or "violation_budget" in params:
        return params
    eta_v = float(topo.application.eta_v)
    budget = 0.0 if eta_v >= 1.0 else eta_v / max(topo.longest_controlled_path, 1)
    return {**params, "violation_budget": budget}


def reset(application: Application, operators: list[str] | None = None) -> int:
    """Forget what the agents learned (all, or the named operators); the next tick starts fresh. Returns count."""
    with application_lock(application.pk), transaction.atomic():
        rows = AgentState.objects.filter(operator__application=application)
        if operators:
            known = set(application.operators.values_list("name", flat=True))
            for name in operators:
                if name not in known:
                    raise ValueError(
                        f"operators: unknown operator {name!r} of application {application.name!r}"
                    )
            rows = rows.filter(operator__name__in=operators)
        n, _ = rows.delete()
        return n


def export(application: Application) -> dict[str, Any]:
    agents = AgentState.objects.filter(operator__application=application).select_related("operator")
    return {
        "format": EXPORT_FORMAT,
        "application": application.name,
        "agents": {
            a.operator.name: {
                "policy": a.policy,
                "formatVersion": a.format_version,
                "steps": a.steps,
                "state": base64.b64encode(bytes(a.blob)).decode("ascii"),
            }
            for a in agents
        },
    }


def import_(application: Application, document: Any) -> int:
    """Install exported agents (validated first; nothing is written when any entry is invalid). Returns count."""
    if not isinstance(document, dict):
        raise ValueError("document: must be a JSON object")
    if document.get("format") != EXPORT_FORMAT:
        raise ValueError(
            f"format: unsupported export format {document.get('format')!r} (expected {EXPORT_FORMAT})"
        )
    entries = document.get("agents")
    if not isinstance(entries, dict) or not entries:
        raise ValueError("agents: must be a non-empty object operator -> agent")
    policy, _ = policy_choice(application, "om", DEFAULT_OM_POLICY)
    ops = {op.name: op for op in application.operators.all()}
    parsed = []
    for name, entry in entries.items():
        loc = f"agents.{name}"
        if name not in ops:
            raise ValueError(f"{loc}: unknown operator of application {application.name!r}")
        if not isinstance(entry, dict):
            raise ValueError(f"{loc}: must be an object")
        if entry.get("policy") != policy:
            raise ValueError(
                f"{loc}.policy: state of policy {entry.get('policy')!r}, the application runs {policy!r}"
            )
        if entry.get("formatVersion", AGENT_STATE_FORMAT) != AGENT_STATE_FORMAT:
            raise ValueError(f"{loc}.formatVersion: unsupported {entry.get('formatVersion')!r}")
        try:
            blob = base64.b64decode(str(entry.get("state", "")), validate=True)
            meta, _ = decode_state(blob)
        except (binascii.Error, ValueError, KeyError, OSError) as exc:
            raise ValueError(f"{loc}.state: not a valid agent state ({exc})") from None
        if meta.get("policy") != policy:
            raise ValueError(f"{loc}.state: encodes policy {meta.get('policy')!r}, not {policy!r}")
        parsed.append((ops[name], blob, int(meta.get("t", 0))))
    with application_lock(application.pk), transaction.atomic():
        for op, blob, steps in parsed:
            AgentState.objects.update_or_create(
                operator=op,
                defaults={
                    "policy": policy,
                    "format_version": AGENT_STATE_FORMAT,
                    "blob": blob,
                    "steps": steps,
                    "am_config_version": 0,
                },
            )
    return len(parsed)


def save_agents(
    topo: Topology, policies: list[Policy], agents: dict[int, AgentState], slot: int, version: int
) -> None:
    """Write every OM's state after its step of tick ``slot`` under AM configuration ``version`` (one upsert)."""
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
