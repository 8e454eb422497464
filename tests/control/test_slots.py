"""Slot accounting in this process: the staleness rule, ordered learning, missed slots with their reasons,
publish-then-claim and the /metrics series (the dispatcher and ticks run eagerly; made-up times)."""

from __future__ import annotations

import time

import pytest
from django.test import Client
from kombu.exceptions import OperationalError as BrokerDown

from autoscaler.celery import app as celery_app
from autoscaler.control import outages, slots
from autoscaler.control import tasks as control_tasks
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.connectors import build_connector
from autoscaler.control.models import AgentState, ApplicationControl, Decision, SimulatedEngine, Tick
from autoscaler.control.tasks import dispatch
from autoscaler.control.tick import forget_definitions, run_tick
from autoscaler.models import Application

pytestmark = pytest.mark.django_db

T = 1_800_000_000.0  # a slot boundary for 60 s periods


@pytest.fixture
def eager(settings):
    settings.AUTOSCALER_DISPATCH_SPREAD = 0.0
    settings.AUTOSCALER_STALE_AFTER_PERIODS = 0.0  # made-up times: ticks are replays here
    celery_app.conf.task_always_eager = True
    forget_definitions()
    outages.reset()
    yield
    celery_app.conf.task_always_eager = False
    outages.reset()


def missed(app) -> dict[int, str]:
    return dict(Tick.objects.filter(application=app, status="missed").values_list("slot", "reason"))


def test_timing_says_early_stale_or_in_time(settings):
    settings.AUTOSCALER_STALE_AFTER_PERIODS = 1.0
    assert slots.timing(10, 60.0, 600.0 + 59.0) == ("", 59.0)
    assert slots.timing(10, 60.0, 600.0 + 61.0)[0] == "stale"
    assert slots.timing(10, 60.0, 600.0 - 5.0)[0] == "early"
    assert slots.timing(10, 60.0, 600.0 - 0.2)[0] == ""  # clock skew tolerated
    settings.AUTOSCALER_STALE_AFTER_PERIODS = 0.0
    assert slots.timing(10, 60.0, 10_000.0)[0] == ""


