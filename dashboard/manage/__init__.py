"""Managing resources from the web: the fleet overview (``/``), the application form, catalogs, regions,
deployments and manifests.

Layout: ``urls.py`` (the area's URL patterns, included by ``dashboard.urls``), ``views/`` (one module per page
group), ``forms/`` (the forms; the resource forms build a manifest document for the one validation layer), ``status.py``
(budget colours and cost per hour of the fleet overview). Templates: ``templates/dashboard/manage/``.
"""
