"""Monitoring pages: application dashboard (+ JSON data), decision explorer, agent inspector, what-if.

Every page needs a login; another user's application, decision or what-if run is 404.
"""

from django.urls import path

from .views import monitor_agents, monitor_dashboard, monitor_decisions, monitor_whatif

urlpatterns = [
    path("applications/<str:name>/", monitor_dashboard.app_dashboard, name="app-dashboard"),
    path("applications/<str:name>/data.json", monitor_dashboard.app_data, name="app-data"),
    path("applications/<str:name>/agents/", monitor_agents.agents_page, name="app-agents"),
    path("applications/<str:name>/whatif/", monitor_whatif.whatif_page, name="app-whatif"),
    path("applications/<str:name>/whatif/<int:pk>.json", monitor_whatif.whatif_status, name="whatif-status"),
    path("decisions/", monitor_decisions.decision_list, name="decisions"),
    path("decisions/<int:pk>/", monitor_decisions.decision_detail, name="decision-detail"),
]
