"""The connector of an application whose declared engine addresses are not (or no longer) covered by the
endpoints staff declared (``connectors.endpoints``): it never contacts the engine. Every period is incomplete
with the reason, every apply fails with it, and the engine's deployment is unknown (empty)."""

from __future__ import annotations

from connectors.base import (
    ApplyResult,
    Connector,
    Deployment,
    Monitor,
    Period,
    PeriodMetrics,
    Realizer,
    ScalingPlan,
)


class RefusedMonitor(Monitor):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def collect(self, period: Period) -> PeriodMetrics:
        return PeriodMetrics(period, {}, complete=False, reason=self.reason)


class RefusedRealizer(Realizer):
    def __init__(self, reason: str) -> None:
        self.reason = reason

    def apply(self, plan: ScalingPlan) -> ApplyResult:
        return ApplyResult(False, {}, error=self.reason)

    def current(self) -> dict[str, Deployment]:
        return {}


class RefusedConnector(Connector):
    """Stands in for the ``engine`` connector; ``reason`` says which address is refused and why (one line)."""

    def __init__(self, engine: str, reason: str) -> None:
        self.engine = engine
        self.reason = reason
        self._monitor = RefusedMonitor(reason)
        self._realizer = RefusedRealizer(reason)

    @property
    def monitor(self) -> RefusedMonitor:
        return self._monitor

    @property
    def realizer(self) -> RefusedRealizer:
        return self._realizer
