"""Every page of the web app in a real browser, walked from the URL configuration (a page added later is
checked without editing this test): each form control has a label, each chart a title and axis titles with
units, no page scrolls sideways at 1280x800 nor at phone width (375 px), and at both widths no text or control
overprints another (bounding boxes of every line of text and every control; inside charts, titles, legends,
tick labels and plot areas). A screenshot of every page at both widths is saved under
``test-artifacts/screenshots/`` (``page-*``). Also: a scaling-event marker on the dashboard's chart opens its
decision when clicked."""

from __future__ import annotations

import pytest
from django.urls import URLPattern, URLResolver, get_resolver

from autoscaler import models as m
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision
from autoscaler.control.tick import run_tick
from dashboard.models import WhatIfRun
from dashboard.tasks import execute

from ..conftest import (
    DESKTOP,
    PHONE,
    chart_overlaps,
    chart_problems,
    horizontal_overflow,
    screenshot,
    text_overlaps,
    too_wide,
    unlabelled_fields,
)

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BASE_SLOT = 29_000_000
#: routes that are not pages (downloads, JSON for scripts, POST-only actions)
NOT_PAGES = (".json", ".yaml", "/state/", "/export/", "/logout/")


def page_routes() -> list[str]:
    def walk(patterns, prefix=""):
        for p in patterns:
            if isinstance(p, URLResolver):
                yield from walk(p.url_patterns, prefix + str(p.pattern))
            elif isinstance(p, URLPattern):
                yield "/" + prefix + str(p.pattern)

    (app,) = [r for r in get_resolver().url_patterns if getattr(r, "namespace", None) == "dashboard"]
    (accounts,) = [r for r in get_resolver().url_patterns if str(r.pattern) == "accounts/"]
    pages = list(walk(app.url_patterns)) + list(walk(accounts.url_patterns, "accounts/"))
    return [r for r in pages if not r.endswith(NOT_PAGES)]


@pytest.fixture
def recorded(browser_user):
    """A simulated application of the browser user with 30 periods of decisions and a finished what-if run."""
    app = simulated_pipeline("walk", n_operators=2, om_policy="ql-pds-plus", owner="webuser", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 30):
        run_tick(app.pk, slot)
    run = WhatIfRun.objects.create(application=app, owner=browser_user, params={"policy": "threshold"})
    from dashboard.monitor import whatif

    run.params = whatif.validate(app, {"policy": "threshold", "range": "all"})[0]
    run.save()
    assert execute(run.pk) == "done"
    return app, run


def concrete(route: str, app: m.Application, run: WhatIfRun) -> str:
    deployment = m.Deployment.objects.filter(operator__application=app).first()
    region = app.regions.first() if hasattr(app, "regions") else m.Region.objects.first()
    values = {
        "/catalogs/": region.catalog.name,
        "/regions/": region.name,
        "/deployments/": deployment.name,
        "/decisions/": str(Decision.objects.filter(application=app, outcome="applied").first().pk),
    }
    for prefix, value in values.items():
        if route.startswith(prefix):
            return route.replace("<str:name>", value).replace("<int:pk>", value)
    return route.replace("<str:name>", app.name).replace("<int:pk>", str(run.pk))


def settle(pg) -> None:
    """Wait until the page's scripts drew what they draw (the dashboard's charts load their data first)."""
    pg.wait_for_load_state("load")
    if pg.locator("#charts").count():
        pg.wait_for_function("Number(document.getElementById('charts').dataset.rows || 0) > 0")
    if pg.locator(".js-plotly-plot, #agent-charts, #whatif-chart").count():
        pg.wait_for_function(
            "[...document.querySelectorAll('.heatmap, .curve, #whatif-chart, #charts')]"
            ".every(el => el.classList.contains('js-plotly-plot'))"
        )


