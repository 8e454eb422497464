"""The Celery control plane: periodic ticks (monitor -> OM steps -> AM arbitration -> execute), durable agents,
the decision log, safety rails and Prometheus metrics.

Modules: ``tick`` (one tick, synchronously callable: ``run_tick(application_id, slot)``), ``tasks`` (Celery:
dispatcher, tick, AM tuning, region step), ``am`` (AM tuning), ``regions`` (RM step + IM arbitration with the
declared policies, realised through the region's NodeProvider), ``nodes`` (durable node record, bookkeeping over
it), ``rails`` (safety rails, declared in the manifest's ``spec.rails``), ``aggregates`` (O(1) per-application
period and time windows), ``agents`` (reset/export/import), ``metrics``
(``/metrics``), ``views``/``urls`` (``/api/v1/control/``), ``topology`` (what a tick needs from the stored
Application), ``builders`` (simulated applications for demos, benchmarks and tests).

Running it: ``celery -A autoscaler worker`` (as many as wanted; ``--pool=solo`` or prefork) and ONE
``celery -A autoscaler beat`` (a second beat is harmless). Only applications in state ``running`` are ticked.
Settings (Django settings, all optional): ``AUTOSCALER_DISPATCH_INTERVAL_S`` (5), ``AUTOSCALER_RM_PERIOD_S`` (60),
``AUTOSCALER_RM_POLICY`` ("simple": the RM policy of regions whose applications declare none), ``AUTOSCALER_DB_REUSE_MAX`` (500 tasks per worker DB connection; set
``DATABASE_CONN_MAX_AGE`` > 0 for workers). Demo on one machine: ``python scripts/demo_control.py``.
"""
