"""The tenant matrix: every route of the URL configuration, called as the owner of an application, as another
non-staff user, as a staff user and unauthenticated (and, on the ingest endpoints, with per-application ingest
tokens). Nothing of one tenant is readable or changeable by another.

The routes are enumerated from the URL resolver and each one must match exactly one class of ``CLASSES``: a route
added later without a class fails ``test_every_route_is_classified`` instead of escaping the matrix. Each class has
one test stating what each caller gets. Throughout, another tenant's object must answer exactly as a name that
does not exist answers (same status, for every method), its name must appear in no answer to anyone but its owner
(and staff on the operator views: /metrics and the region control view), and nothing of it changes.

Staff users are operators, not owners: they write the shared catalogs and regions and read /metrics and the
regions' control state, but other users' applications are as invisible to them as to anyone else.
"""

from __future__ import annotations

import importlib
import re
from collections.abc import Iterator
from dataclasses import dataclass

import pytest
from django.apps import apps
from django.core.cache import cache
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.authtoken.models import Token
from rest_framework.test import APIClient

from autoscaler import models as m
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Consolidation, Decision, RegionNode, WaitingRequest
from autoscaler.control.tick import run_tick
from dashboard.models import WhatIfRun

pytestmark = pytest.mark.django_db

SECRET_APP = "alices-secret-app"  # the marker: must reach alice only (and staff on the operator views)
MISSING = "no-such-thing"
MISSING_PK = 999_999_999
BASE_SLOT = 31_000_000
WRITES = ("post", "put", "patch", "delete")

# first match wins; every route must match one (test_every_route_is_classified)
CLASSES: list[tuple[str, str]] = [
    (r"^admin/", "admin"),
    (r"^(accounts|api-auth)/", "auth-pages"),
    (r"^api/v1/(schema|docs|redoc)/$", "public-docs"),
    (r"^api/v1/token/$", "token-endpoint"),
    (r"^api/v1/(<drf_format_suffix:format>)?$", "api-root"),
    (r"^api/v1/\^(catalogs|regions)[/\\]", "shared-api"),
    (r"^api/v1/\^(applications|deployments)[/\\]", "tenant-api"),
    (r"^api/v1/apply/$", "apply"),
    (r"^api/v1/control/applications/", "tenant-control"),
    (r"^api/v1/control/regions/", "region-control"),
    (r"^api/v1/ingest/", "ingest"),
    (r"^metrics$", "metrics"),
    (r"^(catalogs|regions)/", "shared-pages"),
    (r"^(applications|deployments|decisions)/<", "tenant-pages"),
    (
        r"^(|applications/new/|deployments/|deployments/new/|decisions/|manifests/|manifests/export/)$",
        "own-pages",
    ),
]


def all_routes() -> list[str]:
    """Every route of the URL configuration as its pattern text (``<str:name>``, regex groups and all)."""

    def walk(patterns, prefix: str = "") -> Iterator[str]:
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield prefix + str(p.pattern)

    return sorted(set(walk(get_resolver().url_patterns)))


def class_of(route: str) -> str | None:
    return next((name for pattern, name in CLASSES if re.search(pattern, route)), None)


def routes_of(name: str) -> list[str]:
    found = [r for r in all_routes() if class_of(r) == name]
    assert found, f"no route of class {name}"
    return found


def test_every_route_is_classified():
    unclassified = [r for r in all_routes() if class_of(r) is None]
    assert unclassified == [], f"routes outside the tenant matrix (add them to CLASSES): {unclassified}"
    assert {class_of(r) for r in all_routes()} == {name for _, name in CLASSES}  # no stale class


# ---- filling a route -------------------------------------------------------------------------------------
@dataclass
class Names:
    """What to put into a route's placeholders."""

    app: str
    operator: str
    deployment: str
    region: str
    catalog: str
    decision: int
    run: int


