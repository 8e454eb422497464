"""Rule-based baselines: threshold (cheapest / fastest / first type), DS2 and Kubernetes HPA."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

from policies.base import Observation
from policies.om.ds2 import DS2
from policies.om.hpa import HPA
from policies.om.rules import choose_node_type, removal_type
from policies.om.threshold import ThresholdCheapest, ThresholdFastest, ThresholdFirst
from policies.registry import load
from policies.sim.operator import run_operator
from policies.sim.scenario import initial_deployment, paper_spec, run_paper


def ramp(lo: float, hi: float, n: int) -> np.ndarray:
    """A linear rate ramp from ``lo`` to ``hi`` tuples/s over ``n`` steps."""
    return np.linspace(lo, hi, n)


BASELINES = ["threshold", "threshold-speedup", "threshold-first", "ds2", "hpa"]
FAST = {"ds2": {"scale_down_delay_s": 120.0}}  # keeps the falling-load traces short


def _policy(name: str, spec, **params):  # noqa: ANN001, ANN202
    return load("om", name)(spec, {**FAST.get(name, {}), **params}, 0)


@pytest.mark.parametrize("name", BASELINES)
def test_scales_out_under_rising_load_up_to_k_max(name):
    spec = paper_spec("A", 3, 5)
    pol = _policy(name, spec)
    res = run_operator(ramp(20.0, 1200.0, 300), pol, k0=initial_deployment(spec, pol))
    assert res.replicas[0] == 1
    assert res.replicas.max() == 5  # reaches K_max and never exceeds it
    assert (np.diff(res.replicas) >= 0).all()  # only scale-outs under a rising load
    assert (res.deployment[:, pol.initial_type()] == res.replicas).all()  # always its own node type


@pytest.mark.parametrize("name", BASELINES)
def test_scales_in_under_falling_load_down_to_one(name):
    spec = paper_spec("A", 3, 6)
    pol = _policy(name, spec)
    k0 = np.zeros(3, dtype=np.int64)
    k0[pol.initial_type()] = 6
    res = run_operator(ramp(700.0, 5.0, 400), pol, k0=k0)
    assert res.replicas[-1] == 1
    assert res.replicas.min() >= 1
    assert (np.diff(res.replicas) <= 0).all()


def test_node_type_choices():
    a3, b2 = paper_spec("A", 3, 10), paper_spec("B2", 3, 10)
    assert choose_node_type(a3, "cheapest") == 1  # price 0.7
    assert choose_node_type(a3, "fastest") == 2  # speedup 1.3
    assert choose_node_type(a3, "first") == 0
    # price = speedup on A: every type has speedup/price 1, ties go to the lowest index
    assert choose_node_type(a3, "price-performance") == 0
    # B2: price = speedup^1.5, so speedup/price = speedup^-0.5 is largest on the slowest type (0.05), but 10 replicas
    # of it carry 90 tuples/s, below the range's 650: the best type that can carry the range is type 0
    assert choose_node_type(b2, "price-performance") == 0
    # without a range (learned) nothing says the slow type is too small: speedup per price alone
    assert choose_node_type(replace(b2, rate_levels=None), "price-performance") == 1
    assert ThresholdCheapest(a3).initial_type() == 1
    assert ThresholdFastest(a3).initial_type() == 2
    assert ThresholdFirst(a3).initial_type() == 0
    assert DS2(a3, {"node_type": "fastest"}).initial_type() == 2


def test_removal_prefers_own_type_else_slowest():
    sp = np.array([1.0, 0.7, 1.3])
    assert removal_type(np.array([2, 1, 0]), sp, preferred=0) == 0
    assert removal_type(np.array([2, 1, 0]), sp, preferred=2) == 1  # none of type 2: slowest in place
    assert removal_type(np.array([1, 0, 3]), sp, preferred=1) == 0


def _obs(k, u: float, rate: float = 100.0) -> Observation:  # noqa: ANN001
    return Observation(deployment=np.array(k), input_rate=rate, violated=False, utilisation=u)


def test_threshold_rule_boundaries(spec_a3):
    pol = ThresholdFirst(spec_a3)
    assert pol.step(_obs([1, 0, 0], 0.70)).action == 0  # scale out only strictly above 0.7
    assert pol.step(_obs([1, 0, 0], 0.71)).action == 1 + 3 + 0
    # k = 2: scale in when 2u < 0.75 * 0.7 = 0.525
    assert pol.step(_obs([2, 0, 0], 0.26)).action == 1
    assert pol.step(_obs([2, 0, 0], 0.27)).action == 0
    assert pol.step(_obs([1, 0, 0], 0.0)).action == 0  # never below one replica
    full = ThresholdFirst(paper_spec("A", 3, 2))
    assert full.step(_obs([2, 0, 0], 0.99)).action == 0  # never above K_max


def test_utilisation_from_the_model_when_not_measured(spec_a3):
    pol = ThresholdFirst(spec_a3)
    # 2 replicas of speedup 1 at 260 tuples/s: 130/180 = 0.72 > 0.7
    prop = pol.step(Observation(deployment=np.array([2, 0, 0]), input_rate=260.0, response_time_s=0.01))
    assert prop.action == 1 + 3 + 0
    assert prop.explanation["rule"]["utilisation"] == pytest.approx(130 / 180)
    assert prop.explanation["rule"]["desired_replicas"] == 3


def test_hpa_tolerance_and_ceil(spec_a3):
    pol = HPA(spec_a3, {"node_type": "first"})
    assert pol.step(_obs([4, 0, 0], 0.75)).action == 0  # ratio 1.07 within the 0.1 tolerance
    prop = pol.step(_obs([4, 0, 0], 0.80))  # ceil(4 * 0.8 / 0.7) = 5
    assert prop.action == 4 and prop.explanation["rule"]["desired_replicas"] == 5
    assert pol.recommendation(4, 0.35) == 2
    assert pol.recommendation(4, 0.0) == 1  # clamped to k_min
    assert pol.recommendation(4, 5.0) == 10  # clamped to K_max


@pytest.mark.parametrize(("window_s", "first_removal"), [(300.0, 5), (120.0, 2), (0.0, 1)])
def test_hpa_scale_down_stabilisation(spec_a3, window_s, first_removal):
    pol = HPA(spec_a3, {"node_type": "first", "stabilisation_s": window_s})
    loads = [0.7] + [0.2] * 8  # recommendation 4, then 2 every period
    actions = [pol.step(_obs([4, 0, 0], u)).action for u in loads]
    assert actions.index(1) == first_removal  # removal only once the high recommendation left the window
    assert all(a == 0 for a in actions[:first_removal])


@pytest.mark.parametrize(("delay_s", "first_removal"), [(0.0, 0), (180.0, 3), (3600.0, 60)])
def test_ds2_scale_down_delay(spec_a3, delay_s, first_removal):
    pol = DS2(spec_a3, {"node_type": "first", "scale_down_delay_s": delay_s})
    actions = [pol.step(_obs([4, 0, 0], 0.2)).action for _ in range(first_removal + 2)]
    assert actions.index(1) == first_removal


def test_ds2_desired_parallelism(spec_a3):
    pol = DS2(spec_a3)
    assert pol.desired_replicas(4, 0.35) == 2  # true rate per replica = (rate/4)/0.35: ceil(4 * 0.35 / 0.7)
    assert pol.desired_replicas(3, 0.7) == 3  # exactly at the target: no rounding up through float noise
    assert pol.desired_replicas(3, 0.71) == 4
    assert pol.desired_replicas(3, 0.0) == 1
    assert pol.step(_obs([1, 0, 0], 0.9)).action == 1 + 3 + 0  # adds the price-performance type (A: type 0)


@pytest.mark.parametrize("name", ["ds2", "hpa"])
def test_state_round_trip_keeps_windows_and_counters(spec_a3, name):
    params = {"node_type": "first"} | (
        {"scale_down_delay_s": 300.0} if name == "ds2" else {"stabilisation_s": 420.0, "period_s": 60.0}
    )
    pol = load("om", name)(paper_spec("A", 3, 10), params, 0)
    for u in (0.7, 0.2, 0.2):
        pol.step(_obs([4, 0, 0], u))
    clone = type(pol).from_state(paper_spec("A", 3, 10), pol.state_bytes())
    assert clone.state_bytes() == pol.state_bytes()
    rest = [0.2] * 6 + [0.9, 0.2]
    a = [pol.step(_obs([4, 0, 0], u)).action for u in rest]
    b = [clone.step(_obs([4, 0, 0], u)).action for u in rest]
    assert a == b
    assert a[0] == 0  # the restored window/counter still holds the scale-in back
    assert 1 in a
    assert clone.state_bytes() == pol.state_bytes()


@pytest.mark.parametrize("name", ["threshold", "threshold-speedup", "threshold-first"])
def test_threshold_state_round_trip(spec_a3, name):
    pol = load("om", name)(spec_a3, {"threshold": 0.6}, 0)
    pol.step(_obs([1, 0, 0], 0.3))
    clone = type(pol).from_state(paper_spec("A", 3, 10), pol.state_bytes())
    assert clone.params["threshold"] == 0.6
    assert clone.step(_obs([1, 0, 0], 0.65)).action == pol.step(_obs([1, 0, 0], 0.65)).action != 0


@pytest.mark.parametrize(
    ("name", "params", "field"),
    [
        ("threshold", {"threshold": 1.5}, "params.threshold"),
        ("threshold", {"scale_in_fraction": 1.0}, "params.scale_in_fraction"),
        ("ds2", {"target_utilisation": 0.0}, "params.target_utilisation"),
        ("ds2", {"scale_down_delay_s": -1.0}, "params.scale_down_delay_s"),
        ("ds2", {"node_type": "biggest"}, "params.node_type"),
        ("hpa", {"tolerance": 1.0}, "params.tolerance"),
        ("hpa", {"stabilisation_s": -60.0}, "params.stabilisation_s"),
        ("hpa", {"period_s": 0.0}, "params.period_s"),
        ("hpa", {"warp": 1}, "params.warp"),
    ],
)
def test_bad_params_name_the_field(spec_a3, name, params, field):
    with pytest.raises(ValueError, match=field.replace(".", r"\.")):
        load("om", name)(spec_a3, params, 0)


@pytest.mark.parametrize("name", BASELINES)
def test_short_taxi_smoke(taxi_head, name):
    from policies.sim.trace import load_trace

    res = run_paper(load_trace(taxi_head), name, "A", 3, 10)
    s = res.summary()
    assert s["steps"] == 3000
    assert s["violations_pct"] < 1.0  # the Taxi trace's first days stay well inside A's capacity
    assert 1 <= res.replicas.min() and res.replicas.max() <= 10


@pytest.mark.parametrize("name", BASELINES)
@pytest.mark.parametrize("u", [float("nan"), -0.5])
def test_broken_utilisation_measurement_does_not_scale(spec_a3, name, u):
    pol = _policy(name, spec_a3, **({} if name.startswith("threshold") else {"node_type": "first"}))
    prop = pol.step(_obs([4, 0, 0], u))
    assert prop.action == 0
    assert prop.explanation["rule"]["desired_replicas"] == 4


@pytest.mark.parametrize("name", ["ds2", "hpa"])
def test_rate_rules_default_to_price_performance_on_infrastructure_b(name):
    """Issue 24 item 4: the cheapest type of infrastructure B (speedup 0.05) cannot carry the load, so the old
    default violated in every period; the default now scales a type that can (and violates rarely)."""
    trace = np.concatenate([np.linspace(50.0, 600.0, 150), np.linspace(600.0, 50.0, 150)])
    res = run_paper(trace, name, "B", 3, 10)
    assert res.deployment[:, 1].max() == 0  # never the speedup-0.05 type
    assert res.summary()["violations_pct"] < 10.0
    cheapest = run_paper(trace, name, "B", 3, 10, params={"node_type": "cheapest"}).summary()
    assert cheapest["violations_pct"] == 100.0
