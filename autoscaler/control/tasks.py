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
and database outages retried with exponential backoff (broken connections are closed, see also
``autoscaler.control.apps``), publish-then-claim (a broker failure loses no tick, AM tuning or region step: the
slot stays unclaimed and the next dispatch publishes again). Slots are claimed by their start time (s), so a
changed period never stalls the loop; it takes effect at the first boundary of the new period after the last
claimed slot ended. A tick that begins more than a period late (a redelivery) or before its slot is skipped and
recorded; every slot without a decision gets a ``missed`` ledger row with a reason (``autoscaler.control.slots``).
"""

from __future__ import annotations

import contextlib
import logging
import time

from celery import shared_task
from django.conf import settings
from django.db import IntegrityError, InterfaceError, OperationalError, connections
from django.db.models import F, Q

from autoscaler.control import outages, slots
from autoscaler.control.app_state import AmConfig
from autoscaler.control.connectors import ConnectorUnavailable
from autoscaler.control.models import ApplicationControl, RegionControl, RegionTick
from autoscaler.control.tick import record_failure, run_tick, skip_stale_tick, slot_of
from autoscaler.models import Application, Region
from connectors.base import ConnectorError

log = logging.getLogger(__name__)

TICK_MAX_RETRIES = 5
#: publishing retries briefly (about 2 s in all): a broker that stays down costs the slot its tick only until the
#: next dispatch publishes it again (publish-then-claim), and does not hold the dispatcher up
PUBLISH_RETRY = {"max_retries": 3, "interval_start": 0.2, "interval_step": 0.3, "interval_max": 1.0}
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
#: database errors that mean "the connection or the server is gone": close every connection and retry later
DB_DOWN_ERRORS = (OperationalError, InterfaceError)


def close_connections() -> None:
    """Drop every database connection of this process (a broken one is never reused; the next query reconnects)."""
    for conn in connections.all(initialized_only=True):
        with contextlib.suppress(Exception):
            conn.close()


def _publish(task, args: tuple, what: str) -> bool:
    """Publish ``task(*args)`` (a short retry if the broker hiccups); False when the broker is unreachable."""
    try:
        task.apply_async(args, retry=True, retry_policy=PUBLISH_RETRY)
    except Exception as exc:  # kombu raises OperationalError / socket errors when the broker is unreachable
        outages.broker_failed()
        log.warning("could not publish %s %s: %s", what, args, exc)
        return False
    outages.broker_ok()
    return True


@shared_task(name="control.dispatch", ignore_result=True)
def dispatch(now: float | None = None) -> dict[str, int]:
    """Enqueue the ticks, AM tunings and region steps that are due (see module doc). A database outage is
    survived: every connection is closed (the next dispatch reconnects) and the outage remembered, so the slots
    it cost are recorded as ``database_down`` once the database is back."""
    if now is None:
        outages.dispatch_seen(time.time(), DISPATCH_INTERVAL_S)
    try:
        counts = _dispatch(time.time() if now is None else now)
    except DB_DOWN_ERRORS as exc:
        outages.database_failed()
        close_connections()
        log.warning(
            "dispatch: database unavailable (%s: %s); retrying at the next dispatch", type(exc).__name__, exc
        )
        return {"error": 1}
    outages.database_ok()
    return counts


def _claim_slot(app: Application, control: ApplicationControl, now: float, spread: float) -> int | None:
    """Publish-then-claim the due slot of ``app``: the slot's tick is due at its start (+ the spread delay) and
    once the previous claimed slot has ended (a period change takes effect at the next boundary of the new period
    after the old slot ended). Publishing first means a broker failure loses nothing (the next dispatch tries again);
    the conditional UPDATE on the slot's start time makes the claim unique (a second dispatcher's copy of the
    message is a duplicate for the ledger)."""
    period = float(app.om_period_s)
    slot = slot_of(now, period)
    start = slot * period
    prev_end = (
        control.last_dispatched_start_s + (control.last_dispatched_period_s or period)
        if control.last_dispatched_start_s is not None
        else None
    )
    if now < start + dispatch_delay_s(app.pk, period, spread):
        return None
    if prev_end is not None and start < prev_end - slots.EPS_S:
        return None
    if not _publish(tick, (app.pk, slot, now, period), "tick"):
        return None
    unclaimed = Q(last_dispatched_start_s__isnull=True) | Q(last_dispatched_start_s__lt=start - slots.EPS_S)
    claimed = ApplicationControl.objects.filter(unclaimed, pk=control.pk).update(
        last_dispatched_slot=slot, last_dispatched_start_s=start, last_dispatched_period_s=period
    )
    if not claimed:
        return None
    slots.remember_claim(control, slot, period)
    slots.account_gap(app, control, start, period)
    if control.running_since_s is None or control.paused_since_s is not None:
        ApplicationControl.objects.filter(pk=control.pk).update(running_since_s=start, paused_since_s=None)
    return slot


def _dispatch(now: float) -> dict[str, int]:
    counts = {"ticks": 0, "am": 0, "regions": 0, "missed": 0}
    running = Application.objects.filter(state=Application.State.RUNNING).only(
        "pk", "om_period_s", "am_period_s", "dry_run"
    )
    # applications that stopped running: remember since when (their slots are "paused", not lost)
    ApplicationControl.objects.filter(paused_since_s__isnull=True, running_since_s__isnull=False).exclude(
        application__state=Application.State.RUNNING
    ).update(paused_since_s=now)
    region_periods: dict[int, float] = {}
    spread = dispatch_spread()
    for app in running:
        control, _ = ApplicationControl.objects.get_or_create(application=app)
        if _claim_slot(app, control, now, spread) is not None:
            counts["ticks"] += 1
            control.refresh_from_db()
        counts["missed"] += slots.account_lost(app, control, now)
        am_slot = slot_of(now, app.am_period_s)
        if (
            AmConfig.of(control).bounds_ms
            and control.am_dispatched_slot < am_slot
            and _publish(am_tune, (app.pk, am_slot), "am_tune")  # publish, then claim (am_tune is idempotent)
            and ApplicationControl.objects.filter(pk=control.pk, am_dispatched_slot__lt=am_slot).update(
                am_dispatched_slot=am_slot
            )
        ):
            counts["am"] += 1
        for region_id in app.regions.values_list("pk", flat=True):
            region_periods[region_id] = min(region_periods.get(region_id, app.om_period_s), app.om_period_s)
    own = dict(
        RegionControl.objects.filter(region_id__in=region_periods, rm_period_s__isnull=False).values_list(
            "region_id", "rm_period_s"
        )
    )
    for region in Region.objects.filter(pk__in=region_periods):
        # the region's own RM period, else the shortest OM period of its running applications
        slot = slot_of(now, own.get(region.pk) or region_periods[region.pk])
        if RegionTick.objects.filter(region=region, slot=slot).exists():
            continue
        # publish, then claim by creating the row (region_step is idempotent on it)
        if _publish(region_step, (region.pk, slot), "region_step"):
            RegionTick.objects.get_or_create(region=region, slot=slot)
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
def tick(
    self, application_id: int, slot: int, enqueued_at: float | None = None, period_s: float | None = None
) -> dict:
    """Run tick ``slot`` (of period ``period_s`` s, default the application's T_OM) of an application.

    A tick that begins more than a period after its slot began is stale and one for a slot not begun yet is early
    (``autoscaler.control.slots``): either is recorded and nothing is applied. Connector failures and database
    outages are retried with exponential backoff (1, 2, 4 .. s; a retry that comes too late is stale in turn);
    after a database error every connection is closed, so the retry reconnects."""
    try:
        return _tick(self, application_id, slot, enqueued_at, period_s)
    except DB_DOWN_ERRORS as exc:
        outages.database_failed()
        close_connections()
        if self.request.retries >= self.max_retries:
            log.error("tick %s/%s: database unavailable, giving up: %s", application_id, slot, exc)
            return {"status": "failed", "error": str(exc)}
        raise self.retry(exc=exc, countdown=min(2.0**self.request.retries, TICK_BACKOFF_MAX_S)) from exc


def _tick(task, application_id: int, slot: int, enqueued_at: float | None, period_s: float | None) -> dict:
    app = Application.objects.filter(pk=application_id).only("state", "om_period_s").first()
    if app is None or app.state != Application.State.RUNNING:
        return {"skipped": "application not running"}
    period = float(period_s or app.om_period_s)
    verdict, age = slots.timing(slot, period, time.time())
    if verdict == "early":
        ApplicationControl.objects.filter(application_id=application_id).update(
            early_ticks_total=F("early_ticks_total") + 1
        )
        log.warning("tick %s/%s is early: its slot begins in %.1f s; dropped", application_id, slot, -age)
        return {"skipped": "early", "age_s": age}
    if verdict == "stale":
        status = skip_stale_tick(application_id, slot, period, age)
        log.warning(
            "tick %s/%s is stale (%.1f s old, period %g s): %s", application_id, slot, age, period, status
        )
        return {"skipped": "stale", "age_s": age, "status": status}
    try:
        limit = slots.stale_after_periods()
        deadline = slot * period + limit * period if limit > 0 else None
        out = run_tick(application_id, slot, enqueued_at=enqueued_at, period_s=period, deadline_s=deadline)
    except IntegrityError:  # the dispatcher recorded the slot as missed while this tick ran: it stays missed
        close_connections()
        return {"status": "missed", "duplicate": True}
    except ConnectorUnavailable as exc:  # no connector for this engine: retrying cannot help
        record_failure(application_id, slot, str(exc), final=True)
        return {"status": "no_data", "error": str(exc)}
    except ConnectorError as exc:
        final = task.request.retries >= task.max_retries
        try:
            record_failure(application_id, slot, f"{type(exc).__name__}: {exc}", final)
        except DB_DOWN_ERRORS:
            log.exception("could not record the failure of tick %s/%s", application_id, slot)
            close_connections()
        if final:
            return {"status": "no_data", "error": str(exc)}
        raise task.retry(exc=exc, countdown=min(2.0**task.request.retries, TICK_BACKOFF_MAX_S)) from exc
    outages.database_ok()
    return {"status": out.status, "duplicate": out.duplicate, "applied": out.applied}


@shared_task(
    name="control.am_tune",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=5,
)
def am_tune(self, application_id: int, am_slot: int) -> dict:
    """AM tuning of ``am_slot`` (idempotent); a database outage is retried with backoff after reconnecting."""
    from autoscaler.control.am import tune

    try:
        return tune(application_id, am_slot)
    except DB_DOWN_ERRORS as exc:
        outages.database_failed()
        close_connections()
        raise self.retry(exc=exc, countdown=min(2.0**self.request.retries, TICK_BACKOFF_MAX_S)) from exc


@shared_task(
    name="control.region_step",
    bind=True,
    acks_late=True,
    reject_on_worker_lost=True,
    ignore_result=True,
    max_retries=5,
)
def region_step(self, region_id: int, slot: int) -> dict:
    """RM step + IM arbitration of a region for ``slot`` (idempotent); database outages as in ``am_tune``."""
    from autoscaler.control.regions import region_step as step

    try:
        return step(region_id, slot)
    except DB_DOWN_ERRORS as exc:
        outages.database_failed()
        close_connections()
        raise self.retry(exc=exc, countdown=min(2.0**self.request.retries, TICK_BACKOFF_MAX_S)) from exc
