"""The compact Matern-5/2 GP, expected improvement and the constrained BO of the AM."""

from __future__ import annotations

import math

import numpy as np
import pytest

from policies.am.bayesopt import PathSumDomain, SimplexDomain, minimize_constrained
from policies.am.gp import GaussianProcess, expected_improvement, matern52
from policies.app_graphs import application


def m52(d: float) -> float:
    return (1 + math.sqrt(5) * d + 5 / 3 * d * d) * math.exp(-math.sqrt(5) * d)


def test_matern52_values() -> None:
    x = np.array([[0.0, 0.0], [3.0, 4.0]])
    k = matern52(x, x, 2.0, 1.5)
    assert k[0, 0] == pytest.approx(1.5)
    assert k[0, 1] == pytest.approx(1.5 * m52(2.5))  # distance 5 / length scale 2


def test_gp_posterior_on_two_points_matches_hand_computation() -> None:
    # prior k(x, x') = m52(|x - x'| / 0.5), two noiseless observations y(0) = 1, y(1) = -1, query x = 0.25
    gp = GaussianProcess(lengthscale=0.5, variance=1.0, noise=0.0, optimize=False, normalize_y=False)
    gp.fit(np.array([[0.0], [1.0]]), np.array([1.0, -1.0]))
    k12 = m52(2.0)
    ks = np.array([m52(0.5), m52(1.5)])
    det = 1 - k12 * k12
    inv = np.array([[1, -k12], [-k12, 1]]) / det
    mean_hand = ks @ inv @ np.array([1.0, -1.0])
    var_hand = 1.0 - ks @ inv @ ks
    mean, std = gp.predict(np.array([[0.25]]))
    assert mean[0] == pytest.approx(mean_hand, rel=1e-7)
    assert std[0] ** 2 == pytest.approx(var_hand, rel=1e-6)
    # interpolates the data
    m, s = gp.predict(np.array([[0.0], [1.0]]))
    np.testing.assert_allclose(m, [1.0, -1.0], atol=1e-6)
    assert (s < 1e-3).all()


def test_expected_improvement_formula() -> None:
    # EI for N(0, 1) below best = 0 is phi(0) = 1/sqrt(2 pi); a point far above best has ~0 EI
    assert expected_improvement(np.array([0.0]), np.array([1.0]), 0.0)[0] == pytest.approx(
        1 / math.sqrt(2 * math.pi)
    )
    assert expected_improvement(np.array([10.0]), np.array([1.0]), 0.0)[0] < 1e-20
    # deterministic prediction: EI = max(best - mean, 0)
    assert expected_improvement(np.array([-2.0]), np.array([0.0]), 0.0)[0] == pytest.approx(2.0)


def test_gp_fit_with_likelihood_recovers_a_smooth_function() -> None:
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, size=(20, 1))
    y = np.sin(6 * x[:, 0])
    gp = GaussianProcess().fit(x, y)
    xt = np.linspace(0.05, 0.95, 30)[:, None]
    mean, _ = gp.predict(xt)
    assert np.abs(mean - np.sin(6 * xt[:, 0])).max() < 0.1


def test_bo_finds_the_known_optimum_of_a_cheap_objective_on_the_simplex() -> None:
    target = np.array([0.2, 0.5, 0.3])
    calls = []

    def f(w: np.ndarray):  # noqa: ANN202
        calls.append(w)
        return float(((w - target) ** 2).sum()), [], {}

    res = minimize_constrained(f, SimplexDomain(3), n_iter=25, x0=[np.ones(3) / 3], seed=3)
    assert len(calls) == 25
    assert np.abs(res.x - target).max() < 0.03
    assert res.evaluations == 25 and res.feasible


def test_constrained_bo_respects_the_constraint() -> None:
    # minimise distance to (0.6, 0.2, 0.2) subject to w0 <= 0.4: optimum on the boundary (0.4, 0.3, 0.3)
    target = np.array([0.6, 0.2, 0.2])

    def f(w: np.ndarray):  # noqa: ANN202
        return float(((w - target) ** 2).sum()), [float(w[0] - 0.4)], {}

    res = minimize_constrained(f, SimplexDomain(3), n_iter=25, x0=[np.ones(3) / 3], seed=1)
    assert res.feasible and res.x[0] <= 0.4
    assert np.abs(res.x - np.array([0.4, 0.3, 0.3])).max() < 0.05


def test_bo_over_path_sums_stays_in_the_domain_and_approaches_the_optimum() -> None:
    app = application("C")
    dom = PathSumDomain(app.path_matrix(), eps=0.05)
    target = np.array([0.2, 0.3, 0.5, 0.8])
    seen = []

    def f(x: np.ndarray):  # noqa: ANN202
        seen.append(x)
        return float(((x - target) ** 2).sum()), [], {}

    res = minimize_constrained(f, dom, n_iter=25, x0=[np.array([1 / 3, 1 / 3, 1 / 3, 2 / 3])], seed=2)
    assert all(dom.contains(x) for x in seen)
    assert float(((res.x - target) ** 2).sum()) < 0.005


def test_domains_sample_only_feasible_points() -> None:
    rng = np.random.default_rng(0)
    app = application("B")
    dom = PathSumDomain(app.path_matrix(), eps=0.02)
    pts = dom.sample(rng, 200)
    assert len(pts) > 100
    sums = pts @ app.path_matrix().T
    assert ((sums >= 0.98 - 1e-9) & (sums <= 1.02 + 1e-9)).all()
    assert ((pts > 0) & (pts < 1)).all()
    w = SimplexDomain(3).sample(rng, 100)
    np.testing.assert_allclose(w.sum(axis=1), 1.0)
    assert ((w > 0) & (w < 1)).all()


@pytest.mark.parametrize("bad", [0, -3, 2.5, True])
def test_iteration_count_below_one_is_rejected(bad: object) -> None:
    with pytest.raises(ValueError, match="n_bo"):
        minimize_constrained(lambda x: (0.0, [], {}), SimplexDomain(3), n_iter=bad)  # type: ignore[arg-type]


def test_timeout_stops_the_search_and_says_so() -> None:
    import time

    def slow(w: np.ndarray):  # noqa: ANN202
        time.sleep(0.05)
        return float(w[0]), [], {}

    res = minimize_constrained(slow, SimplexDomain(3), n_iter=25, x0=[np.ones(3) / 3], timeout_s=0.12)
    assert res.stopped.startswith("timeout") and 1 <= res.evaluations < 25
