"""Browser tests of the management pages (headless Chromium via Playwright against the live server).

Register an application through the form (first with a rejected input: the error is shown next to its field
and nothing is stored), watch the DAG drawing and the SLO sentence follow the typing, edit it, start it from
the fleet overview, upload (a rejected and an accepted multi-document manifest) and download manifests, and
delete with confirmation. Every page is saved as a screenshot at 1280x800 and 375x812.
"""

from __future__ import annotations

import pytest
import yaml

from autoscaler import models as m

from ..conftest import (
    horizontal_overflow,
    login,
    screenshot,
    unlabelled_fields,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]


def fill_row(pg, prefix: str, i: int, **values: str) -> None:
    for field, value in values.items():
        locator = pg.locator(f"[name='{prefix}-{i}-{field}']")
        if locator.evaluate("el => el.tagName") == "SELECT":
            locator.select_option(value)
        else:
            locator.fill(value)


def test_register_edit_start_and_fleet(logged_in_page, shared):
    pg = logged_in_page
    screenshot(pg, "fleet-empty")
    pg.get_by_role("link", name="Register application").first.click()
    pg.wait_for_url("**/applications/new/")
    assert pg.locator("#dag svg g.node").count() == 0

    pg.get_by_label("Name", exact=True).fill("clicks")
    pg.get_by_label("R_max (ms)").fill("0")  # rejected by the validation layer: must be > 0
    pg.get_by_label("η_V: tolerated violation fraction").fill("0.05")
    assert "may be exceeded at most 5% of the time" in pg.locator("#slo-help").inner_text()
    pg.get_by_label("η_V: tolerated violation fraction").fill("0.02")
    assert "may be exceeded at most 2% of the time" in pg.locator("#slo-help").inner_text()
    fill_row(pg, "operators", 0, name="clicks-in")
    fill_row(pg, "operators", 1, name="sessionize", max_parallelism="6")
    fill_row(pg, "operators", 2, name="store")
    fill_row(pg, "streams", 0, source="clicks-in", target="sessionize")
    fill_row(pg, "streams", 1, source="sessionize", target="store")
    assert pg.locator("#dag svg g.node").count() == 3
    assert pg.locator("#dag svg path.edge").count() == 2
    assert pg.locator("#dag svg g.node.source").get_attribute("data-name") == "clicks-in"
    # a row added and removed again leaves the formset consistent
    pg.get_by_role("button", name="Add operator").click()
    assert pg.locator("[name='operators-3-name']").is_visible()
    pg.locator(".rowset[data-prefix='operators'] .remove-row").nth(3).click()
    assert pg.locator("[name='operators-TOTAL_FORMS']").input_value() == "3"
    pg.get_by_label("Operator Manager (per operator) policy").select_option("ql-pds-plus")
    pg.get_by_label("vm-local").check()
    pg.get_by_role("button", name="Register application").click()

    error = pg.locator("[data-field='r_max_ms'] .errorlist")
    error.wait_for()
    assert "Input should be greater than 0" in error.inner_text()
    assert pg.locator("[data-field='r_max_ms'] input").get_attribute("aria-invalid") == "true"
    assert "nothing was changed" in pg.locator("#form-errors").inner_text()
    assert not m.Application.objects.filter(name="clicks").exists()
    assert pg.locator("#dag svg g.node").count() == 3  # the form kept what was typed
    assert unlabelled_fields(pg) == []
    assert horizontal_overflow(pg) == 0
    screenshot(pg, "app-register-error")

    pg.get_by_label("R_max (ms)").fill("250")
    pg.get_by_role("button", name="Register application").click()
    pg.wait_for_url("**/applications/clicks/edit/")
    assert "application clicks registered" in pg.locator(".messages").inner_text()
    app = m.Application.objects.get(name="clicks")
    assert (app.r_max_ms, app.eta_v, app.region_order) == (250, 0.02, ["vm-local"])
    assert [o.name for o in app.operators.all()] == ["clicks-in", "sessionize", "store"]
    assert app.policies["om"]["name"] == "ql-pds-plus"
    screenshot(pg, "app-edit")

    pg.get_by_label("R_max (ms)").fill("300")
    fill_row(pg, "operators", 1, max_parallelism="10")
    pg.get_by_role("button", name="Save changes").click()
    pg.wait_for_url("**/applications/clicks/edit/")
    app.refresh_from_db()
    assert app.r_max_ms == 300 and app.operators.get(name="sessionize").max_parallelism == 10

    pg.get_by_role("link", name="Fleet").click()
    row = pg.locator("tr[data-app='clicks']")
    assert "registered" in row.inner_text() and "no data" in row.inner_text()
    row.get_by_role("button", name="Start clicks").click()
    pg.wait_for_url(pg.base_url + "/")
    assert "running" in pg.locator("tr[data-app='clicks']").inner_text()
    app.refresh_from_db()
    assert app.state == "running"
    assert horizontal_overflow(pg) == 0  # the table becomes cards at phone width
    screenshot(pg, "fleet")


