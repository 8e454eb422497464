"""Self-calibration through the real tick: an operator that declares nothing about its performance gets a rate
range learned from its rates (grown, and said so in the decision log, when the rate leaves it) and a service
time learned from its metrics; the AM's simulator reads the same learned service time."""

from __future__ import annotations

import pytest

from autoscaler.control.am import managed_application
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.calibration import learned_service_times
from autoscaler.control.models import AgentState, Decision
from autoscaler.control.om_config import operator_spec
from autoscaler.control.tick import run_tick
from autoscaler.control.topology import topology
from autoscaler.models import Operator
from policies import registry

pytestmark = pytest.mark.django_db


def undeclared(app) -> None:
    """Forget the builder's serviceTimeMs: the loop knows nothing of the operators' performance."""
    Operator.objects.filter(application=app).update(service_time_ms=None)


def levels_of(app, name: str):
    agent = AgentState.objects.get(operator__application=app, operator__name=name)
    topo = topology(app)
    op = next(o for o in topo.operators if o.name == name)
    policy = registry.load("om", agent.policy)(operator_spec(topo, op, {}), {}, seed=0)
    policy.load_state(bytes(agent.blob))
    return policy


def test_spec_declares_no_constants_without_hints():
    app = simulated_pipeline("calib-spec", n_operators=1, om_policy="model-based")
    undeclared(app)
    topo = topology(app)
    spec = operator_spec(topo, topo.operators[0], {})
    assert spec.rate_levels is None and spec.model_mode == "learn"
    Operator.objects.filter(application=app, name="op0").update(service_time_ms=2.0, expected_peak_rate=900.0)
    topo = topology(app)
    spec = operator_spec(topo, topo.operators[0], {})
    assert spec.model_mode == "hint" and spec.model.service_mean_s == pytest.approx(0.002)
    assert spec.rate_levels.grow and spec.rate_levels.max_rate >= 900.0


def test_a_rate_30x_above_the_range_grows_it_and_the_decision_says_so():
    app = simulated_pipeline("calib-ramp", n_operators=1, om_policy="model-based", rate_scale=0.2)
    undeclared(app)
    for slot in range(10, 16):
        run_tick(app.pk, slot)
    before = levels_of(app, "op0")
    low_range = before.levels.max_rate
    steps_before = before.t
    app.connector = {**app.connector, "rateScale": 0.2 * 30}
    app.save()
    for slot in range(16, 22):
        run_tick(app.pk, slot)
    after = levels_of(app, "op0")
    assert after.levels.max_rate > 10 * low_range  # the range followed the rate
    assert after.t > steps_before  # the agent kept learning (state carried over, not restarted)
    reasons = list(
        Decision.objects.filter(application=app, operator__name="op0", slot__gte=16).values_list(
            "reason", flat=True
        )
    )
    assert any("rate range grown" in r for r in reasons), reasons
    grown = [
        d.proposal["explanation"]["calibration"]
        for d in Decision.objects.filter(application=app, slot__gte=16)
        if "calibration" in (d.proposal or {}).get("explanation", {})
    ]
    assert grown and grown[0]["old_range_tuples_s"][1] == pytest.approx(low_range)


def test_the_service_time_is_learned_from_the_metrics_for_the_am():
    app = simulated_pipeline("calib-service", n_operators=2, om_policy="threshold", rate_scale=1.0)
    undeclared(app)
    topo = topology(app)
    assert learned_service_times(topo) == {"op0": None, "op1": None}
    with pytest.raises(ValueError, match="op0, op1: service time not learned yet"):
        managed_application(topo)
    for slot in range(10, 20):
        run_tick(app.pk, slot)
    learned = learned_service_times(topology(app))
    for name in ("op0", "op1"):
        mean, var = learned[name]
        assert mean == pytest.approx(0.005, rel=0.05)  # the simulated engine's 5 ms per tuple
        assert var >= 0
    papp = managed_application(topology(app))
    assert [o.service_mean_s for o in papp.operators] == pytest.approx([learned["op0"][0], learned["op1"][0]])
