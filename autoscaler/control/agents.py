"""Reset, export and import the OM agents of an application (pre-train on a simulator, ship to production).

Export document (JSON)::

    {"format": 1, "application": "<name>", "agents": {"<operator>": {"policy": "ql", "formatVersion": 1,
     "steps": 1234, "state": "<base64 of Policy.state_bytes()>"}}}
"""

from __future__ import annotations

import base64
import binascii
from typing import Any

from django.db import transaction

from autoscaler.control.models import AGENT_STATE_FORMAT, AgentState
from autoscaler.control.tick import application_lock
from autoscaler.control.topology import DEFAULT_OM_POLICY, policy_choice
from autoscaler.models import Application
from policies.base import decode_state

EXPORT_FORMAT = 1


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
