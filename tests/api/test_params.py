"""Query parameters are validated on every API view: malformed, out-of-range, repeated or unknown ones are a 400
naming the parameter (never a 500, never silently ignored)."""

from __future__ import annotations

import pytest

from autoscaler import manifests

from .documents import application

pytestmark = pytest.mark.django_db

DECISIONS = "/api/v1/control/applications/wordcount/decisions/"
REGION = "/api/v1/control/regions/vm-local/"


@pytest.fixture
def stored(shared, alice):
    manifests.apply_documents([application()], alice)


@pytest.mark.parametrize("path", [DECISIONS, REGION])
@pytest.mark.parametrize(
    "query",
    [
        "limit=-1",
        "limit=abc",
        "limit=1.5",
        "limit=",
        "limit=99999999999999999999999",
        "limit=1001",
        "limit=1&limit=2",
    ],
)
def test_bad_limits_are_a_400_naming_the_parameter(alice_api, stored, path, query):
    response = alice_api.get(f"{path}?{query}")
    assert response.status_code == 400, response.content
    assert [e["loc"] for e in response.json()["errors"]] == ["limit"]


@pytest.mark.parametrize("path", [DECISIONS, REGION])
def test_limits_in_range_are_accepted(alice_api, stored, path):
    for query in ("limit=0", "limit=1000", ""):
        assert alice_api.get(f"{path}?{query}").status_code == 200


@pytest.mark.parametrize(
    "path",
    [
        DECISIONS,
        REGION,
        "/api/v1/applications/",
        "/api/v1/applications/wordcount/",
        "/api/v1/regions/",
        "/api/v1/control/applications/wordcount/summary/",
        "/api/v1/control/applications/wordcount/rails/",
    ],
)
def test_unknown_query_parameters_are_a_400_naming_them(alice_api, stored, path):
    response = alice_api.get(f"{path}?owner=bob&sort=name")
    assert response.status_code == 400
    assert sorted(e["loc"] for e in response.json()["errors"]) == ["owner", "sort"]
    assert alice_api.get(f"{path}?format=json").status_code == 200  # DRF's format override stays accepted


def test_operator_filters_are_names(alice_api, stored):
    assert alice_api.get(DECISIONS + "?operator=splitter").json() == []
    bad = alice_api.get(DECISIONS + "?operator=" + "x" * 100)
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == "operator"


def test_agent_reset_validates_every_operator_parameter(alice_api, stored):
    path = "/api/v1/control/applications/wordcount/agents/"
    assert alice_api.delete(path + "?operator=splitter&operator=counter").json() == {"reset": 0}
    unknown = alice_api.delete(path + "?operator=ghost")
    assert unknown.status_code == 400 and unknown.json()["errors"][0]["loc"] == "operators"
    bad = alice_api.delete(path + "?operator=splitter&operator=%20")
    assert bad.status_code == 400 and bad.json()["errors"][0]["loc"] == "operator"
    assert alice_api.delete(path + "?limit=3").status_code == 400
