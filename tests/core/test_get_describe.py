"""``manage.py get KIND`` and ``manage.py describe KIND NAME``: spec and status side by side (like kubectl);
``export`` stays spec only. Unknown kinds and names fail with a message naming them (a CommandError: exit
status 1 from ``manage.py``)."""

from __future__ import annotations

from io import StringIO

import pytest
import yaml
from django.core.management import CommandError, call_command

from autoscaler import manifests
from autoscaler.control.status import _set_status
from autoscaler.models import Deployment

from .conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def wordcount(alice, shared):
    manifests.apply_text((EXAMPLES / "app-wordcount.yaml").read_text(), alice)
    return Deployment.objects.filter(operator__application__name="wordcount").select_related("operator")


def run(*args: str) -> str:
    out = StringIO()
    call_command(*args, "--owner", "alice", stdout=out)
    return out.getvalue()


def test_get_lists_spec_status_and_age(wordcount):
    dep = wordcount.first()
    table = run("get", "deployments")
    lines = table.splitlines()
    assert lines[0].split() == ["NAME", "SPEC", "STATUS", "AGE"]
    assert len(lines) == 1 + len(wordcount)
    row = next(line for line in lines if line.startswith(dep.name + " "))
    assert "not observed yet" in row and row.rstrip().endswith("s")
    _set_status(dep, {"vm.small": 1, "vm.large": 2}, source="observed", decision=None, engine_ids={})
    row = next(line for line in run("get", "deployment").splitlines() if line.startswith(dep.name + " "))
    assert "vm.largex2 vm.smallx1" in row  # by node-type name and "observed" in row
    apps = run("get", "apps")
    assert "wordcount" in apps and "Registered" in apps


def test_get_as_yaml_carries_the_status_and_export_does_not(wordcount):
    dep = wordcount.first()
    _set_status(dep, {"vm.small": 3}, source="observed", decision=None, engine_ids={})
    docs = {d["metadata"]["name"]: d for d in yaml.safe_load_all(run("get", "deployment", "-o", "yaml"))}
    assert docs[dep.name]["status"]["replicas"] == {"vm.small": 3}
    assert docs[dep.name]["spec"]["replicas"] == dep.replicas
    exported = list(yaml.safe_load_all(run("export", "deployment", dep.name)))
    assert "status" not in exported[0]
    assert [r.action for r in manifests.apply_documents(exported, dep.owner)] == ["unchanged"]


def test_describe_shows_spec_status_and_history(wordcount):
    dep = wordcount.first()
    _set_status(dep, {"vm.small": 4}, source="observed", decision=None, engine_ids={"job": "j1"})
    text = run("describe", "deployment", dep.name)
    assert f"Name:  {dep.name}" in text and "Kind:  Deployment" in text
    spec = text.split("Spec:")[1].split("Status:")[0]
    status = text.split("Status:")[1].split("History")[0]
    assert "replicas:" in spec and "vm.small: 4" not in spec
    assert "vm.small: 4" in status and "job: j1" in status and "source: observed" in status
    history = text.split("History")[1]
    assert "vm.smallx4" in history and "observed" in history and "manifest" in history
    app = run("describe", "application", "wordcount")
    assert "phase: Registered" in app and "engine: spark" in app and "splitter: null" in app


@pytest.mark.parametrize(
    "args, message",
    [
        (("get", "gizmos"), "kind: unknown kind 'gizmos'"),
        (("describe", "gizmo", "x"), "kind: unknown kind 'gizmo'"),
        (("describe", "deployment", "nope"), "name: no Deployment named 'nope'"),
    ],
)
def test_unknown_kinds_and_names_are_errors_naming_them(alice, args, message):
    with pytest.raises(CommandError) as exc:
        run(*args)
    assert message in str(exc.value)
