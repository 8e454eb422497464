"""Server-side request forgery: a local listener receives no request from any address a user supplies.

A real HTTP server on 127.0.0.1 counts every request it receives. A non-staff user points connector URLs at it
through every door (REST API, apply endpoint, manifest CLI, web form; Flink ``restUrl`` also with a trailing
``?``, Spark ``master``, ``uiUrl`` and per-operator ``uiUrl``) and through the job agent's ingest report
(``driver.uiUrl``) followed by a control tick: every door answers with an error naming the field, stores
nothing, and the listener stays silent. Positive controls show that the same listener is reached once staff
declare it on a region, and that what it then answers (non-JSON, an HTTP error with a secret body, a redirect)
comes back as a one-line warning holding no byte of the reply.
"""

from __future__ import annotations

import datetime as dt
import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import yaml
from django.core.management import CommandError, call_command
from django.test import Client
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler.control.connectors import build_connector
from autoscaler.control.tick import forget_definitions, run_tick
from autoscaler.models import Application, Region
from connectors.base import ScalingPlan
from connectors.refused import RefusedConnector

pytestmark = pytest.mark.django_db

SECRET = "TOP-SECRET-b7e1c9 <html>internal admin page</html>"


class Listener:
    """An HTTP server on 127.0.0.1 that records every request (method and path) and answers per ``mode``:
    ``json`` (Spark executors / Flink jobs JSON), ``html`` (200, non-JSON holding ``SECRET``), ``error`` (500
    holding ``SECRET``), ``redirect`` (302 to ``location``)."""

    def __init__(self, mode: str = "json", location: str = "") -> None:
        self.mode, self.location = mode, location
        self.requests: list[str] = []
        listener = self

        class Handler(BaseHTTPRequestHandler):
            def _answer(self) -> None:
                listener.requests.append(f"{self.command} {self.path}")
                if listener.mode == "redirect":
                    self.send_response(302)
                    self.send_header("Location", listener.location)
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status, kind, body = {
                    "json": (200, "application/json", json.dumps(listener.json_for(self.path))),
                    "html": (200, "text/html", SECRET),
                    "error": (500, "text/plain", SECRET),
                }[listener.mode]
                data = body.encode()
                self.send_response(status)
                self.send_header("Content-Type", kind)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_PATCH = do_HEAD = do_DELETE = _answer

            def log_message(self, *args) -> None:  # keep the test output clean
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.port = self.server.server_address[1]
        self.url = f"http://127.0.0.1:{self.port}"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @staticmethod
    def json_for(path: str):
        if path.endswith("/executors"):  # a Spark driver's REST API: the driver and one active executor
            return [{"id": "driver"}, {"id": "1", "isActive": True}]
        return {"jobs": []}  # a Flink JobManager without jobs

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=10)


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


def api_for(user) -> APIClient:
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.get_or_create(user=user)[0].key}")
    return client


def locs(response) -> dict[str, str]:
    """loc -> msg of an error answer (a loc given as a list of parts is joined with dots)."""
    out = {}
    for error in response.json()["errors"]:
        loc = error["loc"]
        if isinstance(loc, list):
            loc = ".".join(str(part) for part in loc)
        out[loc] = error["msg"]
    return out


CATALOG = {
    "apiVersion": "autoscaler/v1",
    "kind": "NodeTypeCatalog",
    "metadata": {"name": "ssrf-nodes"},
    "spec": {
        "nodeTypes": [{"name": "small", "cores": 1, "memoryMiB": 512, "speedup": 1.0, "pricePerHour": 0.01}]
    },
}


def region(name: str = "pool", endpoints: list[str] | None = None) -> dict:
    spec = {"catalog": "ssrf-nodes", "maxNodes": 4, "maxNewNodesPerPeriod": 2}
    if endpoints:
        spec["endpoints"] = endpoints
    return {"apiVersion": "autoscaler/v1", "kind": "Region", "metadata": {"name": name}, "spec": spec}


@pytest.fixture
def pool(db):
    """A staff-declared region ``pool`` with no endpoint (applied from the command line, an admin's tool)."""
    manifests.apply_documents([CATALOG, region()], None)


def app(engine: str, connector: dict, name: str = "victim") -> dict:
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "engine": engine,
            "connector": connector,
            "slo": {"rMaxMs": 5000, "etaV": 0.05, "etaR": 0.1},
            "operators": [
                {"name": "src", "kind": "source"},
                {"name": "counter", "kind": "operator", "maxParallelism": 4},
                {"name": "out", "kind": "sink"},
            ],
            "streams": [["src", "counter"], ["counter", "out"]],
            "regions": ["pool"],
        },
    }


