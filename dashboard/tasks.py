"""Celery tasks of the web app: the what-if simulation (``dashboard.whatif``, :mod:`dashboard.monitor.whatif`) and
the dashboards' rollup (``dashboard.rollup``, :mod:`dashboard.monitor.rollup`; a beat entry every
``AUTOSCALER_ROLLUP_INTERVAL_S`` registered in :mod:`dashboard.apps`).

The module stays at the app's top level: Celery's ``autodiscover_tasks`` imports ``<app>.tasks`` of every
installed app. The registered names are explicit (``name=``), so they do not follow the module path."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from dashboard.models import WhatIfRun

#: periods one ``dashboard.rollup`` run rolls up per application at most (a long backlog, e.g. a bulk import, is
#: rolled up over several runs so that one application cannot hold the worker for minutes; ~2 ms per period)
ROLLUP_PER_RUN = 50_000

log = logging.getLogger(__name__)


def execute(run_id: int) -> str:
    """Run what-if ``run_id`` (status queued -> running -> done | failed, progress in [0, 1]); returns status."""
    from autoscaler.control.json_safe import finite
    from dashboard.monitor.whatif import run as replay

    claimed = WhatIfRun.objects.filter(pk=run_id, status=WhatIfRun.Status.QUEUED).update(
        status=WhatIfRun.Status.RUNNING, progress=0.0
    )
    if not claimed:
        return WhatIfRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    run = WhatIfRun.objects.select_related("application").get(pk=run_id)

    def progress(fraction: float) -> None:
        WhatIfRun.objects.filter(pk=run_id).update(progress=round(min(max(fraction, 0.0), 0.99), 3))

    try:
        result = replay(run.application, run.params, progress)
    except Exception as exc:  # noqa: BLE001 -- any failure is reported on the page, the worker continues
        log.exception("what-if %s failed", run_id)
        WhatIfRun.objects.filter(pk=run_id).update(
            status=WhatIfRun.Status.FAILED, error=f"{type(exc).__name__}: {exc}", finished_at=timezone.now()
        )
        return WhatIfRun.Status.FAILED
    WhatIfRun.objects.filter(pk=run_id).update(
        status=WhatIfRun.Status.DONE, progress=1.0, result=finite(result), finished_at=timezone.now()
    )
    return WhatIfRun.Status.DONE


@shared_task(name="dashboard.whatif", acks_late=True)
def whatif(run_id: int) -> str:
    return execute(run_id)


def rollup_all(max_ticks: int | None = ROLLUP_PER_RUN) -> dict[str, int]:
    """Catch up the rollup of every application that has ticks (at most ``max_ticks`` periods each); returns
    application name -> periods rolled up (applications with nothing new are left out). An application whose
    rollup fails is logged and skipped: the others still catch up, and it is retried on the next run."""
    from django.db.models import Exists, OuterRef

    from autoscaler.control.models import Tick
    from autoscaler.models import Application
    from dashboard.monitor.rollup import catch_up

    done: dict[str, int] = {}
    has_ticks = Exists(Tick.objects.filter(application=OuterRef("pk")))
    for app in Application.objects.filter(has_ticks).order_by("pk"):
        try:
            n = catch_up(app, max_ticks)
        except Exception:  # noqa: BLE001 -- one broken application must not stop the others' rollups
            log.exception("rollup of %s failed", app)
            continue
        if n:
            done[f"{app.owner_id}/{app.name}"] = n
    return done


@shared_task(name="dashboard.rollup", acks_late=True, ignore_result=True)
def rollup() -> dict[str, int]:
    return rollup_all()
