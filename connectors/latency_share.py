"""Per-operator response times from a path's end-to-end measurement, for engines that report only the latter.

An engine such as Flink measures the end-to-end response time at the sink but no time per operator. Handing every
operator the whole path's time blames all of them for a violation that one bottleneck caused: an operator at 10 %
utilisation sees the violation, learns a low per-replica bound and scales out for nothing (measured on Flink:
the idle splitter went to 4 slots at 12 % utilisation, 1.31x static peak's cost).

Here each path's measured time (s) is split among the operators on it in proportion to their queueing estimate
``S / (1 - rho)`` (M/M/1 response time of one replica: ``S`` the service time in s per tuple per replica,
``rho`` the busy fraction, capped at ``RHO_CAP`` so that a saturated operator takes nearly all the blame rather
than an infinite share). The shares of a path add up to its measured time, so the application-level picture is
unchanged, and a fixed overhead of the path (buffering, network) is spread in the same proportions. An operator
on several paths gets its largest share. Operators without an estimate (no busy time or no input) get no share;
on a path where no operator has one, every operator keeps the whole path's time (the conservative fallback).
"""

from __future__ import annotations

from connectors.base import OperatorMetrics

#: busy fraction at which an operator counts as saturated (its estimate is then 1 / (1 - RHO_CAP) service times)
RHO_CAP = 0.99


def queueing_estimate_s(m: OperatorMetrics) -> float | None:
    """M/M/1 response time (s) of one replica from the operator's service time and busy fraction, or None."""
    if not m.complete or m.service_time_mean_s is None or m.utilisation is None or m.service_time_mean_s <= 0:
        return None
    rho = min(max(m.utilisation, 0.0), RHO_CAP)
    return m.service_time_mean_s / (1.0 - rho)


def share_path_latency(
    operators: dict[str, OperatorMetrics],
    paths: list[list[str]],
    path_rt_s: dict[str, float],
    path_p95_s: dict[str, float] | None = None,
) -> dict[str, float]:
    """Set ``response_time_s`` (and ``response_time_p95_s``) of every complete operator on a measured path to
    its share of the path's time; returns each operator's share as a fraction (0..1) of its worst path.

    ``path_rt_s`` / ``path_p95_s`` are keyed by ``"->".join(path)``, in seconds."""
    estimates = {name: queueing_estimate_s(m) for name, m in operators.items()}
    best: dict[str, tuple[float, float, float | None]] = {}  # op -> (share s, fraction, p95 share s)
    for path in paths:
        key = "->".join(path)
        if key not in path_rt_s:
            continue
        total_s = path_rt_s[key]
        p95_s = (path_p95_s or {}).get(key)
        known = [estimates.get(op) or 0.0 for op in path]
        weight = sum(known)
        for op, est in zip(path, known, strict=True):
            frac = est / weight if weight > 0 else 1.0
            share = (total_s * frac, frac, None if p95_s is None else p95_s * frac)
            if op not in best or share[0] > best[op][0]:
                best[op] = share
    fractions: dict[str, float] = {}
    for op, (share_s, frac, p95_share) in best.items():
        m = operators.get(op)
        if m is None or not m.complete:
            continue
        m.response_time_s = share_s
        m.response_time_p95_s = p95_share if p95_share is not None else share_s
        fractions[op] = frac
    return fractions