def attacks(url: str) -> list[tuple[str, dict, set[str]]]:
    """(engine, connector pointing at ``url``, the connector fields that must be rejected)."""
    port = url.rsplit(":", 1)[1]
    return [
        ("flink", {"restUrl": url}, {"spec.connector.restUrl"}),
        ("flink", {"restUrl": url + "/?"}, {"spec.connector.restUrl"}),  # "?" would reach any path
        ("flink", {"restUrl": url + "/admin?x=1#"}, {"spec.connector.restUrl"}),
        ("flink", {"restUrl": f"http://user@127.0.0.1:{port}"}, {"spec.connector.restUrl"}),
        ("spark", {"master": f"spark://127.0.0.1:{port}"}, {"spec.connector.master"}),
        ("spark", {"uiUrl": url}, {"spec.connector.uiUrl"}),
        ("spark", {"operators": {"counter": {"uiUrl": url}}}, {"spec.connector.operators.counter.uiUrl"}),
        (
            "spark",
            {
                "master": f"spark://127.0.0.1:{port}",
                "uiUrl": url,
                "operators": {"counter": {"uiUrl": url + "/"}},
            },
            {"spec.connector.master", "spec.connector.uiUrl", "spec.connector.operators.counter.uiUrl"},
        ),
    ]


def test_the_rest_api_rejects_every_undeclared_connector_address_and_sends_nothing(alice, pool, listener):
    api = api_for(alice)
    for engine, connector, fields in attacks(listener.url):
        for response in (
            api.post("/api/v1/applications/", app(engine, connector), format="json"),
            api.put("/api/v1/applications/victim/", app(engine, connector), format="json"),
            api.post("/api/v1/apply/", {"items": [app(engine, connector)]}, format="json"),
        ):
            assert response.status_code == 400, (connector, response.content)
            errors = locs(response)
            found = {loc.removeprefix("documents[0].") for loc in errors}
            assert fields <= found, (connector, errors)
            assert all(
                "declared by staff" in errors[loc] or "must not contain" in errors[loc] for loc in errors
            )
    assert not Application.objects.exists()
    assert listener.requests == []


def test_the_manifest_cli_rejects_them_too(alice, pool, listener, tmp_path, capsys):
    for i, (engine, connector, fields) in enumerate(attacks(listener.url)):
        path = tmp_path / f"app{i}.yaml"
        path.write_text(yaml.safe_dump(app(engine, connector)))
        with pytest.raises(CommandError):
            call_command("apply", "-f", str(path), "--owner", "alice")
        err = capsys.readouterr().err
        for field in fields:
            assert f"error: {field}: " in err, err
    assert not Application.objects.exists()
    assert listener.requests == []


def test_the_web_form_shows_the_error_on_the_connector_field(alice, pool, listener):
    client = Client()
    client.force_login(alice)
    data = {
        "name": "victim",
        "engine": "flink",
        "connector": f"restUrl: {listener.url}/?",
        "r_max_ms": "5000",
        "eta_v": "0.05",
        "eta_r": "0.1",
        "policy_om": "ql-pds-plus",
        "regions": ["pool"],
        "operators-TOTAL_FORMS": "3",
        "operators-INITIAL_FORMS": "0",
        "operators-0-name": "src",
        "operators-0-kind": "source",
        "operators-1-name": "counter",
        "operators-1-kind": "operator",
        "operators-2-name": "out",
        "operators-2-kind": "sink",
        "streams-TOTAL_FORMS": "2",
        "streams-INITIAL_FORMS": "0",
        "streams-0-source": "src",
        "streams-0-target": "counter",
        "streams-1-source": "counter",
        "streams-1-target": "out",
        "paths-TOTAL_FORMS": "0",
        "paths-INITIAL_FORMS": "0",
    }
    page = client.post("/applications/new/", data)
    assert page.status_code == 400  # the form again, with the error; a stored application would redirect
    html = page.content.decode()
    assert "restUrl: must not contain" in html
    data["connector"] = f"restUrl: {listener.url}"
    html = client.post("/applications/new/", data).content.decode()
    assert "restUrl: " in html and "is not an engine endpoint declared by staff" in html
    assert not Application.objects.exists()
    assert listener.requests == []


def test_only_staff_declare_endpoints(alice, staff, pool, listener):
    doc = region(endpoints=[listener.url])
    assert api_for(alice).put("/api/v1/regions/pool/", doc, format="json").status_code == 403
    assert Region.objects.get(name="pool").endpoints == []
    bad = api_for(staff).put("/api/v1/regions/pool/", region(endpoints=[listener.url + "/?"]), format="json")
    assert bad.status_code == 400 and list(locs(bad)) == ["spec.endpoints[0]"]
    assert api_for(staff).put("/api/v1/regions/pool/", doc, format="json").status_code == 200
    assert Region.objects.get(name="pool").endpoints == [listener.url]
    assert listener.requests == []  # declaring contacts nothing


