"""The dispatcher (run eagerly in this process): due ticks, periods changed without restart, AM and region steps."""

from __future__ import annotations

import pytest

from autoscaler.celery import app as celery_app
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.connectors import build_connector
from autoscaler.control.models import ApplicationControl, RegionTick, SimulatedEngine, Tick
from autoscaler.control.tasks import dispatch
from autoscaler.control.tick import forget_definitions
from autoscaler.models import Application

pytestmark = pytest.mark.django_db


@pytest.fixture
def eager(settings):
    settings.AUTOSCALER_DISPATCH_SPREAD = 0.0
    settings.AUTOSCALER_STALE_AFTER_PERIODS = 0.0  # these tests dispatch at made-up times, long past
    celery_app.conf.task_always_eager = True
    forget_definitions()
    yield
    celery_app.conf.task_always_eager = False


def test_dispatch_enqueues_each_due_slot_once_and_follows_period_changes(eager):
    app = simulated_pipeline("disp", n_operators=1, period_s=60.0)
    paused = simulated_pipeline("paused", n_operators=1, state="paused")
    t = 1_800_000_000.0  # a slot boundary for 60 s periods
    assert dispatch(now=t)["ticks"] == 1
    assert dispatch(now=t + 10)["ticks"] == 0  # same slot: already claimed
    assert list(Tick.objects.filter(application=app).values_list("slot", flat=True)) == [t // 60]
    assert not Tick.objects.filter(application=paused).exists()
    Application.objects.filter(pk=app.pk).update(om_period_s=30.0)  # no restart of anything
    # the change takes effect at the next boundary of the new period after the claimed slot ended
    assert dispatch(now=t + 31)["ticks"] == 0
    assert dispatch(now=t + 61)["ticks"] == 1
    assert set(Tick.objects.filter(application=app).values_list("slot", flat=True)) == {
        t // 60,
        (t + 61) // 30,
    }
    assert RegionTick.objects.filter(policy="simple").exists()
    control = ApplicationControl.objects.get(application=app)
    assert control.am_tuned_slot >= 0 and control.am_config["history"][-1]["policy"] == "naive"


def test_connector_failures_are_retried_then_recorded_as_no_data(eager):
    app = simulated_pipeline("flaky", n_operators=1)
    build_connector(app)
    SimulatedEngine.objects.filter(application=app).update(faults={"failCollect": 100})
    celery_app.conf.task_eager_propagates = False
    from autoscaler.control.tasks import tick

    tick.apply(args=(app.pk, 50)).get(disable_sync_subtasks=False, propagate=False)
    row = Tick.objects.get(application=app, slot=50)
    assert row.status == "no_data" and "unreachable" in row.error
    control = ApplicationControl.objects.get(application=app)
    assert control.tick_errors_total == tick.max_retries + 1
    assert row.decisions.get().reason.startswith("no data: connector failed")


def test_bo_am_tuning_uses_the_observed_periods_and_bumps_the_configuration_version(monkeypatch):
    from autoscaler.control.am import tune
    from autoscaler.control.tick import run_tick
    from policies.am.bo import BayesianAM

    given = []
    optimise = BayesianAM.optimise
    monkeypatch.setattr(BayesianAM, "optimise", lambda am, obs: given.append(obs) or optimise(am, obs))

    app = simulated_pipeline("bo-app", n_operators=2, rate_scale=2.0)
    app.policies = {
        **app.policies,
        "am": {"name": "bo", "params": {"n_bo": 2, "max_rounds": 1, "timeout_s": 30.0}},
    }
    app.save()
    assert "kept the current configuration" in tune(app.pk, 0)["outcome"]  # nothing observed yet
    for slot in range(10, 17):
        run_tick(app.pk, slot)
    before = ApplicationControl.objects.get(application=app).am_config_version
    event = tune(app.pk, 1)
    assert event["policy"] == "bo" and event["outcome"] in ("changed", "unchanged"), event
    control = ApplicationControl.objects.get(application=app)
    assert control.am_config["policy"] == "bo" and set(control.am_config["bounds_ms"]) == {"op0", "op1"}
    assert control.am_config_version == before + (event["outcome"] == "changed")
    assert tune(app.pk, 1) == {"duplicate": True}
    # what the configuration in place really did over the window (slots 10..16, all after the first tuning):
    # the same periods the aggregates counted, so the same fractions
    (obs,) = given
    assert control.periods == 7 and len(obs.rates) == 7
    assert obs.observed_violation_fraction == pytest.approx(control.violated_periods / 7)
    assert obs.observed_reconfiguration_fraction == pytest.approx(control.reconfigured_periods / 7)
    assert event["observed"] == {
        "periods": 7,
        "violation_fraction": obs.observed_violation_fraction,
        "reconfiguration_fraction": obs.observed_reconfiguration_fraction,
    }
    assert control.am_config["history"][-1]["observed"] == event["observed"]
    assert "observed" not in control.am_config  # only in the history, not part of the configuration


def test_a_spark_application_without_reports_is_recorded_as_no_data_in_the_decision_log(eager):
    from autoscaler.control.tasks import tick

    app = simulated_pipeline("spark-app", n_operators=1)
    Application.objects.filter(pk=app.pk).update(engine="spark", connector={})
    tick.apply(args=(app.pk, 7))
    row = Tick.objects.get(application=app, slot=7)
    assert row.status == "no_data" and "no progress from the Spark job" in row.error


def test_dispatch_delays_spread_ticks_evenly_over_the_period():
    """1,000 applications' ticks are due at distinct moments spread evenly over spread * period."""
    from autoscaler.control.tasks import dispatch_delay_s

    delays = [dispatch_delay_s(app_id, 60.0, 0.5) for app_id in range(1, 1001)]
    assert all(0.0 <= d < 30.0 for d in delays)
    assert len({round(d, 9) for d in delays}) == 1000
    per_bucket = [0] * 10
    for d in delays:
        per_bucket[int(d // 3.0)] += 1
    assert max(per_bucket) <= 1.2 * 100 and min(per_bucket) >= 0.8 * 100
    assert dispatch_delay_s(7, 60.0, 0.0) == 0.0


def test_spread_dispatch_enqueues_each_application_at_its_due_time(eager, settings):
    settings.AUTOSCALER_DISPATCH_SPREAD = 0.5
    from autoscaler.control.tasks import dispatch_delay_s

    apps = [simulated_pipeline(f"spread{i}", n_operators=1, period_s=60.0) for i in range(4)]
    t = 1_800_000_000.0  # a slot boundary for 60 s periods
    due = {a.pk: dispatch_delay_s(a.pk, 60.0, 0.5) for a in apps}
    first = min(due.values())
    assert dispatch(now=t + first - 0.01)["ticks"] == 0  # nobody is due yet
    ticked = 0
    for moment in sorted(due.values()):
        ticked += dispatch(now=t + moment)["ticks"]
        assert Tick.objects.filter(slot=t // 60).count() == ticked
    assert ticked == len(apps)
    assert dispatch(now=t + 59)["ticks"] == 0  # each application once per slot


def test_bo_that_times_out_keeps_a_good_configuration_and_the_history_says_why():
    from autoscaler.control.am import tune
    from autoscaler.control.tick import run_tick

    app = simulated_pipeline("bo-timeout", n_operators=2, rate_scale=2.0)
    app.policies = {**app.policies, "am": {"name": "bo", "params": {"n_bo": 25, "timeout_s": 1e-6}}}
    app.save()
    for slot in range(10, 17):
        run_tick(app.pk, slot)
    event = tune(app.pk, 1)
    assert "timeout" in event["bo_outcome"].lower(), event
    assert event["bo_outcome"].startswith(("kept last good configuration", "applied best so far")), event
    history = ApplicationControl.objects.get(application=app).am_config["history"]
    assert history[-1]["bo_outcome"] == event["bo_outcome"]
