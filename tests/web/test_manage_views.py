"""Django-client tests of the management pages: login required, ownership, the application form (errors from
the validation layer next to their fields, nothing stored on error), edit, start/pause, delete, fleet overview."""

from __future__ import annotations

import html as htmllib
import re

import pytest
import yaml

from autoscaler import manifests
from autoscaler import models as m
from autoscaler.control.aggregates import record_period
from autoscaler.control.models import ApplicationControl, Decision, Tick

pytestmark = pytest.mark.django_db


def app_post(**overrides: str) -> dict[str, str]:
    """POST data of a valid three-operator application ``wc`` (simulated engine)."""
    data = {
        "name": "wc",
        "engine": "simulated",
        "connector": "",
        "r_max_ms": "60",
        "eta_v": "0.05",
        "eta_r": "0.1",
        "om_period_s": "10",
        "am_period_s": "60",
        "policy_om": "ql-pds-plus",
        "policy_om_params": "",
        "policy_am": "",
        "policy_am_params": "",
        "policy_rm": "",
        "policy_rm_params": "",
        "policy_im": "",
        "policy_im_params": "",
        "operators-TOTAL_FORMS": "3",
        "operators-INITIAL_FORMS": "0",
        "operators-0-name": "src",
        "operators-0-kind": "source",
        "operators-1-name": "split",
        "operators-1-kind": "operator",
        "operators-1-max_parallelism": "8",
        "operators-1-selectivity": "2.5",
        "operators-2-name": "out",
        "operators-2-kind": "sink",
        "streams-TOTAL_FORMS": "2",
        "streams-INITIAL_FORMS": "0",
        "streams-0-source": "src",
        "streams-0-target": "split",
        "streams-1-source": "split",
        "streams-1-target": "out",
        "paths-TOTAL_FORMS": "0",
        "paths-INITIAL_FORMS": "0",
    }
    data.update(overrides)
    return data


def field_errors(html: str) -> dict[str, str]:
    """Form field name -> text of the error list shown next to it."""
    out = {}
    for match in re.finditer(
        r'data-field="([^"]+)"(?:(?!data-field=).)*?<ul class="errorlist"[^>]*>(.*?)</ul>', html, re.S
    ):
        text = re.sub(r"\s+", " ", re.sub("<[^>]+>", " ", match.group(2))).strip()
        out[match.group(1)] = htmllib.unescape(text)
    return out


def test_every_page_needs_a_login(client, shared):
    for url in [
        "/",
        "/applications/new/",
        "/catalogs/",
        "/regions/new/",
        "/deployments/",
        "/manifests/",
        "/manifests/export/",
    ]:
        response = client.get(url)
        assert response.status_code == 302, url
        assert response["Location"].startswith("/accounts/login/?next="), url


def test_login_page_logs_in_and_goes_to_the_fleet(client, alice):
    page = client.get("/accounts/login/")
    assert page.status_code == 200
    assert b'<label for="id_username">' in page.content and b'<label for="id_password">' in page.content
    bad = client.post("/accounts/login/", {"username": "alice", "password": "wrong", "next": "/"})
    assert bad.status_code == 200 and b"form-errors" in bad.content
    good = client.post("/accounts/login/", {"username": "alice", "password": "pw-alice-1", "next": "/"})
    assert good.status_code == 302 and good["Location"] == "/"
    assert client.get("/").status_code == 200


