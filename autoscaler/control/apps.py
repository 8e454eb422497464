from django.apps import AppConfig


class ControlConfig(AppConfig):
    name = "autoscaler.control"
    label = "control"
    verbose_name = "Control plane"
    default_auto_field = "django.db.models.BigAutoField"
