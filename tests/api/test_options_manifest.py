"""Policy options (policies.options) through the manifest doors: a bad value or an unknown option is a 400 (or a
CLI error) naming ``spec.policies.<level>.params.<name>`` and nothing is stored; declared options round-trip
through export unchanged."""

from __future__ import annotations

import pytest
import yaml
from django.core.management import CommandError, call_command

from autoscaler import manifests
from autoscaler.models import Application

from .documents import application

pytestmark = pytest.mark.django_db

BAD = [
    (
        {"am": {"name": "naive", "params": {"bucket_capacity": 0.5}}},
        "am",
        "bucket_capacity",
        "must be >= 1 tokens",
    ),
    (
        {"am": {"name": "naive", "params": {"bucket_capacity": "big"}}},
        "am",
        "bucket_capacity",
        "must be a number",
    ),
    (
        {"am": {"name": "bo", "params": {"bucket_capacity": 2, "scale_in_reserve": 1.5}}},
        "am",
        "scale_in_reserve",
        "must be <= bucket_capacity - 1 = 1 tokens, got 1.5",
    ),
    (
        {"am": {"name": "bo", "params": {"validation_load": 5}}},
        "am",
        "validation_load",
        "must be in [0.5, 2]",
    ),
    (
        {"am": {"name": "bo", "params": {"validation_phases": "yes"}}},
        "am",
        "validation_phases",
        "true or false",
    ),
    ({"am": {"name": "naive", "params": {"bucketCapacity": 2}}}, "am", "bucketCapacity", "unknown parameter"),
    ({"am": {"name": "naive", "params": {"n_bo": 5}}}, "am", "n_bo", "unknown parameter for policy 'naive'"),
    ({"rm": {"name": "simple", "params": {"n_idle": -2}}}, "rm", "n_idle", "must be >= 0 nodes, got -2"),
    ({"rm": {"name": "model-based", "params": {"gamma": 1}}}, "rm", "gamma", "must be in [0, 1)"),
    (
        {"im": {"name": "cheapest-first", "params": {"provisioning_delay_periods": 0.5}}},
        "im",
        "provisioning_delay_periods",
        "must be an integer",
    ),
]


@pytest.mark.parametrize("policies,level,name,message", BAD)
def test_a_bad_option_is_a_400_naming_the_field_and_nothing_is_stored(
    alice_api, shared, policies, level, name, message
):
    doc = application(policies={"om": "threshold", **policies})
    response = alice_api.put("/api/v1/applications/wordcount/", doc, format="json")
    assert response.status_code == 400, response.content
    errors = {e["loc"]: e["msg"] for e in response.json()["errors"]}
    assert list(errors) == [f"spec.policies.{level}.params.{name}"], errors
    assert message in errors[f"spec.policies.{level}.params.{name}"]
    assert not Application.objects.exists()


def test_a_bad_option_in_a_batch_stores_none_of_it(alice_api, shared):
    good, bad = (
        application("good"),
        application("bad", policies={"am": {"name": "bo", "params": {"n_bo": 0}}}),
    )
    response = alice_api.post("/api/v1/apply/", [good, bad], format="json")
    assert response.status_code == 400
    assert [e["loc"] for e in response.json()["errors"]] == ["documents[1].spec.policies.am.params.n_bo"]
    assert not Application.objects.exists()


def test_the_cli_refuses_a_bad_option_naming_the_field(alice, shared, tmp_path, capsys):
    path = tmp_path / "app.yaml"
    doc = application(policies={"am": {"name": "bo", "params": {"bucket_capacity": 0.5}}})
    path.write_text(yaml.safe_dump(doc))
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("apply", "-f", str(path), "--owner", "alice")
    err = capsys.readouterr().err
    assert "spec.policies.am.params.bucket_capacity: must be >= 1 tokens, got 0.5" in err
    assert not Application.objects.exists()


DECLARED = {
    "om": "model-based",
    "am": {
        "name": "bo",
        "params": {"bucket_capacity": 2, "scale_in_reserve": 0.5, "validation_steps": None, "guard": False},
    },
    "rm": {"name": "model-based", "params": {"w_d": 0.6, "w_r": 0.4}},
    "im": {"name": "region-preference", "params": {"region_order": ["vm-local"], "consolidate": False}},
}


def test_declared_options_round_trip_through_the_api_and_export_unchanged(
    alice, alice_api, shared, tmp_path, capsys
):
    doc = application(policies=DECLARED)
    assert alice_api.put("/api/v1/applications/wordcount/", doc, format="json").status_code in (200, 201)
    # stored as declared: no defaults merged in, so a later default change applies to it
    assert alice_api.get("/api/v1/applications/wordcount/").json()["spec"]["policies"] == DECLARED
    (exported,) = manifests.export("application", "wordcount", alice)
    assert exported["spec"]["policies"] == DECLARED
    assert [r.action for r in manifests.apply_documents([exported], alice)] == ["unchanged"]
    # and through the command line
    call_command("export", "application", "wordcount", "--owner", "alice")
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["spec"]["policies"] == DECLARED
    (tmp_path / "wc.yaml").write_text(out)
    call_command("apply", "-f", str(tmp_path / "wc.yaml"), "--owner", "alice")
    assert capsys.readouterr().out.strip() == "application/wordcount unchanged"
