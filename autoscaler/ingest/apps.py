from django.apps import AppConfig


class IngestConfig(AppConfig):
    name = "autoscaler.ingest"
    label = "ingest"
    verbose_name = "Engine telemetry ingest"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from . import openapi  # noqa: F401 - registers the ingest token's OpenAPI security scheme
