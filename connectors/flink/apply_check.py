"""The apply-time binding check of an ``engine: flink`` application (manifest CLI, REST API, web form).

``check_at_apply(settings, operators)`` asks the JobManager (every REST call within ``timeout_s``, default
``APPLY_CHECK_TIMEOUT_S`` seconds) for the job and resolves every declared operator to a vertex:

- reachable and the job found: an operator without a vertex of its own raises ``BindingError`` (``problems``:
  operator -> reason, ``vertices``: the vertex names that exist); the manifest is rejected;
- JobManager unreachable, answering an HTTP error, non-JSON or JSON of another shape, or the job not running
  (yet): returns a one-line warning (the job may be deployed later; the connector then reports a binding error
  at its first tick). A warning says what happened ("JobManager at <restUrl> not reachable: timeout", "...
  answered HTTP 502", "... answered non-JSON") and never holds a byte of the reply;
- everything bound: returns no warning.

``restUrl`` has been checked against the declared engine endpoints before (``autoscaler.schemas.endpoints``).
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
        vertices = vertices_of(job.rest.job(job_id))
    except BindingError:
        raise
    except ConnectorError as exc:
        return [_not_checked(str(exc))]
    except (KeyError, TypeError, AttributeError, ValueError):  # JSON, but not a JobManager's answer
        return [_not_checked(f"JobManager at {job.rest.base_url} answered JSON of an unexpected shape")]
    resolve(job.vertex_names, vertices)
    return []


def _not_checked(what: str) -> str:
    """The one-line warning of a check that could not be made (``what`` holds no byte of a remote reply)."""
    line = " ".join(what.split())
    return (
        f"binding not checked: {line}; the application is stored and the connector will check the binding "
        "at its first tick"
    )
