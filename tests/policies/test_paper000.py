"""Paper 000's centralized vs decentralized model (policies/sim/paper000.py)."""

from __future__ import annotations

import numpy as np
import pytest

from policies.sim.paper000 import Model, generate_levels, rate_levels, run, transition_matrix


def daily_levels(steps: int = 3000) -> np.ndarray:
    t = np.arange(steps)
    rates = 250.0 + 150.0 * np.sin(2 * np.pi * t / 1440.0) + np.random.default_rng(0).normal(0, 15, steps)
    return rate_levels(np.clip(rates, 0, None))  # tuples/min -> levels of 20 tuples/min


def test_transition_matrix_is_stochastic_and_generates_a_chain_within_its_levels() -> None:
    levels = daily_levels()
    n = int(levels.max()) + 1
    p = transition_matrix(levels, n)
    np.testing.assert_allclose(p.sum(axis=1), 1.0)
    unseen = [lv for lv in range(n) if lv not in set(levels[:-1].tolist())]
    for lv in unseen:  # a level never left stays put
        assert p[lv, lv] == 1.0
    work = generate_levels(p, int(levels[0]), 2000, np.random.default_rng(1))
    assert work.min() >= 0 and work.max() < n
    # the generated chain only uses observed transitions
    assert all(p[a, b] > 0 for a, b in zip(work[:-1], work[1:], strict=False))


def test_the_literal_response_time_reading_can_never_meet_t_sla() -> None:
    assert Model(30, rt_mode="sum").violation.all()  # 943 ms of service times alone > 650 ms
    m = Model(30, rt_mode="max")
    assert not m.violation[0].any()  # no load: the slowest operator answers in 370 ms
    assert m.violation[29].all()  # 580 tuples/min exceed what 5 instances of op 3 serve within 650 ms


def test_centralized_mdp_beats_decentralized_and_reconfigures_less() -> None:
    levels = daily_levels(4000)
    n = int(levels.max()) + 1
    p = transition_matrix(levels, n)
    work = generate_levels(p, int(levels[0]), 4000, np.random.default_rng(2))
    model = Model(n)
    mdp = run("mdp", work, model, p)
    rl_plus = run("rl+", work, model, p, sweep_every=5)
    dec = run("decentralized", work, model, p, u_bar=0.8, sweep_every=5)
    assert mdp.avg_cost <= rl_plus.avg_cost + 1e-9
    assert mdp.avg_cost < dec.avg_cost
    assert dec.reconfigurations > mdp.reconfigurations
    assert 3 <= mdp.avg_instances <= 15 and mdp.steps == 3999


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [({"policy": "magic"}, "policy"), ({"u_bar": 0.0}, "u_bar"), ({"sweep_every": 0}, "sweep_every")],
)
def test_bad_run_parameters_name_the_field(kwargs: dict, field: str) -> None:
    args = {"policy": "rl+", "levels": np.array([1, 2, 3]), "model": Model(5)} | kwargs
    with pytest.raises(ValueError, match=field):
        run(**args)
    with pytest.raises(ValueError, match="rt_mode"):
        Model(5, rt_mode="mean")
    with pytest.raises(ValueError, match="p_true"):
        run("mdp", np.array([1, 2]), Model(5))
