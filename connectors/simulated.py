"""The simulated engine: a trace-driven application whose operators behave as the queueing models of ``policies``.

It lets the whole control plane run without an engine (demos, experiments, control-plane benchmarks). The input
rate of slot ``i`` is ``trace[i % len(trace)] * rate_scale`` tuples/s at every source; an operator receives the sum
of its predecessors' output rates (input rate x selectivity). Each operator is an M/G/1 (or M/D/1) queue per
replica (``policies.operator_model.QueueModel``) on the node types of the application's catalog.

The deployment "running on the engine" is kept in a pluggable state store (in memory by default; the control loop
passes a durable one), so that a worker restart sees the same engine.
"""

from __future__ import annotations

import json
import math
import random
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from connectors.base import (
    ApplyResult,
    Cause,
    Connector,
    Deployment,
    Monitor,
    OperatorMetrics,
    Period,
    PeriodMetrics,
    Realizer,
    ScalingPlan,
)
from policies.graph import source_to_sink_paths, topological_order
from policies.operator_model import QueueModel


class StateStore(Protocol):
    def load(self) -> dict[str, Deployment] | None: ...

    def save(self, deployments: dict[str, Deployment]) -> None: ...


class InMemoryStore:
    def __init__(self) -> None:
        self._value: dict[str, Deployment] | None = None

    def load(self) -> dict[str, Deployment] | None:
        return None if self._value is None else json.loads(json.dumps(self._value))

    def save(self, deployments: dict[str, Deployment]) -> None:
        self._value = json.loads(json.dumps(deployments))


