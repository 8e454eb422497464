"""REST API: CRUD on manifests, 400 bodies listing every error, 401 without a token, per-user isolation."""

from __future__ import annotations

import copy

import pytest
from rest_framework.test import APIClient

from autoscaler import models as m

from .test_validation import WORDCOUNT

pytestmark = pytest.mark.django_db

APPS = "/api/v1/applications/"


def wordcount(**spec) -> dict:
    doc = copy.deepcopy(WORDCOUNT)
    doc["spec"].update(spec)
    return doc


def test_requests_without_token_get_401():
    client = APIClient()
    assert client.get(APPS).status_code == 401
    response = client.post(APPS, wordcount(), format="json")
    assert response.status_code == 401
    assert response.json()["errors"][0]["msg"].startswith("Authentication credentials")
    assert not m.Application.objects.exists()


def test_bad_token_gets_401():
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Token not-a-token")
    assert client.get(APPS).status_code == 401


def test_application_crud(alice_api, alice):
    created = alice_api.post(APPS, wordcount(), format="json")
    assert created.status_code == 201, created.json()
    body = created.json()
    assert body["metadata"] == {"name": "wordcount"} and body["kind"] == "Application"
    assert body["spec"]["policies"] == {"om": "ql-pds-plus", "am": "naive"}
    assert m.Application.objects.get(name="wordcount").owner == alice

    assert [d["metadata"]["name"] for d in alice_api.get(APPS).json()] == ["wordcount"]
    assert alice_api.get(APPS + "wordcount/").json() == body

    changed = wordcount(slo={"rMaxMs": 80}, state="paused")
    updated = alice_api.put(APPS + "wordcount/", changed, format="json")
    assert updated.status_code == 200, updated.json()
    assert updated.json()["spec"]["slo"]["rMaxMs"] == 80 and updated.json()["spec"]["state"] == "paused"
    assert m.Application.objects.get(name="wordcount").state == "paused"

    assert alice_api.delete(APPS + "wordcount/").status_code == 204
    assert alice_api.get(APPS + "wordcount/").status_code == 404
    assert not m.Operator.objects.exists()


def test_kind_and_name_are_taken_from_the_url(alice_api):
    doc = wordcount()
    body = {"spec": doc["spec"]}
    response = alice_api.put(APPS + "fromurl/", body, format="json")
    assert response.status_code == 201, response.json()
    assert response.json()["metadata"]["name"] == "fromurl"


def test_name_mismatch_with_url_is_400(alice_api):
    response = alice_api.put(APPS + "other/", wordcount(), format="json")
    assert response.status_code == 400
    assert response.json() == {
        "errors": [{"loc": "metadata.name", "msg": "must be 'other' (the name in the URL)"}]
    }


def test_wrong_kind_at_endpoint_is_400(alice_api):
    doc = wordcount()
    doc["kind"] = "Region"
    response = alice_api.post(APPS, doc, format="json")
    assert response.status_code == 400
    assert {"loc": "kind", "msg": "must be 'Application' at this endpoint, got 'Region'"} in response.json()[
        "errors"
    ]


def test_post_of_existing_name_is_409(alice_api):
    assert alice_api.post(APPS, wordcount(), format="json").status_code == 201
    response = alice_api.post(APPS, wordcount(), format="json")
    assert response.status_code == 409
    assert response.json()["errors"][0]["loc"] == "metadata.name"


def test_invalid_application_gets_400_listing_every_error(alice_api):
    doc = wordcount(
        streams=[["sentences", "splitter"], ["splitter", "counter"], ["counter", "foo"]], slo={"rMaxMs": 0}
    )
    response = alice_api.post(APPS, doc, format="json")
    assert response.status_code == 400
    errors = response.json()["errors"]
    # pydantic field errors are reported first; graph errors need a structurally valid spec
    assert errors == [{"loc": "spec.slo.rMaxMs", "msg": "Input should be greater than 0"}]
    response = alice_api.post(APPS, wordcount(streams=doc["spec"]["streams"]), format="json")
    assert response.status_code == 400
    locs = {e["loc"]: e["msg"] for e in response.json()["errors"]}
    assert locs["spec.streams[2]"] == "edge to unknown operator 'foo'"
    assert "spec.operators[3]" in locs  # the sink is now unreachable
    assert not m.Application.objects.exists()


def test_failed_update_changes_nothing(alice_api):
    alice_api.post(APPS, wordcount(), format="json")
    before = alice_api.get(APPS + "wordcount/").json()
    bad = wordcount(streams=WORDCOUNT["spec"]["streams"] + [["top", "sentences"]])
    assert alice_api.put(APPS + "wordcount/", bad, format="json").status_code == 400
    assert alice_api.get(APPS + "wordcount/").json() == before


