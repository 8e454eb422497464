"""The simulated engine: a trace-driven application whose operators behave as the queueing models of ``policies``.

It lets the whole control plane run without an engine (demos, experiments, control-plane benchmarks). The input
rate of slot ``i`` is ``trace[i % len(trace)] * rate_scale`` tuples/s at every source; an operator receives the sum
of its predecessors' output rates (input rate x selectivity). Each operator is an M/G/1 (or M/D/1) queue per
replica (``policies.operator_model.QueueModel``) on the node types of the application's catalog.

The deployment "running on the engine" is kept in a pluggable state store (in memory by default; the control loop
passes a durable one), so that a worker restart sees the same engine.

By default every period is stationary: an operator's metrics are those of its queue at the period's rate, an
overload shows as an infinite response time and is forgotten in the next period. With ``carry_backlog`` (connector
setting ``backlog: true``) the engine is a fluid queue per operator carried from one period to the next (what a
real engine does, and what ``bench_flink``'s prediction replays): in a period of length T (s) an operator with
capacity c (tuples/s, ``QueueModel.capacity``) that runs a fraction f of the period (a reconfiguration stops the
job for ``downtime_s`` from the start of the next period) serves ``min(c f T, b0 + inflow T)`` records of its
backlog b0 plus inflow, keeps the rest as backlog b1 (records), and passes what it served downstream (x its
selectivity). Its response time is the queue's at the inflow rate (capped at ``MAX_FLUID_UTILISATION`` of c)
plus the mean backlog (b0 + b1) / 2 over c. A period the job is down throughout reports no metrics (job not
running), as a restarting engine does. The backlog state is kept in the state store with the deployment.

With ``path_latency_only`` (connector setting ``pathLatencyOnly: true``) the engine reports what Flink reports: the
end-to-end time of every path, no time per operator; each operator's response time is then its share of its paths'
times, computed exactly as the Flink monitor computes it (``connectors.latency_share``), so a policy run here sees
the attribution it sees on Flink.

With ``micro_batch`` (connector setting ``microBatch``) every scaled operator (kind ``operator``) is a
micro-batch query, as on Spark Structured Streaming: batch by batch, its backlog, next trigger and post-change
penalty carried across periods in the state store, reporting what the Spark monitor reports
(``connectors.simulated_batches``); sources and sinks stay stationary queues.
"""

from __future__ import annotations

import dataclasses
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
from connectors.latency_share import share_path_latency
from connectors.simulated_batches import QueryState, run_query
from policies.graph import source_to_sink_paths, topological_order
from policies.micro_batch_engine import MicroBatchEngine
from policies.operator_model import QueueModel


class StateStore(Protocol):
    """Where the simulated engine keeps what runs on it: the deployments and, with ``carry_backlog``, the queue
    state (``FluidState.to_dict``)."""

    def load(self) -> dict[str, Deployment] | None: ...

    def save(self, deployments: dict[str, Deployment]) -> None: ...

    def load_queue(self) -> dict[str, Any] | None: ...

    def save_queue(self, state: dict[str, Any]) -> None: ...


class InMemoryStore:
    def __init__(self) -> None:
        self._value: dict[str, Deployment] | None = None
        self._queue: dict[str, Any] | None = None

    def load(self) -> dict[str, Deployment] | None:
        return None if self._value is None else json.loads(json.dumps(self._value))

    def save(self, deployments: dict[str, Deployment]) -> None:
        self._value = json.loads(json.dumps(deployments))

    def load_queue(self) -> dict[str, Any] | None:
        return None if self._queue is None else json.loads(json.dumps(self._queue))

    def save_queue(self, state: dict[str, Any]) -> None:
        self._queue = json.loads(json.dumps(state))


class JsonFileStore:
    """Engine state in a JSON file (written atomically)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    def load(self) -> dict[str, Deployment] | None:
        return json.loads(self.path.read_text()) if self.path.exists() else None

    def save(self, deployments: dict[str, Deployment]) -> None:
        _write_json(self.path, deployments)

    @property
    def queue_path(self) -> Path:
        return self.path.with_name(self.path.stem + ".queue.json")

    def load_queue(self) -> dict[str, Any] | None:
        return json.loads(self.queue_path.read_text()) if self.queue_path.exists() else None

    def save_queue(self, state: dict[str, Any]) -> None:
        _write_json(self.queue_path, state)


def _write_json(path: Path, value: Any) -> None:
    """Write ``value`` as JSON to ``path`` atomically (a temporary file renamed over it)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(value, sort_keys=True))
    tmp.replace(path)


