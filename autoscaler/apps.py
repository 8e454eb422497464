"""Django app configuration of the control plane."""

from django.apps import AppConfig


class AutoscalerConfig(AppConfig):
    name = "autoscaler"
    verbose_name = "Autoscaler control plane"
    default_auto_field = "django.db.models.BigAutoField"
