"""Decision explorer: ``/decisions/`` (filterable table) and ``/decisions/<id>/`` (one decision in full).

A decision's time is the time of the period it is about, ``slot * period_s`` (s since the epoch, UTC), the time
the dashboard's charts place it at; the table shows, orders and filters by that time, not by when the row was
written (a backfilled or replayed decision is listed with the period it is about). See
``dashboard.monitor.decision_query``."""

from __future__ import annotations

import datetime as dt

from django.contrib.auth.decorators import login_required
from django.shortcuts import get_object_or_404, render

from autoscaler.control.models import Decision
from autoscaler.models import Application
from dashboard.monitor import decision_query
from dashboard.monitor.forms import DecisionFilter
from dashboard.monitor.rollup import explored

PAGE_SIZE = 50
OBSERVED_FIELDS = (
    ("input_rate", "Input rate", "tuples/s"),
    ("processing_rate", "Processing rate", "tuples/s"),
    ("utilisation", "Utilisation", "fraction"),
    ("response_time_s", "Mean response time", "s"),
    ("response_time_p95_s", "p95 response time", "s"),
    ("service_time_mean_s", "Mean service time", "s"),
    ("backlog", "Backlog", "tuples"),
)


def _utc(value: dt.datetime) -> dt.datetime:
    return value.replace(tzinfo=dt.UTC) if value.tzinfo is None else value.astimezone(dt.UTC)


def period_time(d: Decision) -> dt.datetime:
    """The time (UTC) of the period decision ``d`` is about, as the dashboard's charts place it."""
    return dt.datetime.fromtimestamp(d.slot * d.tick.period_s, tz=dt.UTC)


@login_required
def decision_list(request):
    owned = dict(Application.objects.filter(owner=request.user).order_by("name").values_list("name", "id"))
    form = DecisionFilter(request.GET or None, apps=list(owned))
    app_ids = list(owned.values())
    selected_app = None
    since = until = None
    qs = Decision.objects.all()
    if form.is_bound and form.is_valid():
        f = form.cleaned_data
        if f["application"]:
            selected_app = Application.objects.get(owner=request.user, name=f["application"])
            app_ids = [selected_app.id]
        if f["operator"]:
            qs = qs.filter(operator__name=f["operator"])
        if f["granted"] == "granted":
            qs = qs.filter(granted=True)
        elif f["granted"] == "denied":
            qs = qs.filter(outcome=Decision.Outcome.DENIED)
        elif f["granted"] == "proposed":
            qs = qs.exclude(outcome__in=[Decision.Outcome.NO_CHANGE, Decision.Outcome.NO_DATA])
        if f["outcome"]:
            qs = qs.filter(outcome=f["outcome"])
        since = _utc(f["since"]).timestamp() if f["since"] else None
        until = _utc(f["until"]).timestamp() if f["until"] else None
    elif form.is_bound:
        app_ids = []
    periods = decision_query.periods_by_application(app_ids)
    qs = qs.filter(application_id__in=app_ids)
    qs = decision_query.in_time_range(qs, periods, since, until)
    page = decision_query.page_of(
        decision_query.latest_period_first(qs, periods), request.GET.get("page"), PAGE_SIZE
    )
    for d in page:
        d.period_time = period_time(d)
        expl = (d.proposal or {}).get("explanation") or {}
        d.explored = explored(expl.get("action") or "", expl.get("alternatives"))
    query = request.GET.copy()
    query.pop("page", None)
    return render(
        request,
        "dashboard/monitor/decision_list.html",
        {
            "form": form,
            "page": page,
            "query": query.urlencode(),
            "app": selected_app,
            "tab": "decisions",
            "nav_active": "decisions",
        },
    )


#: the notes an OM adds to its explanation with the reason of a rule that shaped the decision, and their labels
POLICY_NOTES = (
    ("forecast", "Planned ahead on a rising rate"),
    ("node_limit", "Fewest new replicas (node limit)"),
    ("settling", "Scale-in withheld"),
)


def policy_notes(explanation: dict) -> list[tuple[str, str]]:
    """(label, reason) of each rule note of the OM's explanation (:data:`POLICY_NOTES`) that carries a reason."""
    out = []
    for key, label in POLICY_NOTES:
        note = explanation.get(key)
        if isinstance(note, dict) and note.get("reason"):
            out.append((label, str(note["reason"])))
    return out


@login_required
def decision_detail(request, pk: int):
    d = get_object_or_404(
        Decision.objects.select_related("application", "operator", "tick"),
        pk=pk,
        application__owner=request.user,
    )
    explanation = (d.proposal or {}).get("explanation") or {}
    chosen = explanation.get("action")
    alternatives = sorted(
        (
            {"action": a, "value": v, "chosen": a == chosen}
            for a, v in (explanation.get("alternatives") or {}).items()
        ),
        key=lambda r: (r["value"] is None, r["value"]),
    )
    observed = [
        (label, unit, (d.observed or {}).get(key))
        for key, label, unit in OBSERVED_FIELDS
        if key in (d.observed or {})
    ]
    notes = policy_notes(explanation)
    weights = explanation.get("weights") or {}
    terms = explanation.get("last_period_cost_terms") or {}
    cost_terms = [
        {"name": n, "term": terms.get(k), "weight": weights.get(k)}
        for k, n in (("perf", "violation"), ("res", "resource"), ("rcf", "reconfiguration"))
    ]
    period_cost = (
        sum(float(weights.get(k, 0)) * float(terms.get(k) or 0) for k in ("perf", "res", "rcf"))
        if terms
        else None
    )
    siblings = Decision.objects.filter(operator=d.operator)
    prev_d = siblings.filter(slot__lt=d.slot).order_by("-slot").values_list("id", flat=True).first()
    next_d = siblings.filter(slot__gt=d.slot).order_by("slot").values_list("id", flat=True).first()
    return render(
        request,
        "dashboard/monitor/decision_detail.html",
        {
            "d": d,
            "app": d.application,
            "time": period_time(d),
            "explanation": explanation,
            "alternatives": alternatives,
            "explored": explored(chosen or "", explanation.get("alternatives")),
            "observed": observed,
            "notes": notes,
            "cost_terms": cost_terms,
            "period_cost": period_cost,
            "tick_result": d.tick.result,
            "prev_id": prev_d,
            "next_id": next_d,
            "tab": "decisions",
            "nav_active": "decisions",
        },
    )
