"""Monitoring pages with the Django client: a real simulated application driven by real control ticks
(``run_tick``), its rollup, the dashboard's JSON, the decision explorer, the agent inspector and the what-if
simulation (computed for real by the application simulator), with owner isolation on every page."""

from __future__ import annotations

import math

import numpy as np
import pytest
from django.db.models import Sum

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, Tick
from autoscaler.control.tick import run_tick
from dashboard.models import SeriesChunk, WhatIfRun
from dashboard.monitor import rollup, whatif
from dashboard.tasks import execute, rollup_all

pytestmark = pytest.mark.django_db

BASE_SLOT = 29_000_000  # 2025-02-20, 60 s periods: rates of the Taxi trace that make the agents scale
TICKS = 60


def drive(app, n: int, first: int = BASE_SLOT) -> None:
    for slot in range(first, first + n):
        run_tick(app.pk, slot)


@pytest.fixture
def recorded(alice):
    app = simulated_pipeline("rec", n_operators=2, om_policy="ql-pds-plus", owner="alice", rate_scale=1.5)
    drive(app, TICKS)
    rollup_all()  # what the dashboard.rollup beat task does between two ticks
    return app


def urls(app, decision_id: int, run_id: int) -> list[str]:
    n = app.name
    return [
        f"/applications/{n}/",
        f"/applications/{n}/data.json",
        f"/applications/{n}/agents/",
        f"/applications/{n}/whatif/",
        f"/applications/{n}/whatif/{run_id}.json",
        f"/decisions/{decision_id}/",
    ]


def test_pages_need_a_login_and_other_owners_get_404(recorded, alice_client, bob_client, client):
    d = Decision.objects.filter(application=recorded).first()
    run = WhatIfRun.objects.create(application=recorded, owner=recorded.owner, params={})
    for url in urls(recorded, d.id, run.id):
        assert alice_client.get(url).status_code == 200, url
        assert bob_client.get(url).status_code == 404, url
        anonymous = client.get(url)
        if url.endswith(".json"):
            assert anonymous.status_code == 401 and anonymous.json()["errors"][0]["loc"] == "auth"
        else:
            assert anonymous.status_code == 302 and "/accounts/login/" in anonymous["Location"]
    # bob's decision list shows none of alice's decisions, and he cannot filter on her application
    r = bob_client.get("/decisions/")
    assert r.status_code == 200 and r.context["page"].paginator.count == 0
    r = bob_client.get("/decisions/?application=rec")
    assert r.context["form"].errors["application"] and r.context["page"].paginator.count == 0
    # a bob's what-if POST on alice's application is a 404 and creates nothing
    before = WhatIfRun.objects.count()
    assert bob_client.post("/applications/rec/whatif/", {"policy": "threshold"}).status_code == 404
    assert WhatIfRun.objects.count() == before


def test_rollup_matches_the_ledger_and_catches_up_incrementally(recorded, monkeypatch):
    SeriesChunk.objects.filter(application=recorded).delete()
    monkeypatch.setattr(rollup, "BATCH_TICKS", 7)  # several batches, the last one partial
    assert rollup.catch_up(recorded, max_ticks=25) == 25  # a task run rolls up a bounded part
    assert rollup.catch_up(recorded) == TICKS - 25
    assert rollup.catch_up(recorded) == 0  # idempotent
    frame = rollup.load(recorded)
    assert len(frame) == TICKS
    slots = list(Tick.objects.filter(application=recorded).order_by("slot").values_list("slot", flat=True))
    assert np.array_equal(frame.times, np.array(slots) * 60.0)
    total = Decision.objects.filter(application=recorded).aggregate(s=Sum("resource_cost"))["s"]
    assert math.isclose(float(np.nansum(frame.col("cost"))), total, rel_tol=1e-5)
    by_type = sum(np.nansum(frame.col(c)) for c in frame.prefixed("cost:"))
    assert math.isclose(by_type, total, rel_tol=1e-5)
    # replicas per operator and node type are those of the decisions
    last = Decision.objects.filter(application=recorded, slot=slots[-1], operator__name="op0").get()
    for t in ("A1", "A2", "A3"):
        assert frame.col(f"replicas:op0:{t}")[-1] == last.deployment.get(t, 0)
    # more ticks: only they are added
    drive(recorded, 5, BASE_SLOT + TICKS)
    assert rollup.catch_up(recorded) == 5
    assert len(rollup.load(recorded)) == TICKS + 5
    assert SeriesChunk.objects.filter(application=recorded).count() == 1


