"""Operator graphs (DAGs): topological order and source-to-sink paths, shared by the simulators, the connectors
and the control plane. Nodes are any hashable names; successors are visited in edge order, sources in node order."""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Sequence
from typing import TypeVar

N = TypeVar("N", bound=Hashable)


def _successors(nodes: Sequence[N], edges: Iterable[tuple[N, N]]) -> dict[N, list[N]]:
    succ: dict[N, list[N]] = {n: [] for n in nodes}
    for src, dst in edges:
        succ[src].append(dst)
    return succ


def topological_order(nodes: Sequence[N], edges: Iterable[tuple[N, N]]) -> list[N]:
    """Kahn's order of ``nodes``; raise ValueError("the graph has a cycle") when there is none."""
    edges = list(edges)
    succ = _successors(nodes, edges)
    indeg = {n: 0 for n in nodes}
    for _, dst in edges:
        indeg[dst] += 1
    ready = [n for n in nodes if indeg[n] == 0]
    order: list[N] = []
    while ready:
        n = ready.pop(0)
        order.append(n)
        for m in succ[n]:
            indeg[m] -= 1
            if indeg[m] == 0:
                ready.append(m)
    if len(order) != len(nodes):
        raise ValueError("the graph has a cycle")
    return order


def source_to_sink_paths(nodes: Sequence[N], edges: Iterable[tuple[N, N]]) -> list[list[N]]:
    """Every path from a node without predecessors to a node without successors."""
    edges = list(edges)
    succ = _successors(nodes, edges)
    targets = {dst for _, dst in edges}
    out: list[list[N]] = []

    def walk(node: N, path: list[N]) -> None:
        if not succ[node]:
            out.append(path)
        for nxt in succ[node]:
            walk(nxt, path + [nxt])

    for n in nodes:
        if n not in targets:
            walk(n, [n])
    return out
