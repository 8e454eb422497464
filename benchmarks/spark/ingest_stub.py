"""A minimal stand-in for the control plane's ingest endpoints, speaking the agent's contract
(``connectors.spark.agent``): ``POST .../progress``, ``GET .../desired``, ``POST .../applied`` under
``/api/v1/ingest/<application>/<operator>/``. Everything received is kept in memory with its arrival time.

Given a ``token`` (the bench runner gives a fresh ingest-style ``ssi_...`` one, see ``new_token``), it requires
``Authorization: Token <token>`` like the control plane and answers 401 to anything else; without one it
accepts every request."""

from __future__ import annotations

import json
import secrets
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


def new_token() -> str:
    """A fresh secret shaped like the control plane's ingest tokens."""
    return "ssi_" + secrets.token_urlsafe(32)


class IngestStub:
    """Serve on 127.0.0.1 (free port); ``set_desired`` publishes a new generation for the agent."""

    def __init__(self, token: str | None = None) -> None:
        self.token = token
        self.lock = threading.Lock()
        self.progress: list[tuple[float, dict[str, Any]]] = []  # (received at, StreamingQueryProgress)
        self.latency: list[dict[str, Any]] = []
        self.driver: list[tuple[float, dict[str, Any]]] = []
        self.acks: list[tuple[float, dict[str, Any]]] = []
        self.desired: dict[str, Any] = {"generation": 0, "executors": None, "profile": None}
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _reply(self, code: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(code)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def _authorised(self) -> bool:
                if stub.token is None or secrets.compare_digest(
                    self.headers.get("Authorization", ""), f"Token {stub.token}"
                ):
                    return True
                self._reply(401, {"errors": [{"loc": "", "msg": "invalid ingest token"}]})
                return False

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                if not self._authorised():
                    return
                if self.path.endswith("/desired"):
                    with stub.lock:
                        self._reply(200, dict(stub.desired))
                else:
                    self._reply(404, {"errors": [{"loc": ["path"], "msg": "unknown"}]})

            def do_POST(self) -> None:  # noqa: N802
                n = int(self.headers.get("Content-Length", 0))
                body_bytes = self.rfile.read(n)
                if not self._authorised():
                    return
                try:
                    body = json.loads(body_bytes or b"{}")
                except ValueError:
                    self._reply(400, {"errors": [{"loc": ["body"], "msg": "not JSON"}]})
                    return
                now = time.time()
                with stub.lock:
                    if self.path.endswith("/progress"):
                        stub.progress += [(now, p) for p in body.get("progress", [])]
                        stub.latency += body.get("latency", [])
                        if body.get("driver"):
                            stub.driver.append((now, body["driver"]))
                    elif self.path.endswith("/applied"):
                        stub.acks.append((now, body))
                    else:
                        self._reply(404, {"errors": [{"loc": ["path"], "msg": "unknown"}]})
                        return
                self._reply(201, {})

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)

    def start(self) -> IngestStub:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()

    def set_desired(self, executors: int, profile: dict[str, Any]) -> int:
        """Publish a new desired executor count; returns its generation."""
        with self.lock:
            gen = int(self.desired["generation"]) + 1
            self.desired = {"generation": gen, "executors": int(executors), "profile": profile}
            return gen

    def since(self, t: float) -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, Any] | None]:
        """(progress, latency reports, newest driver info) received after epoch ``t``."""
        with self.lock:
            prog = [p for at, p in self.progress if at > t]
            lat = [x for x in self.latency if x.get("timestamp", 0) > t]
            drv = self.driver[-1][1] if self.driver else None
        return prog, lat, drv
