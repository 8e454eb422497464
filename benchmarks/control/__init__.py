"""``bench_control``: control-plane throughput with PostgreSQL, Redis and Celery workers (``command``)."""
