"""Manifests: export/apply round trip, idempotence, all-or-nothing multi-document apply, CLI exit codes."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from django.core.management import CommandError, call_command

from autoscaler import manifests
from autoscaler import models as m
from autoscaler.schemas import ManifestError

from .conftest import EXAMPLES

pytestmark = pytest.mark.django_db
ROOT = Path(__file__).resolve().parents[2]


def snapshot() -> dict:
    """Every stored row of every resource table, for 'nothing changed' checks (timestamps included)."""
    tables = [m.NodeTypeCatalog, m.NodeType, m.Region, m.Application, m.Operator, m.Stream, m.Deployment]
    tables.append(m.DeploymentHistory)
    return {t.__name__: sorted(map(repr, t.objects.order_by("pk").values())) for t in tables}


def export_all(owner) -> list[dict]:
    return [
        doc
        for kind in ("catalog", "region", "application", "deployment")
        for doc in manifests.export(kind, None, owner)
    ]


@pytest.fixture
def examples(alice):
    docs = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs += manifests.parse_documents(path.read_text())
    manifests.apply_documents(docs, alice)
    return docs


def test_export_then_apply_changes_nothing(examples, alice):
    exported = export_all(alice)
    before = snapshot()
    text = manifests.dump_documents(exported)
    results = manifests.apply_text(text, alice)
    assert {r.action for r in results} == {"unchanged"}
    assert snapshot() == before
    assert export_all(alice) == exported


def test_export_json_round_trip(examples, alice):
    text = manifests.dump_documents(manifests.export("app", "wordcount", alice), "json")
    assert json.loads(text)["metadata"]["name"] == "wordcount"
    before = snapshot()
    assert [r.action for r in manifests.apply_text(text, alice)] == ["unchanged"]
    assert snapshot() == before


def test_export_keeps_what_was_declared(examples, alice):
    declared = next(d for d in examples if d["kind"] == "Application" and d["metadata"]["name"] == "taxi-sim")
    exported = manifests.export("Application", "taxi-sim", alice)[0]
    assert exported["spec"]["slo"]["paths"] == [
        {"path": ["rides", "parse", "aggregate", "dashboard"], "rMaxMs": 80.0}
    ]
    for i, op in enumerate(declared["spec"]["operators"]):
        assert {k: exported["spec"]["operators"][i][k] for k in op} == op
    assert exported["spec"]["streams"] == declared["spec"]["streams"]


def test_update_keeps_operator_rows_and_deployments(examples, alice):
    dep_before = m.Deployment.objects.get(name="wordcount-splitter")
    doc = manifests.export("app", "wordcount", alice)[0]
    doc["spec"]["slo"]["rMaxMs"] = 90
    doc["spec"]["operators"][1]["selectivity"] = 4.0
    (result,) = manifests.apply_documents([doc], alice)
    assert result.action == "configured"
    dep_after = m.Deployment.objects.get(name="wordcount-splitter")
    assert dep_after.operator_id == dep_before.operator_id
    assert m.Operator.objects.get(pk=dep_after.operator_id).selectivity == 4.0


def test_multi_document_apply_is_all_or_nothing(examples, alice):
    before = snapshot()
    good_change = manifests.export("region", "vm-local", alice)[0]
    good_change["spec"]["maxNodes"] = 99
    new_app = manifests.export("app", "wordcount", alice)[0]
    new_app["metadata"]["name"] = "wordcount-2"
    bad = manifests.export("app", "taxi-sim", alice)[0]
    bad["spec"]["streams"].append(["dashboard", "rides"])
    with pytest.raises(ManifestError) as info:
        manifests.apply_documents([good_change, new_app, bad], alice)
    locs = [e.loc for e in info.value.errors]
    # out of a sink, into a source, a cycle; the valid documents report nothing
    assert locs == ["documents[2].spec.streams[3]"] * 2 + ["documents[2].spec.streams"]
    assert snapshot() == before
    assert not m.Application.objects.filter(name="wordcount-2").exists()


def test_documents_may_refer_to_earlier_ones_in_any_order(alice):
    region = (EXAMPLES / "regions.yaml").read_text().split("---")[0]  # vm-local
    text = (EXAMPLES / "app-wordcount.yaml").read_text() + "---\n"
    text += region + "---\n" + (EXAMPLES / "catalog-vm-example.yaml").read_text()
    results = manifests.apply_text(text, alice)
    assert [r.kind for r in results][:3] == ["Application", "Deployment", "Deployment"]
    assert all(r.action == "created" for r in results)


def test_duplicate_documents_are_rejected(alice):
    text = (EXAMPLES / "catalog-vm-example.yaml").read_text()
    with pytest.raises(ManifestError) as info:
        manifests.apply_text(text + "---\n" + text, alice)
    assert info.value.errors[0].loc == "documents[1].metadata.name"
    assert not m.NodeTypeCatalog.objects.exists()


def test_yaml_syntax_error_names_the_line():
    with pytest.raises(ManifestError) as info:
        manifests.parse_documents("kind: Region\nspec: [unclosed\n")
    assert "line 3" in info.value.errors[0].msg or "line 2" in info.value.errors[0].msg


def test_delete_application_cascades_and_region_in_use_is_protected(examples, alice):
    with pytest.raises(ManifestError) as info:
        manifests.delete("region", "vm-local", alice)
    assert "still used by" in info.value.errors[0].msg
    manifests.delete("app", "wordcount", alice)
    assert not m.Deployment.objects.filter(name__startswith="wordcount-").exists()
    manifests.delete("region", "vm-local", alice)
    with pytest.raises(ManifestError):
        manifests.delete("region", "vm-local", alice)


# ---- the commands -------------------------------------------------------------------------------------------
def test_cli_apply_error_exits_nonzero_and_prints_every_error(alice, tmp_path, capsys):
    path = tmp_path / "bad.yaml"
    path.write_text(
        "apiVersion: autoscaler/v1\nkind: Region\nmetadata: {name: r}\n"
        "spec: {catalog: nowhere, maxNodes: 0, maxNewNodesPerPeriod: 1}\n---\nkind: Gadget\napiVersion: autoscaler/v1\n"
    )
    with pytest.raises(CommandError, match="nothing was changed"):
        call_command("apply", "-f", str(path), "--owner", "alice")
    err = capsys.readouterr().err
    assert "documents[0].spec.maxNodes: Input should be greater than or equal to 1" in err
    assert "documents[1].kind: unknown kind 'Gadget'" in err
    assert not m.Region.objects.exists()


def test_cli_export_apply_round_trip(examples, alice, tmp_path, capsys):
    call_command("export", "application", "wordcount", "--owner", "alice")
    out = capsys.readouterr().out
    assert yaml.safe_load(out)["metadata"]["name"] == "wordcount"
    (tmp_path / "wc.yaml").write_text(out)
    call_command("apply", "-f", str(tmp_path / "wc.yaml"), "--owner", "alice")
    assert capsys.readouterr().out.strip() == "application/wordcount unchanged"


def test_cli_unknown_names(alice):
    with pytest.raises(CommandError):
        call_command("export", "application", "nope", "--owner", "alice")
    with pytest.raises(CommandError, match="unknown kind"):
        call_command("delete", "gizmo", "x", "--owner", "alice")
    with pytest.raises(CommandError, match="no user named"):
        call_command("export", "application", "--owner", "nobody")


def test_cli_dry_run_stores_nothing(alice, capsys):
    call_command("apply", "-f", str(EXAMPLES / "catalog-vm-example.yaml"), "--dry-run")
    assert "created (dry run)" in capsys.readouterr().out
    assert not m.NodeTypeCatalog.objects.exists()


def test_manage_py_exit_status(tmp_path):
    """The real command line on a fresh SQLite database: a bad manifest exits 1 and prints the field path."""
    bad = tmp_path / "bad.json"
    bad.write_text(
        json.dumps({"apiVersion": "autoscaler/v9", "kind": "Region", "metadata": {"name": "r"}, "spec": {}})
    )
    env = {
        "PATH": "/usr/bin:/bin",
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "AUTOSCALER_VAR_DIR": str(tmp_path / "var"),
    }

    def manage(*args: str) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True
        )

    assert manage("migrate", "-v0").returncode == 0
    run = manage("apply", "-f", str(bad))
    assert run.returncode == 1, run.stderr
    assert "error: apiVersion: unknown version 'autoscaler/v9'" in run.stderr
    good = manage("apply", "-f", str(EXAMPLES / "catalog-vm-example.yaml"))
    assert (good.returncode, good.stdout) == (0, "nodetypecatalog/vm-example created\n"), good.stderr


def test_export_all_round_trips_through_an_empty_database(examples, alice, tmp_path, capsys):
    call_command("export", "all", "--owner", "alice")
    text = capsys.readouterr().out
    kinds = [doc["kind"] for doc in yaml.safe_load_all(text)]
    assert kinds == sorted(kinds, key=["NodeTypeCatalog", "Region", "Application", "Deployment"].index)
    exported = export_all(alice)
    (tmp_path / "all.yaml").write_text(text)
    call_command("delete", "-f", str(tmp_path / "all.yaml"), "--owner", "alice")
    assert not any(t.objects.exists() for t in (m.NodeTypeCatalog, m.Region, m.Application, m.Deployment))
    call_command("apply", "-f", str(tmp_path / "all.yaml"), "--owner", "alice")
    assert export_all(alice) == exported


def test_delete_from_file_is_all_or_nothing(examples, alice, tmp_path, capsys):
    path = tmp_path / "some.yaml"
    path.write_text(
        "kind: Application\nmetadata: {name: wordcount}\n---\nkind: Region\nmetadata: {name: region-a}\n"
    )  # region-a is still used by taxi-sim's deployment
    before = snapshot()
    with pytest.raises(CommandError):
        call_command("delete", "-f", str(path), "--owner", "alice")
    assert "Region/region-a: Region 'region-a' is still used by taxi-sim-parse" in capsys.readouterr().err
    assert snapshot() == before
