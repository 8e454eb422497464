"""Celery tasks of the control plane.

Scheduling: ONE static beat entry (``control.dispatch`` every ``AUTOSCALER_DISPATCH_INTERVAL_S`` = 5 s, set in
``autoscaler.control.apps``). The dispatcher reads every running application's T_OM / T_AM from the database and enqueues
``control.tick(app, slot)`` when a new slot began (slot = floor(now / T_OM)), ``control.am_tune`` every AM period
and ``control.region_step`` per region every RM period (``RegionControl.rm_period_s``, else the shortest OM period
of the region's running applications). Periods are therefore changed by editing the Application,
without restarting beat or workers; a static schedule is enough because the only fixed-rate job is the dispatcher
(django-celery-beat's DatabaseScheduler works too: ``ensure_beat_entry()`` registers the same entry there).
Two beat processes are harmless: dispatch is claimed by a conditional UPDATE and ticks are idempotent by the ledger.

Reliability: ``acks_late`` + ``reject_on_worker_lost`` (a tick whose worker dies is redelivered), connector errors
retried with exponential backoff and recorded in the ledger; the dispatcher also re-enqueues ticks left
``running``/``applying`` for more than one period (lost messages, killed workers).
"""

from __future__ import annotations

import datetime as dt
import logging
import time

from celery import shared_task
from django.conf import settings
from django.db import OperationalError
from django.db import connection as db_connection
from django.db.models import Q
from django.utils import timezone

from autoscaler.control.models import ApplicationControl, RegionControl, RegionTick, Tick
from autoscaler.control.tick import record_failure, run_tick, slot_of
from autoscaler.models import Application, Region
from connectors.base import ConnectorError
from connectors.factory import ConnectorUnavailable

log = logging.getLogger(__name__)

TICK_MAX_RETRIES = 5
PUBLISH_RETRY = {"max_retries": 10, "interval_start": 0.2, "interval_step": 0.5, "interval_max": 2.0}
DISPATCH_INTERVAL_S = float(getattr(settings, "AUTOSCALER_DISPATCH_INTERVAL_S", 5.0))
#: fraction of an application's control period over which the dispatcher spreads the applications' ticks
#: (0 = every tick at the start of its slot): an application's tick is enqueued by the first dispatch at or after
#: its due time (slot start + phase * spread * period). Spreading keeps the broker queue short, so a tick's latency
#: is about its own run time instead of the time to drain every application's tick of the slot.
_GOLDEN = 0.6180339887498949


def dispatch_phase(application_id: int) -> float:
    """A fixed phase in [0, 1) per application, evenly spread over ids (golden-ratio sequence)."""
    return (application_id * _GOLDEN) % 1.0


def dispatch_spread() -> float:
    """``settings.AUTOSCALER_DISPATCH_SPREAD`` (read at every dispatch, so it can change without a restart)."""
    return float(getattr(settings, "AUTOSCALER_DISPATCH_SPREAD", 0.0))


def dispatch_delay_s(application_id: int, period_s: float, spread: float) -> float:
    """Seconds after the start of its slot at which an application's tick is due (s)."""
    return dispatch_phase(application_id) * spread * period_s


TICK_BACKOFF_MAX_S = 30.0


