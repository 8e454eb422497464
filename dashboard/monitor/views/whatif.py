"""What-if ``/applications/<name>/whatif/``: a form (policy, its parameters, cost weights, SLO, range) that queues a
simulator run on the application's recorded trace as a Celery task; the page polls ``whatif/<id>.json``."""

from __future__ import annotations

import json

from django.contrib.auth.decorators import login_required
from django.db import transaction
from django.http import JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse

from autoscaler.control.policy_choice import DEFAULT_OM_POLICY, policy_choice
from dashboard.models import WhatIfRun
from dashboard.monitor import whatif
from dashboard.monitor.views.common import json_login_required, owned_application
from policies import registry

FIELDS = ("policy", "params", "wPerf", "wRes", "wRcf", "rMaxMs", "etaV", "etaR", "range")


def _status(run: WhatIfRun) -> dict:
    return {
        "id": run.pk,
        "status": run.status,
        "progress": run.progress,
        "params": run.params,
        "result": run.result,
        "error": run.error,
        "createdAt": run.created_at.isoformat(),
        "finishedAt": run.finished_at.isoformat() if run.finished_at else None,
    }


@login_required
def whatif_page(request, name: str):
    app = owned_application(request, name)
    current, current_params = policy_choice(app, "om", DEFAULT_OM_POLICY)
    errors: list[dict[str, str]] = []
    values = {
        "policy": current,
        "params": "",
        "rMaxMs": app.r_max_ms,
        "etaV": app.eta_v,
        "etaR": app.eta_r,
        "range": "all",
    }
    if request.method == "POST":
        values = {k: request.POST.get(k, "") for k in FIELDS}
        params, errors = whatif.validate(app, values)
        if not errors:
            with transaction.atomic():
                run = WhatIfRun.objects.create(application=app, owner=request.user, params=params)
                transaction.on_commit(lambda: _enqueue(run.pk))
            return redirect(f"{reverse('dashboard:app-whatif', args=[app.name])}?run={run.pk}")
    selected = None
    run_id = request.GET.get("run")
    if run_id and run_id.isdigit():
        selected = WhatIfRun.objects.filter(application=app, pk=int(run_id)).first()
        if selected is not None and request.method != "POST":  # the form shows what the run simulated
            p = selected.params or {}
            values = {k: p.get(k, values.get(k)) for k in FIELDS}
            values["params"] = json.dumps(p["params"]) if p.get("params") else ""
    runs = WhatIfRun.objects.filter(application=app).order_by("-created_at")[:10]
    field_errors = {e["loc"]: e["msg"] for e in errors}
    return render(
        request,
        "dashboard/monitor/whatif.html",
        {
            "app": app,
            "policies": [p for p in sorted(registry.OM_POLICIES) if p not in registry.OFFLINE_OM],
            "current_policy": current,
            "current_params": current_params,
            "values": values,
            "errors": errors,
            "field_errors": field_errors,
            "runs": runs,
            "selected": selected,
            "ranges": [("all", "All"), ("week", "Last week"), ("day", "Last day"), ("hour", "Last hour")],
            "tab": "whatif",
            "nav_active": "fleet",
        },
        status=400 if errors else 200,
    )


def _enqueue(run_id: int) -> None:
    """Queue the run; when the broker cannot take it the run fails with the reason (shown on the page)."""
    from dashboard.tasks import whatif as whatif_task

    try:
        whatif_task.delay(run_id)
    except Exception as exc:  # noqa: BLE001 -- any broker error: report it on the run instead of a 500
        WhatIfRun.objects.filter(pk=run_id).update(
            status=WhatIfRun.Status.FAILED, error=f"could not queue the run: {type(exc).__name__}: {exc}"
        )


@json_login_required
def whatif_status(request, name: str, pk: int):
    app = owned_application(request, name)
    run = get_object_or_404(WhatIfRun, application=app, pk=pk)
    return JsonResponse(_status(run))
