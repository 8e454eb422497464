"""What ``model-based`` plans with when the operator runs on a micro-batch engine (``engine_model``, issue 21).

Three uses of the engine model fitted online (:class:`policies.engine_model.MicroBatchModel`):

- **Which deployments carry a rate.** The threshold learner's per-replica bound grows linearly with replicas;
  a micro-batch engine does not (waves of tasks, a fixed per-batch overhead). Once the model is ready,
  :func:`class_thresholds` gives each performance class ``(n replicas, slowest speed)`` the largest arrival rate
  (tuples/s) whose predicted mean response time meets R_max, and the violation model ``v[c, l]`` becomes the
  probability that a rate of level ``l`` exceeds it.
- **Backlog-aware steps.** When the backlog left at the end of a period cannot drain within the next period at
  one more replica (:meth:`MicroBatchModel.drains_within`, post-change penalty included), :func:`backlog_target`
  names the smallest deployment that drains it (``multi_step``'s one-reconfiguration step); when none does, the
  smallest one with the most effective parallelism (the fastest drain). Under overload at a rate that no
  deployment is expected to carry, :func:`overload_target` names the one that carries the most: the violation
  model then reads "every deployment violates", and the cost alone would keep the cheapest.
- **Scale-ins that survive their settling.** A scale-in slows the batches of the next periods (the penalty
  measured after scale-ins); :func:`carries_while_settling` says which deployments carry the rate, and drain the
  backlog, at that penalty. ``model-based`` removes capacity only to those: a scale-in that carries the rate
  only once settled violates while it settles, and the violation scales out again.

Pure numpy, no Django.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from policies.engine_model import MicroBatchModel


@dataclass
class EngineContext:
    """What the last micro-batch observation said about the engine: trigger interval (s), partitions (None:
    unknown) and the control period (s, None: unknown)."""

    interval_s: float | None
    partitions: int | None
    period_s: float | None

    def state(self) -> list[Any]:
        return [self.interval_s, self.partitions, self.period_s]

    @classmethod
    def load(cls, state: list[Any] | None) -> EngineContext | None:
        return None if state is None else cls(*state)


def slowest_speed(k: np.ndarray, speedups: np.ndarray) -> float:
    """Relative speed of the slowest node type present in deployment ``k`` (1.0 for an empty one)."""
    present = np.asarray(k) > 0
    return float(np.min(np.asarray(speedups, dtype=float)[present])) if present.any() else 1.0


def class_thresholds(
    model: MicroBatchModel,
    ctx: EngineContext,
    r_max_s: float,
    class_n: np.ndarray,
    class_speed: np.ndarray,
) -> np.ndarray:
    """Per class, the largest arrival rate (tuples/s) whose predicted mean response time meets ``r_max_s`` (s)
    on ``class_n`` replicas whose slowest speed is ``class_speed``."""
    return np.array(
        [
            model.max_rate(int(n), ctx.interval_s, r_max_s, ctx.partitions, float(s))
            for n, s in zip(class_n.tolist(), class_speed.tolist(), strict=True)
        ]
    )


def carries_while_settling(
    model: MicroBatchModel,
    ctx: EngineContext,
    r_max_s: float,
    class_n: np.ndarray,
    class_speed: np.ndarray,
    rate: float,
    backlog: float | None,
    consider: np.ndarray | None = None,
) -> np.ndarray:
    """Per class ``(class_n replicas, slowest speed class_speed)``: whether a scale-in to it keeps the mean
    response time within ``r_max_s`` (s) through the periods right after the change, when every batch runs slower
    by the penalty the model measured after scale-ins (no executor starts cold there; the penalty after additions,
    2-2.5 on Spark here, forbade every scale-in): the class carries ``rate`` (tuples/s) at that penalty and, when
    ``backlog`` (tuples) exceeds one interval's arrivals, drains it within one period at that penalty. What a
    scale-in must satisfy: one that carries the rate only once settled violates while it settles, and the
    violation scales out again (seen on Spark and in simulation: 6 -> 4 -> 6 executors at 75 tuples/s, where 4
    carry 83 once settled and 64 while settling). ``consider`` (per class, default all): the classes to check; the
    others are returned True unchecked (the caller consults only the classes a scale-in can reach)."""
    out = np.zeros(len(class_n), dtype=bool)
    if consider is not None:
        out[~consider] = True
    period = ctx.period_s
    waiting = 0.0 if backlog is None or period is None else float(backlog)
    if waiting <= rate * (ctx.interval_s or 0.0):
        waiting = 0.0  # no more than one interval's arrivals: nothing carried to drain
    for c, (n, s) in enumerate(zip(class_n.tolist(), class_speed.tolist(), strict=True)):
        if consider is not None and not consider[c]:
            continue
        carried = model.max_rate(
            int(n), ctx.interval_s, r_max_s, ctx.partitions, float(s), after_scale_in=True
        )
        ok = rate <= carried
        if ok and waiting > 0.0 and period is not None:
            ok = model.drains_within(
                waiting, rate, int(n), ctx.interval_s, period, ctx.partitions, s, True, r_max_s, scale_in=True
            )
        out[c] = ok
    return out


def backlog_target(
    model: MicroBatchModel,
    ctx: EngineContext,
    k: np.ndarray,
    rate: float,
    backlog: float | None,
    speedups: np.ndarray,
    k_max: int,
    r_max_s: float,
    in_space: Any,  # callable: deployment -> bool
) -> tuple[np.ndarray, str] | None:
    """The deployment a multi-replica step should reach to drain ``backlog`` (tuples) within one period at
    ``rate`` (tuples/s), with the reason; None when there is no backlog beyond one interval's arrivals, the
    period is unknown, or one more replica drains it (an ordinary action does). Replicas are added to the node
    type in place with the most replicas; ``in_space``: whether a deployment may be proposed."""
    if backlog is None or ctx.period_s is None or not model.ready:
        return None
    interval = ctx.interval_s or 0.0
    if backlog <= rate * interval:
        return None
    k = np.asarray(k, dtype=np.int64)
    n_now = int(k.sum())
    t = int(np.argmax(k))
    speed = slowest_speed(k, speedups)
    period_s = ctx.period_s

    def drains(n: int) -> bool:
        return model.drains_within(
            backlog, rate, n, ctx.interval_s, period_s, ctx.partitions, speed, True, r_max_s
        )

    if n_now >= k_max or drains(n_now + 1):
        return None
    candidates = []
    for n in range(n_now + 2, k_max + 1):
        target = k.copy()
        target[t] += n - n_now
        if in_space(target):
            candidates.append((n, target))
    for n, target in candidates:
        if drains(n):
            return target, (
                f"backlog of {backlog:.0f} tuples at {rate:.1f} tuples/s: {n_now + 1} replicas would not drain it "
                f"within the {ctx.period_s:g}-s period, {n} would (engine model)"
            )
    if not candidates:
        return None
    best = max(model.parallelism(n, ctx.partitions) for n, _ in candidates)
    if best <= model.parallelism(n_now + 1, ctx.partitions):
        return None
    n, target = next((n, tg) for n, tg in candidates if model.parallelism(n, ctx.partitions) == best)
    return target, (
        f"backlog of {backlog:.0f} tuples at {rate:.1f} tuples/s: no deployment up to K_max drains it within the "
        f"{ctx.period_s:g}-s period; {n} replicas drain it fastest (engine model)"
    )


def overload_target(
    model: MicroBatchModel,
    ctx: EngineContext,
    k: np.ndarray,
    rate: float,
    speedups: np.ndarray,
    k_max: int,
    r_max_s: float,
    in_space: Any,  # callable: deployment -> bool
) -> tuple[np.ndarray, str] | None:
    """Under overload at a ``rate`` (tuples/s) that no deployment up to ``k_max`` is expected to carry within
    ``r_max_s``: the smallest deployment with the largest expected rate, with the reason (the violation model
    only says "every deployment violates", and its cost would keep the cheapest); None when some deployment
    carries the rate (the violation model decides) or none carries more than ``k``."""
    if not model.ready:
        return None
    k = np.asarray(k, dtype=np.int64)
    n_now, t = int(k.sum()), int(np.argmax(k))
    speed = slowest_speed(k, speedups)

    def carried(n: int) -> float:
        return model.max_rate(n, ctx.interval_s, r_max_s, ctx.partitions, speed)

    if carried(n_now) >= rate:
        return None
    candidates = []
    for n in range(n_now + 1, k_max + 1):
        target = k.copy()
        target[t] += n - n_now
        if in_space(target):
            candidates.append((n, target, carried(n)))
    if not candidates or any(c >= rate for _, _, c in candidates):
        return None
    best = max(c for _, _, c in candidates)
    if best <= carried(n_now):
        return None
    n, target, c = next(x for x in candidates if x[2] == best)
    return target, (
        f"{rate:.1f} tuples/s exceeds what any deployment up to K_max is expected to carry within R_max; {n} "
        f"replicas carry the most ({c:.1f} tuples/s, engine model)"
    )
