"""The OpenAPI schema describes what the API answers: policy levels as a bare name or {name, params}, the
control endpoints' bodies, and every error status with the one error schema."""

from __future__ import annotations

import pytest
from rest_framework.test import APIClient

from autoscaler import manifests

from .documents import application

pytestmark = pytest.mark.django_db

ERRORS_REF = "#/components/schemas/Errors"


@pytest.fixture
def schema(db) -> dict:
    response = APIClient().get("/api/v1/schema/", {"format": "json"})
    assert response.status_code == 200
    return response.json()


def operations(schema: dict):
    for path, item in schema["paths"].items():
        for method, operation in item.items():
            if method in ("get", "put", "post", "patch", "delete"):
                yield path, method, operation


def test_policy_levels_are_declared_as_a_name_or_a_choice(schema, alice_api, alice, shared):
    om = schema["components"]["schemas"]["PoliciesSpec"]["properties"]["om"]
    assert {"type": "string"} in om["anyOf"] and {"$ref": "#/components/schemas/PolicyChoice"} in om["anyOf"]
    manifests.apply_documents([application()], alice)
    answered = alice_api.get("/api/v1/applications/wordcount/").json()["spec"]["policies"]
    assert answered == {"om": "ql-pds-plus", "am": "naive"}  # the bare names the schema now allows


def test_every_operation_documents_the_error_statuses(schema):
    seen = 0
    for path, method, operation in operations(schema):
        responses = operation["responses"]
        expected = {"400", "403", "404", "405"} | ({"429"} if path == "/api/v1/token/" else {"401"})
        if method in ("put", "post", "patch"):
            expected |= {"409", "415"}
        assert expected <= set(responses), (method, path, sorted(responses))
        for code in expected:
            assert responses[code]["content"]["application/json"]["schema"] == {"$ref": ERRORS_REF}
        seen += 1
    assert seen >= 30
    errors = schema["components"]["schemas"]["Errors"]
    assert errors["properties"]["errors"]["items"]["required"] == ["loc", "msg"]


def test_control_endpoints_document_their_answers(schema):
    control = [(p, m, o) for p, m, o in operations(schema) if p.startswith("/api/v1/control/")]
    assert len(control) == 9
    for path, method, operation in control:
        ok = operation["responses"]["200"]["content"]["application/json"]["schema"]
        assert ok.get("$ref", "").startswith("#/components/schemas/"), (method, path, ok)
    region = schema["paths"]["/api/v1/control/regions/{name}/"]["get"]
    limit = next(p for p in region["parameters"] if p["name"] == "limit")
    assert limit["schema"]["minimum"] == 0 and limit["schema"]["maximum"] == 1000
