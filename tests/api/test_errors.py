"""One error format for every API error (``{"errors": [{"loc", "msg"}]}``), JSON-only bodies (415), bounded
integers and finite floats (400 naming the field, never a 500), and any JSON shape answered with a 400."""

from __future__ import annotations

import json

import pytest
from rest_framework.test import APIClient

from autoscaler import manifests
from autoscaler import models as m

from .documents import application

pytestmark = pytest.mark.django_db

APPS = "/api/v1/applications/"
INT_MAX = 2_147_483_647


def error_list(response) -> list[dict]:
    """The errors of an answer, after checking that the body has exactly the one error shape."""
    assert response["Content-Type"].startswith("application/json"), response["Content-Type"]
    body = response.json()
    assert set(body) == {"errors"} and body["errors"], body
    for error in body["errors"]:
        assert set(error) == {"loc", "msg"} and isinstance(error["loc"], str) and error["msg"], error
    return body["errors"]


def locs(response) -> set[str]:
    return {e["loc"] for e in error_list(response)}


@pytest.mark.parametrize(
    ("path", "content_type", "body"),
    [
        (APPS, "application/x-www-form-urlencoded", "kind=Application&metadata=x&spec=y"),
        (
            APPS,
            "multipart/form-data; boundary=BoUnDaRy",
            "--BoUnDaRy\r\nContent-Disposition: form-data; "
            'name="kind"\r\n\r\nApplication\r\n--BoUnDaRy--\r\n',
        ),
        ("/api/v1/deployments/", "application/x-www-form-urlencoded", "kind=Deployment&kind=Deployment"),
        ("/api/v1/apply/", "text/plain", "kind: Application"),
        ("/api/v1/control/applications/wordcount/rails/", "application/xml", "<rails/>"),
    ],
)
def test_bodies_that_are_not_json_get_415(alice_api, alice, path, content_type, body):
    if "control" in path:
        manifests.apply_documents([application()], alice)
    method = alice_api.put if "rails" in path else alice_api.post
    response = method(path, data=body, content_type=content_type)
    assert response.status_code == 415
    assert locs(response) == {"Content-Type"}
    assert not m.Deployment.objects.exists()
    assert m.Application.objects.filter(rails={}).count() == m.Application.objects.count() <= 1


@pytest.mark.parametrize("text", ["{not json", '{"a": NaN}', "[" * 100_000 + "]" * 100_000])
def test_malformed_json_is_a_400_naming_the_body(alice_api, text):
    response = alice_api.post(APPS, data=text, content_type="application/json")
    assert response.status_code == 400 and locs(response) == {"body"}


@pytest.mark.parametrize(
    "body",
    [
        [],
        ["Application"],
        "text",
        17,
        None,
        {"kind": ["Application"], "metadata": ["x"], "spec": []},
        {"apiVersion": {"v": 1}, "kind": {"k": 1}, "metadata": {"name": ["x"]}, "spec": {}},
        {"metadata": {"name": "ok"}, "spec": {"operators": {"a": 1}, "streams": "x", "slo": []}},
        {"metadata": {"name": "ok"}, "spec": {"policies": {"om": ["naive"]}, "operators": [[]], "slo": {}}},
    ],
)
def test_any_json_shape_gets_a_400_not_a_500(alice_api, body):
    for response in (
        alice_api.post(APPS, body, format="json"),
        alice_api.put(APPS + "ok/", body, format="json"),
        alice_api.post("/api/v1/apply/", [body], format="json"),
    ):
        assert response.status_code == 400, response.content
        error_list(response)
    assert not m.Application.objects.exists()


@pytest.mark.parametrize(
    ("field_path", "loc"),
    [
        (("operators", 1, "maxParallelism"), "spec.operators[1].maxParallelism"),
        (("slo", "rMaxMs"), "spec.slo.rMaxMs"),
    ],
)
@pytest.mark.parametrize("value", [INT_MAX + 1, 2**64 + 1, 10**40])
def test_integers_beyond_the_database_range_are_a_400_naming_the_field(alice_api, field_path, loc, value):
    doc = application()
    target = doc["spec"]
    for part in field_path[:-1]:
        target = target[part]
    target[field_path[-1]] = value
    response = alice_api.post(APPS, doc, format="json")
    if loc.endswith("rMaxMs"):  # a float field: a huge number is a valid (finite) bound
        assert response.status_code == 201, response.content
        return
    assert response.status_code == 400 and loc in locs(response)
    assert not m.Application.objects.exists()


def test_largest_database_integer_is_accepted(alice_api):
    doc = application()
    doc["spec"]["operators"][1]["maxParallelism"] = INT_MAX
    response = alice_api.post(APPS, doc, format="json")
    assert response.status_code == 201, response.content
    assert m.Operator.objects.get(name="splitter").max_parallelism == INT_MAX


