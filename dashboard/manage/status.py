"""Fleet status of an application: budget colours of violation/reconfiguration fractions, current cost per hour.

A fraction is compared with its budget (eta_V or eta_R): "within budget" (green) up to 80% of it, "near budget"
(amber) up to the budget, "over budget" (red) above it, "no data" before the first observed period.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from autoscaler import models as m

NEAR = 0.8  # fraction of the budget from which a value is shown as amber


@dataclass(frozen=True)
class Budget:
    """A measured fraction against its budget, with a colour class and the words saying the same."""

    value: float | None
    budget: float
    level: str  # "ok", "warn", "bad", "none"
    label: str

    @property
    def value_pct(self) -> str:
        return "" if self.value is None else f"{self.value * 100:.1f}%"

    @property
    def budget_pct(self) -> str:
        return f"{self.budget * 100:g}%"


def budget_status(value: float | None, budget: float) -> Budget:
    """Classify ``value`` (a fraction of periods, or None without data) against ``budget`` (same unit)."""
    if value is None:
        return Budget(None, budget, "none", "no data")
    if value > budget:
        return Budget(value, budget, "bad", "over budget")
    if value >= NEAR * budget - 1e-12 and value > 0:  # tolerance: 0.8 * 0.05 is 0.04000000000000001
        return Budget(value, budget, "warn", "near budget")
    return Budget(value, budget, "ok", "within budget")


def deployed_cost_per_hour(deployments: list[m.Deployment], prices: dict[tuple[int, str], float]) -> float:
    """Cost per hour (currency/h) of the replicas the engines run now (each deployment's status; its declared
    replicas while the control loop has not observed it): sum of replicas x price of their node type.

    ``prices``: (catalog id, node-type name) -> price per hour."""
    total = 0.0
    for dep in deployments:
        for node_type, count in dep.running_replicas.items():
            total += count * prices.get((dep.region.catalog_id, node_type), 0.0)
    return total


def unobserved(deployments: list[m.Deployment]) -> int:
    """How many of ``deployments`` the control loop has not observed yet (their cost is the declared one)."""
    return sum(dep.status_replicas is None for dep in deployments)


def node_type_prices() -> dict[tuple[int, str], float]:
    """Price per hour of every node type by (catalog id, name)."""
    return {
        (catalog_id, name): price
        for catalog_id, name, price in m.NodeType.objects.values_list("catalog_id", "name", "price_per_hour")
    }


def window_fractions(summary: dict[str, Any] | None) -> tuple[float | None, float | None, float | None]:
    """(violation fraction, reconfiguration fraction, observed cost per hour) over the aggregates' window."""
    if not summary:
        return None, None, None
    window = summary["window"]
    return window["violation_fraction"], window["reconfiguration_fraction"], window["cost_per_hour"]