def test_register_application_through_the_form(alice_client, alice, shared):
    response = alice_client.post("/applications/new/", app_post(regions=["vm-local"]))
    assert response.status_code == 302, field_errors(response.content.decode())
    assert response["Location"] == "/applications/wc/edit/"
    app = m.Application.objects.get(owner=alice, name="wc")
    assert (app.r_max_ms, app.eta_v, app.eta_r, app.om_period_s, app.am_period_s) == (60, 0.05, 0.1, 10, 60)
    assert [o.name for o in app.operators.all()] == ["src", "split", "out"]
    assert app.operators.get(name="split").selectivity == 2.5
    assert [(s.source.name, s.target.name) for s in app.streams.all()] == [("src", "split"), ("split", "out")]
    assert app.policies == {"om": {"name": "ql-pds-plus", "params": {}}}
    assert app.region_order == ["vm-local"] and app.state == "registered"
    # the stored application is the same as the manifest the API would store for the same input
    doc = manifests.export_resource(app)
    assert doc["spec"]["connector"]["trace"] == "taxi_last_month"  # defaults filled in by the layer


@pytest.mark.parametrize(
    ("overrides", "field", "message"),
    [
        ({"r_max_ms": "0"}, "r_max_ms", "greater than 0"),
        ({"r_max_ms": ""}, "r_max_ms", "Field required"),
        ({"eta_v": "1.5"}, "eta_v", "less than 1"),
        ({"name": "bad name!"}, "name", "should match pattern"),
        ({"om_period_s": "100", "am_period_s": "10"}, "am_period_s", "must be >= omS"),
        ({"operators-1-max_parallelism": "0"}, "operators-1-max_parallelism", "greater than or equal to 1"),
        ({"operators-2-name": "src"}, "operators-2-name", "duplicate operator name"),
        ({"streams-1-target": "nowhere"}, "streams-1", "edge to unknown operator 'nowhere'"),
        ({"policy_om": "no-such-policy"}, "policy_om", "unknown om policy 'no-such-policy'"),
        ({"policy_om_params": "alpha: [1"}, "policy_om_params", "not valid YAML"),
        ({"connector": "rateScale: -1"}, "connector", "rateScale: Input should be greater than 0"),
        ({"engine": "storm"}, "engine", "Input should be 'spark', 'flink' or 'simulated'"),
        (
            {"paths-TOTAL_FORMS": "1", "paths-0-path": "src, out", "paths-0-r_max_ms": "30"},
            "paths-0-path",
            "no stream src -> out",
        ),
        (
            {"paths-TOTAL_FORMS": "1", "paths-0-path": "src, split, out", "paths-0-r_max_ms": "0"},
            "paths-0-r_max_ms",
            "greater than 0",
        ),
        ({"regions": ["vm-local", "atlantis"]}, "regions", "unknown region 'atlantis'"),
    ],
)
def test_invalid_input_is_shown_next_to_its_field_and_nothing_is_stored(
    alice_client, shared, overrides, field, message
):
    response = alice_client.post("/applications/new/", app_post(**overrides))
    assert response.status_code == 400
    html = response.content.decode()
    errors = field_errors(html)
    if field == "streams-1":  # a row-level error: shown inside the row of stream 1
        row = re.search(
            r'name="streams-1-target".*?</div>\s*<button[^>]*>Remove</button>(.*?)</div>', html, re.S
        )
        assert row and message in htmllib.unescape(row.group(1))
    else:
        assert field in errors and message in errors[field], errors
    assert "Not saved: nothing was changed." in html
    assert not m.Application.objects.exists() and not m.Operator.objects.exists()


def test_per_path_bounds_are_stored_and_shown_again(alice_client, alice, shared):
    data = app_post(**{"paths-TOTAL_FORMS": "1", "paths-0-path": "src, split, out", "paths-0-r_max_ms": "30"})
    assert alice_client.post("/applications/new/", data).status_code == 302
    assert m.Application.objects.get(name="wc").slo_paths == [
        {"path": ["src", "split", "out"], "r_max_ms": 30.0}
    ]
    page = alice_client.get("/applications/wc/edit/").content.decode()
    assert 'name="paths-0-path" value="src, split, out"' in page


def test_cycle_and_graph_errors_reach_the_form(alice_client, shared):
    response = alice_client.post(
        "/applications/new/",
        app_post(**{"streams-TOTAL_FORMS": "3", "streams-2-source": "split", "streams-2-target": "split"}),
    )
    assert response.status_code == 400
    assert "cycle split -&gt; split" in response.content.decode()
    assert not m.Application.objects.exists()


