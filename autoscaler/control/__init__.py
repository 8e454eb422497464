"""The Celery control plane: periodic ticks (monitor -> OM steps -> AM arbitration -> execute), durable agents,
the decision log, safety rails and Prometheus metrics."""
