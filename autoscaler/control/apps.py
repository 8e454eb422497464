from django.apps import AppConfig
from django.conf import settings


def drop_broken_connections(**_: object) -> None:
    """Before every task: close each database connection that saw an error and no longer answers, and ask the
    others to check themselves on first use (``CONN_HEALTH_CHECKS``), so that a connection reused across tasks
    (``CELERY_DB_REUSE_MAX``) that the server terminated is replaced instead of failing every task after it."""
    from django.db import connections

    for conn in connections.all(initialized_only=True):
        if conn.connection is None:
            continue
        if conn.errors_occurred and not conn.is_usable():
            conn.close()
            continue
        conn.errors_occurred = False
        conn.health_check_done = False


class ControlConfig(AppConfig):
    name = "autoscaler.control"
    label = "control"
    verbose_name = "Control plane"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Register the dispatcher in Celery's static beat schedule and the reliability options of the ticks:
        one message prefetched per worker process (acks_late tasks) and a redelivery timeout for unacked
        messages of the Redis transport."""
        from autoscaler.celery import app

        interval = float(getattr(settings, "AUTOSCALER_DISPATCH_INTERVAL_S", 5.0))
        schedule = dict(app.conf.beat_schedule or {})
        # a dispatch not consumed within a few intervals (no worker up) expires: the next one does its work
        schedule.setdefault(
            "control-dispatch",
            {"task": "control.dispatch", "schedule": interval, "options": {"expires": 3 * interval}},
        )
        app.conf.beat_schedule = schedule
        app.conf.worker_prefetch_multiplier = 1
        # keep each worker's database connection across tasks (Celery closes it after every task otherwise):
        # connecting costs a PostgreSQL backend fork per tick; closed and reopened every 2 x this many tasks
        reuse = int(getattr(settings, "AUTOSCALER_DB_REUSE_MAX", 500))
        if app.conf.get("CELERY_DB_REUSE_MAX") is None:
            app.conf.CELERY_DB_REUSE_MAX = reuse
        # a worker builds its Django fixup (which reads that option) before Django calls this method
        for fixup in getattr(app, "_fixups", None) or []:
            worker_fixup = getattr(fixup, "_worker_fixup", None)
            if worker_fixup is not None and worker_fixup.db_reuse_max is None:
                worker_fixup.db_reuse_max = reuse
        from celery.signals import task_prerun

        task_prerun.connect(
            drop_broken_connections, weak=False, dispatch_uid="control-drop-broken-connections"
        )
        options = dict(app.conf.broker_transport_options or {})
        options.setdefault("visibility_timeout", 300)
        app.conf.broker_transport_options = options
