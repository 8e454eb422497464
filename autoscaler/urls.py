"""Top-level URLs: admin, REST API v1 (with schema and docs), browsable-API login."""

from django.contrib import admin
from django.urls import include, path

from autoscaler.control.metrics import metrics_view

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/control/", include("autoscaler.control.urls")),
    path("api/v1/ingest/", include("autoscaler.ingest.urls")),
    path("api/v1/", include("autoscaler.api.urls")),
    path("metrics", metrics_view, name="metrics"),
    path("api-auth/", include("rest_framework.urls")),
    path("accounts/", include("django.contrib.auth.urls")),
    path("", include("dashboard.urls")),
]

handler404 = "autoscaler.api.errors.api_not_found"  # JSON under /api/, HTML elsewhere
