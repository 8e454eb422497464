"""A minimal client of the Flink JobManager REST API (stdlib ``urllib`` via ``connectors.http_fetch``).

A failed call raises ``FlinkRestError`` whose message is one line naming the JobManager (its declared URL), the
call and what happened ("not reachable: timeout", "answered HTTP 502", "answered non-JSON"): it never holds a
byte of the reply, which may be shown to the application's owner (apply warnings, decision log).
"""

from __future__ import annotations

import json
from typing import Any
from urllib.request import Request

from connectors.base import ConnectorError
from connectors.http_fetch import FetchError, fetch_json


class FlinkRestError(ConnectorError):
    """The REST API could not be reached or answered with an error (``status`` is the HTTP code, 0 if none)."""

    def __init__(self, message: str, status: int = 0) -> None:
        super().__init__(message)
        self.status = status


class FlinkRest:
    """JSON requests to ``base_url`` (e.g. ``http://127.0.0.1:8081``), each with ``timeout_s`` seconds."""

    def __init__(self, base_url: str, timeout_s: float = 5.0) -> None:
        self.base_url = base_url.rstrip("/")
        self.timeout_s = timeout_s

    def request(self, method: str, path: str, body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        req = Request(self.base_url + path, data=data, method=method)
        if data is not None:
            req.add_header("Content-Type", "application/json")
        try:
            return fetch_json(req, self.timeout_s)
        except FetchError as exc:
            where = f"JobManager at {self.base_url}"
            if exc.reason.startswith("not reachable"):
                message = f"{where} {exc.reason} ({method} {path})"
            else:
                message = f"{where}: {method} {path} {exc.reason}"
            raise FlinkRestError(message, exc.status) from None

    def get(self, path: str) -> Any:
        return self.request("GET", path)

    def put(self, path: str, body: Any) -> Any:
        return self.request("PUT", path, body)

    def patch(self, path: str) -> Any:
        return self.request("PATCH", path)

    # ---- job helpers ---------------------------------------------------------------------------------------
    def jobs(self) -> list[dict[str, Any]]:
        """Every job with id, name and state (``/jobs/overview``)."""
        return list(self.get("/jobs/overview").get("jobs", []))

    def job(self, job_id: str) -> dict[str, Any]:
        """Job details: ``state``, ``vertices`` (id, name, parallelism, status), ``timestamps``."""
        return self.get(f"/jobs/{job_id}")

    def vertex_metrics(self, job_id: str, vertex_id: str, names: list[str]) -> dict[str, dict[str, float]]:
        """Subtask-aggregated metrics of a vertex: name -> {min, max, avg, sum} (missing names left out)."""
        rows = self.get(f"/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics?get={','.join(names)}")
        out: dict[str, dict[str, float]] = {}
        for row in rows or []:
            out[row["id"]] = {k: float(v) for k, v in row.items() if k in ("min", "max", "avg", "sum")}
        return out

    def vertex_metric_names(self, job_id: str, vertex_id: str) -> list[str]:
        """Names of the metrics the vertex's subtasks expose."""
        return [row["id"] for row in self.get(f"/jobs/{job_id}/vertices/{vertex_id}/subtasks/metrics") or []]

    def failure_cause(self, job_id: str, limit: int = 2000) -> str:
        """The job's latest root exception (``/jobs/:id/exceptions``), its first ``limit`` characters; ``""`` when
        the job recorded none."""
        history = self.get(f"/jobs/{job_id}/exceptions").get("exceptionHistory", {}).get("entries", [])
        if not history:
            return ""
        latest = max(history, key=lambda e: e.get("timestamp", 0))
        return f"{latest.get('exceptionName', '')}: {latest.get('stacktrace', '')}"[:limit]

    def resource_requirements(self, job_id: str) -> dict[str, Any]:
        return self.get(f"/jobs/{job_id}/resource-requirements")

    def set_resource_requirements(self, job_id: str, requirements: dict[str, Any]) -> None:
        self.put(f"/jobs/{job_id}/resource-requirements", requirements)
