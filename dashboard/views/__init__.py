"""Views of the web app: ``manage*`` modules (forms, fleet, manifests) and ``monitor*`` modules (dashboards)."""