def test_dashboard_json_series_are_downsampled_and_consistent(recorded, alice_client):
    r = alice_client.get("/applications/rec/data.json?range=all")
    assert r.status_code == 200
    d = r.json()
    assert d["rows"] == TICKS and d["rMaxMs"] == 100.0 and not d["empty"]
    for key in ("rate", "capacity", "rt"):
        assert len(d[key]["x"]) == len(d[key]["y"]) == TICKS
    # every type of the catalog is named (stable colours); only those the decisions paid for are stacked. Which
    # types an exploring agent used depends on its seed (the operator's primary key, which a PostgreSQL
    # sequence does not reset between tests), so the expectation comes from the recorded decisions.
    assert d["nodeTypes"] == ["A1", "A2", "A3"]
    paid = {
        t
        for dep in Decision.objects.filter(application=recorded).values_list("deployment", flat=True)
        for t, k in dep.items()
        if k > 0
    }
    assert d["cost"]["types"] == [t for t in d["nodeTypes"] if t in paid] and paid
    ops = {s["operator"] for s in d["replicas"]["series"]}
    assert ops == {"op0", "op1"}
    # at most `points` points per series, and the peak input rate survives the reduction
    small = alice_client.get("/applications/rec/data.json?range=all&points=20").json()
    for key in ("rate", "capacity", "rt"):
        assert len(small[key]["x"]) <= 20
    assert len(small["burn"]["x"]) <= 20 and len(small["replicas"]["x"]) <= 20
    assert max(small["rate"]["y"]) == max(d["rate"]["y"])
    # the burn-down ends at the violated / reconfigured fractions of the whole range
    frame = rollup.load(recorded)
    assert math.isclose(d["burn"]["violation"][-1], float(np.nanmean(frame.col("violated"))), rel_tol=1e-3)
    assert math.isclose(
        d["burn"]["reconfiguration"][-1], float(frame.col("reconfigured").mean()), rel_tol=1e-3
    )
    # scaling events: every granted or denied proposal, each linking to its decision page
    proposals = Decision.objects.filter(application=recorded).exclude(outcome__in=["no_change", "no_data"])
    assert len(d["events"]) == proposals.count() > 0
    ev = d["events"][0]
    assert ev["url"] == f"/decisions/{ev['id']}/"
    assert alice_client.get(ev["url"]).status_code == 200
    # each with the AM's reason (why it was denied) and whether the OM explored
    by_id = {x.pk: x for x in proposals}
    for e in d["events"]:
        dec = by_id[e["id"]]
        assert e["reason"] == dec.reason and e["reason"]
        expl = dec.proposal["explanation"]
        assert e["explored"] == rollup.explored(expl.get("action", ""), expl.get("alternatives"))
    # a zoomed window returns only its rows
    t0, t1 = d["rate"]["x"][10], d["rate"]["x"][19]
    z = alice_client.get(f"/applications/rec/data.json?start={t0}&end={t1}").json()
    assert z["rows"] == 10 and z["rate"]["x"][0] == t0 and z["rate"]["x"][-1] == t1
    # the last hour of the recorded data = 60 one-minute periods (the bounds are inclusive)
    assert alice_client.get("/applications/rec/data.json?range=hour").json()["rows"] == TICKS


