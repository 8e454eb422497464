"""Web app URLs: ``urls_manage`` (register/edit forms, fleet, manifests) and ``urls_monitor`` (dashboards,
decisions, agents, what-if) are kept apart so each area can grow on its own."""

from django.urls import include, path

app_name = "dashboard"

urlpatterns = [
    path("", include("dashboard.urls_manage")),
    path("", include("dashboard.urls_monitor")),
]