def fill(route: str, n: Names) -> str:
    """``/`` + ``route`` with its placeholders (path converters and the router's regex groups) filled."""
    by_kind = n.deployment if re.search(r"deployments", route) else n.app
    if re.search(r"regions", route):
        by_kind = n.region
    elif re.search(r"catalogs", route):
        by_kind = n.catalog
    url = route.replace("<str:application>", n.app).replace("<str:operator>", n.operator)
    url = url.replace("<str:name>", by_kind).replace("<drf_format_suffix:format>", ".json")
    url = url.replace("<int:pk>", str(n.decision if url.startswith("decisions/") else n.run))
    url = url.replace("<uidb64>", "MQ").replace("<token>", "set-password")  # a password reset link
    groups = {"name": by_kind, "format": "json", "app_label": "autoscaler", "url": "no-such-page"}
    url = re.sub(r"\(\?P<(\w+)>[^()]*\)", lambda g: groups[g.group(1)], url)
    url = url.replace("^", "").replace("$", "").replace("\\.", ".").replace("/?", "")
    assert "<" not in url and "(" not in url, (route, url)
    return "/" + url


# ---- the tenants -----------------------------------------------------------------------------------------
@dataclass
class World:
    alice: object
    bob: object
    staff: object
    app: m.Application
    bobs_app: m.Application
    real: Names
    missing: Names


@pytest.fixture
def world(alice, bob, staff) -> World:
    """alice's application with ticks, decisions, a deployment, a what-if run and a place in the region's
    control state (a waiting request, a consolidation, replicas on a node); bob has an application of his own."""
    app = simulated_pipeline(SECRET_APP, n_operators=2, owner="alice", om_policy="threshold", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 3):
        run_tick(app.pk, slot)
    bobs_app = simulated_pipeline(
        "bobs-app", n_operators=1, owner="bob", om_policy="threshold", rate_scale=1.0
    )
    region = app.regions.get()
    operator = app.operators.filter(deployment__isnull=False).first()
    deployment = m.Deployment.objects.get(operator=operator)
    WaitingRequest.objects.create(
        region=region, application=app, operator=operator, node_type="A1", since_slot=BASE_SLOT,
        last_slot=BASE_SLOT + 2, reason=f"application '{SECRET_APP}' waits for a slot",
    )  # fmt: skip
    Consolidation.objects.create(
        region=region, slot=BASE_SLOT, application=app, moves=[], frees=["node-7"], reason="frees node-7"
    )
    RegionNode.objects.create(
        region=region, node_id="node-7", node_type="A1", state="ready",
        replicas=[f"{app.pk}/{operator.name}"], reason=f"acquired for application '{SECRET_APP}'",
    )  # fmt: skip
    run = WhatIfRun.objects.create(application=app, owner=app.owner, params={})
    decision = Decision.objects.filter(application=app).first()
    real = Names(
        SECRET_APP, operator.name, deployment.name, region.name, region.catalog.name, decision.pk, run.pk
    )
    # a missing deployment is named like alice's (``<application>-<operator>``) so that echoed names compare
    missing_deployment = deployment.name.replace(SECRET_APP, MISSING)
    missing = Names(MISSING, operator.name, missing_deployment, MISSING, MISSING, MISSING_PK, MISSING_PK)
    return World(app.owner, bob, staff, app, bobs_app, real, missing)


def session(user=None) -> Client:
    client = Client()
    if user is not None:
        client.force_login(user)
    return client


def token(user=None, key: str | None = None) -> APIClient:
    client = APIClient()
    if user is not None or key:
        client.credentials(HTTP_AUTHORIZATION=f"Token {key or Token.objects.get_or_create(user=user)[0].key}")
    return client


BOOKKEEPING = {"last_used_at"}  # a token's last use moves with every use; it is no tenant's data


def snapshot() -> dict[str, list[dict]]:
    """Every row of the project's own models (resources, control state, ingest, dashboard)."""
    labels = {"autoscaler", "control", "ingest", "dashboard"}
    return {
        model._meta.label: [
            {k: v for k, v in row.items() if k not in BOOKKEEPING}
            for row in model.objects.order_by("pk").values()
        ]
        for model in apps.get_models()
        if model._meta.app_label in labels
    }


def call(client, method: str, url: str):
    if method == "get":
        return client.get(url)
    if isinstance(client, APIClient):
        return getattr(client, method)(url, {}, format="json")
    return getattr(client, method)(url, {})


