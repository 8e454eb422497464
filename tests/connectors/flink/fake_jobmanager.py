"""A scripted Flink JobManager REST endpoint on 127.0.0.1 for faults a real cluster cannot be made to show on
demand (a job that fails exactly when its rescale is requested, a JobManager that vanishes mid-apply).

It serves the calls the connector makes: ``/jobs/overview``, ``/jobs/<id>``, ``/jobs/<id>/resource-requirements``
(GET and PUT), ``/jobs/<id>/exceptions`` (``FakeJob.exceptions``), ``/overview`` and the vertices' subtask
metrics. ``on_put`` decides what a PUT of resource
requirements does to the job: a callable ``(job, put_number) -> None`` that edits the job in place."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

JOB_ID = "a" * 32
VERTICES = [  # id, name, parallelism
    ("v1", "Source: ticks[1] -> TableToDataStream -> sentences", 1),
    ("v2", "splitter, filter, _stream_key_by_map_operator", 2),
    ("v3", "counter", 2),
    ("v4", "top, Filter -> Sink: discard", 1),
]


class FakeJob:
    """The job's state as the REST API reports it (edited by the tests and by ``on_put``)."""

    def __init__(self, slots_total: int = 8) -> None:
        start = time.time() * 1000.0 - 600_000.0
        self.state = "RUNNING"
        self.slots_total = slots_total
        self.vertices = {
            vid: {
                "id": vid,
                "name": name,
                "parallelism": p,
                "status": "RUNNING",
                "start-time": start,
                "metrics": {},
            }
            for vid, name, p in VERTICES
        }
        self.requirements = {
            vid: {"parallelism": {"lowerBound": 1, "upperBound": p}} for vid, _, p in VERTICES
        }
        self.puts: list[dict[str, Any]] = []
        #: the job's exception history, oldest first (entries as Flink's REST API gives them)
        self.exceptions: list[dict[str, Any]] = []

    def end(self, state: str) -> None:
        """The job reaches the terminal ``state`` (FAILED, CANCELED): every vertex with it."""
        self.state = state
        for v in self.vertices.values():
            v["status"] = state

    def details(self) -> dict[str, Any]:
        return {
            "jid": JOB_ID,
            "name": "wc",
            "state": self.state,
            "now": time.time() * 1000.0,
            "timestamps": {},
            "vertices": list(self.vertices.values()),
        }


class FakeJobManager:
    """``with FakeJobManager(on_put) as jm: jm.url ...``; ``stop()`` closes the port (connection refused)."""

    def __init__(self, on_put: Callable[[FakeJob, int], None] | None = None, port: int = 0) -> None:
        self.job = FakeJob()
        self.on_put = on_put
        self.max_parallelism = 128
        self.lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:  # quiet
                pass

            def _send(self, code: int, body: Any) -> None:
                raw = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(raw)))
                self.end_headers()
                self.wfile.write(raw)

            def do_GET(self) -> None:  # noqa: N802 - http.server's name
                with fake.lock:
                    code, body = fake.get(self.path)
                self._send(code, body)

            def do_PUT(self) -> None:  # noqa: N802 - http.server's name
                length = int(self.headers.get("Content-Length") or 0)
                body = json.loads(self.rfile.read(length) or b"{}")
                with fake.lock:
                    code, answer = fake.put(self.path, body)
                self._send(code, answer)

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def __enter__(self) -> FakeJobManager:
        self.thread.start()
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def stop(self) -> None:
        if self.thread.is_alive():
            self.server.shutdown()
        self.server.server_close()

    # ---- the API ---------------------------------------------------------------------------------------------
    def get(self, path: str) -> tuple[int, Any]:
        job = self.job
        path = path.split("?")[0]
        if path == "/jobs/overview":
            return 200, {"jobs": [{"jid": JOB_ID, "name": "wc", "state": job.state, "start-time": 1}]}
        if path == "/overview":
            used = max(v["parallelism"] for v in job.vertices.values()) if job.state == "RUNNING" else 0
            return 200, {"slots-total": job.slots_total, "slots-available": job.slots_total - used}
        if path == f"/jobs/{JOB_ID}":
            return 200, job.details()
        if path == f"/jobs/{JOB_ID}/resource-requirements":
            return 200, job.requirements
        if path == f"/jobs/{JOB_ID}/exceptions":
            return 200, {"exceptionHistory": {"entries": job.exceptions[::-1], "truncated": False}}
        if path.startswith(f"/jobs/{JOB_ID}/vertices/") and path.endswith("/subtasks/metrics"):
            return 200, []
        return 404, {"errors": ["Not found."]}

    def put(self, path: str, body: Any) -> tuple[int, Any]:
        job = self.job
        if path != f"/jobs/{JOB_ID}/resource-requirements":
            return 404, {"errors": ["Not found."]}
        if job.state != "RUNNING":
            return 409, {"errors": [f"job is {job.state}"]}
        bounds = [int(v["parallelism"]["upperBound"]) for v in body.values()]
        if any(b > self.max_parallelism for b in bounds):  # as Flink answers a bound above maxParallelism
            return 400, {"errors": [f"upper bound above the max parallelism {self.max_parallelism}"]}
        job.puts.append(body)
        job.requirements = body
        if self.on_put is not None:
            self.on_put(job, len(job.puts))
        return 200, {}
