"""Declarative control plane of the SLO-driven autoscaler (Django project package)."""

from .celery import app as celery_app

__all__ = ["celery_app"]