MANIFESTS = """\
apiVersion: autoscaler/v1
kind: Application
metadata: {name: uploaded}
spec:
  engine: simulated
  slo: {rMaxMs: 100}
  operators: [{name: a, kind: source}, {name: b, kind: operator, maxParallelism: 4}, {name: c, kind: sink}]
  streams: [[a, b], [b, c]]
---
apiVersion: autoscaler/v1
kind: Deployment
metadata: {name: uploaded-b}
spec: {application: uploaded, operator: b, region: vm-local, replicas: {vm.small: REPLICAS}}
"""


def test_manifest_upload_download_and_delete(logged_in_page, shared, tmp_path):
    pg = logged_in_page
    pg.get_by_role("link", name="Manifests", exact=True).click()
    bad = tmp_path / "bad.yaml"
    bad.write_text(MANIFESTS.replace("REPLICAS", "9"))  # 9 replicas > maxParallelism 4: the whole file fails
    pg.get_by_label("Manifest file").set_input_files(str(bad))
    pg.get_by_role("button", name="Apply").click()
    errors = pg.locator("#upload-errors")
    errors.wait_for()
    assert "documents[1].spec.replicas" in errors.inner_text()
    assert "9 replicas exceed maxParallelism 4" in errors.inner_text()
    assert not m.Application.objects.filter(name="uploaded").exists()  # all or nothing
    assert unlabelled_fields(pg) == []
    screenshot(pg, "manifests-error")

    good = tmp_path / "good.yaml"
    good.write_text(MANIFESTS.replace("REPLICAS", "2"))
    pg.get_by_label("Manifest file").set_input_files(str(good))
    pg.get_by_role("button", name="Apply").click()
    pg.wait_for_url("**/manifests/")
    assert "application/uploaded created" in pg.locator(".messages").inner_text()
    assert m.Deployment.objects.get(name="uploaded-b").replicas == {"vm.small": 2}
    screenshot(pg, "manifests")

    with pg.expect_download() as download_info:
        pg.locator("#download-all").click()
    docs = list(yaml.safe_load_all(download_info.value.path().read_text()))
    kinds = [(d["kind"], d["metadata"]["name"]) for d in docs]
    assert ("Application", "uploaded") in kinds and ("Deployment", "uploaded-b") in kinds
    assert ("NodeTypeCatalog", "vm-example") in kinds

    pg.goto(pg.base_url + "/deployments/uploaded-b/edit/")
    pg.get_by_label("Replicas per node type (YAML)").fill("vm.small: 1\nvm.large: 1")
    pg.get_by_role("button", name="Save deployment").click()
    pg.wait_for_url("**/deployments/uploaded-b/edit/")
    assert m.Deployment.objects.get(name="uploaded-b").replicas == {"vm.small": 1, "vm.large": 1}
    assert pg.locator("#history tbody tr").count() == 2
    assert unlabelled_fields(pg) == []
    screenshot(pg, "deployment-edit")
    pg.get_by_role("link", name="Deployments", exact=True).click()
    screenshot(pg, "deployments")

    pg.goto(pg.base_url + "/applications/uploaded/edit/")
    pg.get_by_role("link", name="Delete…").click()
    assert "deployment uploaded-b" in pg.locator("main").inner_text()
    screenshot(pg, "app-delete-confirm")
    pg.get_by_role("button", name="Delete uploaded").click()
    pg.wait_for_url(pg.base_url + "/")
    assert not m.Application.objects.filter(name="uploaded").exists()
    assert not m.Deployment.objects.filter(name="uploaded-b").exists()


