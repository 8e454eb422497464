"""Naive AM (Alg. 5) against hand-computed bounds, example applications and input validation."""

from __future__ import annotations

import numpy as np
import pytest

from policies.am.naive import EQUAL_WEIGHTS, NaiveAM, fill_paths, naive_bounds
from policies.app_graphs import Application, OperatorDef, application
from policies.operator_model import infrastructure

R = 0.040


def test_alg5_pipeline_a_equal_thirds() -> None:
    # one path of three operators: R/3 each, no spare
    np.testing.assert_allclose(naive_bounds(application("A")), [R / 3] * 3)


def test_alg5_diamond_b_thirds_on_both_paths() -> None:
    # paths split-left-join and split-right-join, both of length 3: R/3 everywhere, both paths tight
    b = naive_bounds(application("B"))
    np.testing.assert_allclose(b, [R / 3] * 4)


def test_alg5_multisink_c_spare_goes_to_the_short_path() -> None:
    # paths filter-map-reduce (3) and filter-rank (2): filter gets min(R/3, R/2) = R/3, rank R/2 first;
    # path filter-rank then has R/6 spare, filter is frozen by the tight long path, so rank grows to 2R/3
    b = naive_bounds(application("C"))
    np.testing.assert_allclose(b, [R / 3, R / 3, R / 3, 2 * R / 3])
    app = application("C")
    sums = app.path_matrix() @ b
    np.testing.assert_allclose(sums, [R, R])


def test_spare_is_shared_proportionally_to_the_current_allocation() -> None:
    # one path, allocation 1:3 of total 8 -> scaled to 2 and 6
    on = np.array([[True, True]])
    np.testing.assert_allclose(fill_paths(on, np.array([1.0, 3.0]), 8.0), [2.0, 6.0])
    # over-full path is shrunk first
    np.testing.assert_allclose(fill_paths(on, np.array([5.0, 15.0]), 8.0), [2.0, 6.0])
    # batch form gives the same rows
    out = fill_paths(on, np.array([[1.0, 3.0], [1.0, 1.0]]), 8.0)
    np.testing.assert_allclose(out, [[2.0, 6.0], [4.0, 4.0]])


def test_alg5_on_a_graph_with_two_spare_paths() -> None:
    # a -> b -> c -> d and a -> e: lengths 4 and 2 -> a = R/4 frozen, e grows from R/2 to 3R/4
    ops = tuple(OperatorDef(n, 0.001, 0.0) for n in "abcde")
    app = Application("x", ops, (("a", "b"), ("b", "c"), ("c", "d"), ("a", "e")), R)
    np.testing.assert_allclose(naive_bounds(app), [R / 4, R / 4, R / 4, R / 4, 3 * R / 4])


def test_naive_am_uses_equal_weights_and_validates_budgets() -> None:
    am = NaiveAM(application("A"))
    assert am.configuration.weights == EQUAL_WEIGHTS
    with pytest.raises(ValueError, match="eta_v"):
        NaiveAM(application("A"), eta_v=1.0)
    with pytest.raises(ValueError, match="eta_r"):
        NaiveAM(application("A"), eta_r=-0.01)


def test_r_max_below_minimum_service_times_can_never_be_met() -> None:
    app = application("A", r_max_s=0.005)  # 1/350 + 1/270 + 1/180 s = 12.12 ms on speedup 1
    with pytest.raises(ValueError, match="r_max_s.*can never be met"):
        app.check_feasible(infrastructure("A", 1))
    # with a faster node type (speedup 1.3 in infrastructure A with 3 types) the floor is 9.32 ms: still unmeetable
    with pytest.raises(ValueError, match="filter -> map -> reduce"):
        app.check_feasible(infrastructure("A", 3))
    application("A", r_max_s=0.0122).check_feasible(infrastructure("A", 1))
    with pytest.raises(ValueError, match="can never be met"):
        NaiveAM(app, node_types=infrastructure("A", 1))
    application("A", r_max_s=0.0094).check_feasible(infrastructure("A", 3))
    with pytest.raises(ValueError, match="12.116 ms"):
        application("A", r_max_s=0.0121).check_feasible(infrastructure("A", 1))


def test_example_rates_follow_selectivities() -> None:
    wc = application("wordcount")
    # splitter x5, filter keeps 40 %: splitter 1, filter 5, counter 2, consumer 2 per source tuple
    np.testing.assert_allclose(wc.rate_gains(), [1.0, 5.0, 2.0, 2.0])
    assert wc.k_max == 20 and wc.r_max_s == pytest.approx(0.060)
    assert all(op.kind == "md1" and op.service_mean_s == pytest.approx(1 / 330) for op in wc.operators)
    b = application("B")
    assert b.paths() == [(0, 1, 3), (0, 2, 3)]
    np.testing.assert_allclose(b.rate_gains(), [1.0, 1.0, 1.0, 1.0])  # join receives 0.5 + 0.5


def test_bad_graphs_are_rejected_naming_the_field() -> None:
    op = OperatorDef("a", 0.001, 0.0)
    with pytest.raises(ValueError, match="edges: unknown operator 'z'"):
        Application("x", (op,), (("a", "z"),), R)
    ops = (op, OperatorDef("b", 0.001, 0.0))
    with pytest.raises(ValueError, match="cycle"):
        Application("x", ops, (("a", "b"), ("b", "a")), R)
    with pytest.raises(ValueError, match="selectivity"):
        OperatorDef("c", 0.001, 0.0, selectivity=-1.0)
    with pytest.raises(ValueError, match="unknown example"):
        application("Z")
