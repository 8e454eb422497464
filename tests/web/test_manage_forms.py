"""Unit tests of the form helpers: error routing from validation paths to fields, the plain-language SLO,
budget colours; and the check that the form and the REST API answer the same input with the same errors."""

from __future__ import annotations

import pytest
from django import forms
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler.schemas import FieldError
from dashboard.manage.forms.application import ApplicationEditor, slo_sentences
from dashboard.manage.forms.common import ErrorRouter, RowList
from dashboard.manage.status import budget_status
from dashboard.manage.views.fleet import fleet_rows

from .test_manage_views import app_post, field_errors


class Main(forms.Form):
    a = forms.CharField(required=False)
    b = forms.CharField(required=False)


class Row(forms.Form):
    x = forms.CharField(required=False)
    y = forms.CharField(required=False)


RowSet = forms.formset_factory(Row, extra=0)


def bound():
    main = Main({"a": "1", "b": "2"})
    rows = RowSet(
        {"r-TOTAL_FORMS": "3", "r-INITIAL_FORMS": "0", "r-0-x": "p", "r-2-x": "q"},
        prefix="r",
    )
    assert main.is_valid() and rows.is_valid()
    return main, rows


def test_router_puts_each_error_on_its_field_row_or_the_form():
    main, rows = bound()
    router = ErrorRouter(
        main,
        {"spec.a": "a", "spec.b": "b"},
        {"spec.rows": RowList(rows, {"xKey": "x", "yKey": "y"}, [0, 2], positions=("x", "y"))},
    )
    router.add(
        [
            FieldError("spec.a", "bad a"),
            FieldError("spec.b.deep[3]", "bad deep b"),  # under b: shown on b with the rest of the path
            FieldError("spec.rows[1].xKey", "bad x of document row 1"),  # document row 1 = form row 2
            FieldError("spec.rows[0][1]", "bad tuple item 1"),  # a tuple position: field y
            FieldError("spec.rows[0]", "bad row 0"),  # the row itself
            FieldError("spec.rows", "bad list"),
            FieldError("spec.rows[0].zKey", "unknown row field"),
            FieldError("spec.other", "nowhere"),
            FieldError("spec.rows[7]", "row out of range"),
        ]
    )
    assert main.errors["a"] == ["bad a"]
    assert main.errors["b"] == ["deep[3]: bad deep b"]
    assert rows.forms[2].errors["x"] == ["bad x of document row 1"]
    assert rows.forms[0].errors["y"] == ["bad tuple item 1"]
    assert rows.forms[0].non_field_errors() == ["bad row 0", "zKey: unknown row field"]
    assert rows.non_form_errors() == ["bad list"]
    assert main.non_field_errors() == ["spec.other: nowhere", "spec.rows[7]: row out of range"]


def test_router_list_items_of_a_plain_field_show_only_the_message():
    main, _ = bound()
    ErrorRouter(main, {"spec.a": "a"}).add([FieldError("spec.a[2]", "unknown region 'x'")])
    assert main.errors["a"] == ["unknown region 'x'"]


def test_slo_sentences():
    text = slo_sentences("60", "0.05", "0.1", "60")
    assert text[0] == (
        "R_max = 60 ms may be exceeded at most 5% of the time "
        "(at most 72 of the 1440 control periods of 60 s in a day)."
    )
    assert text[1] == "The deployment may be changed in at most 10% of the control periods."
    assert "give η_V in [0, 1)" in slo_sentences("60", "1.2", "", None)[0]
    assert slo_sentences("", "0.5", "x")[0].startswith("R_max may be exceeded at most 50%")


@pytest.mark.parametrize(
    ("value", "budget", "level", "label"),
    [
        (None, 0.05, "none", "no data"),
        (0.0, 0.05, "ok", "within budget"),
        (0.039, 0.05, "ok", "within budget"),
        (0.04, 0.05, "warn", "near budget"),
        (0.05, 0.05, "warn", "near budget"),
        (0.051, 0.05, "bad", "over budget"),
        (0.0, 0.0, "ok", "within budget"),
        (0.01, 0.0, "bad", "over budget"),
    ],
)
def test_budget_status(value, budget, level, label):
    status = budget_status(value, budget)
    assert (status.level, status.label) == (level, label)


@pytest.mark.django_db
def test_blank_optional_fields_keep_the_layer_defaults():
    editor = ApplicationEditor(app_post(eta_v="", eta_r="", om_period_s="", am_period_s=""))
    assert editor.is_valid()
    doc = editor.build_document()
    assert doc["spec"]["slo"] == {"rMaxMs": "60"} and "periods" not in doc["spec"]
    assert doc["spec"]["operators"][1] == {
        "name": "split",
        "kind": "operator",
        "maxParallelism": "8",
        "selectivity": "2.5",
    }


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("overrides", "field", "loc"),
    [
        ({"r_max_ms": "-1"}, "r_max_ms", "spec.slo.rMaxMs"),
        ({"operators-1-selectivity": "-2"}, "operators-1-selectivity", "spec.operators[1].selectivity"),
        ({"policy_am": "nope"}, "policy_am", "spec.policies.am.name"),
    ],
)
def test_form_and_api_give_the_same_error(alice, alice_client, shared, overrides, field, loc):
    """The form builds the manifest the API would receive: the same layer answers with the same message."""
    editor = ApplicationEditor(app_post(**overrides))
    assert editor.is_valid()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    response = api.put("/api/v1/applications/wc/", editor.build_document(), format="json")
    assert response.status_code == 400
    (error,) = [e for e in response.json()["errors"] if e["loc"] == loc]
    page = alice_client.post("/applications/new/", app_post(**overrides))
    assert field_errors(page.content.decode())[field] == error["msg"]


@pytest.mark.django_db
def test_fleet_needs_a_fixed_number_of_queries(alice, alice_client, shared, django_assert_max_num_queries):
    for i in range(12):
        assert alice_client.post("/applications/new/", app_post(name=f"app{i}")).status_code == 302
    # decisions of every application; the last one is about the latest period even when written earlier
    from autoscaler.control.models import Decision, Tick
    from autoscaler.models import Application

    latest = {}
    for app in Application.objects.filter(owner=alice):
        op = app.operators.get(name="split")
        for slot in (9, 7):  # slot 7 is written after slot 9 (a backfill): slot 9 stays the last decision
            tick = Tick.objects.create(application=app, slot=slot, period_s=10, status="done")
            d = Decision.objects.create(tick=tick, application=app, operator=op, slot=slot, outcome="applied")
            latest.setdefault(app.name, d.id)
    with django_assert_max_num_queries(6):
        rows = fleet_rows(alice)
        for r in rows:  # what the page shows of the last decision
            assert r["decision"].operator.name == "split"
    assert [r["app"].name for r in rows][:3] == ["app0", "app1", "app10"]
    assert {r["app"].name: r["decision"].id for r in rows} == latest
    with django_assert_max_num_queries(12):  # the whole page: session, user, rows, no query per row
        assert alice_client.get("/").status_code == 200