@pytest.mark.parametrize(
    "query, loc",
    [
        ("range=year", "range"),
        ("start=abc", "start"),
        ("start=10&end=5", "end"),
        ("points=5", "points"),
        ("points=nan", "points"),
    ],
)
def test_dashboard_json_rejects_bad_parameters(recorded, alice_client, query, loc):
    r = alice_client.get(f"/applications/rec/data.json?{query}")
    assert r.status_code == 400
    assert r.json()["errors"][0]["loc"] == loc


def test_empty_application_dashboard(alice, alice_client):
    simulated_pipeline("fresh", owner="alice")
    page = alice_client.get("/applications/fresh/")
    assert page.status_code == 200
    # the SLO in plain language, with the declared numbers (R_max 100 ms, eta_V 0.05, 60 s periods)
    assert "R_max = 100 ms may be exceeded at most 5% of the time" in page.content.decode()
    d = alice_client.get("/applications/fresh/data.json").json()
    assert d["empty"] and d["rows"] == 0 and d["events"] == []


def test_decision_filters_and_detail(recorded, alice_client):
    all_count = Decision.objects.filter(application=recorded).count()
    r = alice_client.get("/decisions/?application=rec")
    assert r.context["page"].paginator.count == all_count == 2 * TICKS
    r = alice_client.get("/decisions/?application=rec&operator=op1")
    assert r.context["page"].paginator.count == TICKS
    assert {d.operator.name for d in r.context["page"]} == {"op1"}
    granted = Decision.objects.filter(application=recorded, granted=True).count()
    denied = Decision.objects.filter(application=recorded, outcome="denied").count()
    assert alice_client.get("/decisions/?granted=granted").context["page"].paginator.count == granted
    assert alice_client.get("/decisions/?granted=denied").context["page"].paginator.count == denied
    r = alice_client.get("/decisions/?outcome=applied")
    assert all(d.outcome == "applied" for d in r.context["page"])
    # time filter: nothing before the year 2000, everything until tomorrow
    assert alice_client.get("/decisions/?until=2000-01-01T00:00").context["page"].paginator.count == 0
    assert alice_client.get("/decisions/?since=2000-01-01T00:00").context["page"].paginator.count == all_count
    r = alice_client.get("/decisions/?since=2020-01-02T00:00&until=2020-01-01T00:00")
    assert "until" in r.context["form"].errors and r.context["page"].paginator.count == 0
    assert b"must be after From" in r.content
    r = alice_client.get("/decisions/?since=yesterday")
    assert "since" in r.context["form"].errors
    # detail of an applied decision: observed state, alternatives with estimates, reason, applied, downtime
    d = Decision.objects.filter(application=recorded, outcome="applied").first()
    assert d is not None, "the fixture's load makes the agents scale"
    page = alice_client.get(f"/decisions/{d.id}/")
    html = page.content.decode()
    assert page.context["alternatives"], "ql-pds-plus estimates every feasible action"
    assert sum(a["chosen"] for a in page.context["alternatives"]) == 1
    assert d.proposal["explanation"]["action"] in html
    assert "Input rate (tuples/s)" in html and "Measured downtime" in html
    assert d.reason in html
    for t, n in d.applied.items():
        assert f"{t}×{n}" in html


def test_decision_detail_shows_the_oms_rule_notes_with_their_reasons(recorded, alice_client):
    """A rule that shaped the decision (a scale-in withheld, planning ahead on a trend, the node limit) is shown
    with the reason the OM stored in its explanation; a decision without such notes shows none."""
    d = Decision.objects.filter(application=recorded).first()
    page = alice_client.get(f"/decisions/{d.id}/")
    assert page.context["notes"] == [] and 'class="policy-note"' not in page.content.decode()
    reason = "scale-in withheld: a change stops the job (last restart 13.0 s), and ..."
    d.proposal = {**d.proposal, "explanation": {**d.proposal["explanation"],
                                                "settling": {"withheld": [3], "restart_s": 13.0, "reason": reason},
                                                "forecast": {"horizon_periods": 2}}}  # fmt: skip
    d.save()
    page = alice_client.get(f"/decisions/{d.id}/")
    assert page.context["notes"] == [("Scale-in withheld", reason)]  # a note without a reason is not listed
    assert "OM: Scale-in withheld" in page.content.decode() and "last restart 13.0 s" in page.content.decode()


