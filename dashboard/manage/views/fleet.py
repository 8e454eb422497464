"""Fleet overview (``/``): each of the user's applications with status, cost per hour, violation and
reconfiguration fractions against budget and the last decision; start and pause buttons.

Cost per hour and replicas are those the engine runs (the deployments' status written by the control loop); a
deployment not observed yet is counted at its declared replicas and the row says so."""

from __future__ import annotations

from typing import Any

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models import OuterRef, Subquery
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import NoReverseMatch, reverse
from django.utils.http import url_has_allowed_host_and_scheme
from django.views.decorators.http import require_POST

from autoscaler import manifests
from autoscaler import models as m
from autoscaler.control.aggregates import summary
from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.schemas import ManifestError

from ..status import (
    budget_status,
    deployed_cost_per_hour,
    node_type_prices,
    unobserved,
    window_fractions,
)


def optional_url(name: str, *args: object) -> str | None:
    """The URL of a page of the web app, or None when no page of that name exists (yet)."""
    try:
        return reverse(name, args=args)
    except NoReverseMatch:
        return None


def decision_url(decision_id: int) -> str:
    """The decision page (``dashboard:decision-detail``) or its literal path while that page does not exist."""
    return optional_url("dashboard:decision-detail", decision_id) or f"/decisions/{decision_id}/"


def fleet_rows(user) -> list[dict[str, Any]]:
    """One row per application of ``user`` (a fixed number of queries, whatever the number of applications).

    The last decision is the one about the latest period (highest slot), on any database."""
    latest = Decision.objects.filter(application=OuterRef("pk")).order_by("-slot", "-id").values("id")[:1]
    apps = list(
        m.Application.objects.filter(owner=user).order_by("name").annotate(last_decision_id=Subquery(latest))
    )
    ids = [a.id for a in apps]
    controls = {c.application_id: c for c in ApplicationControl.objects.filter(application_id__in=ids)}
    deployments: dict[int, list[m.Deployment]] = {}
    for dep in m.Deployment.objects.filter(operator__application_id__in=ids).select_related(
        "region", "operator"
    ):
        deployments.setdefault(dep.operator.application_id, []).append(dep)
    last = {
        d.application_id: d
        for d in Decision.objects.filter(
            id__in=[a.last_decision_id for a in apps if a.last_decision_id is not None]
        ).select_related("operator")
    }
    prices = node_type_prices()
    # one reverse() per page, not per row: names are URL-safe ([A-Za-z0-9._-]) so substitution is exact
    edit_url = reverse("dashboard:app-edit", args=["@@app@@"])
    state_url = reverse("dashboard:app-state", args=["@@app@@"])
    dashboard_url = optional_url("dashboard:app-dashboard", "@@app@@")
    rows = []
    for app in apps:
        control = controls.get(app.id)
        if control is not None:
            control.application = app
        viol, reconf, observed_cost = window_fractions(summary(control) if control else None)
        decision = last.get(app.id)
        deps = deployments.get(app.id, [])
        violations, reconfigurations = budget_status(viol, app.eta_v), budget_status(reconf, app.eta_r)
        rows.append(
            {
                "app": app,
                "cost_per_hour": deployed_cost_per_hour(deps, prices),  # of what the engine runs
                "declared_only": unobserved(deps),  # deployments priced at their spec: not observed yet
                "observed_cost_per_hour": observed_cost,
                "violations": violations,
                "reconfigurations": reconfigurations,
                "budgets": [("Violations", violations), ("Reconfigurations", reconfigurations)],
                "state_url": state_url.replace("@@app@@", app.name),
                "decision": decision,
                "decision_url": decision_url(decision.id) if decision else None,
                "dashboard_url": dashboard_url.replace("@@app@@", app.name) if dashboard_url else None,
                "edit_url": edit_url.replace("@@app@@", app.name),
                "replicas": sum(sum(d.running_replicas.values()) for d in deps),
            }
        )
    return rows


@login_required
def fleet(request: HttpRequest) -> HttpResponse:
    return render(
        request, "dashboard/manage/fleet.html", {"rows": fleet_rows(request.user), "nav_active": "fleet"}
    )


@login_required
@require_POST
def set_state(request: HttpRequest, name: str) -> HttpResponse:
    """Start (``state=running``) or pause (``state=paused``) an application through the validation layer."""
    app = get_object_or_404(m.Application, owner=request.user, name=name)
    state = request.POST.get("state", "")
    if state not in ("running", "paused"):
        messages.error(request, f"state: must be 'running' or 'paused', got {state!r}")
        return redirect("dashboard:fleet")
    doc = manifests.export_resource(app)
    doc["spec"]["state"] = state
    try:
        manifests.apply_documents([doc], request.user, expected_kind="Application", expected_name=name)
    except ManifestError as exc:
        messages.error(request, "; ".join(str(e) for e in exc.errors))
    else:
        messages.success(request, f"{name}: {'started' if state == 'running' else 'paused'}")
    return redirect(safe_next(request) or "dashboard:fleet")


def safe_next(request: HttpRequest) -> str | None:
    """The ``next`` path of a POST when it stays on this site, else None."""
    target = request.POST.get("next") or ""
    if target and url_has_allowed_host_and_scheme(target, {request.get_host()}, request.is_secure()):
        return target
    return None
