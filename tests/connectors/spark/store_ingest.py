"""The control plane's ingest endpoints (``autoscaler.ingest.views``) over an ``InMemorySparkStore``: what a
Spark job's agent (``connectors.spark.agent``) talks to, without Django's request handling or a database.

Same paths, bodies and answers as the views, under ``/api/v1/ingest/<application>/<operator>/``:

- ``POST progress`` -> 201 ``{"stored": n}``: micro-batches become ``ProgressRecord``s, sink latencies
  ``LatencyRecord``s, and the driver block the operator's ``DriverState`` (heard of now; a shipment without one
  only refreshes when the agent was last heard of, as the view keeps the stored driver's fields);
- ``GET desired`` -> ``{"generation", "executors", "profile"}`` from ``store.desired`` (generation 0: nothing
  desired yet);
- ``POST applied`` -> 201 ``{"id": n}``: an ``Acknowledgement`` (its driver block becomes the known driver); a
  generation above the desired one -> 400.

The agent's JSON goes through the control plane's own pure steps: the body checks of ``autoscaler.ingest.body``
(415, 413, 400), the validation of ``autoscaler.ingest.serializers`` (400 with ``{"errors": [{"loc", "msg"}]}``,
nothing stored) and the conversions of ``autoscaler.ingest.records`` (the columns the views store, read back as
``OrmSparkStore`` reads them). Authentication is one application's ingest token (``Authorization: Token
<token>``, else 401); another application -> 403, an operator not served -> 404, an unknown path -> 404, another
method -> 405.

Usage::

    with StoreIngest(store, "wc", {"counter": "counter"}, token) as ingest:
        run(..., application="wc", operator="counter", url=ingest.url, token=token)
"""

from __future__ import annotations

import datetime as dt
import itertools
import json
import re
import secrets
import threading
from collections.abc import Hashable
from dataclasses import asdict
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from autoscaler.ingest.body import BodyError, check_headers, decode, max_body_bytes
from autoscaler.ingest.records import (
    ack_columns,
    acknowledgement,
    driver_columns,
    driver_state,
    latency_columns,
    latency_record,
    progress_columns,
    progress_record,
)
from autoscaler.ingest.serializers import AppliedPayload, Driver, ProgressPayload, parse
from autoscaler.schemas.errors import FieldError
from connectors.spark.store import InMemorySparkStore

_PATH = re.compile(r"^/api/v1/ingest/(?P<application>[^/]+)/(?P<operator>[^/]+)/(?P<endpoint>[^/]+)$")
_METHODS = {"progress": "POST", "desired": "GET", "applied": "POST"}


def _errors(*errors: FieldError) -> dict[str, Any]:
    return {"errors": [e.as_dict() for e in errors]}


