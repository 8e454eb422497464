"""The connector contract (``connectors.base``) as tests every connector passes: a test module binds an engine
by subclassing :class:`ConnectorContract` and providing the ``harness`` fixture (a :class:`Harness`).

What every connector guarantees the control loop:

1. *observe agrees with the engine*: a complete period reports, per operator, the deployment the realizer says
   runs, and rates that are measured (never None in a complete period);
2. *apply, then observe agree*: after a verified ``apply`` the realizer's ``current()`` and the next complete
   period's deployments are the plan's targets;
3. *failures roll back*: a plan the engine cannot satisfy is reported not ok and rolled back, and the engine
   runs what it ran before;
4. *incomplete data is flagged, never zero*: a period without usable metrics is ``complete=False`` with a typed
   cause (not ``Cause.NONE``) and a reason; no operator of it reports a measured zero load as complete.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from connectors.base import Cause, Connector, Deployment, Period, PeriodMetrics, ScalingPlan


@dataclass
class Harness:
    """An engine bound for the contract. ``complete_period()``: the metrics of a complete period of the running
    engine (waiting for the engine as needed); ``scaled(current)``: a plan the engine can satisfy that changes at
    least one operator of ``current``; ``unsatisfiable(current)``: a plan it cannot satisfy; ``without_data()``:
    the metrics of a period with no usable data (the harness provokes it, e.g. a stopped job or a metrics
    outage, and restores the engine afterwards); ``operators``: the operators the connector scales."""

    connector: Connector
    operators: list[str]
    complete_period: Callable[[], PeriodMetrics]
    scaled: Callable[[dict[str, Deployment]], ScalingPlan]
    unsatisfiable: Callable[[dict[str, Deployment]], ScalingPlan]
    without_data: Callable[[], PeriodMetrics]


def positive(deployment: Deployment) -> Deployment:
    """Replicas per type without the zero entries (engines differ in listing types they run none of)."""
    return {t: int(n) for t, n in deployment.items() if int(n) > 0}


class ConnectorContract:
    """The four guarantees of the module doc; the subclass provides the ``harness`` fixture."""

    def test_contract_a_complete_period_reports_the_deployment_in_place(self, harness: Harness) -> None:
        metrics = harness.complete_period()
        assert metrics.complete and metrics.cause == Cause.NONE, (metrics.reason, metrics.cause)
        current = harness.connector.realizer.current()
        for name in harness.operators:
            m = metrics.operators[name]
            assert positive(m.deployment) == positive(current[name]), (name, m.deployment, current[name])
            assert m.input_rate is not None and m.input_rate >= 0, (name, m.input_rate)

    def test_contract_apply_then_observe_agree(self, harness: Harness) -> None:
        realizer = harness.connector.realizer
        plan = harness.scaled(realizer.current())
        result = realizer.apply(plan)
        assert result.ok, result.error
        now = realizer.current()
        for name, target in plan.targets.items():
            assert positive(result.deployments[name]) == positive(target), (name, result.deployments)
            assert positive(now[name]) == positive(target), (name, now[name], target)
        metrics = harness.complete_period()
        for name, target in plan.targets.items():
            assert positive(metrics.operators[name].deployment) == positive(target), name

    def test_contract_a_plan_the_engine_cannot_satisfy_is_rolled_back(self, harness: Harness) -> None:
        realizer = harness.connector.realizer
        before = {name: positive(d) for name, d in realizer.current().items()}
        result = realizer.apply(harness.unsatisfiable(before))
        assert not result.ok and result.error
        assert result.rolled_back, result
        after = {name: positive(d) for name, d in realizer.current().items()}
        assert all(after[name] == before[name] for name in harness.operators), (before, after)

    def test_contract_incomplete_data_is_flagged_never_zero(self, harness: Harness) -> None:
        metrics = harness.without_data()
        assert not metrics.complete
        assert metrics.cause != Cause.NONE and metrics.reason, (metrics.cause, metrics.reason)
        for name, m in metrics.operators.items():
            # an operator whose own metrics survived is measured; one without them has no rate, never a zero
            assert (m.input_rate is not None) if m.complete else (m.input_rate is None), (name, m)


def period_at(slot: int, length_s: float) -> Period:
    return Period(slot, slot * length_s, (slot + 1) * length_s)