#: the simulated engine's mean service time per tuple on a speedup-1 node (ms) for a scaled operator whose
#: manifest declares none (connector setting ``serviceTimeMs``); a property of the simulated system only
SIMULATED_SERVICE_MS = 5.0
#: with ``carry_backlog``: the utilisation at which an operator's stationary queue term is evaluated when its
#: inflow reaches its capacity (beyond it the backlog term carries the overload); dimensionless
MAX_FLUID_UTILISATION = 0.95


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
    ``refuse_apply``: every apply fails and is rolled back (fault injection). ``carry_backlog``: fluid queues
    carried across periods, a reconfiguration's downtime stopping the next period (module doc).
    ``latency_offset_s``: time every path adds outside the operators' queues (s: sources, sinks, network).
    ``path_latency_only``: operators' response times are their shares of the paths' times, as on Flink;
    ``controlled``: the operators the control loop scales (they carry a path's fixed part there; None: all).
    ``micro_batch``: the scaled operators run as micro-batch queries of these parameters, each at its own
    per-record cost (``SimOperator.service_mean_s``; module doc).
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
    carry_backlog: bool = False
    latency_offset_s: float = 0.0
    path_latency_only: bool = False
    controlled: frozenset[str] | None = None
    micro_batch: MicroBatchEngine | None = None

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
        self._preds: dict[str, list[str]] = {n: [] for n in names}
        for src, dst in self.streams:
            self._preds[dst].append(src)
        self._by_name = {op.name: op for op in self.operators}
        #: with ``micro_batch``: each scaled operator's query engine, at its own per-record cost
        self.queries = {
            op.name: dataclasses.replace(self.micro_batch, cost_s_per_record=op.service_mean_s)
            for op in self.operators
            if self.micro_batch is not None and op.kind == "operator"
        }
        self._paths = source_to_sink_paths(names, self.streams)

    def source_rate(self, slot: int) -> float:
        return float(self.trace[slot % len(self.trace)]) * self.rate_scale

    def input_rates(self, slot: int) -> dict[str, float]:
        """Input rate of every operator in slot ``slot`` (tuples/s)."""
        rates: dict[str, float] = {}
        for name in self._order:
            preds = self._preds[name]
            if not preds:
                rates[name] = self.source_rate(slot)
            else:
                rates[name] = sum(rates[p] * self._by_name[p].selectivity for p in preds)
        return rates

    def inflow(self, preds: list[SimOperator], served_rate: dict[str, float], slot: int) -> float:
        """An operator's inflow (tuples/s) in slot ``slot``: what its predecessors ``preds`` served
        (``served_rate``, tuples/s) times their selectivity; the trace's rate at a source (no predecessor)."""
        if preds:
            return sum(served_rate[p.name] * p.selectivity for p in preds)
        return self.source_rate(slot)

    def paths(self) -> list[list[str]]:
        """Every source-to-sink path (lists of operator names; computed once per application)."""
        return [list(path) for path in self._paths]

    def in_order(self) -> list[tuple[SimOperator, list[SimOperator]]]:
        """Every operator in topological order with its predecessors (none: a source)."""
        return [(self._by_name[n], [self._by_name[p] for p in self._preds[n]]) for n in self._order]


@dataclass
class FluidState:
    """The queues of a ``carry_backlog`` engine after slot ``slot`` was observed: ``backlog`` per operator
    (records), ``down_s`` the downtime (s) still to come at the start of the next period; ``before`` /
    ``down_before`` the same before that slot was observed (a repeated collect of the slot starts from them)."""

    slot: int = -1
    backlog: dict[str, float] = field(default_factory=dict)
    down_s: float = 0.0
    before: dict[str, float] = field(default_factory=dict)
    down_before: float = 0.0

    @classmethod
    def from_dict(cls, value: dict[str, Any] | None) -> FluidState:
        """The state :meth:`to_dict` saved; empty queues for none, or for another mode's state (an application
        switched from ``microBatch`` to ``backlog``)."""
        if not value or "backlog" not in value:
            return cls()
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "slot": self.slot,
            "backlog": dict(self.backlog),
            "down_s": self.down_s,
            "before": dict(self.before),
            "down_before": self.down_before,
        }


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
        if self.app.carry_backlog or self.app.micro_batch is not None:
            if self.app.micro_batch is not None:
                ops = self._micro_batches(period, deployments)
            else:
                fluid = self._fluid(period, deployments)
                if fluid is None:
                    return PeriodMetrics(
                        period,
                        {},
                        complete=False,
                        reason="simulated job restarting (reconfiguration downtime)",
                        cause=Cause.JOB_NOT_RUNNING,
                    )
                ops = fluid
            if self.app.noise:  # the measurement error of the rates (the queues carry the true ones)
                for m in ops.values():
                    if m.input_rate is not None:
                        m.input_rate = max(m.input_rate * (1.0 + self.app.noise * rng.gauss(0.0, 1.0)), 0.0)
        else:
            rates = self.app.input_rates(period.slot)
            ops = {}
            for op in self.app.operators:
                rate = rates[op.name] * (
                    1.0 + self.app.noise * rng.gauss(0.0, 1.0) if self.app.noise else 1.0
                )
                ops[op.name] = _operator_metrics(
                    op, deployments.get(op.name, {}), max(rate, 0.0), self.app.speedups, period.length_s
                )
        path_rt: dict[str, float] = {}
        paths = self.app.paths()
        for path in paths:
            total = self.app.latency_offset_s
            for name in path:
                r = ops[name].response_time_s
                total += math.inf if r is None else r
            path_rt["->".join(path)] = total
        if self.app.path_latency_only:
            share_path_latency(ops, paths, path_rt, controlled=self.app.controlled)
        return PeriodMetrics(period, ops, path_rt)

    def _fluid(self, period: Period, deployments: dict[str, Deployment]) -> dict[str, OperatorMetrics] | None:
        """Advance the fluid queues over ``period`` (module doc) and return every operator's metrics; None when
        the job is down for the whole period. The new state is saved to the realizer's store."""
        store = self.realizer.store
        state = FluidState.from_dict(store.load_queue())
        if state.slot == period.slot:  # observed again (a retried tick): from the state before it
            backlog, down = dict(state.before), state.down_before
        else:
            backlog, down = dict(state.backlog), state.down_s
        length = max(period.length_s, 1e-9)
        stopped = min(down, length)
        running = 1.0 - stopped / length
        served_rate: dict[str, float] = {}
        after: dict[str, float] = {}
        ops: dict[str, OperatorMetrics] = {}
        for op, preds in self.app.in_order():
            name = op.name
            inflow = self.app.inflow(preds, served_rate, period.slot)
            dep = {t: n for t, n in deployments.get(name, {}).items() if n > 0}
            b0 = float(backlog.get(name, 0.0))
            if not dep:  # no replica: everything queues
                after[name], served_rate[name] = b0 + inflow * length, 0.0
                ops[name] = _operator_metrics(op, dep, inflow, self.app.speedups, period.length_s)
                continue
            k = np.array([dep[t] for t in sorted(dep)])
            speeds = np.array([self.app.speedups[t] for t in sorted(dep)], dtype=float)
            model = op.model()
            capacity = model.capacity(k, speeds)
            served = min(capacity * running * length, b0 + inflow * length)
            b1 = b0 + inflow * length - served
            after[name], served_rate[name] = b1, served / length
            stationary = model.response_time(k, speeds, min(inflow, MAX_FLUID_UTILISATION * capacity))
            rt = stationary + 0.5 * (b0 + b1) / capacity
            ops[name] = OperatorMetrics(
                operator=name,
                deployment=dict(dep),
                input_rate=inflow,
                processing_rate=served / length,
                utilisation=min(served / (capacity * length * running), 1.0) if running > 0 else None,
                response_time_s=rt,
                response_time_p95_s=rt + 2.0 * stationary,
                service_time_mean_s=op.service_mean_s,
                service_time_var_s2=model.variance,
                backlog=b1,
            )
        store.save_queue(FluidState(period.slot, after, down - stopped, backlog, down).to_dict())
        return ops if running > 0.0 else None

    def _micro_batches(
        self, period: Period, deployments: dict[str, Deployment]
    ) -> dict[str, OperatorMetrics]:
        """Run every scaled operator's micro-batch query over ``period`` (module doc; sources and sinks as
        stationary queues) and return every operator's metrics. The queries' state is saved to the realizer's
        store; a repeated collect of a slot starts from the state before it."""
        store = self.realizer.store
        saved = store.load_queue() or {}
        queries = (saved.get("before") if saved.get("slot") == period.slot else saved.get("queries")) or {}
        served_rate: dict[str, float] = {}
        after: dict[str, dict[str, Any]] = {}
        ops: dict[str, OperatorMetrics] = {}
        for op, preds in self.app.in_order():
            name = op.name
            inflow = self.app.inflow(preds, served_rate, period.slot)
            dep = deployments.get(name, {})
            if op.kind != "operator":
                ops[name] = _operator_metrics(op, dep, inflow, self.app.speedups, period.length_s)
                served_rate[name] = ops[name].processing_rate or 0.0
                continue
            query = self.app.queries[name]
            state = (
                QueryState.from_dict(queries[name])
                if name in queries
                else QueryState.starting(query, period.start)
            )
            ops[name], served_rate[name] = run_query(
                query, state, name, period, dep, inflow, self.app.speedups
            )
            after[name] = state.to_dict()
        store.save_queue({"slot": period.slot, "queries": after, "before": queries})
        return ops


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
        downtime = self.app.downtime_s if plan.targets else 0.0
        if self.app.carry_backlog and downtime > 0:  # the job stops from the start of the next period
            state = FluidState.from_dict(self.store.load_queue())
            state.down_s += downtime
            self.store.save_queue(state.to_dict())
        return ApplyResult(True, after, downtime_s=downtime)


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
        "backlog": (
            bool,
            False,
            "carry each operator's backlog across periods; a reconfiguration stops the job",
        ),
        "latencyOffsetMs": (float, 0.0, "time every path adds outside the operators' queues (ms)"),
        "pathLatencyOnly": (
            bool,
            False,
            "report only each path's end-to-end time; operators get their shares of it, as on Flink",
        ),
        "microBatch": (
            dict,
            None,
            "run the scaled operators as micro-batch queries: intervalMs, overheadMs, partitions, scalingExponent, "
            "penalty, scaleInPenalty, settlePeriods, latencyOffsetMs",
        ),
        "serviceTimeMs": (
            float,
            SIMULATED_SERVICE_MS,
            "mean service time per tuple on a speedup-1 node (ms) of scaled operators declaring none",
        ),
    }