class StoreIngest:
    """Serves the agent's ingest contract of ``application`` on 127.0.0.1 (a free port) into ``store``, with
    ``token`` as the application's ingest token; ``operators`` maps operator names to the store's operator keys.
    ``url`` is what the agent is given."""

    def __init__(
        self, store: InMemorySparkStore, application: str, operators: dict[str, Hashable], token: str
    ) -> None:
        self.store = store
        self.application = application
        self.operators = dict(operators)
        self.token = token
        self._lock = threading.Lock()  # one shipment or acknowledgement at a time, as the views' transactions
        self._ack_ids = itertools.count(1)
        ingest = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def do_GET(self) -> None:  # noqa: N802 - http.server API
                ingest._handle(self, "GET")

            def do_POST(self) -> None:  # noqa: N802
                ingest._handle(self, "POST")

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"
        self._thread = threading.Thread(target=self.server.serve_forever, name="store-ingest", daemon=True)

    def start(self) -> StoreIngest:
        self._thread.start()
        return self

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self._thread.join(timeout=10)

    def __enter__(self) -> StoreIngest:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- one request ------------------------------------------------------------------------------------
    def _handle(self, handler: BaseHTTPRequestHandler, method: str) -> None:
        status, body = self._answer(handler, method)
        data = json.dumps(body).encode()
        handler.send_response(status)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Content-Length", str(len(data)))
        handler.end_headers()
        handler.wfile.write(data)

    def _answer(self, handler: BaseHTTPRequestHandler, method: str) -> tuple[int, dict[str, Any]]:
        path = handler.path.split("?", 1)[0]
        match = _PATH.match(path)
        if match is None or match["endpoint"] not in _METHODS:
            return 404, _errors(FieldError("path", f"no API endpoint at {path!r}"))
        if not self._authorised(handler.headers.get("Authorization", "")):
            return 401, _errors(FieldError("", "invalid ingest token"))
        endpoint = match["endpoint"]
        if method != _METHODS[endpoint]:
            return 405, _errors(FieldError("", f'Method "{method}" not allowed.'))
        application, operator = match["application"], match["operator"]
        if application != self.application:
            return 403, _errors(
                FieldError("", f"this ingest token writes only to application {self.application!r}")
            )
        key = self.operators.get(operator)
        if key is None:
            return 404, _errors(
                FieldError("", f"application {application!r} has no operator named {operator!r}")
            )
        if endpoint == "desired":
            desired = self.store.desired(key)
            return 200, {
                "generation": desired.generation,
                "executors": desired.executors,
                "profile": desired.profile,
            }
        try:
            data = self._body(handler)
        except BodyError as exc:
            return exc.status, _errors(*exc.errors)
        if endpoint == "progress":
            return self._progress(key, data)
        return self._applied(key, data)

    def _authorised(self, header: str) -> bool:
        return secrets.compare_digest(header.encode(), f"Token {self.token}".encode())

    @staticmethod
    def _body(handler: BaseHTTPRequestHandler) -> Any:
        """The request's JSON within the limits of ``autoscaler.ingest.body``; raises ``BodyError``."""
        limit = max_body_bytes()
        length = handler.headers.get("Content-Length")
        check_headers(handler.headers.get("Content-Type"), length, limit)
        return decode(handler.rfile.read(max(int(length or 0), 0)), limit)

    def _progress(self, key: Hashable, data: Any) -> tuple[int, dict[str, Any]]:
        payload, errors = parse(ProgressPayload, data)
        if errors or not isinstance(payload, ProgressPayload):
            return 400, _errors(*errors)
        records = [progress_record(progress_columns(item)) for item in payload.progress]
        latencies = [latency_record(latency_columns(x)) for x in payload.latency]
        with self._lock:
            self.store.add_progress(key, *records)  # a batch already stored is kept once
            self.store.add_latency(key, *latencies)
            self._heard_of(key, payload.driver)
        return 201, {"stored": len(records)}

    def _applied(self, key: Hashable, data: Any) -> tuple[int, dict[str, Any]]:
        payload, errors = parse(AppliedPayload, data)
        if errors or not isinstance(payload, AppliedPayload):
            return 400, _errors(*errors)
        with self._lock:
            current = self.store.desired(key).generation
            if payload.generation > current:
                return 400, _errors(FieldError("generation", f"unknown generation (latest is {current})"))
            if payload.driver is not None:
                self._heard_of(key, payload.driver)
            self.store.add_acknowledgement(key, acknowledgement(ack_columns(payload)))
            return 201, {"id": next(self._ack_ids)}

    def _heard_of(self, key: Hashable, driver: Driver | None) -> None:
        """The operator's driver heard of now: its block's fields, else the stored ones (the view's
        ``update_or_create`` keeps them; a first status without a block has the model's defaults)."""
        known = self.store.driver(key)
        if driver is not None:
            columns = driver_columns(driver)
        elif known is not None:
            columns = asdict(known)
        else:
            columns = {"ui_url": "", "app_id": "", "executors": None, "profile": None}
        self.store.set_driver(key, driver_state(columns, dt.datetime.now(dt.UTC)))
