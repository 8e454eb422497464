"""The control plane with real Celery worker processes, a real Redis broker and the shared PostgreSQL database.

Every test uses ``transaction=True`` so that the workers see committed rows of the test database.
"""

from __future__ import annotations

import threading
import time

import pytest

from autoscaler.control.agents import load_policy
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.connectors import build_connector
from autoscaler.control.models import AgentState, ApplicationControl, Decision, SimulatedEngine, Tick
from autoscaler.control.rails import parse_rails
from autoscaler.control.topology import topology
from policies.base import Observation

from .conftest import sender, wait_for

pytestmark = [pytest.mark.django_db(transaction=True)]

BUSY = 3.0  # trace scale that overloads one replica: the threshold policy scales up


def tick_status(app, slot: int) -> str | None:
    row = Tick.objects.filter(application=app, slot=slot).first()
    return None if row is None else row.status


def done(app, *slots: int) -> bool:
    return all(tick_status(app, s) in ("done", "no_data") for s in slots)


def set_faults(app, **faults) -> None:
    build_connector(app)  # creates the engine row
    SimulatedEngine.objects.filter(application=app).update(faults=faults)


def test_a_tick_delivered_twice_applies_once_and_learns_once(broker, start_worker):
    app = simulated_pipeline("dup", n_operators=2, rate_scale=BUSY)
    start_worker("w1")
    start_worker("w2")
    celery = sender(broker)
    for _ in range(2):  # broker redelivery / two beat processes
        celery.send_task("control.tick", (app.pk, 10))
    wait_for(lambda: done(app, 10), what="tick 10")
    wait_for(
        lambda: ApplicationControl.objects.get(application=app).duplicate_ticks_total == 1, what="duplicate"
    )
    assert SimulatedEngine.objects.get(application=app).applies == 1
    assert Decision.objects.filter(application=app, slot=10).count() == 2
    celery.send_task("control.tick", (app.pk, 11))
    wait_for(lambda: done(app, 11), what="tick 11")
    assert sorted(AgentState.objects.values_list("steps", flat=True)) == [1, 1]


@pytest.mark.slow
def test_sigkill_mid_tick_loses_nothing_and_the_next_tick_continues(broker, start_worker):
    # step 2 needs tick 10 to apply something, whatever the operators' primary keys (they seed the agents' RNGs
    # and differ with the tests run before on PostgreSQL): model-based plans deterministically and, with the
    # declared 5 ms per tuple at three times the trace's rate, scales out at tick 10; it learns every period
    app = simulated_pipeline("killed", n_operators=2, rate_scale=BUSY, om_policy="model-based")
    celery = sender(broker)
    # 1) killed while collecting metrics: nothing was committed
    set_faults(app, collectDelayS=30)
    w = start_worker("victim1")
    celery.send_task("control.tick", (app.pk, 10))
    wait_for(lambda: "control.tick" in w.log.read_text() and "received" in w.log.read_text(), what="receipt")
    time.sleep(0.5)
    w.kill()
    assert not Tick.objects.filter(application=app, slot=10).exists()
    assert not AgentState.objects.exists()
    # 2) killed during the engine apply, after the decision committed
    set_faults(app, applyDelayS=30)
    w = start_worker("victim2")
    celery.send_task("control.tick", (app.pk, 10))  # the redelivery of the lost message
    wait_for(lambda: tick_status(app, 10) == "applying", what="tick 10 applying")
    time.sleep(0.3)
    w.kill()
    assert SimulatedEngine.objects.get(application=app).applies == 0
    blob_10 = {a.operator_id: bytes(a.blob) for a in AgentState.objects.all()}
    # 3) a new worker: the redelivered tick reconciles with the engine, the next tick continues learning
    set_faults(app)
    start_worker("survivor")
    celery.send_task("control.tick", (app.pk, 10))
    wait_for(lambda: done(app, 10), what="tick 10 reconciled")
    celery.send_task("control.tick", (app.pk, 11))
    wait_for(lambda: done(app, 11), what="tick 11")
    tick10 = Tick.objects.get(application=app, slot=10)
    assert tick10.result["ok"] and "reconciled" in tick10.result["details"]
    applied_10 = Decision.objects.filter(application=app, slot=10, outcome="applied").count()
    assert (
        SimulatedEngine.objects.get(application=app).applies
        == (1 if applied_10 else 0)
        + Tick.objects.filter(application=app, slot=11, plan__isnull=False, result__ok=True).count()
    )
    assert Decision.objects.filter(application=app, slot=10).count() == 2
    assert Decision.objects.filter(application=app, slot=11).count() == 2
    agents = list(AgentState.objects.all())
    assert all(a.steps == 1 and a.last_slot == 11 for a in agents)
    assert all(bytes(a.blob) != blob_10[a.operator_id] for a in agents)