def test_agent_inspector_shows_learned_policy_curve_and_am(recorded, alice_client):
    r = alice_client.get("/applications/rec/agents/")
    assert r.status_code == 200
    charts = r.context["charts"]
    assert set(charts) == {"op0", "op1"}
    for op in ("op0", "op1"):
        m = charts[op]["map"]
        assert m["policy"] == "ql-pds-plus" and m["steps"] == TICKS - 1
        assert len(m["action"]) == len(m["labels"]) >= 1
        curve = charts[op]["curve"]["y"]
        assert len(curve) == TICKS and all(v is None or 0 <= v <= 1 for v in curve)
    html = r.content.decode()
    assert 'id="am-weights"' in html and 'id="am-bounds"' in html
    assert "op0" in html and "ms" in html


def test_agent_inspector_for_a_rule_based_policy(alice, alice_client):
    app = simulated_pipeline("rules", owner="alice", om_policy="threshold")
    drive(app, 3)
    rollup_all()
    r = alice_client.get("/applications/rules/agents/")
    assert "not tabular" in r.content.decode()
    assert "curve" in r.context["charts"]["op0"]


def test_whatif_rejects_bad_input_and_creates_nothing(recorded, alice_client):
    for data, loc in (
        ({"policy": "nope"}, "policy"),
        ({"policy": "clairvoyant"}, "policy"),  # offline-only: it needs the whole trace in advance
        ({"policy": "dp-average"}, "policy"),
        ({"policy": "ql", "params": "{bad"}, "params"),
        ({"policy": "ql", "params": '{"alpha_decay": 5}'}, "params"),
        ({"rMaxMs": "0"}, "rMaxMs"),
        ({"etaV": "1.5"}, "etaV"),
        ({"wPerf": "0.5"}, "wPerf"),
        ({"wPerf": "0.5", "wRes": "0.5", "wRcf": "0.5"}, "wPerf"),
    ):
        r = alice_client.post("/applications/rec/whatif/", data)
        assert r.status_code == 400, data
        assert loc in r.context["field_errors"], (data, r.context["field_errors"])
    assert WhatIfRun.objects.count() == 0


def test_whatif_runs_the_simulator_on_the_recorded_trace(recorded, alice_client, settings):
    r = alice_client.post(
        "/applications/rec/whatif/",
        {"policy": "threshold", "rMaxMs": "100", "etaV": "0.05", "etaR": "0.1", "range": "all"},
    )
    assert r.status_code == 302
    run = WhatIfRun.objects.get()
    assert r["Location"].endswith(f"?run={run.pk}")
    seen: list[float] = []
    res = whatif.run(recorded, run.params, seen.append)
    assert seen == sorted(seen) and len(seen) >= 10 and seen[-1] < 1.0
    assert execute(run.pk) == "done"
    run.refresh_from_db()
    assert run.status == "done" and run.progress == 1.0
    result = run.result
    assert result["steps"] == TICKS == res["steps"]
    frame = rollup.load(recorded)
    assert math.isclose(result["actual"]["totalCost"], float(np.nansum(frame.col("cost"))), rel_tol=1e-6)
    # the recorded trace is replayed as it was recorded
    assert (
        max(v for v in result["series"]["rate"] if v is not None)
        <= float(np.nanmax(frame.col("rate"))) + 1e-6
    )
    sim = result["simulated"]
    assert sim["costPerHour"] > 0 and 0 <= sim["violationFraction"] <= 1
    assert 0 <= sim["reconfigurationFraction"] <= 1
    # the same simulation again gives the same answer (deterministic seeds)
    again = whatif.run(recorded, run.params)
    assert again["simulated"]["costPerHour"] == sim["costPerHour"]
    # a stricter SLO cannot make the simulated threshold policy cheaper on the same trace
    strict = dict(run.params, rMaxMs=20.0)
    assert whatif.run(recorded, strict)["simulated"]["costPerHour"] >= sim["costPerHour"]
    status = alice_client.get(f"/applications/rec/whatif/{run.pk}.json").json()
    assert status["status"] == "done" and status["result"]["steps"] == TICKS
    # a second run of an already finished what-if does nothing
    assert execute(run.pk) == "done"