def test_the_region_form_takes_one_endpoint_per_line(staff, pool):
    client = Client()
    client.force_login(staff)
    data = {
        "catalog": "ssrf-nodes",
        "max_nodes": "4",
        "max_new_nodes_per_period": "2",
        "provider_kind": "bookkeeping",
        "provider_settings": "",
        "endpoints": "http://127.0.0.1:8081\n\nftp://127.0.0.1\n",
    }
    page = client.post("/regions/pool/edit/", data)
    assert (
        page.status_code == 400
        and "&#x27;ftp://127.0.0.1&#x27;: must start with one of" in page.content.decode()
    )
    assert Region.objects.get(name="pool").endpoints == []
    data["endpoints"] = "http://127.0.0.1:8081\n\nspark://127.0.0.1:7077\n"
    assert client.post("/regions/pool/edit/", data).status_code == 302
    assert Region.objects.get(name="pool").endpoints == ["http://127.0.0.1:8081", "spark://127.0.0.1:7077"]


# ---- the agent's ingest report, then a control tick -------------------------------------------------------
def ingest_driver_report(user, ui_url: str) -> None:
    """The Spark job's agent reports its driver (UI URL chosen by whoever runs the job) and a batch."""
    now = dt.datetime.now(dt.UTC)
    body = {
        "progress": [
            {
                "runId": "r",
                "batchId": 1,
                "timestamp": now.isoformat(),
                "numInputRows": 10,
                "batchDuration": 100,
            }
        ],
        "driver": {"uiUrl": ui_url, "appId": "app-1", "executors": 3, "profile": {"name": "small"}},
    }
    response = api_for(user).post("/api/v1/ingest/victim/counter/progress", body, format="json")
    assert response.status_code == 201, response.content


def spark_app_with_deployment(user) -> Application:
    deployment = {
        "apiVersion": "autoscaler/v1",
        "kind": "Deployment",
        "metadata": {"name": "victim-counter"},
        "spec": {"application": "victim", "operator": "counter", "region": "pool", "replicas": {"small": 1}},
    }
    manifests.apply_documents([app("spark", {"batchIntervalS": 1.0}), deployment], user)
    forget_definitions()
    return Application.objects.get(name="victim", owner=user)


