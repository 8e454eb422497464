from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "autoscaler.ingest"
    label = "ingest"
    verbose_name = "Engine telemetry ingest"
    default_auto_field = "django.db.models.BigAutoField"
