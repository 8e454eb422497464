"""Celery application instance, configured from Django settings (``CELERY_*``); tasks are autodiscovered."""

import os

from celery import Celery
from kombu.transport import TRANSPORT_ALIASES

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "autoscaler.settings")
# the embedded broker writes its message files atomically (kombu's own can hand a worker an empty file)
TRANSPORT_ALIASES["filesystem"] = "autoscaler.broker_fs:Transport"

app = Celery("autoscaler")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