def test_catalog_and_region_forms(logged_in_page):
    pg = logged_in_page
    pg.get_by_role("link", name="Node types").click()
    pg.get_by_role("link", name="New catalog").click()
    pg.get_by_label("Name", exact=True).fill("lab")
    fill_row(
        pg, "nodetypes", 0, name="small", cores="2", memory_mib="2048", speedup="1", price_per_hour="0.1"
    )
    pg.get_by_role("button", name="Add node type").click()
    fill_row(pg, "nodetypes", 1, name="big", cores="8", memory_mib="8192", speedup="-3", price_per_hour="0.5")
    pg.get_by_role("button", name="Save catalog").click()
    error = pg.locator("[data-field='nodetypes-1-speedup'] .errorlist")
    error.wait_for()
    assert "greater than 0" in error.inner_text()
    assert not m.NodeTypeCatalog.objects.exists()
    assert unlabelled_fields(pg) == []
    screenshot(pg, "catalog-error")
    fill_row(pg, "nodetypes", 1, speedup="4")
    pg.get_by_role("button", name="Save catalog").click()
    pg.wait_for_url("**/catalogs/lab/edit/")
    assert list(m.NodeType.objects.values_list("name", "speedup")) == [("small", 1.0), ("big", 4.0)]

    pg.get_by_role("link", name="Regions", exact=True).click()
    pg.get_by_role("link", name="New region").click()
    pg.get_by_label("Name", exact=True).fill("lab-1")
    pg.get_by_label("Node-type catalog").select_option("lab")
    pg.get_by_label("Maximum nodes").fill("10")
    pg.get_by_label("New nodes per period").fill("0")
    pg.get_by_role("button", name="Save region").click()
    error = pg.locator("[data-field='max_new_nodes_per_period'] .errorlist")
    error.wait_for()
    assert "greater than or equal to 1" in error.inner_text()
    pg.get_by_label("New nodes per period").fill("2")
    pg.get_by_role("button", name="Save region").click()
    pg.wait_for_url("**/regions/lab-1/edit/")
    assert m.Region.objects.get(name="lab-1").max_new_nodes_per_period == 2
    assert unlabelled_fields(pg) == []
    screenshot(pg, "region-edit")
    pg.get_by_role("link", name="Regions", exact=True).click()
    screenshot(pg, "regions")
    pg.get_by_role("link", name="Node types").click()
    screenshot(pg, "catalogs")
    for name in ("regions", "catalogs"):
        pg.goto(f"{pg.base_url}/{name}/")
        assert horizontal_overflow(pg) == 0, name


def test_login_logout_and_skip_link(page, browser_user):
    page.goto(page.base_url + "/applications/new/")
    page.wait_for_url("**/accounts/login/?next=/applications/new/")
    assert unlabelled_fields(page) == []
    page.get_by_label("Username").fill("webuser")
    page.get_by_label("Password").fill("wrong")
    page.get_by_role("button", name="Log in").click()
    assert "Please enter a correct username and password" in page.locator(".form-errors").inner_text()
    screenshot(page, "login-error")
    page.get_by_label("Password").fill("pw-web-1")
    page.get_by_role("button", name="Log in").click()
    page.wait_for_url("**/applications/new/")  # back where the user wanted to go
    page.keyboard.press("Tab")
    assert page.evaluate("document.activeElement.textContent") == "Skip to content"
    page.get_by_role("button", name="Log out").click()
    page.wait_for_url("**/accounts/login/")
    page.goto(page.base_url + "/")
    page.wait_for_url("**/accounts/login/?next=/")
    login(page, "webuser", "pw-web-1")
    assert page.get_by_role("heading", name="Fleet overview").is_visible()
