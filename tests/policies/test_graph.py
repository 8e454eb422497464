"""Operator-graph helpers shared by simulators, connectors and the control plane."""

import pytest

from policies.graph import source_to_sink_paths, topological_order


def test_paths_of_a_diamond_and_a_second_sink():
    nodes = ["src", "a", "b", "join", "sink", "side"]
    edges = [("src", "a"), ("src", "b"), ("a", "join"), ("b", "join"), ("join", "sink"), ("a", "side")]
    assert source_to_sink_paths(nodes, edges) == [
        ["src", "a", "join", "sink"],
        ["src", "a", "side"],
        ["src", "b", "join", "sink"],
    ]
    order = topological_order(nodes, edges)
    assert all(order.index(s) < order.index(d) for s, d in edges)


def test_cycle_is_rejected():
    with pytest.raises(ValueError, match="cycle"):
        topological_order(["a", "b", "c"], [("a", "b"), ("b", "c"), ("c", "b")])
