"""Top-level URLs: admin, REST API v1 (with schema and docs), browsable-API login."""

from django.contrib import admin
from django.urls import include, path

from autoscaler.control.metrics import metrics_view
from autoscaler.metrics_auth import metrics_access
from dashboard.accounts.forms import ThrottledAdminAuthenticationForm
from dashboard.accounts.views import ThrottledLoginView

admin.site.login_form = ThrottledAdminAuthenticationForm  # failed logins count as on the other login pages

urlpatterns = [
    path("admin/", admin.site.urls),
    path("api/v1/control/", include("autoscaler.control.urls")),
    path("api/v1/ingest/", include("autoscaler.ingest.urls")),
    path("api/v1/", include("autoscaler.api.urls")),
    path("metrics", metrics_access(metrics_view), name="metrics"),
    path("api-auth/login/", ThrottledLoginView.as_view(template_name="rest_framework/login.html")),
    path("api-auth/", include("rest_framework.urls")),
    path("accounts/", include("dashboard.accounts.urls")),  # throttled login; no password reset by mail
    path("", include("dashboard.urls")),
]

handler404 = "autoscaler.api.errors.api_not_found"  # JSON under /api/, HTML elsewhere
