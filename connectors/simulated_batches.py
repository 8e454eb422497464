"""The simulated engine's micro-batch mode (connector setting ``microBatch``): one operator as a Spark Structured
Streaming query, batch by batch (``policies.micro_batch_engine``).

Per period ``[start, end)`` the query's clock runs the batches whose trigger falls in it at the period's inflow
rate (records/s) on the executors in place; the backlog, the next trigger and the penalty after an executor
change carry to the next period. What it reports is what the Spark monitor (``connectors.spark.monitor``) reports
from the batches that started in the period:

- input rate = the inflow (records/s); processing rate = records of those batches over the period (records/s);
- utilisation = the sum of their durations over the period, capped at 1;
- response time (s) = their record-weighted mean latency (with the engine's latency offset); a period in which no
  batch starts because one runs since before it is overload: utilisation 1, the latency of that running batch
  (a period without a batch and without one running, nothing having arrived, is incomplete, as on Spark);
- backlog = records waiting for a batch at the end; service time = busy time x executors / records (s);
- the micro-batch fields the engine model learns from: mean batch duration (s), mean records per batch, the
  partitions and the trigger interval (s).

The executor count of a period is the sum of the deployment's replicas, the speed that of its slowest node type.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from connectors.base import Cause, Deployment, OperatorMetrics, Period
from policies.micro_batch_engine import BatchClock, MicroBatchEngine


@dataclass
class QueryState:
    """One query between periods: its ``clock`` (``BatchClock.to_dict``), the ``executors`` of the last period
    observed (None before any), the periods observed ``since_change`` of its executor count, and whether that
    change removed executors (``scale_in``)."""

    clock: dict[str, Any]
    executors: int | None
    since_change: int
    scale_in: bool = False

    @classmethod
    def starting(cls, engine: MicroBatchEngine, t0: float) -> QueryState:
        """A query whose first trigger is at ``t0`` (s), settled (no change yet)."""
        return cls(BatchClock.starting(t0, engine.interval_s).to_dict(), None, engine.settle_periods)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> QueryState:
        return cls(**value)

    def to_dict(self) -> dict[str, Any]:
        return {
            "clock": dict(self.clock),
            "executors": self.executors,
            "since_change": self.since_change,
            "scale_in": self.scale_in,
        }


def run_query(
    engine: MicroBatchEngine,
    state: QueryState,
    name: str,
    period: Period,
    deployment: Deployment,
    inflow: float,
    speedups: dict[str, float],
) -> tuple[OperatorMetrics, float]:
    """Run operator ``name``'s query over ``period`` at ``inflow`` (records/s) on ``deployment`` (module doc),
    advancing ``state`` in place; returns its metrics and the rate it passes downstream (records/s)."""
    dep = {t: int(n) for t, n in deployment.items() if n > 0}
    executors = sum(dep.values())
    speed = min((speedups[t] for t in dep), default=0.0)
    if state.executors is not None and executors != state.executors:
        state.since_change, state.scale_in = 0, executors < state.executors
    else:
        state.since_change += 1
    state.executors = executors
    clock = BatchClock.from_dict(state.clock)
    settling = state.since_change < engine.settle_periods
    batches = clock.run(engine, period.end, inflow, executors, speed, settling, state.scale_in)
    state.clock = clock.to_dict()
    length = max(period.length_s, 1e-9)
    if not dep:
        return OperatorMetrics(
            name,
            dep,
            complete=False,
            reason="operator has no running replica",
            cause=Cause.NO_RUNNING_REPLICA,
        ), 0.0
    last = clock.last
    running_since_before = last is not None and last["start"] + last["duration_s"] > period.start
    if not batches and not running_since_before:  # nothing arrived to read
        return OperatorMetrics(
            name, dep, complete=False, reason="no micro-batch in this period", cause=Cause.METRICS_MISSING
        ), 0.0
    common = {
        "partitions": engine.partitions,
        "batch_interval_s": engine.interval_s,
        "backlog": clock.waiting,
    }
    if not batches:  # one batch runs since before the period: overload, not missing data
        return OperatorMetrics(
            operator=name,
            deployment=dep,
            input_rate=inflow,
            processing_rate=0.0,
            utilisation=1.0,
            response_time_s=float(last["latency_s"]) if last else None,
            reason="a micro-batch runs since before the period",
            **common,
        ), 0.0
    records = np.array([b.records for b in batches])
    durations = np.array([b.duration_s for b in batches])
    latency = float(np.average([b.latency_s for b in batches], weights=records))
    rows, busy = float(records.sum()), float(durations.sum())
    metrics = OperatorMetrics(
        operator=name,
        deployment=dep,
        input_rate=inflow,
        processing_rate=rows / length,
        utilisation=min(busy / length, 1.0),
        response_time_s=latency,
        response_time_p95_s=float(max(b.latency_s for b in batches)),
        service_time_mean_s=busy * executors / rows,
        batch_duration_s=float(durations.mean()),
        batch_records=float(records.mean()),
        **common,
    )
    return metrics, rows / length
