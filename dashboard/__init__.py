"""The web app: registration forms, fleet overview, application dashboards, decision explorer, what-if."""
