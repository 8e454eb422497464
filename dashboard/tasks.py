"""Celery tasks of the web app: the what-if simulation (``dashboard.whatif``)."""

from __future__ import annotations

import logging

from celery import shared_task
from django.utils import timezone

from dashboard.models import WhatIfRun

log = logging.getLogger(__name__)


def execute(run_id: int) -> str:
    """Run what-if ``run_id`` (status queued -> running -> done | failed, progress in [0, 1]); returns status."""
    from autoscaler.control.topology import finite
    from dashboard import monitor_whatif

    claimed = WhatIfRun.objects.filter(pk=run_id, status=WhatIfRun.Status.QUEUED).update(
        status=WhatIfRun.Status.RUNNING, progress=0.0
    )
    if not claimed:
        return WhatIfRun.objects.filter(pk=run_id).values_list("status", flat=True).first() or "missing"
    run = WhatIfRun.objects.select_related("application").get(pk=run_id)

    def progress(fraction: float) -> None:
        WhatIfRun.objects.filter(pk=run_id).update(progress=round(min(max(fraction, 0.0), 0.99), 3))

    try:
        result = monitor_whatif.run(run.application, run.params, progress)
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
