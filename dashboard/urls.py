"""Web app URLs: ``dashboard.manage.urls`` (register/edit forms, fleet, manifests) and ``dashboard.monitor.urls``
(dashboards, decisions, agents, what-if) are kept apart so each area can grow on its own."""

from django.urls import include, path

app_name = "dashboard"

urlpatterns = [
    path("", include("dashboard.manage.urls")),
    path("", include("dashboard.monitor.urls")),
]
