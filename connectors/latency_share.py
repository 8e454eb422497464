"""Per-operator response times from a path's end-to-end measurement, for engines that report only the latter.

An engine such as Flink measures the end-to-end response time at the sink but no time per operator. Handing every
operator the whole path's time blames all of them for a violation that one bottleneck caused: an operator at 10 %
utilisation sees the violation, learns a low per-replica bound and scales out for nothing (measured on Flink:
the idle splitter went to 4 slots at 12 % utilisation, 1.31x static peak's cost).

Here each path's measured time T (s) is split in two parts. The queueing part: every operator on it gets its
queueing estimate ``E = S / (1 - rho)`` (M/M/1 response time of one replica: ``S`` the service time in s per tuple
per replica, ``rho`` the busy fraction, capped at ``RHO_CAP`` so that a saturated operator's estimate is large
but finite). The rest, ``T - sum E`` (source, sink and network time, the workers' buffers, and any backlog):

- when an operator on the path is saturated (busy ``SATURATED_UTILISATION`` of the time or more), it goes to the
  saturated operators in proportion to their estimates: the bottleneck takes the blame for the backlog it builds;
- otherwise it is the path's fixed part, which no deployment changes, and the controlled operators on the path
  (``controlled``; every operator with an estimate when none is given or none is on the path) carry equal shares
  of it: with the AM's initial bounds (equal shares of R_max along a path, Alg. 5) each carries the same fraction
  of its bound, so an operator exceeds its bound about when the path exceeds R_max. Split in proportion to the
  estimates (until 3 Dec), the busier of two operators carried most of a 1.1-s fixed part against its own bound
  of R_max / 2 and scaled out at 57 % busy (measured on Flink, docs/benchmarks.md).

When ``T <= sum E`` the estimates are scaled down to add up to T. The shares of a path add up to its measured
time, so the application-level picture is unchanged; p95 shares are the p95 in the same fractions. An operator on
several paths gets its largest share. Operators without an estimate (no busy time or no input) get no share; on a
path where no operator has one, every operator keeps the whole path's time (the conservative fallback).
"""

from __future__ import annotations

import math
from collections.abc import Collection

from connectors.base import OperatorMetrics

#: busy fraction at which an operator's estimate stops growing (it is then 1 / (1 - RHO_CAP) service times)
RHO_CAP = 0.99
#: busy fraction from which an operator counts as saturated: the unexplained part of its paths is its backlog
SATURATED_UTILISATION = 0.9


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
    controlled: Collection[str] | None = None,
) -> dict[str, float]:
    """Set ``response_time_s`` (and ``response_time_p95_s``) of every complete operator on a measured path to
    its share of the path's time (module doc); returns each operator's share as a fraction (0..1) of its worst
    path.

    ``path_rt_s`` / ``path_p95_s`` are keyed by ``"->".join(path)``, in seconds; ``controlled``: the operators
    the control loop scales (they carry a path's fixed part)."""
    estimates = {name: queueing_estimate_s(m) for name, m in operators.items()}
    best: dict[str, tuple[float, float, float | None]] = {}  # op -> (share s, fraction, p95 share s)
    for path in paths:
        key = "->".join(path)
        if key not in path_rt_s:
            continue
        total_s = path_rt_s[key]
        p95_s = (path_p95_s or {}).get(key)
        for op, share_s in zip(path, _shares(path, total_s, estimates, operators, controlled), strict=True):
            frac = share_s / total_s if 0 < total_s < math.inf else (1.0 if share_s > 0 else 0.0)
            share = (share_s, frac, None if p95_s is None else (p95_s * frac if frac > 0 else 0.0))
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


def _shares(
    path: list[str],
    total_s: float,
    estimates: dict[str, float | None],
    operators: dict[str, OperatorMetrics],
    controlled: Collection[str] | None,
) -> list[float]:
    """Each operator's share (s) of one path's measured ``total_s`` (module doc), in the path's order."""
    known = [estimates.get(op) or 0.0 for op in path]
    queued = sum(known)
    if queued <= 0.0:
        return [total_s] * len(path)  # nothing to share by: everyone keeps the whole path
    if not math.isfinite(total_s):  # an unbounded queue (a simulated overload): every operator with a queue
        return [total_s if e > 0.0 else 0.0 for e in known]
    if total_s <= queued:
        return [total_s * e / queued for e in known]
    rest = total_s - queued
    saturated = [
        e if e > 0.0 and (operators[op].utilisation or 0.0) >= SATURATED_UTILISATION else 0.0
        for op, e in zip(path, known, strict=True)
    ]
    if sum(saturated) > 0.0:
        weights = saturated
    else:
        carriers = [
            e > 0.0 and (controlled is None or op in controlled) for op, e in zip(path, known, strict=True)
        ]
        if not any(carriers):
            carriers = [e > 0.0 for e in known]
        weights = [1.0 if c else 0.0 for c in carriers]
    norm = sum(weights)
    return [e + rest * w / norm for e, w in zip(known, weights, strict=True)]