def test_users_cannot_see_or_change_each_others_applications(alice_api, bob_api, bob):
    assert alice_api.post(APPS, wordcount(), format="json").status_code == 201
    assert bob_api.get(APPS).json() == []
    assert bob_api.get(APPS + "wordcount/").status_code == 404
    assert bob_api.delete(APPS + "wordcount/").status_code == 404
    assert alice_api.get(APPS + "wordcount/").status_code == 200
    # bob may own an application of the same name; it is a different one
    response = bob_api.put(APPS + "wordcount/", wordcount(slo={"rMaxMs": 99}), format="json")
    assert response.status_code == 201
    assert alice_api.get(APPS + "wordcount/").json()["spec"]["slo"]["rMaxMs"] == 60
    assert m.Application.objects.filter(name="wordcount").count() == 2
    assert m.Application.objects.get(name="wordcount", owner=bob).r_max_ms == 99


CATALOG = {
    "kind": "NodeTypeCatalog",
    "apiVersion": "autoscaler/v1",
    "metadata": {"name": "tiny"},
    "spec": {
        "nodeTypes": [{"name": "n1", "cores": 1, "memoryMiB": 512, "speedup": 1.0, "pricePerHour": 0.01}]
    },
}


def test_shared_resources_are_readable_by_all_and_writable_by_staff(staff_api, alice_api):
    assert alice_api.post("/api/v1/catalogs/", CATALOG, format="json").status_code == 403
    assert staff_api.post("/api/v1/catalogs/", CATALOG, format="json").status_code == 201
    assert alice_api.get("/api/v1/catalogs/tiny/").json()["spec"]["nodeTypes"][0]["name"] == "n1"
    region = {"spec": {"catalog": "tiny", "maxNodes": 4, "maxNewNodesPerPeriod": 1}}
    assert staff_api.put("/api/v1/regions/r1/", region, format="json").status_code == 201
    assert alice_api.delete("/api/v1/regions/r1/").status_code == 403
    response = staff_api.delete("/api/v1/catalogs/tiny/")
    assert response.status_code == 400
    assert "still used by r1" in response.json()["errors"][0]["msg"]


def test_deployments_and_history(staff_api, alice_api, bob_api):
    staff_api.post("/api/v1/catalogs/", CATALOG, format="json")
    staff_api.put(
        "/api/v1/regions/r1/",
        {"spec": {"catalog": "tiny", "maxNodes": 4, "maxNewNodesPerPeriod": 1}},
        format="json",
    )
    alice_api.post(APPS, wordcount(), format="json")
    dep = {
        "spec": {"application": "wordcount", "operator": "splitter", "region": "r1", "replicas": {"n1": 2}}
    }
    assert alice_api.put("/api/v1/deployments/split/", dep, format="json").status_code == 201
    dep["spec"]["replicas"] = {"n1": 3}
    assert alice_api.put("/api/v1/deployments/split/", dep, format="json").status_code == 200
    assert alice_api.put("/api/v1/deployments/split/", dep, format="json").status_code == 200  # unchanged
    history = alice_api.get("/api/v1/deployments/split/history/").json()
    assert [h["replicas"] for h in history] == [{"n1": 3}, {"n1": 2}]
    assert bob_api.get("/api/v1/deployments/split/history/").status_code == 404
    # bob cannot deploy alice's application: for him it does not exist
    response = bob_api.put("/api/v1/deployments/split/", dep, format="json")
    assert response.status_code == 400
    assert {"loc": "spec.application", "msg": "unknown application 'wordcount'"} in response.json()["errors"]
    dep["spec"]["replicas"] = {"n1": 0}
    response = alice_api.put("/api/v1/deployments/split/", dep, format="json")
    assert response.json() == {
        "errors": [{"loc": "spec.replicas", "msg": "a deployment needs at least one replica"}]
    }


def test_apply_endpoint_is_all_or_nothing(alice_api):
    bad = wordcount()
    bad["metadata"]["name"] = "broken"
    bad["spec"]["slo"] = {"rMaxMs": -1}
    response = alice_api.post("/api/v1/apply/", {"items": [wordcount(), bad]}, format="json")
    assert response.status_code == 400
    assert response.json()["errors"][0]["loc"] == "documents[1].spec.slo.rMaxMs"
    assert not m.Application.objects.exists()
    response = alice_api.post("/api/v1/apply/", [wordcount()], format="json")
    assert response.json() == {"results": ["application/wordcount created"]}


def test_token_endpoint(alice):
    response = APIClient().post(
        "/api/v1/token/", {"username": "alice", "password": "pw-alice-1"}, format="json"
    )
    assert response.status_code == 200
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION=f"Token {response.json()['token']}")
    assert client.get(APPS).status_code == 200


def test_openapi_schema_and_doc_pages(alice_api):
    schema = alice_api.get("/api/v1/schema/?format=json")
    assert schema.status_code == 200
    doc = schema.json()
    assert "/api/v1/applications/{name}/" in doc["paths"]
    assert "rMaxMs" in doc["components"]["schemas"]["SLOSpec"]["properties"]
    docs = alice_api.get("/api/v1/docs/")
    assert docs.status_code == 200
    assert b'src="/static/drf_spectacular_sidecar/swagger-ui-dist/swagger-ui-bundle.js"' in docs.content
    redoc = alice_api.get("/api/v1/redoc/")
    assert redoc.status_code == 200 and b"/static/drf_spectacular_sidecar/redoc/" in redoc.content
