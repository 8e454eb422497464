"""``/api/v1/control/``: per-application control-plane endpoints."""

from django.urls import path

from . import views

NAME = "<str:name>"

urlpatterns = [
    path(f"applications/{NAME}/summary/", views.SummaryView.as_view(), name="control-summary"),
    path(f"applications/{NAME}/decisions/", views.DecisionsView.as_view(), name="control-decisions"),
    path(f"applications/{NAME}/rails/", views.RailsView.as_view(), name="control-rails"),
    path(f"applications/{NAME}/agents/", views.AgentsView.as_view(), name="control-agents"),
    path(f"regions/{NAME}/", views.RegionView.as_view(), name="control-region"),
]
