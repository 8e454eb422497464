"""``bench_spark``: one Spark pipeline, one compressed trace, run in turn under several scaling strategies.

- ``ingest_stub``: an in-process HTTP endpoint speaking the agent's contract (progress / desired / applied), so
  every run is monitored and driven by the same agent whatever the strategy;
- ``strategies``: static peak / mean, Spark's dynamic allocation, the Spark Streaming allocator rule, DS2 and
  the project's OM policies (``policies.registry``) as per-period controllers;
- ``runner``: runs one strategy on a standalone cluster and measures it (violations, executor-core-seconds,
  cost, reconfigurations, apply time, records lost/duplicated, and a fluid-queue prediction fitted from the
  recorded metrics);
- ``prediction``: the project simulator's M/G/1 model fitted from the run's service times, replayed on the run's
  executor series (the sim-to-real gap).
"""