def test_whatif_without_recorded_data_fails_with_a_reason(alice, alice_client):
    app = simulated_pipeline("blank", owner="alice")
    run = WhatIfRun.objects.create(application=app, owner=alice, params=whatif.validate(app, {})[0])
    assert execute(run.pk) == "failed"
    run.refresh_from_db()
    assert "fewer than 2 recorded periods" in run.error
    assert alice_client.get(f"/applications/blank/whatif/?run={run.pk}").status_code == 200


def test_rollup_marks_no_data_periods_and_waits_for_a_pending_tick(alice):
    from autoscaler.control.models import SimulatedEngine

    app = simulated_pipeline("gaps", n_operators=1, owner="alice", om_policy="threshold")
    drive(app, 2)
    SimulatedEngine.objects.filter(application=app).update(faults={"missingSlots": [BASE_SLOT + 2]})
    drive(app, 2, BASE_SLOT + 2)  # the tick of slot +3 observes the missing period
    assert rollup.catch_up(app) == 4
    frame = rollup.load(app)
    assert frame.col("no_data").tolist() == [0.0, 0.0, 0.0, 1.0]
    assert np.isnan(frame.col("violated")[3]) and np.isnan(frame.col("rate")[3])
    # a tick still running holds back the ticks after it until it finishes
    Tick.objects.create(application=app, slot=BASE_SLOT + 4, period_s=60.0, status=Tick.Status.RUNNING)
    Tick.objects.create(application=app, slot=BASE_SLOT + 5, period_s=60.0, status=Tick.Status.NO_DATA)
    assert rollup.catch_up(app) == 0
    Tick.objects.filter(application=app, slot=BASE_SLOT + 4).update(status=Tick.Status.NO_DATA)
    assert rollup.catch_up(app) == 2
    # the dashboard counts the no-data periods out of the violation fraction
    d = monitor_data_for(app)
    assert d["rows"] == 6 and d["violatedPeriods"] == int(np.nansum(frame.col("violated")))


def monitor_data_for(app):
    from dashboard.monitor import chart_data

    return chart_data.dashboard_data(app, "all")


def test_dashboard_answers_are_cached_until_a_new_period_arrives(recorded, monkeypatch):
    from dashboard.monitor import chart_data

    calls = []
    real = chart_data._compute
    monkeypatch.setattr(chart_data, "_compute", lambda *a: calls.append(a) or real(*a))
    first = chart_data.dashboard_data(recorded, "all")
    assert chart_data.dashboard_data(recorded, "all") == first and len(calls) == 1
    chart_data.dashboard_data(recorded, "all", max_points=50)  # another question: computed
    assert len(calls) == 2
    drive(recorded, 1, BASE_SLOT + TICKS)
    # a new tick not rolled up yet: a new answer (the lag changed), still from the rollup as it is
    behind = chart_data.dashboard_data(recorded, "all")
    assert behind["rows"] == TICKS and behind["behindPeriods"] == 1 and len(calls) == 3
    assert behind["ledgerLastMs"] == behind["rolledToMs"] + 60_000.0
    rollup_all()
    fresh = chart_data.dashboard_data(recorded, "all")
    assert fresh["rows"] == TICKS + 1 and fresh["behindPeriods"] == 0 and len(calls) == 4


