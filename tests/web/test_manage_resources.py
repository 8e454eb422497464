"""Django-client tests of the catalog, region and deployment pages and of manifest upload and download."""

from __future__ import annotations

import json

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile

from autoscaler import models as m

from .conftest import apply_examples
from .test_manage_views import app_post, field_errors

pytestmark = pytest.mark.django_db

CATALOG = {
    "name": "lab",
    "description": "test catalog",
    "nodetypes-TOTAL_FORMS": "2",
    "nodetypes-INITIAL_FORMS": "0",
    "nodetypes-0-name": "small",
    "nodetypes-0-cores": "2",
    "nodetypes-0-memory_mib": "2048",
    "nodetypes-0-speedup": "1",
    "nodetypes-0-price_per_hour": "0.1",
    "nodetypes-1-name": "big",
    "nodetypes-1-cores": "8",
    "nodetypes-1-memory_mib": "8192",
    "nodetypes-1-speedup": "4",
    "nodetypes-1-price_per_hour": "0.4",
}
REGION = {
    "name": "lab-1",
    "catalog": "lab",
    "max_nodes": "10",
    "max_new_nodes_per_period": "2",
    "provisioning_delay_s": "5",
    "provider_kind": "bookkeeping",
    "provider_settings": "",
}


def test_staff_creates_catalog_and_region(staff_client):
    response = staff_client.post("/catalogs/new/", CATALOG)
    assert response.status_code == 302 and response["Location"] == "/catalogs/lab/edit/"
    assert list(m.NodeType.objects.values_list("name", "cores", "price_per_hour")) == [
        ("small", 2, 0.1),
        ("big", 8, 0.4),
    ]
    response = staff_client.post("/regions/new/", REGION)
    assert response.status_code == 302
    region = m.Region.objects.get(name="lab-1")
    assert (region.catalog.name, region.max_nodes, region.provisioning_delay_s) == ("lab", 10, 5.0)
    assert region.provider == {"kind": "bookkeeping", "settings": {}}
    page = staff_client.get("/catalogs/").content.decode()
    assert "small (2 cores, 2048 MiB, ×1, 0.1/h)" in page


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"nodetypes-1-speedup": "0"}, "nodetypes-1-speedup", "greater than 0"),
        ({"nodetypes-1-cores": "1.5"}, "nodetypes-1-cores", "valid integer"),
        ({"nodetypes-1-name": "small"}, "nodetypes-1-name", "duplicate node type name 'small'"),
        ({"nodetypes-0-price_per_hour": ""}, "nodetypes-0-price_per_hour", "Field required"),
    ],
)
def test_catalog_errors_go_to_the_node_type_row(staff_client, overrides, field, message):
    response = staff_client.post("/catalogs/new/", {**CATALOG, **overrides})
    assert response.status_code == 400
    assert message in field_errors(response.content.decode()).get(field, ""), field_errors(
        response.content.decode()
    )
    assert not m.NodeTypeCatalog.objects.exists()


def test_catalog_without_node_types_is_refused_above_the_rows(staff_client):
    data = {**CATALOG, "nodetypes-TOTAL_FORMS": "0"}
    response = staff_client.post("/catalogs/new/", data)
    assert response.status_code == 400
    assert 'id="nodetypes-errors"' in response.content.decode()
    assert "at least 1 item" in response.content.decode()


def test_region_errors_and_unknown_catalog(staff_client):
    staff_client.post("/catalogs/new/", CATALOG)
    response = staff_client.post("/regions/new/", {**REGION, "catalog": "nope", "max_nodes": "0"})
    errors = field_errors(response.content.decode())
    assert "greater than or equal to 1" in errors["max_nodes"]
    response = staff_client.post("/regions/new/", {**REGION, "catalog": "nope"})
    assert "unknown node-type catalog 'nope'" in field_errors(response.content.decode())["catalog"]
    response = staff_client.post("/regions/new/", {**REGION, "provider_settings": "[unclosed"})
    assert "not valid YAML" in field_errors(response.content.decode())["provider_settings"]
    assert not m.Region.objects.exists()


def test_non_staff_reads_but_cannot_write_shared_resources(alice_client, shared):
    page = alice_client.get("/catalogs/vm-example/edit/")
    assert page.status_code == 200 and b"only staff users change it" in page.content
    assert b"Save catalog" not in page.content
    assert alice_client.post("/catalogs/new/", CATALOG).status_code == 403
    assert alice_client.post("/regions/vm-local/edit/", REGION).status_code == 403
    assert alice_client.post("/regions/vm-local/delete/").status_code == 403
    assert not m.NodeTypeCatalog.objects.filter(name="lab").exists()


def test_catalog_in_use_cannot_be_deleted(staff_client, shared):
    confirm = staff_client.get("/catalogs/vm-example/delete/")
    assert confirm.status_code == 200 and b"Delete vm-example" in confirm.content
    response = staff_client.post("/catalogs/vm-example/delete/", follow=True)
    assert b"is still used by vm-local" in response.content
    assert m.NodeTypeCatalog.objects.filter(name="vm-example").exists()


