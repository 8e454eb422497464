"""Per-period executor controllers of ``bench_spark``. Each sees the period's measurements and returns the
executor count for the next period (None = leave it to Spark)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from benchmarks.live import clairvoyant_floor


@dataclass
class PeriodStats:
    """What one control period measured (rates in records/s, times in s)."""

    input_rate: float
    processed_rate: float
    batch_ratio: float  # mean batch duration / trigger interval (Spark Streaming's allocator signal)
    busy_s_per_s: float  # batch seconds per wall second (utilisation of the query)
    latency_mean_s: float | None
    latency_p95_s: float | None
    executors: int
    #: the period holds the query's first micro-batch (batchId 0), which includes the query's start-up (Python
    #: workers, executors registering; with dynamic allocation, the executors themselves): the OM policies
    #: neither learn from it nor scale on it, as the Spark monitor reports it incomplete
    startup: bool = False
    #: wall seconds from the trace's start (t0) to the end of the period
    elapsed_s: float = 0.0
    #: the period's micro-batches (``policies.engine_model``): mean duration (s) and records per batch; None
    #: without a batch
    batch_duration_s: float | None = None
    batch_records: float | None = None


class Strategy:
    name = ""
    dynamic = False  # Spark's own dynamic allocation decides

    def initial(self) -> int:
        return 1

    def decide(self, stats: PeriodStats) -> int | None:
        return None


class Static(Strategy):
    def __init__(self, name: str, executors: int) -> None:
        self.name, self.executors = name, executors

    def initial(self) -> int:
        return self.executors


class SparkDynamic(Strategy):
    """Spark's dynamic allocation with shuffle tracking (decides by itself)."""

    name = "spark-dynamic-allocation"
    dynamic = True


class StreamingRule(Strategy):
    """Spark Streaming's allocator rule: ratio = batch processing time / batch interval; add one executor above
    ``up``, remove one below ``down``."""

    name = "spark-streaming-rule"

    def __init__(self, k_max: int, up: float = 0.9, down: float = 0.3) -> None:
        self.k_max, self.up, self.down = k_max, up, down

    def decide(self, stats: PeriodStats) -> int | None:
        k = stats.executors
        if stats.startup:  # the query's start-up, not load (the Spark monitor reports it incomplete)
            return k
        if stalled(stats):  # a batch runs longer than the period: the ratio is above period / interval
            return min(self.k_max, k + 1)
        if stats.batch_ratio > self.up:
            return min(self.k_max, k + 1)
        if stats.batch_ratio < self.down:
            return max(1, k - 1)
        return k


class DS2(Strategy):
    """DS2 (paper 002): true processing rate per executor = records processed / busy time / executors; target
    = ceil(input rate / true rate per executor x (1 + headroom))."""

    name = "ds2"

    def __init__(self, k_max: int, headroom: float = 0.2) -> None:
        self.k_max, self.headroom = k_max, headroom
        #: the true rate per executor (records/s) of the last period with a finished batch
        self.true_rate: float | None = None

    def decide(self, stats: PeriodStats) -> int | None:
        k = stats.executors
        if stats.startup or k <= 0:  # start-up: see StreamingRule
            return k
        if stats.busy_s_per_s > 0 and stats.processed_rate > 0:
            self.true_rate = stats.processed_rate / stats.busy_s_per_s / k
        elif not stalled(stats):  # nothing arrived, nothing ran: nothing to measure
            return k
        if self.true_rate is None or self.true_rate <= 0:
            return k
        want = int(
            min(self.k_max, max(1, math.ceil(stats.input_rate / self.true_rate * (1 + self.headroom))))
        )
        # a period without a finished batch measured no capacity: never scale in on it
        return max(want, k) if stalled(stats) else want


def stalled(stats: PeriodStats) -> bool:
    """Records arrived in the period but no micro-batch finished in it: a batch has been running for longer
    than the period (overload), not an idle query."""
    return stats.busy_s_per_s <= 0 and stats.batch_duration_s is None and stats.input_rate > 0


class Clairvoyant(Strategy):
    """A reference, not a policy: it reads the future off the trace schedule. At the end of each period it sizes
    the next one for the mean arrival rate over ``[now, now + period + lead]`` (``lead`` covers the executor
    start, seconds) with ``headroom`` over ``mu`` records/s per executor, plus what is still unprocessed
    (records created so far minus records read by finished batches, less one micro-batch in flight) drained
    within one period. What knowing the future buys a strategy that still pays Spark's reconfiguration costs
    (the floor without them: ``clairvoyant_bound``)."""

    name = "clairvoyant"

    def __init__(
        self,
        schedule: Any,
        period_s: float,
        mu: float,
        k_max: int,
        headroom: float = 0.1,
        lead_s: float = 5.0,
        interval_s: float = 5.0,
    ) -> None:
        if mu <= 0:
            raise ValueError("mu: must be > 0 (records/s per executor)")
        self.schedule, self.period_s, self.mu, self.k_max = schedule, period_s, mu, k_max
        self.headroom, self.lead_s, self.interval_s = headroom, lead_s, interval_s
        self.processed = 0.0  # records read by finished batches so far
        self.last_s: float | None = None  # elapsed_s of the previous period's end

    def _size(self, rate: float) -> int:
        return int(min(self.k_max, max(1, math.ceil(rate * (1 + self.headroom) / self.mu))))

    def _rate(self, start_s: float, end_s: float) -> float:
        return mean_arrival_rate(self.schedule, start_s, end_s)

    def initial(self) -> int:
        return self._size(self._rate(0.0, self.period_s + self.lead_s))

    def decide(self, stats: PeriodStats) -> int | None:
        now = stats.elapsed_s
        length = self.period_s if self.last_s is None else now - self.last_s
        self.processed += stats.processed_rate * length
        self.last_s = now
        in_flight = self._rate(now - self.interval_s, now) * self.interval_s
        backlog = max(0.0, self.schedule.count_at(now) - self.processed - in_flight)
        rate = self._rate(now, now + self.period_s + self.lead_s)
        return self._size(rate + backlog / self.period_s)


