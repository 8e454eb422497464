"""A micro-batch engine run batch by batch: what ``policies.engine_model`` fits, played forward in time.

``policies.engine_model.MicroBatchModel`` learns ``batch duration = overhead + cost x records / effective
parallelism`` (with the scaling exponent, the penalty after an executor change) from an operator's metrics. This
module runs an engine with such parameters over time, so that the same model replays a recorded run
(``benchmarks.spark.prediction.engine_replay``) and drives the simulated engine's micro-batch mode
(``connectors.simulated_batches``, connector setting ``microBatch``), and through it a policy's closed loop
(``benchmarks.spark.closed_loop``):

- a batch starts at a trigger and takes every record waiting (what arrived since the previous batch started,
  plus what an earlier overload left);
- it runs ``overhead + cost x records / effective parallelism`` seconds (x the penalty in the
  ``settle_periods`` periods after an executor change: the one measured after additions, or after removals);
- the next batch starts ``max(interval, duration)`` after it (Spark triggers at once after a late batch), so a
  backlog carries across periods;
- a record's response time is half the gap since the previous batch started (it arrived uniformly in that gap)
  plus its batch's duration, plus the learned ``latency_offset_s`` (source, sink and network time).

Pure Python, no Django; the clock round-trips through JSON (``to_dict`` / ``from_dict``).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

from policies.engine_model import SETTLE_PERIODS, Fit, batch_duration_s, effective_parallelism

#: guard of one period's batch loop (batches of one period)
MAX_BATCHES_PER_PERIOD = 10_000
#: the trigger's step when no batch can start (no executor, nothing to read), s, when the interval is 0
IDLE_STEP_S = 1e-3


@dataclass(frozen=True)
class MicroBatchEngine:
    """The engine's parameters: ``overhead_s`` (s per batch), ``cost_s_per_record`` (s per record on one
    effective executor of speed 1), ``interval_s`` (trigger interval, s; 0: batches back to back),
    ``partitions`` (of the stateful stage; None: unknown, parallelism linear in the executors),
    ``scaling_exponent`` (in (0, 1]), ``penalty`` / ``scale_in_penalty`` (measured over predicted batch
    duration in the ``settle_periods`` periods after a change that added / removed executors),
    ``latency_offset_s`` (s, may be negative: measured minus formula response time)."""

    overhead_s: float
    cost_s_per_record: float
    interval_s: float
    partitions: int | None = None
    scaling_exponent: float = 1.0
    penalty: float = 1.0
    scale_in_penalty: float = 1.0
    settle_periods: int = SETTLE_PERIODS
    latency_offset_s: float = 0.0

    def __post_init__(self) -> None:
        for name in ("overhead_s", "cost_s_per_record", "interval_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0.0):
                raise ValueError(f"{name}: must be a finite number >= 0, got {value!r}")
        if self.cost_s_per_record <= 0.0:
            raise ValueError(f"cost_s_per_record: must be > 0, got {self.cost_s_per_record!r}")
        if not 0.0 < self.scaling_exponent <= 1.0:
            raise ValueError(f"scaling_exponent: must be in (0, 1], got {self.scaling_exponent!r}")
        for name in ("penalty", "scale_in_penalty"):
            if not (math.isfinite(getattr(self, name)) and getattr(self, name) > 0.0):
                raise ValueError(f"{name}: must be a finite number > 0, got {getattr(self, name)!r}")
        if self.settle_periods < 0:
            raise ValueError(f"settle_periods: must be >= 0, got {self.settle_periods!r}")
        if self.partitions is not None and self.partitions < 1:
            raise ValueError(f"partitions: must be >= 1, got {self.partitions!r}")

    @classmethod
    def from_fit(
        cls, fit: Fit, interval_s: float | None, partitions: int | None, settle_periods: int = SETTLE_PERIODS
    ) -> MicroBatchEngine:
        """The engine a fitted ``MicroBatchModel`` describes (its ``fit()``), at ``interval_s`` / ``partitions``."""
        return cls(
            overhead_s=fit.overhead_s,
            cost_s_per_record=fit.cost_s_per_record,
            interval_s=float(interval_s or 0.0),
            partitions=partitions,
            scaling_exponent=fit.scaling_exponent,
            penalty=fit.penalty,
            scale_in_penalty=fit.scale_in_penalty,
            settle_periods=settle_periods,
            latency_offset_s=fit.latency_offset_s,
        )

    def batch_s(
        self,
        records: float,
        executors: int,
        speed: float = 1.0,
        settling: bool = False,
        scale_in: bool = False,
    ) -> float:
        """Duration (s) of one batch of ``records`` on ``executors`` of relative ``speed``; ``settling``: in
        the periods after an executor change (x ``scale_in_penalty`` with ``scale_in``, else x ``penalty``)."""
        e = effective_parallelism(executors, self.partitions, speed, self.scaling_exponent)
        factor = (self.scale_in_penalty if scale_in else self.penalty) if settling else 1.0
        return batch_duration_s(self.overhead_s, self.cost_s_per_record, records, e, factor)


@dataclass(frozen=True)
class Batch:
    """One batch: ``start`` (s on the clock), ``records``, ``duration_s``, ``latency_s`` (the mean response
    time of its records, s, with the engine's latency offset, never below 0)."""

    start: float
    records: float
    duration_s: float
    latency_s: float


@dataclass
class BatchClock:
    """Where the engine is: ``next_start`` (s: the next trigger), ``prev_start`` (s: the last batch's start),
    ``arrived_until`` (s: arrivals counted up to here), ``waiting`` (records not yet in a batch), ``last``
    (the last batch started, as ``Batch`` fields; None before any)."""

    next_start: float
    prev_start: float
    arrived_until: float
    waiting: float = 0.0
    last: dict[str, float] | None = None

    @classmethod
    def starting(cls, t0: float, interval_s: float) -> BatchClock:
        """A query whose first trigger is at ``t0`` (s), as if a batch had started one interval before."""
        return cls(next_start=t0, prev_start=t0 - interval_s, arrived_until=t0)

    def run(
        self,
        engine: MicroBatchEngine,
        end: float,
        rate: float,
        executors: int,
        speed: float = 1.0,
        settling: bool = False,
        scale_in: bool = False,
    ) -> list[Batch]:
        """Advance to ``end`` (s) at arrival ``rate`` (records/s) on ``executors``; the batches that start
        before ``end`` (module doc). Arrivals up to ``end`` are counted; the records after the last trigger
        wait for the next one."""
        batches: list[Batch] = []
        while self.next_start < end and len(batches) < MAX_BATCHES_PER_PERIOD:
            s = self.next_start
            self.waiting += rate * max(0.0, s - self.arrived_until)
            self.arrived_until = max(self.arrived_until, s)
            if executors <= 0 or speed <= 0.0 or self.waiting <= 0.0:  # no executor, or nothing to read
                if self.waiting <= 0.0:  # the next batch's records arrive after this trigger
                    self.prev_start = s
                self.next_start = s + max(engine.interval_s, IDLE_STEP_S)
                continue
            records, self.waiting = self.waiting, 0.0
            d = engine.batch_s(records, executors, speed, settling, scale_in)
            latency = max(0.0, 0.5 * (s - self.prev_start) + d + engine.latency_offset_s)
            batch = Batch(s, records, d, latency)
            batches.append(batch)
            self.last = asdict(batch)
            self.prev_start, self.next_start = s, s + max(engine.interval_s, d)
        self.waiting += rate * max(0.0, end - self.arrived_until)
        self.arrived_until = max(self.arrived_until, end)
        return batches

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, value: dict[str, Any]) -> BatchClock:
        return cls(**value)