def test_deployment_form_create_edit_history_and_ownership(alice_client, bob_client, alice, shared):
    alice_client.post("/applications/new/", app_post(regions=["vm-local"]))
    data = {
        "name": "wc-split",
        "application": "wc",
        "operator": "split",
        "region": "vm-local",
        "replicas": "vm.small: 2",
    }
    response = alice_client.post("/deployments/new/", {**data, "replicas": "vm.small: 20"})
    assert "20 replicas exceed maxParallelism 8" in field_errors(response.content.decode())["replicas"]
    response = alice_client.post("/deployments/new/", {**data, "region": "region-a"})
    assert "not one of the application's regions" in field_errors(response.content.decode())["region"]
    response = alice_client.post("/deployments/new/", {**data, "replicas": "vm.tiny: 1"})
    assert "unknown node type 'vm.tiny'" in field_errors(response.content.decode())["replicas"]
    response = alice_client.post("/deployments/new/", {**data, "operator": "ghost"})
    assert "has no operator 'ghost'" in field_errors(response.content.decode())["operator"]
    assert not m.Deployment.objects.exists()
    assert alice_client.post("/deployments/new/", data).status_code == 302
    assert (
        alice_client.post("/deployments/wc-split/edit/", {**data, "replicas": "vm.large: 3"}).status_code
        == 302
    )
    dep = m.Deployment.objects.get(name="wc-split")
    assert dep.replicas == {"vm.large": 3} and dep.history.count() == 2
    page = alice_client.get("/deployments/wc-split/edit/").content.decode()
    assert 'id="history"' in page and "vm.small: 2" in page
    assert bob_client.get("/deployments/wc-split/edit/").status_code == 404
    assert b"wc-split" not in bob_client.get("/deployments/").content


MULTI = """\
apiVersion: autoscaler/v1
kind: Application
metadata: {name: up}
spec:
  engine: simulated
  slo: {rMaxMs: 100}
  operators: [{name: a, kind: source}, {name: b, maxParallelism: 4}, {name: c, kind: sink}]
  streams: [[a, b], [b, c]]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {name: up-b}
spec: {application: up, operator: b, region: vm-local, replicas: {vm.small: N}}
"""


def test_upload_is_all_or_nothing_and_lists_every_error(alice_client, alice, shared):
    bad = SimpleUploadedFile("bad.yaml", MULTI.replace("N", "9").encode())
    response = alice_client.post("/manifests/", {"file": bad})
    assert response.status_code == 400
    html = response.content.decode()
    assert "documents[1].spec.replicas" in html and "Nothing was applied." in html
    assert not m.Application.objects.exists()
    good = SimpleUploadedFile("good.yaml", MULTI.replace("N", "2").encode())
    response = alice_client.post("/manifests/", {"file": good}, follow=True)
    assert b"application/up created" in response.content and b"deployment/up-b created" in response.content
    assert m.Deployment.objects.get(name="up-b").operator.application.owner == alice


def test_upload_pasted_text_dry_run_and_syntax_errors(alice_client, shared):
    response = alice_client.post("/manifests/", {"text": MULTI.replace("N", "1"), "dry_run": "on"})
    assert response.status_code == 200 and b"dry run: nothing stored" in response.content
    assert not m.Application.objects.exists()
    response = alice_client.post("/manifests/", {"text": "kind: [unclosed"})
    assert response.status_code == 400 and b"not valid YAML or JSON: line 1" in response.content
    response = alice_client.post("/manifests/", {"text": ""})
    assert b"choose a file or paste manifests" in response.content


def test_non_staff_upload_of_shared_kinds_is_refused(alice_client, staff_client):
    text = (apply_examples.__globals__["EXAMPLES"] / "catalog-vm-example.yaml").read_text()
    response = alice_client.post("/manifests/", {"text": text})
    assert (
        response.status_code == 400 and b"only staff users may write catalogs and regions" in response.content
    )
    assert not m.NodeTypeCatalog.objects.exists()
    assert staff_client.post("/manifests/", {"text": text}).status_code == 302
    assert m.NodeTypeCatalog.objects.filter(name="vm-example").exists()


def test_export_downloads_round_trip(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    response = alice_client.get("/manifests/export/")
    assert response.status_code == 200 and response["Content-Disposition"].startswith("attachment")
    docs = list(yaml.safe_load_all(response.content))
    kinds = [d["kind"] for d in docs]
    assert kinds.index("NodeTypeCatalog") < kinds.index("Region") < kinds.index("Application")
    only_apps = alice_client.get("/manifests/export/?kind=Application&format=json")
    assert json.loads(only_apps.content)["metadata"]["name"] == "wc"
    assert alice_client.get("/manifests/export/?kind=bogus").status_code == 302


def test_application_page_lists_deployments_and_prefills_new_ones(alice_client, shared):
    alice_client.post("/applications/new/", app_post())
    page = alice_client.get("/applications/wc/edit/").content.decode()
    link = "/deployments/new/?name=wc-split&amp;application=wc&amp;operator=split"
    assert link in page
    form = alice_client.get(link.replace("&amp;", "&")).content.decode()
    assert 'name="name" value="wc-split"' in form and 'name="operator" value="split"' in form
    assert '<option value="wc" selected>' in form
    alice_client.post(
        "/deployments/new/",
        {
            "name": "wc-split",
            "application": "wc",
            "operator": "split",
            "region": "vm-local",
            "replicas": "vm.small: 3",
        },
    )
    page = alice_client.get("/applications/wc/edit/").content.decode()
    assert 'href="/deployments/wc-split/edit/">wc-split</a> in vm-local' in page and "3 × vm.small" in page
