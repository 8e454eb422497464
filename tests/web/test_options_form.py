"""A bad policy option entered in the application form: the same message as the API, on the params field, and
nothing stored."""

from __future__ import annotations

import pytest
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler.models import Application
from dashboard.manage.forms.application import ApplicationEditor

from .test_manage_views import app_post, field_errors

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    "overrides,field,loc",
    [
        (
            {"policy_am": "naive", "policy_am_params": "bucket_capacity: 0.5"},
            "policy_am_params",
            "spec.policies.am.params.bucket_capacity",
        ),
        (
            {"policy_am": "bo", "policy_am_params": "validation_replications: -1"},
            "policy_am_params",
            "spec.policies.am.params.validation_replications",
        ),
        (
            {"policy_rm": "simple", "policy_rm_params": "n_idle: many"},
            "policy_rm_params",
            "spec.policies.rm.params.n_idle",
        ),
    ],
)
def test_a_bad_option_in_the_form_is_shown_on_its_field_as_the_api_says_it(
    alice, alice_client, shared, overrides, field, loc
):
    editor = ApplicationEditor(app_post(**overrides))
    assert editor.is_valid()
    api = APIClient()
    api.credentials(HTTP_AUTHORIZATION=f"Token {Token.objects.create(user=alice).key}")
    response = api.put("/api/v1/applications/wc/", editor.build_document(), format="json")
    assert response.status_code == 400
    (error,) = [e for e in response.json()["errors"] if e["loc"] == loc]
    page = alice_client.post("/applications/new/", app_post(**overrides))
    assert page.status_code == 400  # the form is shown again with the errors
    shown = field_errors(page.content.decode())[field]
    assert error["msg"] in shown and loc.rsplit(".", 1)[1] in shown, shown
    assert not Application.objects.exists()