def test_decision_time_filter_uses_the_period_the_decision_is_about(alice, alice_client):
    """A decision written now about a period of last week is found by a filter on last week, not on today."""
    import datetime as dt

    app = simulated_pipeline("late", n_operators=1, owner="alice", om_policy="threshold")
    now = dt.datetime.now(dt.UTC).replace(second=0, microsecond=0)
    week_ago = now - dt.timedelta(days=7)
    backfilled = int(week_ago.timestamp() // 60)
    drive(app, 1, backfilled)  # run (and written) now, about a period one week ago
    d = Decision.objects.get(application=app)
    assert d.created_at >= now - dt.timedelta(minutes=5), "the row is written now"

    def found(since: dt.datetime, until: dt.datetime) -> list[int]:
        fmt = "%Y-%m-%dT%H:%M"
        r = alice_client.get(f"/decisions/?since={since.strftime(fmt)}&until={until.strftime(fmt)}")
        assert r.status_code == 200 and not r.context["form"].errors
        return [x.id for x in r.context["page"]]

    day = dt.timedelta(days=1)
    assert found(week_ago - day, week_ago + day) == [d.id]
    assert found(now - day, now + day) == []
    # the bounds are the period's time (slot * period_s): From is inclusive, Until exclusive
    t = dt.datetime.fromtimestamp(backfilled * 60, tz=dt.UTC)
    assert found(t, t + dt.timedelta(minutes=1)) == [d.id]
    assert found(t - dt.timedelta(minutes=1), t) == []
    # the table shows the period's time (as on the charts), and lists the latest period first
    drive(app, 1, int(now.timestamp() // 60))
    r = alice_client.get("/decisions/?application=late")
    rows = list(r.context["page"])
    assert [x.slot for x in rows] == sorted((x.slot for x in rows), reverse=True)
    assert rows[-1].id == d.id
    assert t.strftime("%Y-%m-%d %H:%M:%S") in r.content.decode()


def test_agent_inspector_shows_the_violation_budget_guard_and_its_reason(alice, alice_client):
    app = simulated_pipeline("guarded", owner="alice", rate_scale=3.0)
    app.policies = {**app.policies, "am": {"name": "naive", "params": {"guard": True, "guard_window": 2}}}
    app.save()
    drive(app, 2, first=10)  # two overloaded periods: the guard acts
    html = alice_client.get("/applications/guarded/agents/").content.decode()
    assert 'id="am-guard"' in html and "<strong>0.850</strong>" in html
    assert "guard" in html and "violations 100.00% over the last 2 periods" in html
    app.policies = {**app.policies, "am": {"name": "naive", "params": {"guard": False}}}  # on by default
    app.save()
    drive(app, 1, first=12)  # turned off: the tuned weights are back, the banner goes
    html = alice_client.get("/applications/guarded/agents/").content.decode()
    assert 'id="am-guard"' not in html and "guard turned off" in html


def test_an_action_the_om_did_not_rank_best_is_marked_explored():
    alts = {"do nothing": 1.0, "add one replica on A1": 0.8, "remove one replica on A1": 1.2}
    assert rollup.explored("add one replica on A1", alts) is False
    assert rollup.explored("do nothing", alts) is True
    assert rollup.explored("do nothing", None) is False
    assert rollup.explored("unknown", alts) is False


def test_saturated_periods_are_sent_as_intervals_the_chart_marks(alice, alice_client):
    """An overloaded operator's response time is unbounded: no point of the line. data.json sends those periods
    as intervals (the chart marks them "> R_max, saturated" at the top of its clipped axis) and the largest finite
    response time (the axis is clipped at 3 x R_max when it is higher)."""
    app = simulated_pipeline("sat", n_operators=1, om_policy="threshold", owner="alice", rate_scale=6.0)
    drive(app, 12)
    rollup_all()
    d = alice_client.get("/applications/sat/data.json?range=all").json()
    frame = rollup.load(app)
    rt = frame.col("rt_ms")
    assert d["saturatedPeriods"] == int(np.isinf(rt).sum()) > 0
    covered = sum((b - a) / 1000.0 for a, b in d["saturated"])
    assert covered == pytest.approx(d["saturatedPeriods"] * app.om_period_s)
    finite = rt[np.isfinite(rt)]
    assert d["rtMaxMs"] == (pytest.approx(float(finite.max())) if len(finite) else None)
    # the line has no point where the response time was unbounded
    assert sum(y is None for y in d["rt"]["y"]) >= 1


def test_a_request_after_bulk_writes_builds_no_rollup_and_says_how_far_it_is(
    alice, alice_client, django_assert_max_num_queries
):
    """The pages only read: ticks written in bulk are not rolled up by a request (no SeriesChunk written, a bounded
    number of queries whatever the backlog); the answer says how many periods are not rolled up yet and the
    dashboard.rollup task catches them up."""
    app = simulated_pipeline("bulk", n_operators=2, om_policy="ql-pds-plus", owner="alice", rate_scale=1.5)
    drive(app, 30)
    with django_assert_max_num_queries(12):
        d = alice_client.get("/applications/bulk/data.json?range=all").json()
    assert SeriesChunk.objects.filter(application=app).count() == 0
    assert d["empty"] and d["rolledToMs"] is None and d["behindPeriods"] == 30
    assert d["ledgerLastMs"] == (BASE_SLOT + 29) * 60_000.0
    page = alice_client.get("/applications/bulk/agents/")
    assert page.status_code == 200 and SeriesChunk.objects.filter(application=app).count() == 0
    assert rollup_all() == {f"{alice.pk}/bulk": 30}
    assert rollup_all() == {}  # nothing new: nothing to do
    d = alice_client.get("/applications/bulk/data.json?range=all").json()
    assert d["rows"] == 30 and d["behindPeriods"] == 0 and d["rolledToMs"] == d["ledgerLastMs"]
    # ten more periods: the page shows the rollup as it was, and how far behind it is
    drive(app, 10, BASE_SLOT + 30)
    d = alice_client.get("/applications/bulk/data.json?range=all").json()
    assert d["rows"] == 30 and d["behindPeriods"] == 10
    assert d["rolledToMs"] == (BASE_SLOT + 29) * 60_000.0 and d["ledgerLastMs"] == (BASE_SLOT + 39) * 60_000.0


def test_rollup_task_is_on_the_beat_schedule_and_never_rolls_a_period_up_twice(recorded):
    from autoscaler.celery import app as celery_app
    from dashboard import tasks

    entry = celery_app.conf.beat_schedule["dashboard-rollup"]
    assert entry["task"] == "dashboard.rollup" and entry["schedule"] > 0
    assert "dashboard.rollup" in celery_app.tasks and tasks.rollup.name == "dashboard.rollup"
    drive(recorded, 3, BASE_SLOT + TICKS)
    assert tasks.rollup.apply().get() == {f"{recorded.owner_id}/rec": 3}  # the task body, as a worker runs it
    # a second catch-up that read the same ticks before the first one wrote them (two workers) writes nothing
    frame = rollup.load(recorded)
    assert rollup._append(recorded, frame.times[-3:], [{"rate": 1.0}] * 3, []) == 0
    assert len(rollup.load(recorded)) == TICKS + 3


def _stored_model_based(app):  # noqa: ANN001, ANN202
    """(agent state row, the ``model-based`` policy restored from it) of the application's one scaled operator."""
    from autoscaler.control.models import AgentState, ApplicationControl
    from autoscaler.control.om_config import operator_spec
    from autoscaler.control.rails import parse_rails
    from autoscaler.control.topology import topology
    from policies.om.model_based import ModelBased

    agent = AgentState.objects.get(operator__application=app)
    topo = topology(app)
    control = ApplicationControl.objects.get(application=app)
    op = topo.operators[0]
    lo, hi = parse_rails(control.rails, [o.name for o in topo.all_operators]).bounds(
        op.name, op.max_parallelism
    )
    spec = operator_spec(topo, op, control.am_config, k_min=lo, k_max=hi)
    return agent, ModelBased.from_state(spec, bytes(agent.blob))


def test_agent_inspector_shows_the_engine_model_the_om_fitted(alice, alice_client):
    """A model-based OM that observed micro-batches (as on Spark) shows its fit, with the learned scaling
    exponent, on the agent page; an OM without batch measurements shows none."""
    from policies.base import Observation
    from policies.engine_model import effective_parallelism

    app = simulated_pipeline("batches", n_operators=1, om_policy="model-based", owner="alice")
    drive(app, 1)
    html = alice_client.get("/applications/batches/agents/").content.decode()
    assert "engine-fit" not in html  # the simulator reports no micro-batches
    agent, policy = _stored_model_based(app)
    n_types = len(policy.spec.node_types)
    for k, records in ((1, 100.0), (1, 150.0), (1, 200.0), (2, 200.0), (2, 300.0), (2, 300.0), (3, 400.0)):
        for _ in range(2):
            duration = 1.0 + 0.02 * records / effective_parallelism(k, 12, exponent=0.7)
            dep = np.zeros(n_types, dtype=int)
            dep[0] = k
            obs = Observation(
                dep, records / 5.0, response_time_s=2.5 + duration, violated=False, utilisation=0.5
            )
            obs.batch_duration_s, obs.batch_records = duration, records
            obs.partitions, obs.batch_interval_s, obs.period_s = 12, 5.0, 60.0
            policy.step(obs)
    agent.blob = policy.state_bytes()
    agent.save()
    r = alice_client.get("/applications/batches/agents/")
    fit = r.context["rows"][0]["engine_fit"]
    assert fit["ready"] and fit["scaling_exponent"] == pytest.approx(0.7)
    assert fit["overhead_s"] == pytest.approx(1.0, abs=1e-6) and fit["rmse_s"] < 1e-6
    html = r.content.decode()
    assert 'class="engine-fit"' in html and '<td class="num">0.70</td>' in html
    assert "Scaling exponent" in html and "20.000" in html  # ms per record


def test_agent_inspector_shows_the_processing_rate_the_om_learned_from_busy_time(alice, alice_client):
    """An OM with ``capacity_bound`` (model-based-trend, the product's default; as on Flink, where the monitor
    reports busy time per subtask) shows per node type the processing rate of one busy replica it measured, the
    service time and the per-replica rate it expects to meet the bound at; one that measured nothing shows no
    table."""
    from policies.base import Observation
    from policies.registry import om_choice

    trend = om_choice("model-based-trend")
    app = simulated_pipeline(
        "busy", n_operators=1, om_policy=trend["name"], om_params=trend["params"], owner="alice"
    )
    agent_html = alice_client.get("/applications/busy/agents/").content.decode()
    assert "capacity-fit" not in agent_html  # no agent state yet
    drive(app, 1)
    agent, policy = _stored_model_based(app)
    policy.cap_stats[:] = 0.0  # what the simulated tick measured: replaced by a replica of 80 records/s
    n_types = len(policy.spec.node_types)
    dep = np.zeros(n_types, dtype=int)
    dep[0] = 2
    for rate in (40.0, 60.0, 80.0, 100.0, 120.0, 80.0):
        # two replicas at 80 records/s each: utilisation = per-replica rate / 80
        u = rate / 2.0 / 80.0
        policy.step(Observation(dep, rate, response_time_s=0.05, violated=False, utilisation=u))
    agent.blob = policy.state_bytes()
    agent.save()
    r = alice_client.get("/applications/busy/agents/")
    fit = r.context["rows"][0]["capacity_fit"]
    row = next(t for t in fit["types"] if t["node_type"] == policy.spec.node_types[0].name)
    assert row["capacity_tuples_s"] == pytest.approx(80.0) and row["service_ms"] == pytest.approx(12.5)
    assert row["periods"] >= 4 and row["proven_tuples_s"] == pytest.approx(60.0)
    assert 0 < row["bound_tuples_s"] < 80.0
    html = r.content.decode()
    assert 'class="capacity-fit"' in html and "80.0" in html and "12.50" in html
    # the delay fit's variability and latency offset (s of the response time no queue explains)
    variability, offset_s = policy.delay_fit()
    assert fit["variability"] == pytest.approx(variability)
    assert fit["latency_offset_s"] == pytest.approx(offset_s)
    assert f"latency offset {offset_s:.3f} s" in html