@shared_task(name="control.dispatch", ignore_result=True)
def dispatch(now: float | None = None) -> dict[str, int]:
    """Enqueue the ticks, AM tunings and region steps that are due (see module doc)."""
    now = time.time() if now is None else now
    counts = {"ticks": 0, "am": 0, "regions": 0, "redelivered": 0}
    running = Application.objects.filter(state=Application.State.RUNNING).only(
        "pk", "om_period_s", "am_period_s"
    )
    region_periods: dict[int, float] = {}
    spread = dispatch_spread()
    for app in running:
        control, _ = ApplicationControl.objects.get_or_create(application=app)
        slot = slot_of(now, app.om_period_s)
        due = slot * app.om_period_s + dispatch_delay_s(app.pk, app.om_period_s, spread)
        claimed = now >= due and ApplicationControl.objects.filter(
            pk=control.pk, last_dispatched_slot__lt=slot
        ).update(last_dispatched_slot=slot)
        if claimed:
            tick.apply_async(
                (app.pk, slot, now), retry=True, retry_policy={"max_retries": 10, "interval_step": 0.5}
            )
            counts["ticks"] += 1
        am_slot = slot_of(now, app.am_period_s)
        if control.am_config.get("bounds_ms") and ApplicationControl.objects.filter(
            pk=control.pk, am_dispatched_slot__lt=am_slot
        ).update(am_dispatched_slot=am_slot):
            am_tune.apply_async((app.pk, am_slot), retry=True)
            counts["am"] += 1
        for region_id in app.regions.values_list("pk", flat=True):
            region_periods[region_id] = min(region_periods.get(region_id, app.om_period_s), app.om_period_s)
    # re-enqueue ticks stuck for more than one period (worker killed, message lost)
    for stale in Tick.objects.filter(
        Q(status=Tick.Status.RUNNING) | Q(status=Tick.Status.APPLYING),
        application__state=Application.State.RUNNING,
        created_at__lt=timezone.now() - dt.timedelta(seconds=1),
    ).select_related("application"):
        age = (timezone.now() - stale.created_at).total_seconds()
        if age > stale.period_s and age % stale.period_s < DISPATCH_INTERVAL_S:  # about once per period
            tick.apply_async((stale.application_id, stale.slot, now), retry=True)
            counts["redelivered"] += 1
    own = dict(
        RegionControl.objects.filter(region_id__in=region_periods, rm_period_s__isnull=False).values_list(
            "region_id", "rm_period_s"
        )
    )
    for region in Region.objects.filter(pk__in=region_periods):
        # the region's own RM period, else the shortest OM period of its running applications
        slot = slot_of(now, own.get(region.pk) or region_periods[region.pk])
        _, created = RegionTick.objects.get_or_create(region=region, slot=slot)
        if created:
            region_step.apply_async((region.pk, slot), retry=True)
            counts["regions"] += 1
    return counts


@shared_task(
    name="control.tick",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=TICK_MAX_RETRIES,
)
def tick(self, application_id: int, slot: int, enqueued_at: float | None = None) -> dict:
    """Run tick ``slot`` of an application; connector failures retried with exponential backoff (1, 2, 4 .. s)."""
    if not Application.objects.filter(pk=application_id, state=Application.State.RUNNING).exists():
        return {"skipped": "application not running"}
    try:
        out = run_tick(application_id, slot, enqueued_at=enqueued_at)
    except (
        ConnectorUnavailable
    ) as exc:  # no connector for this engine: retrying cannot help, say so in the log
        record_failure(application_id, slot, str(exc), final=True)
        return {"status": "no_data", "error": str(exc)}
    except (ConnectorError, OperationalError) as exc:
        if isinstance(exc, OperationalError):
            db_connection.close()  # a reused connection may be broken (database restart): reconnect on retry
        final = self.request.retries >= self.max_retries
        try:
            record_failure(application_id, slot, f"{type(exc).__name__}: {exc}", final)
        except OperationalError:
            log.exception("could not record the failure of tick %s/%s", application_id, slot)
        if final:
            return {"status": "no_data", "error": str(exc)}
        raise self.retry(exc=exc, countdown=min(2.0**self.request.retries, TICK_BACKOFF_MAX_S)) from exc
    return {"status": out.status, "duplicate": out.duplicate, "applied": out.applied}


@shared_task(name="control.am_tune", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def am_tune(application_id: int, am_slot: int) -> dict:
    from autoscaler.control.am import tune

    return tune(application_id, am_slot)


@shared_task(name="control.region_step", acks_late=True, reject_on_worker_lost=True, ignore_result=True)
def region_step(region_id: int, slot: int) -> dict:
    from autoscaler.control.regions import region_step as step

    return step(region_id, slot)
