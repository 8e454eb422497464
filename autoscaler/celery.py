"""Celery application instance, configured from Django settings (``CELERY_*``); tasks are autodiscovered."""

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")

app = Celery("autoscaler")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
