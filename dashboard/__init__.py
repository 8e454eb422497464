"""The web app: registration forms, fleet overview, application dashboards, decision explorer, what-if.

One package per area: ``manage`` (fleet, forms, manifests), ``monitor`` (dashboards, decisions, agents,
what-if), ``accounts`` (throttled login). Left at the top because they belong to no area: ``models`` and
``migrations`` (the rollups and what-if runs of the monitor area and its tasks), ``tasks`` (the Celery module
autodiscovery imports), ``staticfiles`` (the project's static files storage, named in ``settings.STORAGES``),
``apps`` and ``urls`` (the app's config and the root of its URLs).
"""
