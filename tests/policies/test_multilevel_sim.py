"""Multi-level WordCount simulation (paper 004 Sec. 8.1): smoke runs of every ICS x ACS and the model pieces."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.sim.multilevel import (
    PipelineApp,
    StreamOperator,
    ThresholdOM,
    md1_response_time,
    run_multilevel,
    wordcount,
)


def daily(steps: int, peak: float = 600.0) -> np.ndarray:
    """A synthetic daily pattern, 0..peak tuples/s, one value per minute."""
    t = np.arange(steps)
    return peak * 0.5 * (1 - np.cos(2 * np.pi * t / 1440))


def test_wordcount_rates_and_bounds() -> None:
    app = wordcount()
    assert np.allclose(app.input_rates(600.0), [600.0, 3000.0, 1200.0, 1200.0])
    assert app.network_total_s() == pytest.approx(0.003)
    assert app.operator_bounds_s().sum() + app.network_total_s() == pytest.approx(app.r_max_s)


def test_md1_response_time() -> None:
    assert md1_response_time(165.0, 1, 330.0) == pytest.approx(1 / 330 + 0.5 / (2 * 330 * 0.5))
    assert md1_response_time(330.0, 1, 330.0) == math.inf


def test_unreachable_r_max_is_rejected_and_says_why() -> None:
    ops = (StreamOperator("a", "r1"), StreamOperator("b", "r2"))
    with pytest.raises(ValueError, match="r_max_s.*can never be met"):
        PipelineApp(ops, "r1", {("r1", "r2"): 0.002}, r_max_s=0.005)


def test_threshold_om_follows_paper_thresholds() -> None:
    om = ThresholdOM(k_max=20, mu=330.0, u_out=0.75, c=0.75)
    assert om.act(1, 0.8 * 330, False) == +1
    assert om.act(3, 0.5 * 330 * 3, False) == 0  # 2 replicas would run at 0.75 >= 0.5625
    assert om.act(3, 0.3 * 330 * 3, False) == -1  # 2 replicas would run at 0.45 < 0.5625


@pytest.mark.parametrize(("ics", "acs"), [("static", "threshold"), ("simple", "rl"), ("rl", "rl")])
def test_short_multilevel_run(ics: str, acs: str) -> None:
    steps = 1500
    res = run_multilevel(daily(steps), ics=ics, acs=acs, seed=3)
    assert len(res.violation) == steps
    assert res.replicas.min() >= 4 and res.replicas.max() <= 80
    assert res.nodes.max() <= 150
    # Replicas always fit on the nodes (two per node).
    assert np.all(res.replicas <= 2 * res.nodes)
    s = res.summary()
    if ics == "static":
        assert s["avg_active_nodes"] == 36.0
        assert s["rmax_violations_pct"] < 1.0  # threshold ACS with ample nodes
    else:
        assert s["avg_active_nodes"] < 36.0  # elastic ICS uses fewer nodes than the static baseline


def test_scale_outs_wait_when_the_ics_has_no_spare_node() -> None:
    # Simple provisioning with no idle node: every scale-out first waits one provisioning delay.
    rates = np.concatenate([np.full(30, 50.0), np.full(60, 550.0)])
    res = run_multilevel(rates, ics="simple", acs="threshold", rm_params={"n_idle": 0})
    assert res.unsatisfied.max() > 0
    assert res.unsatisfied[-1] == 0  # eventually served
    assert res.replicas[-1] > res.replicas[0]


def test_bad_policy_names() -> None:
    with pytest.raises(ValueError, match="ics"):
        run_multilevel(daily(10), ics="magic")
    with pytest.raises(ValueError, match="acs"):
        run_multilevel(daily(10), acs="magic")


def test_consolidation_after_reconfigurations_saves_nodes() -> None:
    rates = daily(2880)
    with_c = run_multilevel(rates, ics="simple", acs="threshold", consolidation=True, seed=1)
    without = run_multilevel(rates, ics="simple", acs="threshold", consolidation=False, seed=1)
    assert with_c.summary()["avg_active_nodes"] < without.summary()["avg_active_nodes"]
    # Consolidating happens within reconfigurations the ACS makes anyway: no extra restarts.
    assert with_c.summary()["reconfigurations_pct"] == pytest.approx(
        without.summary()["reconfigurations_pct"]
    )
