"""Every registered OM policy: a short paper-mode run on a shipped trace, the control loop's call with its
explanation, and a durable-state round trip that continues identically."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.base import Observation
from policies.paths import SHIPPED_TRACES_DIR
from policies.registry import OM_POLICIES
from policies.sim.scenario import build_policy, paper_spec, run_paper
from policies.sim.trace import load_trace

TRACE = load_trace(SHIPPED_TRACES_DIR / "taxi_last_month.txt", steps=600)


@pytest.mark.parametrize("name", sorted(OM_POLICIES))
def test_short_run_and_summary(name):
    result = run_paper(TRACE, name, "A", 3, 10, seed=1, steps=300)
    summary = result.summary()
    assert summary["steps"] == 300
    assert math.isfinite(summary["avg_cost"]) and 0.0 <= summary["avg_cost"] <= 1.0
    assert result.replicas.min() >= 1 and result.replicas.max() <= 10
    # never scaling out (one type-0 replica) violates in most of these steps: every policy must react to the load
    spec = paper_spec("A", 3, 10)
    static = 100.0 * np.mean(
        [spec.model.response_time(np.array([1, 0, 0]), spec.speedups, r) > spec.r_max_s for r in TRACE[:300]]
    )
    assert static > 90.0
    assert summary["violations_pct"] < 0.6 * static


@pytest.mark.parametrize("name", sorted(OM_POLICIES))
def test_step_explains_and_state_round_trips(name):
    spec = paper_spec("A", 3, 10)
    policy = build_policy(name, spec, None, 3)
    if hasattr(policy, "set_trace"):
        policy.set_trace(TRACE)
    k = np.array([1, 0, 0])
    for rate in TRACE[:40]:
        proposal = policy.step(Observation(k, float(rate), response_time_s=0.01 if rate < 150 else 0.2))
        assert proposal.deployment.sum() >= 1
        assert proposal.explanation["policy"] == name
        k = proposal.deployment
    blob = policy.state_bytes()
    twin = type(policy).from_state(paper_spec("A", 3, 10), blob)
    if hasattr(twin, "set_trace"):
        twin.set_trace(TRACE)
    for rate in TRACE[40:80]:
        obs = Observation(k, float(rate), violated=bool(rate > 300))
        a, b = policy.step(obs), twin.step(obs)
        assert a.action == b.action
        k = a.deployment
    assert policy.state_bytes() == twin.state_bytes()


def test_named_variants_resolve_to_a_registered_policy_with_valid_parameters() -> None:
    from policies.registry import OM_VARIANTS, resolve_om

    for name, (base, params) in OM_VARIANTS.items():
        cls, resolved = resolve_om(name)
        assert cls.name == base and resolved == params
        cls.validate_params(resolved)  # the variant's parameters are accepted by the policy
    assert resolve_om("model-based") == (resolve_om("model-based-capacity")[0], {})
    with pytest.raises(ValueError, match="unknown om policy 'model-based-capacityy'.*model-based-capacity"):
        resolve_om("model-based-capacityy")
