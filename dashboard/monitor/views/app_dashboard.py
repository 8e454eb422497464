"""The application dashboard: ``/applications/<name>/`` (page) and ``.../data.json`` (its charts' data)."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render

from autoscaler.control import aggregates
from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.control.resource_status import application_status
from dashboard.manage.forms.application import slo_sentences
from dashboard.monitor import chart_data
from dashboard.monitor.views.common import json_error, json_login_required, owned_application, parse_float


@login_required
def app_dashboard(request, name: str):
    app = owned_application(request, name)
    range_name = request.GET.get("range", "day")
    if range_name not in chart_data.RANGES_S:
        range_name = "day"
    control = ApplicationControl.objects.filter(application=app).first()
    last = (
        Decision.objects.filter(application=app).order_by("-slot", "-id").select_related("operator").first()
    )
    return render(
        request,
        "dashboard/monitor/app_dashboard.html",
        {
            "app": app,
            "range": range_name,
            "ranges": [("hour", "Last hour"), ("day", "Last day"), ("week", "Last week"), ("all", "All")],
            "summary": aggregates.summary(control) if control else None,
            "last_decision": last,
            "running": running_now(app),
            "slo_text": slo_sentences(app.r_max_ms, app.eta_v, app.eta_r, app.om_period_s),
            "nav_active": "fleet",
        },
    )


def running_now(app) -> dict:
    """What the engines run now, from the deployments' status the control loop writes: cost per hour
    (currency/h, None while no deployment has been observed) and per operator its replicas by node type
    (``None`` for an operator not observed yet)."""
    status = application_status(app)
    return {
        "cost_per_hour": status["costPerHour"],
        "operators": [
            (op, None if reps is None else [(t, n) for t, n in sorted(reps.items()) if n])
            for op, reps in status["replicas"].items()
        ],
    }


@json_login_required
def app_data(request, name: str):
    app = owned_application(request, name)
    range_name = request.GET.get("range", "day")
    if range_name not in chart_data.RANGES_S:
        return json_error(400, "range", f"must be one of {', '.join(chart_data.RANGES_S)}")
    try:
        start_ms, end_ms = parse_float(request, "start"), parse_float(request, "end")
        points = parse_float(request, "points")
    except ValueError as exc:
        loc, _, msg = str(exc).partition(": ")
        return json_error(400, loc, msg)
    if start_ms is not None and end_ms is not None and end_ms <= start_ms:
        return json_error(400, "end", "must be after start")
    max_points = chart_data.MAX_POINTS
    if points is not None:
        if not 10 <= points <= chart_data.MAX_POINTS:
            return json_error(400, "points", f"must be in [10, {chart_data.MAX_POINTS}]")
        max_points = int(points)
    body = chart_data.dashboard_json(
        app,
        range_name,
        None if start_ms is None else start_ms / 1000.0,
        None if end_ms is None else end_ms / 1000.0,
        max_points,
    )
    return HttpResponse(body, content_type="application/json")