def test_a_stale_tick_is_recorded_and_applies_nothing_an_early_one_is_dropped(settings):
    settings.AUTOSCALER_STALE_AFTER_PERIODS = 1.0
    app = simulated_pipeline("stale", n_operators=2, period_s=10.0, rate_scale=3.0)
    now = time.time()
    old = int(now // 10.0) - 30  # 300 s ago: a redelivery after the visibility timeout
    out = control_tasks.tick.apply(args=(app.pk, old)).get()
    assert out["skipped"] == "stale" and out["age_s"] > 290
    row = Tick.objects.get(application=app, slot=old)
    assert (row.status, row.reason) == ("missed", "stale")
    assert "began" in row.error and "nothing applied" in row.error
    assert not Decision.objects.filter(application=app).exists() and not AgentState.objects.exists()
    future = int(now // 10.0) + 3
    assert control_tasks.tick.apply(args=(app.pk, future)).get()["skipped"] == "early"
    assert not Tick.objects.filter(application=app, slot=future).exists()
    control = ApplicationControl.objects.get(application=app)
    assert control.early_ticks_total == 1 and control.missed_slots == {"stale": 1}


def test_a_tick_records_when_it_passed_its_staleness_check_not_when_its_slow_work_ended():
    """``Tick.began_at`` is the staleness check's time: the fault suite audits it, not a wall-clock allowance."""
    app = simulated_pipeline("began", n_operators=1, period_s=10.0, rate_scale=3.0)
    build_connector(app)
    SimulatedEngine.objects.filter(application=app).update(faults={"collectDelayS": 1.0})
    slot = int(time.time() // 10.0)
    deadline = time.time() + 60.0  # far: a loaded machine must not make this tick stale
    out = run_tick(app.pk, slot, period_s=10.0, deadline_s=deadline)
    row = Tick.objects.get(application=app, slot=slot)
    assert out.status in ("done", "no_data") and row.began_at is not None
    assert row.began_at.timestamp() <= deadline
    # the 1-s collect ran after the check: the recorded start precedes the decision by at least that much
    assert row.decided_at.timestamp() - row.began_at.timestamp() >= 1.0
    late = run_tick(app.pk, slot + 1, period_s=10.0, deadline_s=time.time() - 0.1)
    row = Tick.objects.get(application=app, slot=slot + 1)
    assert late.status == "missed" and row.reason == "stale" and row.began_at is None


def test_learning_consumes_periods_in_order_only():
    app = simulated_pipeline("order", n_operators=1, rate_scale=3.0, om_policy="ql")
    run_tick(app.pk, 12)
    blob = bytes(AgentState.objects.get().blob)
    out = run_tick(app.pk, 11)  # an older slot after a newer one
    row = Tick.objects.get(application=app, slot=11)
    assert out.status == "missed" and row.reason == "stale" and "out of order" in row.error
    assert not row.decisions.exists()
    agent = AgentState.objects.get()
    assert agent.last_slot == 12 and bytes(agent.blob) == blob  # the agent learned nothing from slot 11


def test_a_gap_between_dispatches_is_recorded_slot_by_slot_with_the_inferred_reason(eager):
    app = simulated_pipeline("gap", n_operators=1, period_s=60.0)
    outages.dispatch_seen(T - 600, 5.0)  # this worker has been dispatching since before the test's slots
    assert dispatch(now=T + 1)["ticks"] == 1
    outages.database_failed(now=T + 70)  # this worker saw the database down during [T+70, T+130]
    outages.database_failed(now=T + 130)
    outages.database_ok(now=T + 131)
    assert dispatch(now=T + 301)["ticks"] == 1  # slots T+60 .. T+240 were never dispatched
    assert missed(app) == {
        (T + 60) // 60: "database_down",
        (T + 120) // 60: "database_down",
        (T + 180)
        // 60: "broker_down",  # this worker was up and saw no dispatch: the broker (or beat) was down
        (T + 240) // 60: "broker_down",
    }
    control = ApplicationControl.objects.get(application=app)
    assert control.missed_slots == {"database_down": 2, "broker_down": 2}
    slots_seen = sorted(Tick.objects.filter(application=app).values_list("slot", flat=True))
    assert slots_seen == [T // 60 + i for i in range(6)]  # every slot has exactly one row


def test_slots_while_paused_are_recorded_as_paused(eager):
    app = simulated_pipeline("pause", n_operators=1, period_s=60.0)
    dispatch(now=T + 1)
    Application.objects.filter(pk=app.pk).update(state="paused")
    dispatch(now=T + 61)
    Application.objects.filter(pk=app.pk).update(state="running")
    assert dispatch(now=T + 181)["ticks"] == 1
    # the pause was seen during slot T+60: it and T+120 are "paused"; T+180 is ticked again
    assert missed(app) == {(T + 60) // 60: "paused", (T + 120) // 60: "paused"}
    assert ApplicationControl.objects.get(application=app).paused_since_s is None


def test_a_claimed_tick_that_never_ran_is_recorded_two_periods_later(eager):
    lost = simulated_pipeline("lost", n_operators=1, period_s=60.0)
    dispatch(now=T + 1)
    Tick.objects.filter(application=lost).delete()  # the message was lost with a worker
    outages.dispatch_seen(T + 30, 5.0)  # this worker's first dispatch came after that slot began
    dispatch(now=T + 61)
    assert missed(lost) == {}  # not yet: its tick could still be running
    dispatch(now=T + 121)
    assert missed(lost) == {T // 60: "worker_down"}
    # a worker that was up all along: the tick was queued too long (it would be stale when it came)
    slow = simulated_pipeline("slow", n_operators=1, period_s=60.0)
    dispatch(now=T + 181)
    Tick.objects.filter(application=slow).delete()
    dispatch(now=T + 301)
    # ... and the slot between the two dispatches was never dispatched while this worker was up
    assert missed(slow) == {(T + 180) // 60: "stale", (T + 240) // 60: "broker_down"}
    # a tick whose attempt failed and whose retry never came is closed as missed, not left running
    retried = simulated_pipeline("retried", n_operators=1, period_s=60.0)
    dispatch(now=T + 361)
    Tick.objects.filter(application=retried).update(status="running")
    dispatch(now=T + 481)
    row = Tick.objects.get(application=retried, slot=(T + 360) // 60)
    assert (row.status, row.reason) == ("missed", "stale") and "retries" in row.error
    # (and T+420, never dispatched, as above)
    assert ApplicationControl.objects.get(application=retried).missed_slots == {"stale": 1, "broker_down": 1}


def test_publish_then_claim_a_broker_failure_leaves_the_slot_unclaimed(eager, monkeypatch):
    app = simulated_pipeline("broker", n_operators=1, period_s=60.0)
    calls = []

    def refuse(
        *args, **kwargs
    ):  # the broker refuses the connection (cannot be provoked in-process otherwise)
        calls.append(args)
        raise BrokerDown("connection refused")

    with monkeypatch.context() as m:
        m.setattr(control_tasks.tick, "apply_async", refuse)
        m.setattr(control_tasks.am_tune, "apply_async", refuse)
        assert dispatch(now=T + 1)["ticks"] == 0
    control = ApplicationControl.objects.get(application=app)
    assert calls and control.last_dispatched_start_s is None and control.am_dispatched_slot == -1
    assert outages.BROKER.intervals  # remembered for the reason of slots it costs
    assert dispatch(now=T + 5)["ticks"] == 1  # the broker is back: the same slot is published and claimed
    assert Tick.objects.filter(application=app, slot=T // 60).exists()
    assert ApplicationControl.objects.get(application=app).am_dispatched_slot >= 0


def test_a_period_change_takes_effect_at_the_next_boundary_and_never_stalls(eager):
    app = simulated_pipeline("period", n_operators=1, period_s=15.0)
    dispatch(now=T + 1)
    Application.objects.filter(pk=app.pk).update(om_period_s=30.0)  # slot numbers now count 30 s periods
    assert dispatch(now=T + 16)["ticks"] == 0  # the 30 s slot containing it began before the 15 s slot ended
    assert dispatch(now=T + 31)["ticks"] == 1
    assert dispatch(now=T + 61)["ticks"] == 1
    Application.objects.filter(pk=app.pk).update(om_period_s=15.0)
    assert dispatch(now=T + 76)["ticks"] == 0  # inside the claimed 30 s slot
    assert dispatch(now=T + 91)["ticks"] == 1
    starts = sorted(s * p for s, p in Tick.objects.filter(application=app).values_list("slot", "period_s"))
    assert starts == [T, T + 30, T + 60, T + 90] and not missed(app)


def test_metrics_expose_missed_slots_by_reason_and_the_last_tick_age(eager, settings):
    settings.METRICS_TOKEN = "scraper-token-for-the-slot-counters"  # /metrics answers the scraper's token
    simulated_pipeline("metrics", n_operators=1, period_s=60.0)
    outages.dispatch_seen(T - 600, 5.0)
    dispatch(now=T + 1)
    dispatch(now=T + 181)
    scraper = {"Authorization": "Bearer scraper-token-for-the-slot-counters"}
    text = Client().get("/metrics", headers=scraper).content.decode()
    lab = 'application="metrics",owner="control"'
    assert f'autoscaler_control_missed_slots_total{{{lab},reason="broker_down"}} 2' in text
    assert f'autoscaler_control_missed_slots_total{{{lab},reason="database_down"}} 0' in text
    assert "# TYPE autoscaler_control_last_tick_age_seconds gauge" in text
    age = next(
        ln for ln in text.splitlines() if ln.startswith(f"autoscaler_control_last_tick_age_seconds{{{lab}")
    )
    assert 0.0 <= float(age.split()[-1]) < 60.0


def test_the_dashboard_shows_missed_slots_as_gaps_with_their_reason():
    from dashboard.monitor import chart_data
    from dashboard.tasks import rollup_all

    app = simulated_pipeline("dash", n_operators=1, period_s=60.0)
    for slot in (10, 11, 12):
        run_tick(app.pk, slot)
    slots.record_missed(app, [(13, 60.0, "worker_down", "missed"), (14, 60.0, "worker_down", "missed")])
    slots.record_missed(app, [(15, 60.0, "database_down", "missed")])
    for slot in (16, 17):
        run_tick(app.pk, slot)
    rollup_all()  # the beat task dashboard.rollup: the dashboard only reads rollups
    d = chart_data.dashboard_data(app, "all")
    assert d["gaps"] == [[780_000.0, 900_000.0, "worker_down"], [900_000.0, 960_000.0, "database_down"]]
    for key in ("rate", "capacity"):  # the lines stop at the gap instead of crossing it
        points = dict(zip(d[key]["x"], d[key]["y"], strict=True))
        assert points[780_000] is None and points[900_000] is None
        assert points[720_000] is not None and points[960_000] is not None
