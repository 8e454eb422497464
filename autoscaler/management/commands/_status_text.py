"""Text of resources for ``manage.py get`` and ``manage.py describe``: one-line spec and status summaries,
ages, and the described sections (spec, status, history)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import yaml
from django.utils import timezone

from autoscaler import models as m
from autoscaler.control.resource_status import status_of
from autoscaler.manifests import export_resource

HISTORY_SHOWN = 10  # history rows ``describe`` prints, newest first


def replicas_text(replicas: dict[str, int] | None) -> str:
    """``A1x1 A2x2`` (node type x count by node-type name, zero counts left out); ``-`` for none."""
    if replicas is None:
        return "-"
    return " ".join(f"{t}x{n}" for t, n in sorted(replicas.items()) if n) or "none"


def age(since: dt.datetime | None, now: dt.datetime | None = None) -> str:
    """Time since ``since`` like kubectl: 45s, 12m, 3h, 2d."""
    if since is None:
        return "-"
    seconds = max(((now or timezone.now()) - since).total_seconds(), 0.0)
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds >= size:
            return f"{int(seconds // size)}{unit}"
    return f"{int(seconds)}s"


def spec_summary(obj: Any) -> str:
    if isinstance(obj, m.Deployment):
        return f"{obj.operator.application.name}/{obj.operator.name} in {obj.region.name}: {replicas_text(obj.replicas)}"
    if isinstance(obj, m.Application):
        return f"{obj.engine}, {obj.operators.count()} operators, state {obj.state}{', dry run' if obj.dry_run else ''}"
    if isinstance(obj, m.Region):
        return f"catalog {obj.catalog.name}, max {obj.max_nodes} nodes"
    return f"{obj.node_types.count()} node types"


def status_summary(status: dict[str, Any] | None, kind: str) -> str:
    if status is None:
        return "-"
    if kind == "Deployment":
        if not status["observed"]:
            return "not observed yet"
        decision = status["decision"]
        by = f", decision {decision['id']}" if decision else f", {status['source']}"
        return f"{replicas_text(status['replicas'])} ({status['costPerHour']:.3f}/h{by})"
    tick = status["lastTick"]
    cost = "" if status["costPerHour"] is None else f", {status['costPerHour']:.3f}/h"
    return f"{status['phase']}" + (f" (slot {tick['slot']}{cost})" if tick else cost)


def table(rows: list[list[str]]) -> str:
    """Columns padded to their widest cell, separated by three spaces."""
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "   ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip() for row in rows
    )


def get_table(kind: str, objects: list[Any]) -> str:
    rows = [["NAME", "SPEC", "STATUS", "AGE"]]
    for obj in objects:
        rows.append([obj.name, spec_summary(obj), status_summary(status_of(obj), kind), age(obj.created_at)])
    return table(rows)


def describe(kind: str, obj: Any) -> str:
    """Name, kind, age, spec (as in the manifest), status and, for a deployment, its recent history with the
    decisions that made each change (id, outcome, reason)."""
    doc = export_resource(obj)
    status = status_of(obj)
    parts = [f"Name:  {obj.name}", f"Kind:  {kind}", f"Age:   {age(obj.created_at)}", "Spec:"]
    parts.append(_indented(doc["spec"]))
    if status is not None:
        parts += ["Status:", _indented(status)]
    if isinstance(obj, m.Deployment):
        parts.append(f"History (newest first, at most {HISTORY_SHOWN}):")
        rows = [["CHANGED", "REPLICAS", "SOURCE", "DECISION", "REASON"]]
        for h in obj.history.select_related("decision")[:HISTORY_SHOWN]:
            d = h.decision
            rows.append(
                [
                    h.changed_at.isoformat(timespec="seconds"),
                    replicas_text(h.replicas),
                    h.source,
                    f"{d.pk} (slot {d.slot}, {d.outcome})" if d else "-",
                    (d.reason if d else "") or "-",
                ]
            )
        parts.append(_indent(table(rows)) if len(rows) > 1 else "  <none>")
    return "\n".join(parts)


def _indented(value: Any) -> str:
    return _indent(yaml.safe_dump(value, sort_keys=False, default_flow_style=False).rstrip())


def _indent(text: str) -> str:
    return "\n".join("  " + line for line in text.splitlines())
