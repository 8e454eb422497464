"""Sharing a path's measured end-to-end time among its operators (connectors.latency_share)."""

import pytest

from connectors.base import OperatorMetrics
from connectors.latency_share import RHO_CAP, queueing_estimate_s, share_path_latency

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
    assert ops["a"].response_time_s == pytest.approx(max(1.0 * 0.5, 2.0 * 0.25))
    assert ops["b"].response_time_s == pytest.approx(0.5) and ops["c"].response_time_s == pytest.approx(1.5)


def test_without_estimates_every_operator_keeps_the_whole_path_and_incomplete_ones_are_untouched():
    ops = {"a": _op("a"), "b": _op("b"), "c": _op("c", 0.01, 0.5, complete=False)}
    share_path_latency(ops, [["a", "b", "c"]], {"a->b->c": 3.0})
    assert ops["a"].response_time_s == 3.0 and ops["b"].response_time_s == 3.0
    assert ops["c"].response_time_s is None
    # an unmeasured path changes nothing
    other = {"a": _op("a", 0.01, 0.5)}
    assert share_path_latency(other, [["a"]], {}) == {} and other["a"].response_time_s is None