def mean_arrival_rate(schedule: Any, start_s: float, end_s: float) -> float:
    """Mean arrival rate (records/s) of a ``TraceSchedule`` over ``[start_s, end_s)`` seconds after t0."""
    return (schedule.count_at(end_s) - schedule.count_at(start_s)) / max(end_s - start_s, 1e-9)


def clairvoyant_bound(schedule: Any, period_s: float, mu: float, peak: int, headroom: float = 0.1) -> float:
    """Executor-seconds of sizing every period exactly for its own mean arrival rate (``Clairvoyant`` without
    lead, lag or backlog; ``benchmarks.live.clairvoyant_floor``) as a fraction of ``peak`` executors all
    the time: no strategy that changes the count once per period and keeps ``headroom`` over ``mu`` records/s per
    executor in integer executors can use less."""
    floor = clairvoyant_floor(schedule.count_at, schedule.duration_s, period_s, mu, headroom)
    return floor / (peak * schedule.duration_s)


#: a policy named ``<policy>-pretrained`` first replays every earlier run's recorded periods (``pretrain``)
PRETRAINED = "-pretrained"


class OMPolicy(Strategy):
    """One of the project's OM policies (``policies.registry``) on a single executor profile. ``policy`` may
    end in ``-pretrained``: the name then says the runner pre-trains it on earlier runs (``pretrain``)."""

    def __init__(
        self,
        policy: str,
        k_max: int,
        r_max_s: float,
        service_s: float,
        max_rate: float,
        engine: tuple[int, float, float] | None = None,
    ) -> None:
        from policies import registry
        from policies.operator_model import NodeType, OperatorSpec, QueueModel, RateLevels

        self.name = policy
        #: (partitions, trigger interval s, control period s): the batch measurements go to the policy as the
        #: Spark monitor reports them (``policies.engine_model``); None: they do not
        self.engine = engine
        self.wants_history = policy.endswith(PRETRAINED)
        policy = policy.removesuffix(PRETRAINED)
        self.r_max_s = r_max_s
        spec = OperatorSpec(
            node_types=(NodeType("exec.small", 1.0, 0.005, 1, 512),),
            k_max=k_max,
            r_max_s=r_max_s,
            model=QueueModel(service_s, service_s * service_s / 2.0),
            rate_levels=RateLevels(30, max_rate),
        )
        cls, params = registry.resolve_om(policy)
        self.policy: Any = cls(spec, params or None, 0)

    def decide(self, stats: PeriodStats) -> int | None:
        obs = observation(stats, self.r_max_s, self.engine)
        if obs is None:  # incomplete (see PeriodStats): keep the deployment
            return stats.executors
        return int(np.sum(self.policy.step(obs).deployment))

    def pretrain(self, series: list[dict[str, Any]]) -> int:
        """Learn from recorded periods (rows of ``RunResult.series``: the ``PeriodStats`` fields) without acting
        on the proposals; returns how many periods were replayed."""
        fields = PeriodStats.__dataclass_fields__
        for row in series:
            self.decide(PeriodStats(**{k: row[k] for k in fields if k in row}))
        return len(series)


def observation(stats: PeriodStats, r_max_s: float, engine: tuple[int, float, float] | None) -> Any:
    """The ``policies.base.Observation`` of one period as the Spark monitor reports it (input and processing
    rates in records/s, mean e2e latency s, busy fraction, and with ``engine`` = (partitions, trigger interval
    s, control period s) the micro-batch fields); None for a period the monitor reports incomplete (no latency
    reported, or the query's start-up)."""
    from policies.base import Observation

    if stats.latency_mean_s is None or stats.startup:
        return None
    obs = Observation(
        deployment=np.array([stats.executors]),
        input_rate=stats.input_rate,
        response_time_s=stats.latency_mean_s,
        violated=stats.latency_mean_s > r_max_s,
        utilisation=min(stats.busy_s_per_s, 1.5),
        processing_rate=stats.processed_rate,
    )
    if engine is not None and stats.batch_duration_s is not None:
        partitions, interval, period = engine
        obs.batch_duration_s, obs.batch_records = stats.batch_duration_s, stats.batch_records
        obs.partitions, obs.batch_interval_s, obs.period_s = partitions, interval, period
        # the Spark monitor's estimate without a source-reported backlog
        obs.backlog = stats.input_rate * max(0.0, stats.batch_duration_s - interval)
    return obs