def same_answer(theirs, nothing) -> None:
    """Another tenant's object answers as a missing one: same status and, for JSON, the same body once the name
    the caller sent (an error message may echo it) is set aside; HTML pages must not contain the name at all."""
    assert theirs.status_code == nothing.status_code, (theirs.status_code, nothing.status_code)
    if theirs.get("Content-Type", "").startswith("application/json"):
        assert theirs.content.replace(SECRET_APP.encode(), b"<name>") == nothing.content.replace(
            MISSING.encode(), b"<name>"
        ), (theirs.content[:300], nothing.content[:300])
    else:
        assert SECRET_APP.encode() not in theirs.content, theirs.content[:300]


def assert_hidden(client, url_real: str, url_missing: str, methods=("get", *WRITES)) -> list[int]:
    """``client`` gets for the other tenant's object what it gets for a missing one (see ``same_answer``)."""
    statuses = []
    for method in methods:
        theirs, nothing = call(client, method, url_real), call(client, method, url_missing)
        try:
            same_answer(theirs, nothing)
        except AssertionError as exc:
            raise AssertionError(f"{method.upper()} {url_real}: {exc}") from None
        assert theirs.status_code not in range(200, 300) or method == "get", (method, url_real)
        statuses.append(theirs.status_code)
    return statuses


# ---- one test per class ----------------------------------------------------------------------------------
def test_tenant_pages(world):
    """Dashboard, data, agents, what-if (page, status), decisions, deployments, edit/delete/state/manifest."""
    before = snapshot()
    for route in routes_of("tenant-pages"):
        real, missing = fill(route, world.real), fill(route, world.missing)
        for other in (world.bob, world.staff):
            for status in assert_hidden(session(other), real, missing, ("get", "post")):
                assert status in (404, 405), (route, status)
        anonymous = session().get(real)
        if real.endswith(".json"):  # the pages' JSON data: 401 in the API's error format
            assert anonymous.status_code == 401 and SECRET_APP.encode() not in anonymous.content, route
        else:
            assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/"), (
                route
            )
    assert snapshot() == before
    for route in routes_of("tenant-pages"):
        assert session(world.alice).get(fill(route, world.real)).status_code in (200, 405), route


def test_own_pages_list_only_the_users_own_rows(world):
    before = snapshot()
    for route in routes_of("own-pages"):
        url = fill(route, world.real)
        for other in (world.bob, world.staff):
            response = session(other).get(url)
            assert response.status_code == 200 and SECRET_APP.encode() not in response.content, (url, other)
            assert SECRET_APP.encode() not in session(other).post(url, {}).content, url
        anonymous = session().get(url)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/"), url
    assert snapshot() == before
    for url in ("/", "/deployments/", "/decisions/", "/manifests/export/"):  # the owner sees it there
        assert SECRET_APP in session(world.alice).get(url).text, url


def test_shared_pages_are_read_by_all_and_written_by_staff_only(world):
    before = snapshot()
    for route in routes_of("shared-pages"):
        real = fill(route, world.real)
        for user in (world.alice, world.bob):
            client = session(user)
            read = client.get(real)
            assert read.status_code in (200, 403), (real, read.status_code)  # edit forms: staff only
            assert SECRET_APP.encode() not in read.content, real
            write = client.post(real, {})
            if re.search(r"/(new|edit|delete)/$", real):
                assert write.status_code in (403, 405), (real, write.status_code)
            else:  # a list page: a POST shows the list again (the snapshot shows nothing changed)
                assert write.status_code in (200, 403, 405), (real, write.status_code)
            assert SECRET_APP.encode() not in write.content, real
        anonymous = session().get(real)
        assert anonymous.status_code == 302 and anonymous["Location"].startswith("/accounts/login/"), real
        assert SECRET_APP.encode() not in session(world.staff).get(real).content, real
    assert snapshot() == before


