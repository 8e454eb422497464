"""The AM's violation-budget guard and the hold on scale-ins in the control loop: declared in the AM's
parameters, run every tick, durable, visible in the AM history, picked up by the OMs."""

from __future__ import annotations

import pytest

from autoscaler.control.am import tune
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import AgentState, ApplicationControl, Decision
from autoscaler.control.om_config import operator_spec
from autoscaler.control.tick import run_tick
from autoscaler.control.topology import topology
from autoscaler.models import Deployment
from policies import registry

pytestmark = pytest.mark.django_db

BUSY = 3.0  # one A1 replica (180 tuples/s at 5 ms) is too small at slot 10 of the taxi trace with this scale


def with_am(app, params: dict):  # noqa: ANN001, ANN201
    app.policies = {**app.policies, "am": {"name": "naive", "params": params}}
    app.save()
    return app


def loaded_weights(app) -> list[tuple[float, float, float]]:  # noqa: ANN001
    """The cost weights in every operator's saved agent state."""
    topo = topology(app)
    out = []
    for agent in AgentState.objects.filter(operator__application=app).order_by("operator__position"):
        policy = registry.load("om", agent.policy)(operator_spec(topo, agent.operator, {}), {})
        policy.load_state(bytes(agent.blob))
        w = policy.spec.weights
        out.append((w.perf, w.res, w.rcf))
    return out


def test_the_guard_shifts_the_oms_weights_when_violations_exceed_the_budget_and_records_why():
    app = with_am(
        simulated_pipeline("guarded", n_operators=2, rate_scale=BUSY, om_policy="ql-pds"),
        {"guard": True, "guard_window": 3, "guard_cooldown": 2},
    )
    run_tick(app.pk, 10)
    control = ApplicationControl.objects.get(application=app)
    tuned = control.am_config["weights"]
    assert "guard_scale" not in control.am_config
    version = control.am_config_version
    run_tick(app.pk, 11)
    run_tick(app.pk, 12)  # three violated periods in the window of 3: the guard acts
    control = ApplicationControl.objects.get(application=app)
    assert control.violated_periods == 3
    assert control.am_config["guard_scale"] == pytest.approx(0.85)
    assert control.am_config["weights"] == tuned  # the tuned configuration is kept; the OMs get it scaled
    assert control.am_config_version == version + 1
    event = control.am_config["history"][-1]
    assert event["policy"] == "guard" and event["am_slot"] == "period 12"
    assert "violations 100.00% over the last 3 periods > 2.50%" in event["outcome"]
    # the OMs of this tick were reconfigured and saved with the new version: their weights lean to performance
    for perf, res, rcf in loaded_weights(app):
        assert res == pytest.approx(tuned["res"] * 0.85) and rcf == pytest.approx(tuned["rcf"] * 0.85)
        assert perf == pytest.approx(1.0 - 0.85 * (tuned["res"] + tuned["rcf"]))
    assert {a.am_config_version for a in AgentState.objects.filter(operator__application=app)} == {
        version + 1
    }
    # the guard's own state is durable: the window and counts are in the application's memory
    state = control.operator_memory["__app__"]["guard"]
    assert state["periods"] == 3 and state["violations"] == 3 and state["scale"] == pytest.approx(0.85)


def guard_acted(name: str):  # noqa: ANN201
    """A one-operator overloaded application whose guard (window 2, no cooldown) acted after slots 10 and 11."""
    app = with_am(
        simulated_pipeline(name, n_operators=1, rate_scale=BUSY),
        {"guard": True, "guard_window": 2, "guard_cooldown": 0},
    )
    for slot in (10, 11):
        run_tick(app.pk, slot)
    assert ApplicationControl.objects.get(application=app).am_config["guard_scale"] < 1.0
    return app


def test_turning_the_guard_off_gives_the_tuned_weights_back():
    app = guard_acted("unguarded")
    with_am(app, {"guard": False})
    run_tick(app.pk, 12)
    control = ApplicationControl.objects.get(application=app)
    assert control.am_config["guard_scale"] == 1.0
    assert control.am_config["history"][-1]["outcome"] == "guard turned off: the tuned weights are back"
    assert "guard" not in control.operator_memory["__app__"]


def test_an_am_tuning_keeps_the_guard_scale():
    app = guard_acted("retuned")
    scale = ApplicationControl.objects.get(application=app).am_config["guard_scale"]
    tune(app.pk, 5)
    assert ApplicationControl.objects.get(application=app).am_config["guard_scale"] == scale


@pytest.mark.parametrize("hold", [False, True])
def test_scale_ins_are_held_while_another_operator_violates(hold: bool):
    app = with_am(
        simulated_pipeline(f"held-{hold}", n_operators=2, rate_scale=BUSY), {"hold_scale_ins": hold}
    )
    # op1 has far more replicas than the load needs: its threshold policy proposes to remove one
    Deployment.objects.filter(operator__application=app, operator__name="op1").update(replicas={"A1": 10})
    run_tick(app.pk, 10)
    op0 = Decision.objects.get(application=app, slot=10, operator__name="op0")
    op1 = Decision.objects.get(application=app, slot=10, operator__name="op1")
    assert op0.violated and not op1.violated and op0.outcome == "applied"
    assert op1.proposal["target"] == {"A1": 9}
    if hold:
        assert op1.outcome == "denied"
        assert op1.reason == "denied: scale-in held while operator(s) [0] violate their bounds"
    else:
        assert op1.outcome == "applied"


@pytest.mark.parametrize(
    "params,field",
    [
        ({"guard": "yes"}, "params.guard"),
        ({"guard_window": 0}, "params.guard_window"),
        ({"guard_cooldown": -1}, "params.guard_cooldown"),
        ({"hold_scale_ins": 1}, "params.hold_scale_ins"),
    ],
)
def test_bad_guard_parameters_are_rejected_naming_the_field(params: dict, field: str):
    for am in ("naive", "bo"):
        with pytest.raises(ValueError, match=field):
            registry.validate_params("am", am, params)
