"""The Celery control plane: periodic ticks (monitor -> OM steps -> AM arbitration -> execute), durable agents,
the decision log, safety rails and Prometheus metrics.

Modules: ``tick`` (one tick, synchronously callable: ``run_tick(application_id, slot)``: the ledger row, the
engine's metrics, no-data periods and the rollback rail, the apply and its reconciliation), ``decide`` (a tick's
decide phase in named steps: observe and propose -> request (rails) -> grant (AM) -> settle -> record), ``tasks``
(Celery: dispatcher, tick, AM tuning, region step), ``am`` (AM tuning), ``regions`` (RM step + IM arbitration
with the declared policies, realised through the region's NodeProvider: observe -> propose and grant -> realise
-> record), ``nodes`` (durable node record, bookkeeping over it), ``capacity`` (a region's node accounting),
``node_limits`` and ``staged_swap`` (a region's node limit in the tick), ``rails`` (safety rails, declared in the
manifest's ``spec.rails``, and the checks each tick runs), ``guard`` (the violation-budget guard each tick runs),
``app_state`` (the typed application state: the AM's configuration and the tick's memory), ``locks`` (the
per-application lock), ``aggregates`` (O(1) per-application period and time windows), ``agents`` (OM agents
built from their stored state, reset/export/import), ``status`` (deployments' observed status), ``metrics``
(``/metrics``), ``views``/``urls`` (``/api/v1/control/``), ``topology`` (what a tick needs from the stored
Application), ``policy_choice`` (each level's declared or default policy), ``om_config`` (the OMs' specs and the
AM's initial configuration), ``json_safe`` (``finite``: what is stored), ``builders`` (simulated applications for demos, benchmarks and tests).

Running it: ``celery -A autoscaler worker`` (as many as wanted; ``--pool=solo`` or prefork) and ONE
``celery -A autoscaler beat`` (a second beat is harmless). Only applications in state ``running`` are ticked.
Settings (Django settings, all optional): ``AUTOSCALER_DISPATCH_INTERVAL_S`` (5), ``AUTOSCALER_RM_PERIOD_S`` (60),
``AUTOSCALER_RM_POLICY`` ("simple": the RM policy of regions whose applications declare none), ``AUTOSCALER_DB_REUSE_MAX`` (500 tasks per worker DB connection; set
``DATABASE_CONN_MAX_AGE`` > 0 for workers). Demo on one machine: ``python scripts/demo_control.py``.
"""