def test_tenant_api(world):
    """Applications and deployments (list, detail, history, format suffixes) through the REST API."""
    before = snapshot()
    for route in routes_of("tenant-api"):
        real, missing = fill(route, world.real), fill(route, world.missing)
        listing = real == missing  # list routes have no name in them
        for other in (world.bob, world.staff):
            if listing:
                response = token(other).get(real)
                assert response.status_code == 200 and SECRET_APP.encode() not in response.content, real
            else:
                assert_hidden(token(other), real, missing)
        assert token().get(real).status_code == 401, real
        assert session().get(real).status_code == 401, real
    # a reference to another tenant's application is as unknown as a missing one
    deployment = {
        "apiVersion": "autoscaler/v1", "kind": "Deployment", "metadata": {"name": "bobs-grab"},
        "spec": {"application": SECRET_APP, "operator": world.real.operator, "region": world.real.region,
                 "replicas": {"A1": 1}},
    }  # fmt: skip
    grab = token(world.bob).post("/api/v1/deployments/", deployment, format="json")
    nothing = token(world.bob).post(
        "/api/v1/deployments/",
        {**deployment, "spec": {**deployment["spec"], "application": MISSING}},
        format="json",
    )
    assert grab.status_code == nothing.status_code == 400, grab.content[:300]
    assert grab.content.replace(SECRET_APP.encode(), MISSING.encode()) == nothing.content  # echoes input only
    assert snapshot() == before
    for route in routes_of("tenant-api"):
        mine = token(world.alice).get(fill(route, world.real))
        assert mine.status_code == 200, route
        if "history" not in route:  # a history lists replica changes (none yet), not names
            assert SECRET_APP.encode() in mine.content, route


def test_apply_cannot_reach_another_tenants_objects(world):
    before = snapshot()
    for other in (world.bob, world.staff):
        doc = {
            "apiVersion": "autoscaler/v1", "kind": "Deployment", "metadata": {"name": "grab"},
            "spec": {"application": SECRET_APP, "operator": world.real.operator, "region": world.real.region,
                     "replicas": {"A1": 1}},
        }  # fmt: skip
        response = token(other).post("/api/v1/apply/", {"items": [doc]}, format="json")
        missing = token(other).post(
            "/api/v1/apply/",
            {"items": [{**doc, "spec": {**doc["spec"], "application": MISSING}}]},
            format="json",
        )
        assert response.status_code == missing.status_code == 400, response.content[:300]
    assert token().post("/api/v1/apply/", {"items": []}, format="json").status_code == 401
    assert snapshot() == before


def test_tenant_control_api(world):
    """Summary, decisions, rails, agents (export, import, reset) of an application."""
    before = snapshot()
    for route in routes_of("tenant-control"):
        real, missing = fill(route, world.real), fill(route, world.missing)
        for other in (world.bob, world.staff):
            for status in assert_hidden(token(other), real, missing):
                assert status in (404, 405), (real, status)
        assert token().get(real).status_code == 401, real
    assert snapshot() == before
    for route in routes_of("tenant-control"):
        assert token(world.alice).get(fill(route, world.real)).status_code == 200, route


def test_region_control_view_shows_other_tenants_to_staff_only(world):
    """A region is shared, its control state is not: a non-staff user sees only their own applications in it
    (waiting requests, consolidations, placements); staff see all of it."""
    (route,) = routes_of("region-control")
    url = fill(route, world.real)
    before = snapshot()
    staff_view = token(world.staff).get(url)
    assert staff_view.status_code == 200 and SECRET_APP.encode() in staff_view.content  # the data is there
    for user in (world.bob, world.alice):
        response = token(user).get(url)
        assert response.status_code == 200, user
        body = response.content.decode()
        if user == world.bob:
            assert SECRET_APP not in body, "another tenant's application in a region's control state"
            assert f'"{world.app.pk}/' not in body, "another tenant's placements in a region's control state"
        change = token(user).put(url, {"rmPeriodS": 60}, format="json")
        assert change.status_code == 403, change.content[:300]
    assert token().get(url).status_code == 401
    assert token(world.bob).get(fill(route, world.missing)).status_code == 404
    assert snapshot() == before


def _ingest_tokens() -> object:
    """``autoscaler.ingest.tokens`` (per-application ingest tokens)."""
    return importlib.import_module("autoscaler.ingest.tokens")


def test_ingest_with_user_tokens(world):
    before = snapshot()
    for route in routes_of("ingest"):
        real, missing = fill(route, world.real), fill(route, world.missing)
        for other in (world.bob, world.staff):
            for status in assert_hidden(token(other), real, missing):
                assert status in (404, 405), (real, status)
        assert (
            token().get(real).status_code == 401 and token().post(real, {}, format="json").status_code == 401
        )
    assert snapshot() == before
    desired = fill("api/v1/ingest/<str:application>/<str:operator>/desired", world.real)
    assert token(world.alice).get(desired).status_code == 200


