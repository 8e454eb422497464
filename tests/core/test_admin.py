"""The admin edits resources as manifests through the same validation layer."""

from __future__ import annotations

import pytest

from autoscaler import manifests
from autoscaler import models as m

from .conftest import EXAMPLES

pytestmark = pytest.mark.django_db


@pytest.fixture
def admin_client(client, django_user_model):
    user = django_user_model.objects.create_superuser("root", password="pw-root-1")
    client.force_login(user)
    return client, user


def test_admin_add_validates_and_applies(admin_client):
    client, user = admin_client
    text = (EXAMPLES / "catalog-vm-example.yaml").read_text()
    bad = text.replace("speedup: 1.0", "speedup: -1.0")
    response = client.post("/admin/autoscaler/nodetypecatalog/add/", {"manifest": bad})
    assert response.status_code == 200
    assert b"spec.nodeTypes[0].speedup: Input should be greater than 0" in response.content
    assert not m.NodeTypeCatalog.objects.exists()
    response = client.post("/admin/autoscaler/nodetypecatalog/add/", {"manifest": text})
    assert response.status_code == 302
    assert m.NodeType.objects.filter(catalog__name="vm-example").count() == 3


def test_admin_change_shows_and_updates_the_manifest(admin_client, shared):
    client, user = admin_client
    region = m.Region.objects.get(name="vm-local")
    url = f"/admin/autoscaler/region/{region.pk}/change/"
    page = client.get(url)
    assert page.status_code == 200 and b"maxNewNodesPerPeriod" in page.content
    doc = manifests.export("region", "vm-local", user)[0]
    doc["spec"]["maxNodes"] = 42
    response = client.post(url, {"manifest": manifests.dump_documents([doc])})
    assert response.status_code == 302, response.content[:2000]
    assert m.Region.objects.get(pk=region.pk).max_nodes == 42
    doc["metadata"]["name"] = "renamed"
    response = client.post(url, {"manifest": manifests.dump_documents([doc])})
    assert b"must be &#x27;vm-local&#x27; (the name in the URL)" in response.content


def test_admin_edit_of_an_application_keeps_its_owner(admin_client, shared, alice):
    client, root = admin_client
    text = (EXAMPLES / "app-wordcount.yaml").read_text()
    manifests.apply_text(text, alice)
    app = m.Application.objects.get(name="wordcount", owner=alice)
    doc = manifests.export("app", "wordcount", alice)[0]
    doc["spec"]["dryRun"] = True
    response = client.post(
        f"/admin/autoscaler/application/{app.pk}/change/", {"manifest": manifests.dump_documents([doc])}
    )
    assert response.status_code == 302
    app.refresh_from_db()
    assert app.dry_run is True and app.owner == alice
    assert not m.Application.objects.filter(owner=root).exists()
    page = client.get(f"/admin/autoscaler/application/{app.pk}/change/").content.decode()
    assert "<td>splitter</td>" in page and "<td>wordcount-splitter</td>" in page
