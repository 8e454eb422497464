"""The product's control path at wall-clock slots, for the benchmarks on live engines (``bench_spark``,
``bench_flink`` through the product): register a bench pipeline by manifest, then at every slot boundary run the
Celery task functions eagerly, in the order one dispatch publishes them (``control.tick``, ``control.am_tune``
when the AM slot advanced, ``control.region_step``), as ``bench_loop`` does with synthetic slots."""

from __future__ import annotations

import time
from typing import Any

from benchmarks.loop.runner import am_slot_due, run_task


def register(
    documents: list[dict[str, Any]], owner_name: str, application: str, region: str, catalog: str
) -> Any:
    """Delete an earlier run's definitions (:func:`cleanup`), apply ``documents`` as ``owner_name`` (what
    ``manage.py apply`` does) and return the application ``application`` with its control row."""
    from django.contrib.auth import get_user_model

    from autoscaler.control.models import ApplicationControl
    from autoscaler.manifests import apply_documents
    from autoscaler.models import Application

    cleanup(owner_name, region, catalog)
    owner, _ = get_user_model().objects.get_or_create(username=owner_name)
    apply_documents(documents, owner)
    app = Application.objects.get(owner__username=owner_name, name=application)
    ApplicationControl.objects.get_or_create(application=app)
    return app


def cleanup(owner_name: str, region: str, catalog: str) -> None:
    """Delete what a bench registered: ``owner_name``'s applications (with their ledger, decision log and
    samples), the region with its nodes, the catalog."""
    from autoscaler.control.tick import forget_definitions
    from autoscaler.models import Application, NodeTypeCatalog, Region

    Application.objects.filter(owner__username=owner_name).delete()
    Region.objects.filter(name=region).delete()
    NodeTypeCatalog.objects.filter(name=catalog).delete()
    forget_definitions()


def sleep_until(t: float) -> None:
    """Sleep until the epoch time ``t`` (s), in steps of at most a second."""
    while time.time() < t:
        time.sleep(min(1.0, max(t - time.time(), 0.0)))


def control_slot(
    app: Any, region: Any, slot: int, period_s: float, am_period_s: float, am_last: int
) -> tuple[str, int]:
    """Run slot ``slot``'s task functions for ``app`` (control period ``period_s``, s) and ``region``: the tick,
    the AM's tuning when its slot (period ``am_period_s``, s) is past ``am_last``, the region's RM/IM step.
    Returns (the tick's status, the last AM slot tuned)."""
    from autoscaler.control import tasks
    from autoscaler.control.regions import region_period_s
    from autoscaler.control.tick import slot_of

    out = run_task(tasks.tick, (app.pk, slot, None, period_s))
    status = (out or {}).get("status") or (out or {}).get("skipped") or "-"
    am_slot = am_slot_due(app, slot * period_s, am_period_s, am_last)
    if am_slot is not None:
        run_task(tasks.am_tune, (app.pk, am_slot))
        am_last = am_slot
    run_task(tasks.region_step, (region.pk, slot_of(slot * period_s, region_period_s(region))))
    return status, am_last
