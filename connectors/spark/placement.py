"""Typed-worker placement: a node type becomes a custom resource that its workers advertise and executors request.

Spark cannot tell node types apart that differ only in speed or price (same cores and memory). A standalone worker
of node type ``T`` therefore advertises the resource ``nodetype_<T sanitised>`` (amount = its cores), and the
executors of an operator deployed on ``T`` request one unit of it (``spark.executor.resource.<name>.amount=1``),
so the master places them only on workers of type ``T``. Plain module (no Django, no pyspark): the provider, the
connector and the job-side agent share it.
"""

from __future__ import annotations

import re
from typing import Any

PREFIX = "nodetype_"


def resource_name(node_type: str) -> str:
    """The resource of ``node_type``: ``nodetype_`` + the name lower-cased, every character other than a letter,
    digit or ``_`` replaced by ``_`` (Spark resource names cannot contain dots: ``exec.small`` ->
    ``nodetype_exec_small``)."""
    if not node_type:
        raise ValueError("node type: an empty name has no resource")
    return PREFIX + re.sub(r"[^a-z0-9_]", "_", node_type.lower())


def executor_conf(resource: str) -> dict[str, str]:
    """Spark conf that makes every executor request one unit of ``resource`` (empty for no resource)."""
    return {f"spark.executor.resource.{resource}.amount": "1"} if resource else {}


def typed_workers(provider: dict[str, Any] | None) -> bool:
    """Whether a region's workers are typed: its provider is ``spark-standalone`` and ``settings.typedWorkers``
    (default: ``settings.managed``, itself default true: the provider starts typed workers; a user's own cluster
    declares ``typedWorkers: true`` when its workers advertise ``nodetype_<T>`` resources)."""
    provider = provider or {}
    if provider.get("kind") != "spark-standalone":
        return False
    settings = provider.get("settings") or {}
    return bool(settings.get("typedWorkers", settings.get("managed", True)))