def test_blank_rows_are_ignored_and_row_errors_follow_the_form_row(alice_client, alice, shared):
    data = app_post(
        **{
            "operators-TOTAL_FORMS": "4",
            "operators-3-name": "out",  # row 3 duplicates row 2 ...
            "operators-3-kind": "sink",
        }
    )
    data["operators-1-name"] = data["operators-1-kind"] = (
        ""  # ... and row 1 is blank: document row 2 = form row 3
    )
    data["operators-1-max_parallelism"] = data["operators-1-selectivity"] = ""
    data["streams-0-target"], data["streams-1-source"] = "out", "src"
    response = alice_client.post("/applications/new/", data)
    errors = field_errors(response.content.decode())
    assert "duplicate operator name 'out'" in errors.get("operators-3-name", ""), errors


def test_duplicate_name_is_refused_without_touching_the_existing_application(alice_client, alice, shared):
    assert alice_client.post("/applications/new/", app_post()).status_code == 302
    response = alice_client.post("/applications/new/", app_post(r_max_ms="999"))
    assert response.status_code == 400
    assert "already have an application named 'wc'" in field_errors(response.content.decode())["name"]
    assert m.Application.objects.get(owner=alice, name="wc").r_max_ms == 60


def test_edit_shows_the_stored_values_and_saves_changes(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    page = alice_client.get("/applications/wc/edit/").content.decode()
    assert 'name="operators-1-name" value="split"' in page
    assert 'value="60"' in page and "may be exceeded at most 5% of the time" in page
    response = alice_client.post(
        "/applications/wc/edit/",
        app_post(name="ignored", r_max_ms="80", **{"operators-1-max_parallelism": "12", "policy_om": "ds2"}),
    )
    assert response.status_code == 302
    app = m.Application.objects.get(owner=alice, name="wc")  # the name field is disabled on edit
    assert app.r_max_ms == 80 and app.operators.get(name="split").max_parallelism == 12
    assert app.policies["om"]["name"] == "ds2"
    bad = alice_client.post("/applications/wc/edit/", app_post(r_max_ms="-5"))
    assert bad.status_code == 400
    assert m.Application.objects.get(owner=alice, name="wc").r_max_ms == 80


def test_edit_below_deployed_replicas_is_refused(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    manifests.apply_documents(
        [
            {
                "apiVersion": "autoscaler/v1",
                "kind": "Deployment",
                "metadata": {"name": "wc-split"},
                "spec": {
                    "application": "wc",
                    "operator": "split",
                    "region": "vm-local",
                    "replicas": {"vm.small": 5},
                },
            }
        ],
        alice,
    )
    response = alice_client.post("/applications/wc/edit/", app_post(**{"operators-1-max_parallelism": "2"}))
    errors = field_errors(response.content.decode())
    assert "below the 5 replicas of deployment 'wc-split'" in errors["operators-1-max_parallelism"]


def test_other_users_applications_are_404(alice_client, bob_client, shared):
    alice_client.post("/applications/new/", app_post())
    for url in ["/applications/wc/edit/", "/applications/wc/delete/", "/applications/wc/manifest.yaml"]:
        assert bob_client.get(url).status_code == 404, url
    assert bob_client.post("/applications/wc/state/", {"state": "running"}).status_code == 404
    assert b'data-app="wc"' not in bob_client.get("/").content


def test_start_pause_and_delete_with_confirmation(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    assert alice_client.post("/applications/wc/state/", {"state": "running"}).status_code == 302
    assert m.Application.objects.get(name="wc").state == "running"
    alice_client.post("/applications/wc/state/", {"state": "paused"})
    assert m.Application.objects.get(name="wc").state == "paused"
    alice_client.post("/applications/wc/state/", {"state": "deleted"})  # not a button: refused
    assert m.Application.objects.get(name="wc").state == "paused"
    confirm = alice_client.get("/applications/wc/delete/")
    assert confirm.status_code == 200 and b"3 operators" in confirm.content
    assert m.Application.objects.filter(name="wc").exists()  # GET deletes nothing
    assert alice_client.post("/applications/wc/delete/").status_code == 302
    assert not m.Application.objects.filter(name="wc").exists()


def test_fleet_overview_shows_status_cost_budgets_and_last_decision(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    app = m.Application.objects.get(name="wc")
    manifests.apply_documents(
        [
            {
                "apiVersion": "autoscaler/v1",
                "kind": "Deployment",
                "metadata": {"name": "wc-split"},
                "spec": {
                    "application": "wc",
                    "operator": "split",
                    "region": "vm-local",
                    "replicas": {"vm.small": 2, "vm.large": 1},
                },
            }
        ],
        alice,
    )
    control = ApplicationControl.objects.create(application=app, window=10)
    for i in range(10):  # 1 of 10 periods violated (budget 5%: red), 0 reconfigured (green)
        record_period(control, violated=i == 3, reconfigured=False, cost=0.01, seconds=10)
    control.save()
    tick = Tick.objects.create(application=app, slot=7, period_s=10, status="done")
    decision = Decision.objects.create(
        tick=tick, application=app, operator=app.operators.get(name="split"), slot=7, outcome="applied"
    )
    html = alice_client.get("/").content.decode()
    row = re.search(r'<tr data-app="wc">(.*?)</tr>', html, re.S).group(1)
    assert "0.030/h" in row  # 2 x 0.005 + 1 x 0.02 (vm-example prices)
    assert "observed 3.600/h" in row  # 0.01 per 10 s
    assert "over budget" in row and "10.0% of periods" in row and "(budget 5%)" in row
    assert "within budget" in row and "0.0% of periods" in row and "(budget 10%)" in row
    assert f'href="/decisions/{decision.id}/"' in row and "split: Applied" in row, row
    assert "registered" in row and ">Start<" in row


def test_fleet_without_data_says_so(alice_client, shared):
    alice_client.post("/applications/new/", app_post())
    row = re.search(r'<tr data-app="wc">(.*?)</tr>', alice_client.get("/").content.decode(), re.S).group(1)
    assert row.count("no data") == 2 and "none yet" in row


def test_application_manifest_download_round_trips(alice_client, alice, shared):
    alice_client.post("/applications/new/", app_post())
    response = alice_client.get("/applications/wc/manifest.yaml")
    assert response.status_code == 200 and "attachment" in response["Content-Disposition"]
    docs = list(yaml.safe_load_all(response.content))
    assert docs[0]["kind"] == "Application" and docs[0]["metadata"]["name"] == "wc"
    results = manifests.apply_documents(docs, alice)
    assert [r.action for r in results] == ["unchanged"]


def dashboard_paths() -> list[str]:
    """A concrete path for every page of the web app (placeholders filled with sample values)."""
    from django.urls import URLPattern, URLResolver, get_resolver

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern)

    (app,) = [r for r in get_resolver().url_patterns if getattr(r, "namespace", None) == "dashboard"]
    out = []
    for route in walk(app.url_patterns):
        route = re.sub(r"<int:\w+>", "1", route)
        out.append("/" + re.sub(r"<(?:str:)?\w+>", "wc", route))
    return out


def test_every_page_of_the_web_app_needs_a_login(client, shared):
    paths = dashboard_paths()
    assert "/" in paths and "/applications/new/" in paths and len(paths) >= 15
    for path in paths:
        for method in (client.get, client.post):
            response = method(path)
            if path.endswith(".json"):  # data for scripts: refused outright rather than redirected
                assert response.status_code in (401, 403), (method.__name__, path)
                continue
            assert response.status_code == 302, (method.__name__, path)
            assert response["Location"].startswith("/accounts/login/?next="), path
