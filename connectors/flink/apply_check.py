"""The apply-time binding check of an ``engine: flink`` application (manifest CLI, REST API, web form).

``check_at_apply(settings, operators)`` asks the JobManager (every REST call within ``timeout_s``, default
``APPLY_CHECK_TIMEOUT_S`` seconds) for the job and resolves every declared operator to a vertex:

- reachable and the job found: an operator without a vertex of its own raises ``BindingError`` (``problems``:
  operator -> reason, ``vertices``: the vertex names that exist); the manifest is rejected;
- JobManager unreachable or the job not running (yet): returns a warning (the job may be deployed later; the
  connector then reports a binding error at its first tick);
- everything bound: returns no warning.
"""

from __future__ import annotations

from connectors.base import ConnectorError
from connectors.flink.binding import BindingError, resolve, vertices_of
from connectors.flink.connector import job_of

#: per REST call of the apply-time check (s): applying a manifest must not hang on an unreachable cluster
APPLY_CHECK_TIMEOUT_S = 2.0


def check_at_apply(
    settings: dict, operators: list[str], timeout_s: float = APPLY_CHECK_TIMEOUT_S
) -> list[str]:
    """Warnings (possibly none) of binding ``operators`` to the job of ``settings`` (camelCase); raises
    ``BindingError`` when the job runs and some operator has no vertex of its own."""
    job = job_of({**settings, "restTimeoutS": timeout_s}, operators)
    try:
        job_id = job.find()
        details = job.rest.job(job_id)
    except BindingError:
        raise
    except ConnectorError as exc:
        return [
            f"binding not checked: {exc}; the application is stored and the connector will check the "
            "binding at its first tick"
        ]
    resolve(job.vertex_names, vertices_of(details))
    return []
