"""Monitoring pages: application dashboard (+ JSON data), decision explorer, agent inspector, what-if.

Every page needs a login; another user's application, decision or what-if run is 404.
"""

from django.urls import path

from .views import agents, app_dashboard, decisions, whatif

urlpatterns = [
    path("applications/<str:name>/", app_dashboard.app_dashboard, name="app-dashboard"),
    path("applications/<str:name>/data.json", app_dashboard.app_data, name="app-data"),
    path("applications/<str:name>/agents/", agents.agents_page, name="app-agents"),
    path("applications/<str:name>/whatif/", whatif.whatif_page, name="app-whatif"),
    path("applications/<str:name>/whatif/<int:pk>.json", whatif.whatif_status, name="whatif-status"),
    path("decisions/", decisions.decision_list, name="decisions"),
    path("decisions/<int:pk>/", decisions.decision_detail, name="decision-detail"),
]
