"""The read-only ``status`` of Deployments and Applications in the API: answered beside the spec, ignored in
writes (DRF read-only semantics), described in the OpenAPI schema; other kinds still reject a ``status``."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler.models import Deployment

from .documents import application

pytestmark = pytest.mark.django_db


def deployment(replicas: dict[str, int] | None = None) -> dict:
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Deployment",
        "metadata": {"name": "wc-split"},
        "spec": {
            "application": "wordcount",
            "operator": "splitter",
            "region": "vm-local",
            "replicas": replicas or {"vm.small": 2},
        },
    }


@pytest.fixture
def stored(alice, shared) -> Deployment:
    manifests.apply_documents([application(regions=["vm-local"]), deployment()], alice)
    return Deployment.objects.get(name="wc-split")


def observe(dep: Deployment, replicas: dict[str, int]) -> None:
    """What the control loop writes after a verified apply (without a decision here)."""
    from autoscaler.control.status import _set_status

    _set_status(dep, replicas, source="observed", decision=None, engine_ids={"job": "abc"})


def test_a_deployment_not_observed_yet_says_so(alice_api, stored):
    body = alice_api.get("/api/v1/deployments/wc-split/").json()
    assert body["spec"]["replicas"] == {"vm.small": 2}
    assert body["status"]["observed"] is False and body["status"]["replicas"] is None
    assert body["status"]["costPerHour"] is None


def test_status_shows_what_runs_and_its_cost_beside_the_declared_spec(alice_api, stored):
    observe(stored, {"vm.small": 1, "vm.large": 1})
    body = alice_api.get("/api/v1/deployments/wc-split/").json()
    assert body["spec"]["replicas"] == {"vm.small": 2}
    status = body["status"]
    assert status["replicas"] == {"vm.small": 1, "vm.large": 1} and status["totalReplicas"] == 2
    assert status["costPerHour"] == pytest.approx(0.005 + 0.02)  # vm-example prices
    assert status["matchesSpec"] is False and status["engineIds"] == {"job": "abc"}
    listed = alice_api.get("/api/v1/deployments/").json()
    assert [d["status"]["replicas"] for d in listed] == [{"vm.small": 1, "vm.large": 1}]
    app = alice_api.get("/api/v1/applications/wordcount/").json()["status"]
    assert app["phase"] == "Registered" and app["lastTick"] is None  # not running: no tick
    assert app["replicas"] == {"splitter": {"vm.small": 1, "vm.large": 1}}
    assert app["costPerHour"] == pytest.approx(0.025)


@pytest.mark.parametrize("method", ["put", "post"])
def test_a_status_in_a_write_is_ignored(alice_api, stored, method):
    observe(stored, {"vm.small": 1})
    doc = {**deployment({"vm.small": 3}), "status": {"replicas": {"vm.large": 9}, "observed": True}}
    if method == "post":
        Deployment.objects.filter(name="wc-split").delete()
        response = alice_api.post("/api/v1/deployments/", doc, format="json")
        assert response.status_code == 201, response.json()
        assert response.json()["status"]["observed"] is False  # a new deployment: not observed yet
    else:
        response = alice_api.put("/api/v1/deployments/wc-split/", doc, format="json")
        assert response.status_code == 200, response.json()
        assert response.json()["status"]["replicas"] == {"vm.small": 1}  # unchanged by the request
    dep = Deployment.objects.get(name="wc-split")
    assert dep.replicas == {"vm.small": 3}  # the spec is written
    assert dep.status_replicas != {"vm.large": 9}


def test_a_read_resource_puts_back_unchanged(alice_api, stored):
    observe(stored, {"vm.small": 1})
    for path in ("/api/v1/deployments/wc-split/", "/api/v1/applications/wordcount/"):
        body = alice_api.get(path).json()
        again = alice_api.put(path, body, format="json")
        assert again.status_code == 200, again.json()
        assert again.json() == body


def test_kinds_without_status_still_reject_it(staff_api, shared):
    body = staff_api.get("/api/v1/regions/vm-local/").json()
    response = staff_api.put("/api/v1/regions/vm-local/", {**body, "status": {}}, format="json")
    assert response.status_code == 400
    assert {"loc": "status", "msg": "unknown top-level field"} in response.json()["errors"]


def test_apply_endpoint_ignores_the_status_of_applications_and_deployments(alice_api, stored):
    docs = [{**application(regions=["vm-local"]), "status": {"phase": "x"}}, {**deployment(), "status": {}}]
    response = alice_api.post("/api/v1/apply/", {"items": docs}, format="json")
    assert response.status_code == 200, response.json()
    assert response.json()["results"] == ["application/wordcount unchanged", "deployment/wc-split unchanged"]


def test_the_schema_documents_a_read_only_status(db):
    schema = APIClient().get("/api/v1/schema/", {"format": "json"}).json()
    components = schema["components"]["schemas"]
    for kind in ("Deployment", "Application"):
        resource = components[f"{kind}Resource"]
        assert "status" in resource["required"]
        prop = resource["properties"]["status"]
        assert prop.get("readOnly") is True, prop
        assert "status" not in components[f"{kind}ManifestRequest"]["properties"]  # not part of a request
    assert "status" not in components["RegionResource"]["properties"]