def relaid(pg, size: dict) -> None:
    """Wait until the page laid itself out for the viewport ``size``: the dashboard's charts for the new width,
    plotly's responsive charts after their resize."""
    for chart in ("charts", "whatif-chart"):  # laid out by the page's script for its width
        if pg.locator(f"#{chart}.js-plotly-plot").count():
            pg.wait_for_function(
                f"() => {{ const el = document.getElementById('{chart}');"
                " return el.dataset.layoutWidth === String(Math.max(300, el.clientWidth)); }"
            )
    if pg.locator(".js-plotly-plot").count():
        pg.wait_for_timeout(400)


def shot_name(url: str) -> str:
    """``page-<path>`` with the path's slashes and query as dashes: the screenshot files of a page."""
    words = "".join(c if c.isalnum() else "-" for c in url).strip("-")
    return "page-" + ("-".join(w for w in words.split("-") if w) or "fleet")


def test_every_page_has_labels_chart_titles_and_fits_desktop_and_phone(logged_in_page, recorded):
    pg = logged_in_page
    app, run = recorded
    routes = page_routes()
    assert len(routes) >= 18, routes
    urls = [concrete(r, app, run) for r in routes] + [f"/applications/{app.name}/whatif/?run={run.pk}"]
    problems: dict[str, list[str]] = {}
    charts = 0
    shots = []
    for url in urls:
        pg.set_viewport_size(DESKTOP)
        response = pg.goto(pg.base_url + url)
        assert response.status == 200, (url, response.status)
        settle(pg)
        found = [f"unlabelled: {name}" for name in unlabelled_fields(pg)]
        found += chart_problems(pg)
        charts += pg.locator(".js-plotly-plot").count()
        for size in (DESKTOP, PHONE):
            extra = horizontal_overflow(pg, size["width"])
            if extra > 0:
                culprits = ", ".join(too_wide(pg, size["width"]))
                found.append(f"{extra} px wider than a {size['width']} px screen: {culprits}")
            pg.set_viewport_size(size)
            relaid(pg, size)
            found += [f"{size['width']} px: overlap {o}" for o in text_overlaps(pg) + chart_overlaps(pg)]
        shots += screenshot(pg, shot_name(url), settle=lambda size: relaid(pg, size))
        if found:
            problems[url] = found
    assert problems == {}, "\n".join(f"{u}: {p}" for u, ps in problems.items() for p in ps)
    assert len(shots) == 2 * len(urls) and all(p.stat().st_size > 0 for p in shots)
    assert charts >= 1 + 4 + 1  # the dashboard's, two operators' heatmaps and curves, the what-if comparison


def test_a_scaling_marker_opens_its_decision(logged_in_page, recorded):
    pg = logged_in_page
    app, _ = recorded
    pg.goto(pg.base_url + f"/applications/{app.name}/?range=all")
    settle(pg)
    # the pixel of the first applied scaling action's marker on the replicas chart
    target = pg.evaluate(
        """() => {
            const gd = document.getElementById('charts'), L = gd._fullLayout;
            const i = gd.data.findIndex(t => t.name === 'scaling actions');
            const t = gd.data[i], xa = L[t.xaxis.replace('x', 'xaxis')], ya = L[t.yaxis.replace('y', 'yaxis')];
            const box = gd.getBoundingClientRect();
            // markers of the same period overlap (one per operator): any of them may be the one clicked
            const urls = t.customdata.filter((u, k) => t.x[k] === t.x[0]);
            return {urls: urls, x: box.left + xa._offset + xa.d2p(t.x[0]), y: box.top + ya._offset + ya.d2p(t.y[0])};
        }"""
    )
    pg.evaluate(f"window.scrollTo(0, {target['y']} - 300)")
    scrolled = pg.evaluate("window.scrollY")
    pg.mouse.move(target["x"], target["y"] - scrolled)
    pg.mouse.click(target["x"], target["y"] - scrolled)
    pg.wait_for_url("**/decisions/*/")
    path = pg.url[len(pg.base_url) :]
    assert path in target["urls"], (path, target["urls"])
    d = Decision.objects.get(pk=int(path.rstrip("/").split("/")[-1]))
    assert d.application == app and d.outcome != "denied"
    assert pg.locator("#outcome").inner_text() == d.get_outcome_display()
