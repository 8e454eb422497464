from django.apps import AppConfig
from django.conf import settings


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
        schedule.setdefault("control-dispatch", {"task": "control.dispatch", "schedule": interval})
        app.conf.beat_schedule = schedule
        app.conf.worker_prefetch_multiplier = 1
        options = dict(app.conf.broker_transport_options or {})
        options.setdefault("visibility_timeout", 300)
        app.conf.broker_transport_options = options
