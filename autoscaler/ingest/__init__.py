"""Ingest of engine-side telemetry and the desired state the engine-side agents apply.

``/api/v1/ingest/<application>/<operator>/``: ``progress`` (POST, batched query progress and sink latencies),
``desired`` (GET, what the agent must run), ``applied`` (POST, the agent's acknowledgement). Authenticated with
the DRF token of the application's owner; see ``autoscaler.ingest.views``.
"""
