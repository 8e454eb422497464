"""Spec vs status in the browser (headless Chromium against the live server): after the control loop applied a
scaling action, every page that shows a deployment shows what the engine runs (the deployments list, the
deployment's page with its history linked to the decision, the fleet's replicas and cost, the dashboard's
"Running now"); the dashboard's events table gives each denial its reason and marks the proposals the OM chose
by exploring, and a decision's page shows the badge beside the alternatives' estimated costs."""

from __future__ import annotations

import re

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, SimulatedEngine
from autoscaler.control.tick import run_tick
from autoscaler.models import Deployment
from dashboard.monitor.rollup import explored
from dashboard.tasks import rollup_all

from ..conftest import screenshot

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True)]

BASE_SLOT = 29_000_000


def engine_runs(app) -> dict[str, dict[str, int]]:
    """What the simulated engine runs per operator (node type -> replicas, zeros left out)."""
    raw = SimulatedEngine.objects.get(application=app).deployments
    return {op: {t: int(n) for t, n in dep.items() if n} for op, dep in raw.items()}


def parse_pairs(text: str, sep: str) -> dict[str, int]:
    """``"A1: 2, A2: 1"`` (sep ":") or ``"A1×2 A2×1"`` (sep "×") as a dict."""
    return {t: int(n) for t, n in re.findall(rf"([A-Za-z0-9._-]+){sep}\s*(\d+)", text)}


def test_the_status_shown_equals_the_engines_deployment_after_a_scaling_action(logged_in_page):
    pg = logged_in_page
    app = simulated_pipeline("stb", n_operators=2, owner="webuser", rate_scale=3.0)
    pg.goto(pg.base_url + "/deployments/")
    assert "running: not observed yet" in pg.locator("tr[data-name='stb-op0']").inner_text()
    slot = BASE_SLOT
    while not run_tick(app.pk, slot).applied:
        slot += 1
        assert slot < BASE_SLOT + 20, "no scaling action was applied"
    rollup_all()
    engine = engine_runs(app)
    applied = {
        d.operator.name: d for d in Decision.objects.filter(application=app, slot=slot, outcome="applied")
    }
    assert applied and any(engine[op] != {"A1": 1} for op in applied)

    pg.goto(pg.base_url + "/deployments/")
    for op in ("op0", "op1"):
        cell = pg.locator(f"tr[data-name='stb-{op}']").inner_text()
        running = cell.split("running ", 1)[1].split("(since", 1)[0]
        assert parse_pairs(running, ":") == engine[op], (op, cell)
        assert "declared A1: 1" in cell  # the spec as declared, never rewritten by the loop
        if op in applied:
            assert f"decision {applied[op].pk}" in cell

    op, decision = next(iter(applied.items()))
    pg.goto(pg.base_url + f"/deployments/stb-{op}/edit/")
    status = pg.locator("#status").inner_text().split("engine is running ", 1)[1]
    assert parse_pairs(status.split("(since", 1)[0], ":") == engine[op], status
    assert f"decision {decision.pk}" in status
    first = pg.locator("#history tbody tr").first
    assert parse_pairs(first.locator("td").nth(2).inner_text(), ":") == engine[op]
    assert first.locator("td").nth(3).inner_text() == "control"
    assert first.locator("a").get_attribute("href") == f"/decisions/{decision.pk}/"
    screenshot(pg, "status-deployment")

    prices = {
        t.name: t.price_per_hour
        for t in Deployment.objects.get(name="stb-op0").region.catalog.node_types.all()
    }
    deployed = [engine[op] for op in ("op0", "op1")]  # the operators with a Deployment (not source and sink)
    cost = sum(n * prices[t] for reps in deployed for t, n in reps.items())
    replicas = sum(n for reps in deployed for n in reps.values())
    pg.goto(pg.base_url + "/")
    row = pg.locator("tr[data-app='stb']").inner_text()
    assert f"{cost:.3f}/h" in row and f"{replicas} replicas running" in row, row

    pg.goto(pg.base_url + "/applications/stb/")
    assert pg.locator("#running-cost").inner_text() == f"{cost:.3f}/h"
    for op in ("op0", "op1"):
        text = pg.locator(f"#running-now [data-operator='{op}']").inner_text()
        assert parse_pairs(text.split(":", 1)[1], "×") == engine[op], (op, text)
    pg.wait_for_function("Number(document.getElementById('charts').dataset.rows || 0) > 0")
    screenshot(
        pg,
        "status-dashboard",
        settle=lambda size: pg.wait_for_function(
            "() => { const el = document.getElementById('charts');"
            " return el.dataset.layoutWidth === String(Math.max(300, el.clientWidth)); }"
        ),
    )


def test_events_table_gives_denial_reasons_and_marks_explored_proposals(logged_in_page):
    pg = logged_in_page
    app = simulated_pipeline("evt", n_operators=3, om_policy="ql-pds-plus", owner="webuser", rate_scale=1.5)
    for slot in range(BASE_SLOT, BASE_SLOT + 40):
        run_tick(app.pk, slot)
    rollup_all()
    proposals = list(
        Decision.objects.filter(application=app)
        .exclude(outcome__in=["no_change", "no_data"])
        .order_by("-slot")
    )
    denied = [d for d in proposals if d.outcome == "denied"]
    tried = [
        d
        for d in proposals
        if explored(d.proposal["explanation"]["action"], d.proposal["explanation"].get("alternatives"))
    ]
    assert denied and tried, (len(denied), len(tried))  # the run both denies and explores
    pg.goto(pg.base_url + "/applications/evt/?range=all")
    pg.wait_for_function(
        f"document.querySelectorAll('#events tbody tr').length === {min(len(proposals), 200)}"
    )
    rows = pg.locator("#events tbody tr")
    shown = {}
    for i in range(rows.count()):
        row = rows.nth(i)
        pk = int(row.locator("a").get_attribute("href").rstrip("/").split("/")[-1])
        cells = row.locator("td")
        shown[pk] = (cells.nth(4).inner_text(), row.locator(".badge.explored").count())
    for d in denied:
        assert shown[d.pk][0] == d.reason and d.reason, d.pk
    for d in proposals:
        expl = d.proposal["explanation"]
        assert shown[d.pk][1] == int(explored(expl["action"], expl.get("alternatives"))), d.pk

    # a decision the OM explored: its page has the badge beside the alternatives, the chosen one not the cheapest
    d = tried[0]
    pg.goto(pg.base_url + f"/decisions/{d.pk}/")
    assert pg.locator("#proposed .badge.explored").inner_text() == "explored"
    values = [float(v) for v in pg.locator("#alternatives td.num").all_inner_texts() if v != "–"]
    chosen = float(pg.locator("#alternatives tr.chosen td.num").inner_text())
    assert len(values) >= 2 and chosen > min(values)
    pg.goto(pg.base_url + "/decisions/?application=evt")
    assert pg.locator("#decision-table .badge.explored").count() >= 1
    other = next(x for x in proposals if x not in tried)
    pg.goto(pg.base_url + f"/decisions/{other.pk}/")
    assert pg.locator("#explored").count() == 0