def tick_metrics(application: Application) -> dict:
    """What the monitor reported in a control tick of ``application`` (the tick's stored metrics)."""
    from autoscaler.control.models import Tick

    slot = int(dt.datetime.now(dt.UTC).timestamp() // application.om_period_s)
    run_tick(application.pk, slot)
    return Tick.objects.get(application=application, slot=slot).metrics


def test_a_driver_ui_url_reported_through_ingest_is_never_requested(alice, pool, listener):
    application = spark_app_with_deployment(alice)
    ingest_driver_report(alice, listener.url)
    metrics = tick_metrics(application)
    assert listener.requests == []
    assert metrics["operators"]["counter"]["deployment"] == {"small": 3}  # the agent's own count


def test_a_declared_driver_ui_is_asked(alice, staff, pool, listener):
    """Positive control: the same report reaches the listener once staff declared its address."""
    declared = region(endpoints=["http://127.0.0.1:1024-65535"])
    assert api_for(staff).put("/api/v1/regions/pool/", declared, format="json").status_code == 200
    application = spark_app_with_deployment(alice)
    ingest_driver_report(alice, listener.url)
    metrics = tick_metrics(application)
    # the executors, and (a period without a batch) whether a job runs: the declared driver only
    assert "GET /api/v1/applications/app-1/executors" in listener.requests, listener.requests
    assert all(r.startswith("GET /api/v1/applications/app-1/") for r in listener.requests), listener.requests
    assert metrics["operators"]["counter"]["deployment"] == {"small": 1}  # the driver's one active executor


def test_an_endpoint_revoked_by_staff_is_no_longer_contacted(alice, staff, pool, listener):
    manifests.apply_documents([region(endpoints=[listener.url])], None)
    manifests.apply_documents([app("flink", {"restUrl": listener.url, "jobName": "wc"})], alice)
    contacted = len(listener.requests)
    assert contacted >= 1  # the apply-time binding check asked the declared JobManager
    manifests.apply_documents([region()], None)  # staff remove the endpoint
    application = Application.objects.get(name="victim")
    connector = build_connector(application)
    assert isinstance(connector, RefusedConnector)
    forget_definitions()
    metrics = tick_metrics(application)
    assert not metrics["complete"]
    assert metrics["reason"].startswith("engine not contacted: connector.restUrl: ")
    assert "declared by staff" in metrics["reason"]
    assert not connector.realizer.apply(ScalingPlan({"counter": {"small": 2}}, 1)).ok
    assert len(listener.requests) == contacted


# ---- what a declared engine answers never reaches the user ---------------------------------------------------
@pytest.mark.parametrize(
    ("mode", "said"),
    [("html", "answered non-JSON"), ("error", "answered HTTP 500"), ("redirect", "answered HTTP 302")],
)
def test_a_declared_engines_reply_comes_back_as_one_line_without_its_body(alice, pool, mode, said):
    target = Listener("json")  # where a redirect points: never followed
    engine = Listener(mode, location=target.url + "/jobs/overview")
    try:
        manifests.apply_documents([region(endpoints=[engine.url])], None)
        response = api_for(alice).post(
            "/api/v1/applications/", app("flink", {"restUrl": engine.url}), format="json"
        )
        assert response.status_code == 201, response.content
        (warning,) = response.json()["warnings"]
        assert warning == (
            f"binding not checked: JobManager at {engine.url}: GET /jobs/overview {said}; the application is "
            "stored and the connector will check the binding at its first tick"
        )
        assert "SECRET" not in response.content.decode() and "internal admin" not in response.content.decode()
        assert engine.requests == ["GET /jobs/overview"] and target.requests == []
    finally:
        engine.close()
        target.close()


def test_json_of_another_shape_is_a_warning_not_a_500(alice, pool):
    engine = Listener("json")
    engine.json_for = staticmethod(lambda path: [SECRET])  # JSON, but no JobManager's
    try:
        manifests.apply_documents([region(endpoints=[engine.url])], None)
        response = api_for(alice).post(
            "/api/v1/applications/", app("flink", {"restUrl": engine.url}), format="json"
        )
        assert response.status_code == 201, response.content
        (warning,) = response.json()["warnings"]
        assert f"JobManager at {engine.url} answered JSON of an unexpected shape" in warning
        assert "SECRET" not in response.content.decode()
    finally:
        engine.close()


# ---- the matching rules, and a malformed allow-list setting ---------------------------------------------------
DECLARED = [
    "http://127.0.0.1:8081",
    "http://127.0.0.1:4040-4042",
    "spark://127.0.0.1",
    "https://gw.local/flink/",
]


@pytest.mark.parametrize(
    ("url", "covered"),
    [
        ("http://127.0.0.1:8081", True),
        ("http://127.0.0.1:8081/", True),
        ("HTTP://127.0.0.1:8081/jobs", True),
        ("http://127.0.0.1:4042", True),
        ("http://127.0.0.1:4043", False),  # outside the port range
        ("http://127.0.0.1:8082", False),
        ("http://127.1:8081", False),  # the same address written otherwise is not the declared host
        ("http://localhost:8081", False),
        ("https://127.0.0.1:8081", False),  # another scheme
        ("http://127.0.0.1:8081?", False),
        ("http://127.0.0.1:8081/#x", False),
        ("http://127.0.0.1:8081@10.0.0.1", False),
        ("http://x@127.0.0.1:8081", False),
        ("http://127.0.0.1:8081/%2e%2e/", False),
        ("http://127.0.0.1:8081\\@10.0.0.1", False),
        ("http://127.0.0.1:8081 ", False),
        ("spark://127.0.0.1:7077", True),  # the scheme's default port
        ("spark://127.0.0.1:7078", False),
        ("spark://127.0.0.1:7077,10.0.0.1:7077", False),  # every standby master must be declared
        ("https://gw.local/flink/jobs", True),
        ("https://gw.local/flink", True),
        ("https://gw.local/flinkx", False),
        ("https://gw.local/flink/../admin", False),
        ("https://gw.local/", False),
        ("http://127.0.0.1:8081/caf\u00e9", False),  # non-ASCII
        ("http://\uff11\uff12\uff17.0.0.1:8081", False),  # full-width digits
        ("ftp://127.0.0.1:8081", False),
        ("", False),
    ],
)
def test_an_endpoint_covers_only_its_scheme_host_ports_and_path(url, covered):
    from connectors.endpoints import AllowList

    assert AllowList(DECLARED).allows(url) is covered


def test_local_spark_masters_need_no_endpoint():
    from connectors.endpoints import connector_urls

    for master in ("local", "local[2]", "local[*]", "local[4,2]"):
        assert connector_urls("spark", {"master": master}) == []
    assert connector_urls("spark", {"master": "local[2] spark://10.0.0.1"}) == [
        (("master",), "local[2] spark://10.0.0.1")
    ]


def test_a_malformed_allow_list_setting_stops_the_server_with_the_reason(tmp_path):
    import os
    import subprocess
    import sys
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    env = {
        **os.environ,
        "AUTOSCALER_ENGINE_ENDPOINTS": "http://127.0.0.1:8081,ftp://127.0.0.1",
        "PYTHONPATH": str(root),
    }
    done = subprocess.run(
        [sys.executable, str(root / "manage.py"), "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode != 0
    assert (
        "AUTOSCALER_ENGINE_ENDPOINTS: 'ftp://127.0.0.1': must start with one of http://, https://, spark://"
        in done.stderr
    )
