"""The apply-time Flink binding check when it cannot be made: a JobManager that refuses connections or never
answers. The application is stored and a one-line warning returned (CLI output, API body), within the check's
timeout. The JobManager's address is an endpoint staff declared on the application's region (or in the
AUTOSCALER_ENGINE_ENDPOINTS setting): an undeclared one is rejected (tests/security/test_ssrf.py).
(Rejections of a missing vertex need a running job: tests/connectors/flink/test_flink_live.py.)"""

from __future__ import annotations

import socket
import time

import pytest
import yaml
from django.core.management import call_command

from autoscaler import manifests
from autoscaler.models import Application
from connectors.flink.apply_check import APPLY_CHECK_TIMEOUT_S

pytestmark = pytest.mark.django_db

REGION = "flink-ep"


def declare(url: str) -> None:
    """Staff (here the command line, an administrator's tool) declare ``url`` on region ``flink-ep``."""
    catalog = {
        "apiVersion": "autoscaler/v1",
        "kind": "NodeTypeCatalog",
        "metadata": {"name": "flink-slots"},
        "spec": {
            "nodeTypes": [
                {"name": "slot", "cores": 1, "memoryMiB": 1024, "speedup": 1.0, "pricePerHour": 0.01}
            ]
        },
    }
    region = {
        "apiVersion": "autoscaler/v1",
        "kind": "Region",
        "metadata": {"name": REGION},
        "spec": {"catalog": "flink-slots", "maxNodes": 2, "maxNewNodesPerPeriod": 1, "endpoints": [url]},
    }
    manifests.apply_documents([catalog, region], None)


def _doc(rest_url: str, regions: tuple[str, ...] = (REGION,)) -> dict:
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Application",
        "metadata": {"name": "wc-flink"},
        "spec": {
            "engine": "flink",
            "connector": {"restUrl": rest_url, "jobName": "wordcount"},
            "slo": {"rMaxMs": 2000, "etaV": 0.05, "etaR": 0.1},
            "operators": [
                {"name": "src", "kind": "source"},
                {"name": "counter", "kind": "operator"},
                {"name": "out", "kind": "sink"},
            ],  # fmt: skip
            "streams": [["src", "counter"], ["counter", "out"]],
            "policies": {"om": "ql-pds-plus"},
            "regions": list(regions),
        },
    }


@pytest.fixture
def refused_url():
    """A local port nothing listens on (connections are refused). The port stays bound, without listening, for
    the test's length: released, another test's server could take it meanwhile (a CI run's JobManager answered
    there once)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
def silent_url():
    """A local port that accepts connections but never answers."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(8)
        yield f"http://127.0.0.1:{s.getsockname()[1]}"


def test_unreachable_cluster_stores_the_application_with_a_warning(alice, tmp_path, capsys, refused_url):
    declare(refused_url)
    (tmp_path / "app.yaml").write_text(yaml.safe_dump(_doc(refused_url)))
    call_command("apply", "-f", str(tmp_path / "app.yaml"), "--owner", "alice")
    printed = capsys.readouterr()
    assert printed.out == "application/wc-flink created\n"
    assert printed.err == (
        f"warning: application/wc-flink: binding not checked: JobManager at {refused_url} not reachable: "
        "connection refused (GET /jobs/overview); the application is stored and the connector will check the "
        "binding at its first tick\n"
    )
    assert Application.objects.get(name="wc-flink").connector["restUrl"] == refused_url


def test_api_returns_the_warning_with_the_stored_manifest(alice_api, refused_url):
    declare(refused_url)
    response = alice_api.post("/api/v1/applications/", _doc(refused_url), format="json")
    assert response.status_code == 201, response.content
    body = response.json()
    assert body["metadata"]["name"] == "wc-flink"
    (warning,) = body["warnings"]
    assert warning.startswith(f"binding not checked: JobManager at {refused_url} not reachable: connection")
    assert Application.objects.filter(name="wc-flink").exists()


def test_apply_endpoint_lists_the_warnings(alice_api, refused_url):
    declare(refused_url)
    response = alice_api.post("/api/v1/apply/", {"items": [_doc(refused_url)]}, format="json")
    assert response.status_code == 200, response.content
    assert response.json()["results"] == ["application/wc-flink created"]
    (warning,) = response.json()["warnings"]
    assert warning.startswith("application/wc-flink: binding not checked: JobManager at")


def test_a_cluster_that_never_answers_delays_apply_by_the_check_timeout_only(alice, silent_url):
    declare(silent_url)
    started = time.monotonic()
    (result,) = manifests.apply_documents([_doc(silent_url)], alice)
    elapsed = time.monotonic() - started
    assert result.action == "created"
    assert f"JobManager at {silent_url} not reachable: timeout (GET /jobs/overview)" in result.warnings[0]
    assert APPLY_CHECK_TIMEOUT_S * 0.9 <= elapsed < APPLY_CHECK_TIMEOUT_S * 2 + 1.5


def test_an_endpoint_of_the_allow_list_setting_needs_no_region(alice, refused_url, settings):
    settings.AUTOSCALER_ENGINE_ENDPOINTS = [refused_url + "/"]  # a trailing slash declares the same base
    (result,) = manifests.apply_documents([_doc(refused_url, regions=())], alice)
    assert result.action == "created" and "not reachable: connection refused" in result.warnings[0]
    settings.AUTOSCALER_ENGINE_ENDPOINTS = []
    with pytest.raises(manifests.ManifestError) as info:
        manifests.apply_documents([_doc(refused_url + "/x", regions=())], alice)
    (error,) = info.value.errors
    assert error.loc == "spec.connector.restUrl" and "not an engine endpoint declared by staff" in error.msg


def test_other_engines_are_not_checked(alice):
    doc = _doc("http://127.0.0.1:9", regions=())
    doc["spec"]["engine"], doc["spec"]["connector"] = "simulated", {}
    (result,) = manifests.apply_documents([doc], alice)
    assert result.warnings == [] and str(result) == "application/wc-flink created"
