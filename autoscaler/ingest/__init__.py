"""Ingest of engine-side telemetry and the desired state the engine-side agents apply.

``/api/v1/ingest/<application>/<operator>/``: ``progress`` (POST, batched query progress and sink latencies),
``desired`` (GET, what the agent must run), ``applied`` (POST, the agent's acknowledgement). Authenticated with
the application's ingest token (``manage.py ingest_token``; the owner's API token still works, for
compatibility); see ``autoscaler.ingest.views``.
"""
