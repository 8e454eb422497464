"""Short-term trend of an operator's input rate and the lead time of its own scale-outs (model-based's
``trend_periods``).

A reactive policy plans for the rate it has just seen. On a rising rate that is one period late, and on a real
deployment a scale-out takes more than a period to become capacity: the request may wait for a node that is
being provisioned, or for the reconfiguration budget. For a policy that knows both the trend and its own lead time,
the rate to plan for is the rate expected when the change would take effect:

    planned rate = rate + slope x min(lead, run)      (tuples/s)

- ``slope`` (tuples/s per period, :class:`RateTrend`): the smallest of the last ``periods`` increments, and only
  when the rate rose in each of them, else 0. A single jump (a step, a flash crowd) or noise is not a trend; a
  ramp is. The smallest increment is the conservative extrapolation of what was seen.
- ``lead`` (periods, :class:`LeadTime`): how many periods the operator's own recent scale-outs took from the
  first proposal to the first period run with more capacity, the largest of the last :data:`LEAD_SAMPLES`
  (1 before the first one: the next period).
- ``run`` (periods): how long the rate has been rising. The extrapolation goes no further ahead than the
  evidence behind it.

Everything here is measured from the operator's own periods; the only setting is ``periods``, declared by the
policy's parameters. Pure Python, exact state round trip (:meth:`RateTrend.state`, :meth:`LeadTime.state`).
"""

from __future__ import annotations

import math
from collections import deque
from typing import Any

LEAD_SAMPLES = 3  # the lead time is the largest of this many recent scale-outs (periods)


class RateTrend:
    """The rate's consecutive rises (tuples/s per period) over the last ``periods`` periods."""

    def __init__(self, periods: int) -> None:
        self.periods = periods
        self.increments: deque[float] = deque(maxlen=max(periods, 1))
        self.run = 0  # periods in a row in which the rate rose

    def observe(self, rate_before: float, rate_now: float) -> None:
        """One period ended: the input rate went from ``rate_before`` to ``rate_now`` (tuples/s)."""
        rise = rate_now - rate_before
        self.increments.append(rise)
        self.run = self.run + 1 if rise > 0.0 else 0

    def slope(self) -> float:
        """Tuples/s per period: the smallest of the last ``periods`` increments when each was a rise, else 0."""
        if self.periods < 1 or self.run < self.periods:
            return 0.0
        return min(self.increments)

    def state(self) -> dict[str, Any]:
        return {"increments": list(self.increments), "run": self.run}

    def load(self, state: dict[str, Any] | None) -> None:
        self.increments.clear()
        self.run = 0
        if state:
            self.increments.extend(float(x) for x in state["increments"])
            self.run = int(state["run"])


class LeadTime:
    """Periods from a proposed scale-out to the first period that runs with more capacity, as realised."""

    def __init__(self) -> None:
        self.samples: deque[int] = deque(maxlen=LEAD_SAMPLES)
        self.pending: tuple[int, float] | None = None  # (step of the first proposal, capacity then)

    def proposed(self, step: int, capacity_now: float, capacity_target: float) -> None:
        """The policy proposed a deployment of ``capacity_target`` (sum of speedups) at ``step``; a proposal
        that adds no capacity ends the wait without a sample (the policy no longer asks for more)."""
        if capacity_target > capacity_now + 1e-9:
            if self.pending is None:
                self.pending = (step, capacity_now)
        else:
            self.pending = None

    def observed(self, step: int, capacity_now: float) -> None:
        """The period before ``step`` ran with ``capacity_now``: a wait that ends here is a sample."""
        if self.pending is not None and capacity_now > self.pending[1] + 1e-9:
            self.samples.append(step - self.pending[0] + 1)
            self.pending = None

    def periods(self) -> int:
        """The lead time to plan for (periods, >= 1)."""
        return max(self.samples, default=1)

    def state(self) -> dict[str, Any]:
        return {
            "samples": list(self.samples),
            "pending": None if self.pending is None else list(self.pending),
        }

    def load(self, state: dict[str, Any] | None) -> None:
        self.samples.clear()
        self.pending = None
        if state:
            self.samples.extend(int(x) for x in state["samples"])
            p = state["pending"]
            self.pending = None if p is None else (int(p[0]), float(p[1]))


def planned_rate(rate: float, trend: RateTrend, lead: LeadTime, wait: float = 0.0) -> tuple[float, int]:
    """The rate (tuples/s) to plan for and the horizon (periods) it was extrapolated over (0: no trend).
    ``wait``: periods before a scale-out proposed later could even start (a reconfiguration budget to refill),
    added to the lead time."""
    slope = trend.slope()
    if slope <= 0.0:
        return rate, 0
    extra = math.ceil(wait) if math.isfinite(wait) else trend.run  # no budget refill: as far as the evidence
    horizon = min(lead.periods() + extra, trend.run)
    return rate + slope * horizon, horizon
