"""Browser tests of the monitoring pages (headless Chromium via Playwright against the live server).

A running simulated application is driven by real control ticks (``run_tick``, the function the Celery task
runs) while its dashboard is open: the charts and the scaling events appear without a reload; a scaling event
opens its decision; the agent inspector draws the learned policy; a what-if is rejected with an invalid R_max,
then runs in the background (the real task body in a thread, as a worker would run it) while the page shows its
progress and finally the side-by-side comparison. Screenshots of every page at 1280x800 and 375x812.
"""

from __future__ import annotations

import threading

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, Tick
from autoscaler.control.tick import run_tick
from dashboard.monitor.views import whatif as whatif_view
from dashboard.tasks import rollup_all

from ..conftest import horizontal_overflow, screenshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BASE_SLOT = 29_000_000


def drive(app, first: int, n: int) -> None:
    """``n`` control ticks, then the rollup the ``dashboard.rollup`` beat task builds between two ticks."""
    for slot in range(first, first + n):
        run_tick(app.pk, slot)
    rollup_all()


def test_decisions_appear_on_the_dashboard_and_open(logged_in_page):
    pg = logged_in_page
    app = simulated_pipeline("live", n_operators=2, om_policy="ql-pds-plus", owner="webuser", rate_scale=1.5)
    pg.goto(pg.base_url + "/applications/live/?range=all")
    pg.wait_for_function("document.getElementById('chart-status').textContent.includes('No periods')")
    assert pg.locator("#events tbody tr").first.inner_text().startswith("No scaling")
    screenshot(pg, "monitor-dashboard-empty")
    drive(app, BASE_SLOT, 40)  # the control loop runs while the page is open
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows || 0) >= 40", timeout=20_000)
    granted = Decision.objects.filter(application=app).exclude(outcome__in=["no_change", "no_data"]).count()
    assert granted > 0
    assert pg.locator("#events tbody tr").count() == min(granted, 200)
    # six charts with their titles and units, on one shared time axis
    text = pg.locator("#charts").text_content()
    for title in (
        "Input rate and processing capacity (tuples/s)",
        "End-to-end response time vs R_max (ms)",
        "Budget burn-down",
        "Cost per hour by node type",
        "Cumulative cost by node type",
        "Replicas per operator",
    ):
        assert title in text
    assert pg.locator("#charts .main-svg").count() >= 1
    assert horizontal_overflow(pg) <= 0
    screenshot(pg, "monitor-dashboard")
    # the range picker reloads the data without a page load
    pg.get_by_label("Last hour").check()
    pg.wait_for_function("location.search === '?range=hour'")
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows) === 40")
    # zooming in (as a drag on any chart does) fetches finer data of that window only; double-click resets
    pg.evaluate(
        """() => { const el = document.getElementById('charts'); const x = el.data[0].x;
           const f = (ms) => new Date(ms).toISOString().replace('T', ' ').slice(0, 19);
           return Plotly.relayout(el, {'xaxis2.range[0]': f(x[10]), 'xaxis2.range[1]': f(x[19])}); }"""
    )
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows) === 10")
    pg.evaluate("() => Plotly.relayout(document.getElementById('charts'), {'xaxis.autorange': true})")
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows) === 40")
    # open the newest scaling event: its decision page
    link = pg.locator("#events tbody tr a").first
    href = link.get_attribute("href")
    link.click()
    pg.wait_for_url("**" + href)
    d = Decision.objects.get(pk=int(href.rstrip("/").split("/")[-1]))
    assert pg.locator("#outcome").inner_text() == d.get_outcome_display()
    assert pg.locator("#alternatives tbody tr").count() == len(d.proposal["explanation"]["alternatives"])
    assert pg.locator("#alternatives tr.chosen").count() == 1
    assert d.reason in pg.locator("#reason").inner_text()
    screenshot(pg, "monitor-decision")
    # the decision explorer, filtered on the operator
    pg.get_by_role("link", name=f"All decisions of {d.operator.name}").click()
    pg.wait_for_selector("#decision-table")
    assert pg.locator("#decision-table tbody tr").count() == 40
    pg.get_by_label("Granted or denied").select_option("granted")
    pg.get_by_role("button", name="Filter").click()
    pg.wait_for_url("**granted=granted**")
    expected = Decision.objects.filter(application=app, operator=d.operator, granted=True).count()
    assert pg.locator("#decision-table tbody tr[data-outcome]").count() == expected
    screenshot(pg, "monitor-decisions")
    # the agent inspector: one learned-policy heatmap and one learning curve per operator
    pg.goto(pg.base_url + "/applications/live/agents/")
    pg.wait_for_selector(".heatmap .main-svg")
    assert pg.locator(".heatmap .main-svg").count() >= 2 and pg.locator(".curve .main-svg").count() >= 2
    assert "Learned policy of op0" in pg.locator(".heatmap").first.text_content()
    screenshot(pg, "monitor-agents")


