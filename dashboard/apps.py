from django.apps import AppConfig
from django.conf import settings


class DashboardConfig(AppConfig):
    default_auto_field = "django.db.models.BigAutoField"
    name = "dashboard"
    verbose_name = "Dashboard"

    def ready(self) -> None:
        """Register ``dashboard.rollup`` (the dashboards' rollups, off the request path) in Celery's static beat
        schedule, every ``AUTOSCALER_ROLLUP_INTERVAL_S`` seconds; a run not consumed within that interval expires
        (the next one does its work)."""
        from autoscaler.celery import app

        interval = float(getattr(settings, "AUTOSCALER_ROLLUP_INTERVAL_S", 10.0))
        schedule = dict(app.conf.beat_schedule or {})
        schedule.setdefault(
            "dashboard-rollup",
            {"task": "dashboard.rollup", "schedule": interval, "options": {"expires": interval}},
        )
        app.conf.beat_schedule = schedule