class JsonFileStore:
    """Engine state in a JSON file (written atomically)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Deployment] | None:
        return json.loads(self.path.read_text()) if self.path.exists() else None

    def save(self, deployments: dict[str, Deployment]) -> None:
        self.path.parent.mkdir(parents=True, exist_ok=True)
        tmp = self.path.with_suffix(".tmp")
        tmp.write_text(json.dumps(deployments, sort_keys=True))
        tmp.replace(self.path)


#: the simulated engine's mean service time per tuple on a speedup-1 node (ms) for a scaled operator whose
#: manifest declares none (connector setting ``serviceTimeMs``); a property of the simulated system only
SIMULATED_SERVICE_MS = 5.0


@dataclass
class SimOperator:
    """One operator of the simulated application.

    ``service_mean_s``: mean service time on a speedup-1 node (s); ``service_var_s2``: its variance (s^2; M/G/1
    with the variance of an exponential over two, mean^2 / 2, when not given); ``selectivity``: output tuples per
    input tuple.
    """

    name: str
    kind: str = "operator"
    service_mean_s: float = SIMULATED_SERVICE_MS / 1000.0
    service_var_s2: float = (SIMULATED_SERVICE_MS / 1000.0) ** 2 / 2.0
    queue: str = "mg1"
    selectivity: float = 1.0

    def model(self) -> QueueModel:
        return QueueModel(self.service_mean_s, self.service_var_s2, kind=self.queue)


@dataclass
class SimulatedApplication:
    """The application as the simulated engine sees it.

    ``speedups``: node-type name -> relative speed. ``streams``: edges (from, to). ``trace``: rates (tuples/s).
    ``noise``: relative standard deviation of measured rates (0 = exact). ``downtime_s``: simulated downtime of a
    reconfiguration (s). ``missing_slots``: slots whose metrics are reported as missing (fault injection).
    ``refuse_apply``: every apply fails and is rolled back (fault injection).
    """

    operators: list[SimOperator]
    streams: list[tuple[str, str]]
    speedups: dict[str, float]
    trace: Sequence[float]
    rate_scale: float = 1.0
    noise: float = 0.0
    seed: int = 0
    downtime_s: float = 0.0
    missing_slots: frozenset[int] = field(default_factory=frozenset)
    refuse_apply: bool = False

    def __post_init__(self) -> None:
        if not self.trace:
            raise ValueError("trace: must contain at least one rate")
        names = [op.name for op in self.operators]
        for src, dst in self.streams:
            for end in (src, dst):
                if end not in names:
                    raise ValueError(f"streams: edge ({src}, {dst}) names unknown operator {end!r}")
        try:
            self._order = topological_order(names, self.streams)
        except ValueError as exc:
            raise ValueError(f"streams: {exc}") from None

    def source_rate(self, slot: int) -> float:
        return float(self.trace[slot % len(self.trace)]) * self.rate_scale

    def input_rates(self, slot: int) -> dict[str, float]:
        """Input rate of every operator in slot ``slot`` (tuples/s)."""
        by_name = {op.name: op for op in self.operators}
        preds: dict[str, list[str]] = {n: [] for n in by_name}
        for src, dst in self.streams:
            preds[dst].append(src)
        rates: dict[str, float] = {}
        for name in self._order:
            if not preds[name]:
                rates[name] = self.source_rate(slot)
            else:
                rates[name] = sum(rates[p] * by_name[p].selectivity for p in preds[name])
        return rates

    def paths(self) -> list[list[str]]:
        """Every source-to-sink path (lists of operator names)."""
        return source_to_sink_paths([op.name for op in self.operators], self.streams)


class SimulatedMonitor(Monitor):
    def __init__(self, app: SimulatedApplication, realizer: SimulatedRealizer) -> None:
        self.app = app
        self.realizer = realizer

    def collect(self, period: Period) -> PeriodMetrics:
        if period.slot in self.app.missing_slots:
            return PeriodMetrics(
                period, {}, complete=False, reason="simulated metrics outage", cause=Cause.METRICS_MISSING
            )
        deployments = self.realizer.current()
        rng = random.Random(f"{self.app.seed}:{period.slot}")
        rates = self.app.input_rates(period.slot)
        ops: dict[str, OperatorMetrics] = {}
        for op in self.app.operators:
            dep = deployments.get(op.name, {})
            rate = rates[op.name] * (1.0 + self.app.noise * rng.gauss(0.0, 1.0) if self.app.noise else 1.0)
            rate = max(rate, 0.0)
            ops[op.name] = _operator_metrics(op, dep, rate, self.app.speedups, period.length_s)
        path_rt: dict[str, float] = {}
        for path in self.app.paths():
            total = 0.0
            for name in path:
                r = ops[name].response_time_s
                total += math.inf if r is None else r
            path_rt["->".join(path)] = total
        return PeriodMetrics(period, ops, path_rt)


def _operator_metrics(
    op: SimOperator, dep: Deployment, rate: float, speedups: dict[str, float], period_s: float
) -> OperatorMetrics:
    types = sorted(dep)
    if not types or sum(dep.values()) == 0:
        return OperatorMetrics(
            op.name,
            dict(dep),
            complete=False,
            reason="operator has no running replica",
            cause=Cause.NO_RUNNING_REPLICA,
        )
    k = np.array([dep[t] for t in types])
    speeds = np.array([speedups[t] for t in types], dtype=float)
    model = op.model()
    rt = model.response_time(k, speeds, rate)
    util = model.utilisation(k, speeds, rate)
    capacity = model.capacity(k, speeds)
    processed = min(rate, capacity)
    return OperatorMetrics(
        operator=op.name,
        deployment=dict(dep),
        input_rate=rate,
        processing_rate=processed,
        utilisation=min(util, 1.0),
        response_time_s=rt,
        response_time_p95_s=rt * 3.0 if math.isfinite(rt) else rt,
        service_time_mean_s=op.service_mean_s,
        service_time_var_s2=model.variance,
        backlog=max(rate - capacity, 0.0) * period_s,
    )


class SimulatedRealizer(Realizer):
    def __init__(self, app: SimulatedApplication, store: StateStore, initial: dict[str, Deployment]) -> None:
        self.app = app
        self.store = store
        if store.load() is None:
            store.save(initial)

    def current(self) -> dict[str, Deployment]:
        return self.store.load() or {}

    def apply(self, plan: ScalingPlan) -> ApplyResult:
        before = self.current()
        if self.app.refuse_apply:
            return ApplyResult(
                False, before, error="simulated engine refused the reconfiguration", rolled_back=True
            )
        after = dict(before)
        for name, target in plan.targets.items():
            if name not in after:
                return ApplyResult(False, before, error=f"unknown operator {name!r}", rolled_back=True)
            for t in target:
                if t not in self.app.speedups:
                    return ApplyResult(False, before, error=f"unknown node type {t!r}", rolled_back=True)
            after[name] = {t: int(n) for t, n in target.items() if n > 0}
        self.store.save(after)
        return ApplyResult(True, after, downtime_s=self.app.downtime_s if plan.targets else 0.0)


class SimulatedConnector(Connector):
    """Connector for ``engine: simulated`` applications."""

    engine = "simulated"

    def __init__(
        self,
        app: SimulatedApplication,
        initial: dict[str, Deployment],
        store: StateStore | None = None,
    ) -> None:
        self._realizer = SimulatedRealizer(app, store or InMemoryStore(), initial)
        self._monitor = SimulatedMonitor(app, self._realizer)

    @property
    def monitor(self) -> SimulatedMonitor:
        return self._monitor

    @property
    def realizer(self) -> SimulatedRealizer:
        return self._realizer


def settings_schema() -> dict[str, Any]:
    """Connector settings accepted for ``engine: simulated`` (name -> (type, default, meaning))."""
    return {
        "trace": (
            str,
            "taxi_last_month",
            "trace name shipped with the project or a file path (tuples/s per line)",
        ),
        "rateScale": (float, 1.0, "multiplier applied to the trace rates"),
        "noise": (float, 0.0, "relative standard deviation of measured rates"),
        "seed": (int, 0, "seed of the measurement noise"),
        "downtimeS": (float, 0.0, "simulated downtime of one reconfiguration (s)"),
        "serviceTimeMs": (
            float,
            SIMULATED_SERVICE_MS,
            "mean service time per tuple on a speedup-1 node (ms) of scaled operators declaring none",
        ),
    }
