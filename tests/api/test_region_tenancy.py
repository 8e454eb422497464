"""``/api/v1/control/regions/<name>/``: a region is shared, its contents are not. A non-staff user sees the
region's capacity and only their own applications' replicas, waiting scale-outs, consolidations and step
details; texts that name another user's application read "another user's application". Staff see everything."""

from __future__ import annotations

import json

import pytest

from autoscaler import manifests
from autoscaler.control.models import (
    Consolidation,
    RegionControl,
    RegionNode,
    RegionTick,
    WaitingRequest,
)
from autoscaler.models import Application, Region

from .documents import application

pytestmark = pytest.mark.django_db

PATH = "/api/v1/control/regions/vm-local/"


@pytest.fixture
def two_tenants(shared, alice, bob):
    """alice's ``alice-etl`` and bob's ``bob-secret`` both placed in region vm-local, with every kind of row the
    region view shows."""
    manifests.apply_documents([application("alice-etl", regions=["vm-local"])], alice)
    manifests.apply_documents([application("bob-secret", regions=["vm-local"])], bob)
    region = Region.objects.get(name="vm-local")
    mine = Application.objects.get(name="alice-etl")
    theirs = Application.objects.get(name="bob-secret")
    RegionNode.objects.create(
        region=region,
        node_id="n0",
        node_type="vm.medium",
        state="ready",
        replicas=[f"{mine.pk}/splitter", f"{theirs.pk}/counter"],
    )
    for app in (mine, theirs):
        WaitingRequest.objects.create(
            region=region,
            application=app,
            operator=app.operators.get(name="splitter"),
            node_type="vm.small",
            since_slot=3,
            last_slot=4,
            reason=f"application {app.name!r} waits",
        )
        Consolidation.objects.create(region=region, slot=4, application=app, moves=[], frees=["n0"])
    RegionTick.objects.create(
        region=region,
        slot=4,
        policy="simple",
        state={
            "node_types": ["vm.small", "vm.medium"],
            "used_slots": 2,
            "placement": {"n0": [f"{mine.pk}/splitter", f"{theirs.pk}/counter"]},
            "consolidation": [{"application": mine.pk}, {"application": theirs.pk}],
            "rm": {"policy": "simple", "params": {}, "source": "declared by application 'bob-secret'"},
        },
        warnings=["application 'bob-secret' declares rm policy 'x' but region 'vm-local' runs 'simple'"],
    )
    RegionControl.objects.create(
        region=region,
        rm_policy="simple",
        policy_source="rm: declared by application 'bob-secret'; im: declared by application 'alice-etl'",
    )
    return mine, theirs


def test_a_non_staff_user_sees_only_their_own_applications_in_a_region(alice_api, two_tenants):
    mine, theirs = two_tenants
    response = alice_api.get(PATH)
    assert response.status_code == 200
    body = response.json()
    text = json.dumps(body)
    assert "bob-secret" not in text
    assert f"{theirs.pk}/counter" not in text
    assert [w["application"] for w in body["waiting"]] == ["alice-etl"]
    assert [c["application"] for c in body["consolidations"]] == ["alice-etl"]
    assert body["nodes"][0]["replicas"] == [f"{mine.pk}/splitter"]
    (step,) = body["steps"]
    assert "placement" not in step["state"] and step["state"]["used_slots"] == 2
    assert step["state"]["consolidation"] == [{"application": mine.pk}]
    assert step["warnings"] == [
        "another user's application declares rm policy 'x' but region 'vm-local' runs 'simple'"
    ]
    assert body["policy_source"] == (
        "rm: declared by another user's application; im: declared by application 'alice-etl'"
    )


def test_the_other_tenant_sees_the_mirror_image(bob_api, two_tenants):
    mine, theirs = two_tenants
    body = bob_api.get(PATH).json()
    assert "alice-etl" not in json.dumps(body)
    assert [w["application"] for w in body["waiting"]] == ["bob-secret"]
    assert body["nodes"][0]["replicas"] == [f"{theirs.pk}/counter"]


def test_staff_see_every_application_in_a_region(staff_api, two_tenants):
    mine, theirs = two_tenants
    body = staff_api.get(PATH).json()
    assert sorted(w["application"] for w in body["waiting"]) == ["alice-etl", "bob-secret"]
    assert sorted(c["application"] for c in body["consolidations"]) == ["alice-etl", "bob-secret"]
    assert body["nodes"][0]["replicas"] == [f"{mine.pk}/splitter", f"{theirs.pk}/counter"]
    assert "placement" in body["steps"][0]["state"] and "bob-secret" in body["policy_source"]


def test_a_user_without_applications_sees_capacity_but_no_application(django_user_model, two_tenants):
    from .conftest import token_client

    carol = django_user_model.objects.create_user("carol", password="pw-carol-1")
    body = token_client(carol).get(PATH).json()
    text = json.dumps(body)
    assert "alice-etl" not in text and "bob-secret" not in text
    assert body["waiting"] == [] and body["consolidations"] == [] and body["nodes"][0]["replicas"] == []
    assert body["nodes"][0]["node_id"] == "n0"  # the region's own capacity stays visible


def test_control_application_views_do_not_show_another_users_application(bob_api, two_tenants):
    for suffix in ("summary/", "decisions/", "rails/", "agents/"):
        response = bob_api.get(f"/api/v1/control/applications/alice-etl/{suffix}")
        assert response.status_code == 404 and "alice-etl" in response.json()["errors"][0]["msg"]
    assert bob_api.delete("/api/v1/control/applications/alice-etl/agents/").status_code == 404
    assert (
        bob_api.put(
            "/api/v1/control/applications/alice-etl/rails/", {"maxReplicas": {"*": 1}}, format="json"
        ).status_code
        == 404
    )
    assert Application.objects.get(name="alice-etl").rails == {}
