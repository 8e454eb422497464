"""Users see only their own applications: every page of the web app that names an application, a deployment,
a decision or a what-if run answers another user exactly as it answers a name that does not exist (404, or 405
for a POST-only URL), and changes nothing; lists (fleet, deployments, decisions) show only the user's own rows.

The routes are walked from the URL configuration, so a page added later is checked without editing this test."""

from __future__ import annotations

import re

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from autoscaler import models as m
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision
from autoscaler.control.tick import run_tick
from dashboard.models import WhatIfRun

pytestmark = pytest.mark.django_db

SHARED_KINDS = ("/catalogs/", "/regions/")  # shared resources: everyone reads them, staff writes them
BASE_SLOT = 29_000_000


def routes() -> list[str]:
    """Every route of the ``dashboard`` namespace, with its placeholders (``<str:name>``, ``<int:pk>``)."""

    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern)

    (app,) = [r for r in get_resolver().url_patterns if getattr(r, "namespace", None) == "dashboard"]
    return ["/" + r for r in walk(app.url_patterns)]


def fill(route: str, app: str, deployment: str, decision: int, run: int) -> str:
    """``route`` with its placeholders replaced by the given objects' names and ids."""
    if route.startswith("/deployments/"):
        return route.replace("<str:name>", deployment)
    if route.startswith("/decisions/"):
        return route.replace("<int:pk>", str(decision))
    return route.replace("<str:name>", app).replace("<int:pk>", str(run))


@pytest.fixture
def alices_objects(alice):
    app = simulated_pipeline("private", n_operators=2, owner="alice", om_policy="threshold", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 3):
        run_tick(app.pk, slot)
    deployment = m.Deployment.objects.filter(operator__application=app).first()
    decision = Decision.objects.filter(application=app).first()
    run = WhatIfRun.objects.create(application=app, owner=alice, params={})
    return app, deployment, decision, run


def test_other_users_get_what_a_missing_object_gets(alices_objects, alice_client, bob, bob_client):
    app, deployment, decision, run = alices_objects
    owned = [r for r in routes() if "<" in r and not r.startswith(SHARED_KINDS)]
    assert len(owned) >= 12, owned  # application pages, data, agents, what-if, decisions, deployments
    before = (
        m.Application.objects.filter(pk=app.pk).values().get(),
        m.Deployment.objects.filter(pk=deployment.pk).values().get(),
        WhatIfRun.objects.count(),
    )
    checked = []
    for route in owned:
        real = fill(route, app.name, deployment.name, decision.id, run.id)
        missing = fill(route, "no-such-thing", "no-such-thing", 999_999_999, 999_999_999)
        for method in ("get", "post"):
            theirs = getattr(bob_client, method)(real)
            nothing = getattr(bob_client, method)(missing)
            assert theirs.status_code in (404, 405), (method, real, theirs.status_code)
            assert theirs.status_code == nothing.status_code, (method, real)
            assert app.name.encode() not in theirs.content, (method, real)
        mine = alice_client.get(real)
        assert mine.status_code in (200, 405), (real, mine.status_code)  # the route exists for its owner
        checked.append(real)
    assert any(re.search(r"/decisions/\d+/$", c) for c in checked)
    assert any(c.endswith(".json") for c in checked)
    after = (
        m.Application.objects.filter(pk=app.pk).values().get(),
        m.Deployment.objects.filter(pk=deployment.pk).values().get(),
        WhatIfRun.objects.count(),
    )
    assert after == before, "another user's POSTs changed nothing"


def test_lists_show_only_the_users_own_rows(alices_objects, alice_client, bob_client):
    app, deployment, decision, _ = alices_objects
    for url, marker in (
        ("/", f'data-app="{app.name}"'),
        ("/deployments/", deployment.name),
        ("/decisions/", f"/decisions/{decision.id}/"),
        ("/manifests/export/", f"name: {app.name}"),
    ):
        assert marker in alice_client.get(url).content.decode(), url
        assert marker not in bob_client.get(url).content.decode(), url
    assert bob_client.get("/decisions/").context["page"].paginator.count == 0
    r = bob_client.get(f"/decisions/?application={app.name}")
    assert "application" in r.context["form"].errors and r.context["page"].paginator.count == 0