def test_ingest_tokens_reach_their_own_application_only(world):
    tokens = _ingest_tokens()
    alices, bobs = tokens.issue(world.app), tokens.issue(world.bobs_app)
    before = snapshot()
    for route in routes_of("ingest"):
        real, missing = fill(route, world.real), fill(route, world.missing)
        statuses = assert_hidden(token(key=bobs), real, missing)
        assert all(s in (401, 403, 404, 405) for s in statuses), (real, statuses)
    # an ingest token opens nothing but the ingest endpoints
    for route in all_routes():
        if class_of(route) in ("ingest", "public-docs", "auth-pages", "admin", "token-endpoint"):
            continue
        url = fill(route, world.real)
        response = token(key=alices).get(url)
        assert response.status_code in (302, 401, 403, 404), (url, response.status_code)
        assert SECRET_APP.encode() not in response.content, url
    assert snapshot() == before
    desired = fill("api/v1/ingest/<str:application>/<str:operator>/desired", world.real)
    assert token(key=alices).get(desired).status_code == 200


def test_metrics(world, settings):
    settings.METRICS_TOKEN = ""
    (route,) = routes_of("metrics")
    url = fill(route, world.real)
    for user, status in ((None, 401), (world.alice, 403), (world.bob, 403), (world.staff, 200)):
        for client in (session(user), token(user)):
            response = client.get(url)
            assert response.status_code == status, (user, response.status_code)
            assert (SECRET_APP.encode() in response.content) == (status == 200), user


def test_shared_api_is_read_by_all_and_written_by_staff_only(world):
    before = snapshot()
    for route in routes_of("shared-api"):
        url = fill(route, world.real)
        for user in (world.alice, world.bob):
            response = token(user).get(url)
            assert response.status_code == 200 and SECRET_APP.encode() not in response.content, url
            for method in WRITES:
                assert call(token(user), method, url).status_code in (403, 405), (method, url)
        assert token().get(url).status_code == 401, url
        assert SECRET_APP.encode() not in token(world.staff).get(url).content, url
    assert snapshot() == before


def test_open_routes_carry_no_tenant_data(world):
    """The schema and docs pages, the API root, the token endpoint, login/logout/password pages: no tenant's
    objects in any answer, to anyone."""
    cache.clear()
    before = snapshot()
    for name in ("public-docs", "api-root", "token-endpoint", "auth-pages"):
        for route in routes_of(name):
            url = fill(route, world.real).replace(f"/{SECRET_APP}/", "/x/")
            for user in (None, world.alice, world.bob, world.staff):
                response = session(user).get(url)
                assert response.status_code < 500, (url, response.status_code)
                if user is not world.alice:
                    assert SECRET_APP.encode() not in response.content, (url, user)
    assert token().get("/api/v1/").status_code == 401
    assert snapshot() == before


def test_admin_is_for_staff_with_permissions_only(world):
    """Non-staff users and anonymous callers are sent to the admin login; a staff user without model permissions
    (the staff of these tests) is refused every model page and sees no tenant's objects."""
    before = snapshot()
    for route in routes_of("admin"):
        url = re.sub(r"<(path:)?(object_id|id|content_type_id)>", str(world.app.pk), route)
        url = fill(url.replace("<path:", "<str:"), world.real)
        for user in (None, world.alice, world.bob):
            response = session(user).get(url)
            if url == "/admin/login/":
                assert response.status_code == 200, url
            else:  # to the admin login (logout: to the admin index, which sends them to the login)
                assert response.status_code in (302, 405), (url, user, response.status_code)
                if response.status_code == 302:
                    assert response["Location"].startswith(
                        "/admin/login/" if "logout" not in url else "/admin/"
                    )
            assert SECRET_APP.encode() not in response.content, url
        response = session(world.staff).get(url)
        assert SECRET_APP.encode() not in response.content, url
        if re.search(r"^/admin/(autoscaler|control|dashboard|ingest|auth|authtoken)/\w+/", url):
            assert response.status_code in (302, 403, 404), (url, response.status_code)
    assert snapshot() == before