def test_two_ticks_of_one_application_serialise_and_applications_run_in_parallel(broker, start_worker):
    a = simulated_pipeline("serial-a", n_operators=1)
    b = simulated_pipeline("serial-b", n_operators=1)
    set_faults(a, collectDelayS=1.5)
    set_faults(b, collectDelayS=1.5)
    start_worker("w1")
    start_worker("w2")
    celery = sender(broker)
    celery.send_task("control.tick", (a.pk, 10))
    celery.send_task("control.tick", (a.pk, 11))
    # learning is in order: if 11 ran first, 10 is recorded as missed (stale), which also finishes its row
    wait_for(lambda: done(a, 10, 11) or (tick_status(a, 10) == "missed" and done(a, 11)), what="ticks of a")
    t10, t11 = Tick.objects.get(application=a, slot=10), Tick.objects.get(application=a, slot=11)
    first, second = sorted([t10, t11], key=lambda t: t.created_at)
    assert second.created_at >= first.finished_at, "two ticks of one application overlapped"
    celery.send_task("control.tick", (a.pk, 12))
    celery.send_task("control.tick", (b.pk, 12))
    wait_for(lambda: done(a, 12) and done(b, 12), what="ticks of a and b")
    ta, tb = Tick.objects.get(application=a, slot=12), Tick.objects.get(application=b, slot=12)
    assert ta.created_at < tb.finished_at and tb.created_at < ta.finished_at, "applications did not overlap"


def test_no_data_periods_and_dry_run_through_the_worker(broker, start_worker):
    gap = simulated_pipeline("gap", n_operators=2, rate_scale=BUSY)
    dry = simulated_pipeline("dry", n_operators=2, rate_scale=BUSY, dry_run=True)
    set_faults(gap, missingSlots=[9])
    start_worker("w1")
    celery = sender(broker)
    for slot in (10, 11, 12):
        celery.send_task("control.tick", (gap.pk, slot))
        celery.send_task("control.tick", (dry.pk, slot))
    wait_for(lambda: done(gap, 10, 11, 12) and done(dry, 10, 11, 12), what="ticks")
    assert tick_status(gap, 10) == "no_data"
    assert set(Decision.objects.filter(application=gap, slot=10).values_list("outcome", flat=True)) == {
        "no_data"
    }
    assert not AgentState.objects.filter(operator__application=gap, last_slot=10).exists()
    assert SimulatedEngine.objects.get(application=dry).applies == 0
    assert Decision.objects.filter(application=dry, outcome="dry_run").exists()


def test_agent_state_survives_a_worker_restart_bit_exactly(broker, start_worker):
    app = simulated_pipeline("restart", n_operators=1, rate_scale=BUSY, om_policy="ql")
    celery = sender(broker)
    w = start_worker("before")
    for slot in (10, 11, 12):
        celery.send_task("control.tick", (app.pk, slot))
        wait_for(lambda s=slot: done(app, s), what=f"tick {slot}")
    w.stop()
    saved = AgentState.objects.get()
    blob_12 = bytes(saved.blob)
    start_worker("after")
    celery.send_task("control.tick", (app.pk, 13))
    wait_for(lambda: done(app, 13), what="tick 13")
    # continue the saved agent in this process on the same observation: the worker must have produced the same
    topo = topology(app)
    control = ApplicationControl.objects.get(application=app)
    policy = load_policy(saved, topo.operators[0], topo, control, parse_rails(control.rails))
    assert policy.state_bytes() == blob_12
    d = Decision.objects.get(application=app, slot=13)
    m = d.observed
    k = topo.vector(d.deployment)
    proposal = policy.step(
        Observation(k, m["input_rate"], m["response_time_s"], d.violated, m["utilisation"])
    )
    if proposal.action != 0 and not d.granted:
        policy.override_last_action(0)
    assert proposal.action == d.proposal["action"]
    assert policy.state_bytes() == bytes(AgentState.objects.get().blob)


@pytest.mark.slow
def test_a_broker_outage_delays_ticks_and_loses_none(private_redis, start_worker, broker):
    app = simulated_pipeline("outage", n_operators=1, rate_scale=BUSY)
    url = private_redis["url"]
    start_worker("w1", url)
    celery = sender(url)
    celery.send_task("control.tick", (app.pk, 10))
    wait_for(lambda: done(app, 10), what="tick 10")
    private_redis["stop"]()
    restarted = threading.Timer(3.0, private_redis["start"])
    restarted.start()
    t0 = time.time()
    for slot in (
        11,
        12,
    ):  # beat keeps dispatching during the outage: publishing retries until the broker is back
        celery.send_task(
            "control.tick",
            (app.pk, slot),
            retry=True,
            retry_policy={
                "max_retries": 40,
                "interval_start": 0.2,
                "interval_step": 0.2,
                "interval_max": 0.5,
            },
        )
    restarted.join()
    wait_for(lambda: done(app, 11, 12), timeout=60, what="ticks after the outage")
    assert time.time() - t0 >= 2.5
    assert list(Tick.objects.filter(application=app).order_by("slot").values_list("slot", flat=True)) == [
        10,
        11,
        12,
    ]
    assert Decision.objects.filter(application=app).count() == 3
