"""Layout of the monitoring pages in headless Chromium at 1280 and 375 px: no chart text or legend overprints
another or is cut off (bounding boxes), every dashboard chart has its own legend with one colour per node type
and per operator in every chart, the agents page's tables are whole and its heatmaps keep a usable plot area on
a phone, and the operator graph on the application form is drawn at a readable size. Screenshots of each page at
both widths are saved under ``test-artifacts/screenshots/`` (``layout-*``)."""

from __future__ import annotations

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.tick import run_tick
from dashboard.tasks import rollup_all

from ..conftest import DESKTOP, PHONE, chart_overlaps, horizontal_overflow, screenshot, text_overlaps

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BASE_SLOT = 29_000_000


@pytest.fixture
def running(browser_user):
    app = simulated_pipeline("lay", n_operators=3, om_policy="ql-pds-plus", owner="webuser", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 40):
        run_tick(app.pk, slot)
    rollup_all()
    return app


def relaid(pg, size: dict) -> None:
    """Resize the viewport and wait until the dashboard laid its charts out again for the new width."""
    pg.set_viewport_size(size)
    pg.wait_for_function(
        "() => { const el = document.getElementById('charts');"
        " return el.dataset.layoutWidth === String(Math.max(300, el.clientWidth)); }"
    )


def test_dashboard_charts_do_not_overprint_and_have_a_legend_each(logged_in_page, running):
    pg = logged_in_page
    pg.goto(pg.base_url + "/applications/lay/?range=all")
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows || 0) >= 40")
    for size in (DESKTOP, PHONE):
        relaid(pg, size)
        assert chart_overlaps(pg) == [], size
        # one legend per chart (six), each listing only its chart's series
        legends = pg.evaluate(
            """() => { const el = document.getElementById('charts'); const by = {};
                 el.data.forEach((t) => { (by[t.legend] = by[t.legend] || new Set()).add(t.yaxis); });
                 return Object.fromEntries(Object.entries(by).map(([k, v]) => [k, [...v]])); }"""
        )
        assert sorted(legends) == ["legend"] + [f"legend{i}" for i in range(2, 7)]
        assert all(len(axes) == 1 for axes in legends.values())
        assert pg.locator("#charts g[class^=legend] g.traces").count() >= 12
    assert horizontal_overflow(pg) <= 0
    # stable colours: a node type has one colour in both cost charts, an operator one colour (its node types as
    # shades), and different operators different colours
    colours = pg.evaluate(
        """() => document.getElementById('charts').data.filter((t) => t.legendgroup)
                   .map((t) => [t.legendgroup, t.yaxis, t.line.color])"""
    )
    by_group: dict[str, set[str]] = {}
    for group, _, colour in colours:
        by_group.setdefault(group, set()).add(colour)
    assert all(len(c) == 1 for c in by_group.values()), by_group
    ops = [next(iter(c)) for g, c in by_group.items() if g.startswith("op-")]
    assert len(ops) == 3 and len(set(ops)) == 3
    types = {g for g, axis, _ in colours if g.startswith("type-") and axis == "y4"}
    assert types and types == {g for g, axis, _ in colours if g.startswith("type-") and axis == "y5"}
    screenshot(pg, "layout-dashboard", settle=lambda size: relaid(pg, size))


def test_agents_page_labels_tables_and_heatmaps_fit_desktop_and_phone(logged_in_page, running):
    pg = logged_in_page
    pg.goto(pg.base_url + "/applications/lay/agents/")
    pg.wait_for_function("document.querySelectorAll('.heatmap.js-plotly-plot').length === 3")
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        pg.wait_for_timeout(400)  # plotly's responsive resize and the narrow re-layout
        assert chart_overlaps(pg) == [], size
        for table in ("#am-bounds", "#am-weights"):  # whole: no column cut off or scrolled away
            cut = pg.evaluate(
                f"() => {{ const t = document.querySelector('{table}');"
                " return t.getBoundingClientRect().width - t.parentElement.clientWidth; }"
            )
            assert cut <= 1, (table, size, cut)
        plot_width = pg.evaluate(
            "() => Math.min(...[...document.querySelectorAll('.heatmap .nsewdrag')]"
            ".map((r) => r.getBoundingClientRect().width))"
        )
        assert plot_width >= (150 if size is PHONE else 600), (size, plot_width)
    assert horizontal_overflow(pg) <= 0
    screenshot(pg, "layout-agents", settle=lambda size: pg.wait_for_timeout(400))


def test_operator_graph_on_the_application_form_is_readable(logged_in_page, running):
    pg = logged_in_page
    pg.goto(pg.base_url + "/applications/lay/edit/")
    pg.wait_for_selector("#dag svg g.node")
    for size in (DESKTOP, PHONE):
        pg.set_viewport_size(size)
        pg.wait_for_timeout(200)
        # every operator box is drawn at (nearly) its natural 34-px height: the drawing is not scaled to a sliver
        heights = pg.evaluate(
            "() => [...document.querySelectorAll('#dag svg g.node rect')].map((r) => r.getBoundingClientRect().height)"
        )
        assert len(heights) == 5 and min(heights) >= 28, (size, heights)
        svg_h = pg.evaluate("() => document.querySelector('#dag svg').getBoundingClientRect().height")
        assert svg_h >= 60, (size, svg_h)
    screenshot(pg, "layout-app-form", settle=lambda size: pg.wait_for_timeout(200))


def test_the_overlap_check_finds_overprinted_text_and_controls(page):
    """The bounding-box check the page tests rely on: text printed over text or over a control is found, text
    beside it, inside a button or scrolled out of its container is not."""
    page.set_content(
        """<div style="position:relative;height:200px;font:16px sans-serif">
             <span id="a" style="position:absolute;left:10px;top:10px">First label</span>
             <span id="b" style="position:absolute;left:40px;top:14px">Second label</span>
             <input id="c" style="position:absolute;left:300px;top:60px;width:120px" aria-label="c">
             <span style="position:absolute;left:320px;top:64px">under</span>
             <button style="position:absolute;left:10px;top:120px">Inside a button</button>
             <span style="position:absolute;left:200px;top:120px">Beside it</span>
             <span class="visually-hidden" style="position:absolute;left:10px;top:120px">hidden the accessible way</span>
           </div>"""
    )
    found = text_overlaps(page)
    assert any('"First label"' in f and '"Second label"' in f for f in found), found
    assert any("input#c" in f and '"under"' in f for f in found), found
    assert len(found) == 2, found
    page.evaluate("document.getElementById('b').style.top = '60px'; document.getElementById('c').remove()")
    assert text_overlaps(page) == []
