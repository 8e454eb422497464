"""Sharing a path's measured end-to-end time among its operators (connectors.latency_share)."""

import math

import pytest

from connectors.base import OperatorMetrics
from connectors.latency_share import RHO_CAP, SATURATED_UTILISATION, queueing_estimate_s, share_path_latency

PATH = ["src", "split", "count", "sink"]
KEY = "->".join(PATH)


def _op(name, service_s=None, util=None, complete=True):
    return OperatorMetrics(name, {"slot": 1}, input_rate=10.0, utilisation=util, service_time_mean_s=service_s,
                           complete=complete)  # fmt: skip


def test_queueing_estimate_is_mm1_with_a_capped_utilisation():
    assert queueing_estimate_s(_op("a", 0.01, 0.5)) == pytest.approx(0.02)
    assert queueing_estimate_s(_op("a", 0.01, 1.0)) == pytest.approx(0.01 / (1 - RHO_CAP))
    assert queueing_estimate_s(_op("a", None, 0.5)) is None
    assert queueing_estimate_s(_op("a", 0.01, None)) is None
    assert queueing_estimate_s(_op("a", 0.01, 0.5, complete=False)) is None


def test_the_bottleneck_takes_the_blame_and_shares_add_up_to_the_path():
    ops = {"src": _op("src"), "split": _op("split", 0.01, 0.12), "count": _op("count", 0.01, 0.95),
           "sink": _op("sink", 0.001, 0.05)}  # fmt: skip
    fractions = share_path_latency(ops, [PATH], {KEY: 4.0}, {KEY: 6.0})
    assert ops["src"].response_time_s == 0.0  # no estimate: no share
    total = sum(ops[n].response_time_s for n in PATH)
    assert total == pytest.approx(4.0)
    assert ops["count"].response_time_s > 3.2 and ops["split"].response_time_s < 0.5
    # the idle splitter stays under a per-operator bound of R_max / 2 = 1.5 s while the counter exceeds it
    assert ops["split"].response_time_s < 1.5 < ops["count"].response_time_s
    assert ops["count"].response_time_p95_s == pytest.approx(6.0 * fractions["count"])
    assert sum(fractions.values()) == pytest.approx(1.0)


def test_operator_on_two_paths_gets_its_larger_share():
    ops = {"a": _op("a", 0.01, 0.5), "b": _op("b", 0.01, 0.5), "c": _op("c", 0.03, 0.5)}
    share_path_latency(ops, [["a", "b"], ["a", "c"]], {"a->b": 1.0, "a->c": 2.0})
    # estimates 0.02, 0.02, 0.06 s; a->b leaves 0.96 s and a->c 1.92 s unexplained, in equal halves
    assert ops["a"].response_time_s == pytest.approx(max(0.02 + 0.48, 0.02 + 0.96))
    assert ops["b"].response_time_s == pytest.approx(0.5) and ops["c"].response_time_s == pytest.approx(1.02)


def test_without_estimates_every_operator_keeps_the_whole_path_and_incomplete_ones_are_untouched():
    ops = {"a": _op("a"), "b": _op("b"), "c": _op("c", 0.01, 0.5, complete=False)}
    share_path_latency(ops, [["a", "b", "c"]], {"a->b->c": 3.0})
    assert ops["a"].response_time_s == 3.0 and ops["b"].response_time_s == 3.0
    assert ops["c"].response_time_s is None
    # an unmeasured path changes nothing
    other = {"a": _op("a", 0.01, 0.5)}
    assert share_path_latency(other, [["a"]], {}) == {} and other["a"].response_time_s is None


def test_a_fixed_part_is_shared_equally_by_the_controlled_operators_not_by_how_busy_they_are():
    """1.2 s end to end, 0.04 s of it in queues (a counter 60 % busy, a splitter 20 % busy): each controlled
    operator carries half of the rest, as its bound is half of R_max. In proportion to the estimates, the counter
    carried 0.81 s against its 1.0-s bound and scaled out at 57 % busy on Flink."""
    ops = {"src": _op("src", 0.001, 0.1), "split": _op("split", 0.0124, 0.2), "count": _op("count", 0.013, 0.6),
           "sink": _op("sink", 0.001, 0.1)}  # fmt: skip
    est = {n: queueing_estimate_s(m) for n, m in ops.items()}
    fractions = share_path_latency(ops, [PATH], {KEY: 1.2}, controlled={"split", "count"})
    rest = 1.2 - sum(est.values())
    assert ops["count"].response_time_s == pytest.approx(est["count"] + rest / 2)
    assert ops["split"].response_time_s == pytest.approx(est["split"] + rest / 2)
    assert ops["src"].response_time_s == pytest.approx(est["src"])  # not controlled: its queue only
    assert sum(ops[n].response_time_s for n in PATH) == pytest.approx(1.2)
    assert sum(fractions.values()) == pytest.approx(1.0)
    assert ops["count"].response_time_s < 1.0 / 0.8 * 0.6  # well within its 1.0-s bound at 1.2 s of 2.0 s
    # without a list of controlled operators every operator with an estimate carries an equal part
    again = {n: _op(n, m.service_time_mean_s, m.utilisation) for n, m in ops.items()}
    share_path_latency(again, [PATH], {KEY: 1.2})
    assert again["src"].response_time_s == pytest.approx(est["src"] + (1.2 - sum(est.values())) / 4)


def test_a_saturated_operator_carries_the_backlog_and_a_short_path_scales_the_estimates_down():
    ops = {"split": _op("split", 0.0124, 0.3), "count": _op("count", 0.013, SATURATED_UTILISATION)}
    est = {n: queueing_estimate_s(m) for n, m in ops.items()}
    share_path_latency(ops, [["split", "count"]], {"split->count": 9.0}, controlled={"split", "count"})
    assert ops["split"].response_time_s == pytest.approx(
        est["split"]
    )  # not saturated: no part of the backlog
    assert ops["count"].response_time_s == pytest.approx(9.0 - est["split"])
    short = {n: _op(n, m.service_time_mean_s, m.utilisation) for n, m in ops.items()}
    total = sum(est.values())
    share_path_latency(
        short, [["split", "count"]], {"split->count": total / 2}, controlled={"split", "count"}
    )
    assert short["count"].response_time_s == pytest.approx(est["count"] / 2)


def test_an_unbounded_path_leaves_every_operator_with_a_queue_unbounded_and_no_nan():
    """The stationary simulated engine reports an overload as an infinite response time."""
    ops = {"a": _op("a", 0.01, 0.5), "b": _op("b"), "c": _op("c", 0.01, 1.0)}
    fractions = share_path_latency(ops, [["a", "b", "c"]], {"a->b->c": math.inf}, {"a->b->c": math.inf})
    assert ops["a"].response_time_s == math.inf and ops["c"].response_time_s == math.inf
    assert ops["b"].response_time_s == 0.0 and ops["b"].response_time_p95_s == 0.0
    assert not any(math.isnan(f) for f in fractions.values())
