"""Monitoring from the web: the application dashboard (+ its JSON data), the decision explorer, the agent
inspector and the what-if simulation.

Layout: ``urls.py`` (the area's URL patterns, included by ``dashboard.urls``), ``views/`` (one module per page,
``common`` for their owner-scoped lookups and JSON errors), ``forms.py`` (the decision explorer's filters), and
the helpers the views read through: ``rollup`` (per-day rollups of the ledger, kept by the ``dashboard.rollup``
task), ``chart_data`` (the dashboard's series from the rollups), ``series`` (downsampling, pure numpy),
``decision_query`` (the decision explorer's query), ``whatif`` (the what-if replay run by the
``dashboard.whatif`` task). The Celery tasks themselves stay in ``dashboard/tasks.py``, where Celery's
autodiscovery looks. Templates: ``templates/dashboard/monitor/``.
"""