def test_whatif_rejects_then_runs_with_progress(logged_in_page, monkeypatch):
    pg = logged_in_page
    app = simulated_pipeline("wi", n_operators=2, om_policy="ql-pds-plus", owner="webuser", rate_scale=1.5)
    drive(app, BASE_SLOT, 30)
    gate = threading.Event()
    threads: list[threading.Thread] = []

    def enqueue(run_id: int) -> None:  # a worker: the real task body, in the background
        from django.db import connection

        from dashboard.tasks import execute

        def work() -> None:
            gate.wait(20)  # hold the run so the page shows it queued before it finishes
            try:
                execute(run_id)
            finally:
                connection.close()

        t = threading.Thread(target=work, daemon=True)
        threads.append(t)
        t.start()

    monkeypatch.setattr(whatif_view, "_enqueue", enqueue)
    pg.goto(pg.base_url + "/applications/wi/whatif/")
    pg.get_by_label("Operator Manager policy").select_option("threshold")
    pg.get_by_label("R_max (ms)").fill("0")
    pg.get_by_role("button", name="Run what-if").click()
    assert "must be > 0" in pg.locator("[data-field='rMaxMs'] .errorlist").inner_text()
    assert pg.locator("#form-errors").is_visible()
    screenshot(pg, "monitor-whatif-rejected")
    pg.get_by_label("R_max (ms)").fill("80")
    pg.get_by_role("button", name="Run what-if").click()
    pg.wait_for_url("**/whatif/?run=*")
    assert pg.locator("#whatif-state").inner_text().startswith("queued")
    gate.set()
    pg.wait_for_function("document.getElementById('whatif-run').dataset.status === 'done'", timeout=30_000)
    assert pg.locator("#whatif-progress").evaluate("el => el.value") == 1
    table = pg.locator("#whatif-compare").inner_text()
    assert "What happened" in table and "What-if (simulated)" in table and "Cost per hour" in table
    assert pg.locator("#whatif-chart .main-svg").count() >= 1
    screenshot(pg, "monitor-whatif")
    for t in threads:
        t.join(10)


def test_a_saturated_period_is_marked_and_r_max_stays_readable(logged_in_page):
    """Saturated periods (unbounded response time) are drawn as markers "> R_max, saturated" at the top of the
    response-time axis, and the axis never reaches beyond 3 x R_max, so the R_max line stays readable."""
    pg = logged_in_page
    app = simulated_pipeline("hot", n_operators=1, om_policy="threshold", owner="webuser", rate_scale=6.0)
    drive(app, BASE_SLOT, 12)
    pg.goto(pg.base_url + "/applications/hot/?range=all")
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows || 0) >= 12", timeout=20_000)
    info = pg.evaluate(
        """() => {
        const gd = document.querySelector('#charts');
        const t = gd.data.find(tr => tr.name && tr.name.startsWith('saturated'));
        const i = gd.data.indexOf(t);
        const drawn = gd.querySelectorAll('.scatterlayer .trace')[i];
        return {x: t ? t.x : [], y: t ? t.y : [], text: t ? t.text : [], range: gd.layout.yaxis2.range,
                points: drawn ? drawn.querySelectorAll('path.point').length : 0};
    }"""
    )
    # one marker at the start of every run of periods the engine reported unbounded (a path without a time)
    unbounded = [
        t.slot
        for t in Tick.objects.filter(application=app, status="done").order_by("slot")
        if any(v is None for v in t.metrics["path_response_time_s"].values())
    ]
    starts = [s for s in unbounded if s - 1 not in unbounded]
    assert starts, "the run never saturated"
    assert info["x"] == [s * app.om_period_s * 1000.0 for s in starts]
    assert info["points"] == len(starts)
    assert all(t.startswith("> R_max, saturated") for t in info["text"])
    # drawn above the R_max line, inside an axis that stops at 3 x R_max: R_max stays readable
    assert all(app.r_max_ms < y <= info["range"][1] for y in info["y"])
    assert info["range"][1] <= 3 * app.r_max_ms * 1.05 + 1e-9
    screenshot(pg, "monitor-dashboard-saturated")
