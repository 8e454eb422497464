"""``/api/v1/ingest/``: telemetry in, desired state out, per application operator."""

from django.urls import path

from . import views

BASE = "<str:application>/<str:operator>"

urlpatterns = [
    path(f"{BASE}/progress", views.ProgressView.as_view(), name="ingest-progress"),
    path(f"{BASE}/desired", views.DesiredView.as_view(), name="ingest-desired"),
    path(f"{BASE}/applied", views.AppliedView.as_view(), name="ingest-applied"),
]