@pytest.mark.parametrize(
    ("path", "doc", "loc"),
    [
        (
            "/api/v1/catalogs/",
            {
                "metadata": {"name": "big"},
                "spec": {
                    "nodeTypes": [
                        {"name": "n", "cores": 2**63, "memoryMiB": 512, "speedup": 1.0, "pricePerHour": 0.0}
                    ]
                },
            },
            "spec.nodeTypes[0].cores",
        ),
        (
            "/api/v1/catalogs/",
            {
                "metadata": {"name": "big"},
                "spec": {
                    "nodeTypes": [
                        {"name": "n", "cores": 1, "memoryMiB": 2**31, "speedup": 1.0, "pricePerHour": 0.0}
                    ]
                },
            },
            "spec.nodeTypes[0].memoryMiB",
        ),
        (
            "/api/v1/regions/",
            {
                "metadata": {"name": "big"},
                "spec": {"catalog": "vm-example", "maxNodes": 2**70, "maxNewNodesPerPeriod": 1},
            },
            "spec.maxNodes",
        ),
    ],
)
def test_shared_resources_reject_integers_beyond_the_database_range(staff_api, shared, path, doc, loc):
    response = staff_api.post(path, doc, format="json")
    assert response.status_code == 400 and loc in locs(response)
    assert staff_api.get(path + "big/").status_code == 404


def test_non_finite_numbers_are_a_400_naming_the_field(alice_api):
    text = json.dumps(application()).replace('"rMaxMs": 60', '"rMaxMs": 1e999')
    text = text.replace('"policies": {', '"policies": {"rm": {"name": "x", "params": {"a": -1e999}}, ')
    response = alice_api.post(APPS, data=text, content_type="application/json")
    assert response.status_code == 400
    assert {"spec.slo.rMaxMs", "spec.policies.rm.params.a"} <= locs(response)
    assert not m.Application.objects.exists()


@pytest.mark.parametrize(
    ("method", "path", "status"),
    [
        ("get", "/api/v1/applications/", 401),
        ("get", "/api/v1/control/regions/vm-local/", 401),
        ("get", "/api/v1/control/applications/x/decisions/", 401),
    ],
)
def test_unauthenticated_requests_get_401_in_the_error_format(shared, method, path, status):
    response = getattr(APIClient(), method)(path)
    assert response.status_code == status
    error_list(response)


def test_every_error_status_uses_the_one_format(alice_api, bob_api, shared):
    assert alice_api.post(APPS, application(), format="json").status_code == 201
    cases = [
        (alice_api.post(APPS, application(), format="json"), 409),  # already exists
        (bob_api.get(APPS + "wordcount/"), 404),  # another user's
        (alice_api.patch(APPS + "wordcount/", {}, format="json"), 405),
        (alice_api.post("/api/v1/regions/", {}, format="json"), 403),  # shared: staff only
        (alice_api.put("/api/v1/control/regions/vm-local/", {"rmPeriodS": 5}, format="json"), 403),
        (alice_api.get("/api/v1/control/regions/nowhere/"), 404),
        (alice_api.get("/api/v1/control/applications/nope/summary/"), 404),
        (alice_api.put("/api/v1/control/applications/wordcount/rails/", {"x": 1}, format="json"), 400),
        (alice_api.put("/api/v1/control/applications/wordcount/agents/", [], format="json"), 400),
    ]
    for response, status in cases:
        assert response.status_code == status, (response.status_code, response.content)
        error_list(response)


@pytest.mark.parametrize(
    "path",
    [
        "/api/v1/applications/bad%20name/",
        "/api/v1/applications/%C3%A9t%C3%A9/",
        "/api/v1/regions/a%2Fb/",
        "/api/v1/no-such-endpoint/",
        "/api/v2/",
    ],
)
def test_urls_under_api_that_match_nothing_get_a_json_404(alice_api, path):
    response = alice_api.get(path)
    assert response.status_code == 404
    assert locs(response) == {"path"}


def test_urls_outside_api_keep_the_html_404(client):
    response = client.get("/no-such-page/")
    assert response.status_code == 404 and response["Content-Type"].startswith("text/html")


def test_control_region_period_errors_name_the_field(staff_api, shared):
    path = "/api/v1/control/regions/vm-local/"
    for body, loc in (
        ({"rmPeriodS": -5}, "rmPeriodS"),
        ({"rmPeriodS": "soon"}, "rmPeriodS"),
        ({"period": 5}, "period"),
        ([], ""),
    ):
        response = staff_api.put(path, body, format="json")
        assert response.status_code == 400 and loc in locs(response), (body, response.content)
    infinite = staff_api.put(path, data='{"rmPeriodS": 1e999}', content_type="application/json")
    assert infinite.status_code == 400 and locs(infinite) == {"rmPeriodS"}
    ok = staff_api.put(path, {"rmPeriodS": 10**30}, format="json")  # a large but finite number of seconds
    assert ok.status_code == 200 and ok.json()["rm_period_s_set"] == 1e30
