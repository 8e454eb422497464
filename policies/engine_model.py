"""Performance model of a micro-batch stream engine (Spark Structured Streaming), fitted online from the
operator's own per-period metrics (issue 21).

What a micro-batch engine does that a per-record queue (``policies.operator_model.QueueModel``) does not describe
(docs/benchmarks.md, section bench_spark):

- every batch pays a fixed **overhead** (planning, scheduling, commit), whatever its size;
- a batch of ``r`` records on ``P`` partitions runs in ``ceil(P / k)`` **waves** of tasks on ``k`` executors, so its
  work goes as ``r / e`` with the *effective parallelism* ``e = P / ceil(P / k)`` (``k`` when ``P`` is unknown):
  executors beyond a divisor of ``P`` add nothing;
- a batch that outlasts the trigger interval ``T`` makes the next one larger (**backlog carried** across batches);
- for a batch or two after an executor joins, batches are **slower** (cold Python workers, state reloaded);
- executors need not add work linearly: on a host with fewer cores than executors, or with a shared driver, ``k``
  executors do the work of ``e(k) ** alpha`` (the **scaling exponent** ``alpha`` in (0, 1], learned).

The model::

    batch duration (s) = overhead_s + cost_s_per_record x records / effective_parallelism ** alpha

is fitted by least squares over a forgetting window of the last :data:`WINDOW` periods (each period gives one
sample: its mean batch duration and mean records per batch, which the linear model relates exactly as it
relates single batches). A window whose batch sizes per executor do not spread by :data:`MIN_SPREAD` (a steady
load on one executor count) identifies the line's level but not its slope: it keeps the per-record cost of the
last window that spread and refits the overhead. Periods within :data:`SETTLE_PERIODS` of an executor change are
kept out of the fit. ``alpha`` is chosen on a grid (:data:`SCALING_EXPONENTS`) once the settled periods ran on
two executor counts or more: the one of smallest squared error, kept only when it beats linear scaling by more
than the noise does (an F-test at :data:`SCALING_F`); a window on one executor count keeps the last exponent
learned. The ratio of a settling period's measured duration to the fit's prediction is the **post-change
penalty** (mean over the window, 1 before any). The mean response time is predicted as ``max(T, d) / 2 + d + offset`` (a record waits
half a trigger interval -- or half a batch when batches run back to back -- then its batch runs); ``offset``
(s, may be negative) is the mean gap between the measured response time and that formula, learned too.

Everything is learned from the operator's metrics; the settings (:data:`WINDOW`, :data:`MIN_SAMPLES`,
:data:`MIN_SPREAD`, :data:`SETTLE_PERIODS`, :data:`SCALING_EXPONENTS`, :data:`SCALING_F`) are declared
here. Pure numpy, no Django; ``to_state()`` / ``from_state()`` round-trip exactly through JSON.
"""

from __future__ import annotations

import math
from collections import deque
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from policies.operator_model import QueueModel

WINDOW = 40  # periods kept (the forgetting window): 10 minutes of 15-s periods
MIN_SAMPLES = 4  # fitted periods needed when they all ran on one executor count (two counts: 2 suffice)
MIN_SPREAD = (
    0.2  # the fit needs its records / parallelism to spread by this fraction of their mean (std/mean)
)
SETTLE_PERIODS = 2  # periods after an executor change whose batches measure the penalty, not the fit
CATCH_UP_TOLERANCE = (
    0.05  # a batch this close (fraction) to the steady-state one has caught up (no bound given)
)
#: candidate scaling exponents (alpha: k executors do e(k) ** alpha executors' work), from 0.2 to 1 by 0.05
SCALING_EXPONENTS = tuple(round(0.2 + 0.05 * i, 2) for i in range(17))
SCALING_F = 4.0  # F statistic a smaller exponent must beat (one parameter more, about the 95 % level)
MAX_BATCHES_PER_PERIOD = 10_000  # guard of the backlog simulation (batches of one period)


def effective_parallelism(
    executors: float, partitions: int | None = None, speed: float = 1.0, exponent: float = 1.0
) -> float:
    """Executors' worth of parallel work of a batch: ``speed x (P / ceil(P / k)) ** exponent`` with ``P``
    partitions and ``k`` executors (``speed x k ** exponent`` when ``P`` is unknown). ``speed``: relative speed of
    the slowest executor type; ``exponent``: the learned scaling exponent (1: linear in the waves)."""
    k = float(executors)
    if k <= 0:
        return 0.0
    return speed * _waves_parallelism(k, partitions) ** exponent


def _waves_parallelism(executors: float, partitions: int | None) -> float:
    """``P / ceil(P / k)`` for ``k > 0`` executors on ``P`` partitions (``k`` when ``P`` is unknown)."""
    if partitions is None or partitions <= 0:
        return executors
    return partitions / math.ceil(partitions / executors)


@dataclass(frozen=True)
class Sample:
    """One period of one operator. ``records``: mean records per micro-batch; ``duration_s``: mean batch duration
    (s); ``executors``; ``partitions`` (None: unknown); ``speed``: relative speed of the slowest executor type;
    ``interval_s``: trigger interval (s, None: continuous); ``response_time_s``: mean response time (s, None:
    not measured); ``settling``: within :data:`SETTLE_PERIODS` of an executor change; ``scale_in``: settling
    after a change that removed executors."""

    records: float
    duration_s: float
    executors: int
    partitions: int | None
    speed: float
    interval_s: float | None
    response_time_s: float | None
    settling: bool
    scale_in: bool = False

    @property
    def work(self) -> float:
        """records / effective parallelism (records per executor-equivalent), linear scaling."""
        return self.work_at(1.0)

    def work_at(self, exponent: float) -> float:
        """records / effective parallelism with scaling exponent ``exponent``."""
        return self.records / effective_parallelism(self.executors, self.partitions, self.speed, exponent)


@dataclass(frozen=True)
class Fit:
    """The fitted model: ``overhead_s`` (s per batch), ``cost_s_per_record`` (s per record on one effective
    executor), ``rmse_s`` (root mean squared error of the fitted durations, s), ``n`` (fitted periods),
    ``penalty`` (measured / predicted batch duration in the periods after an executor change; 1 without any),
    ``latency_offset_s`` (measured minus formula response time, s), ``executor_counts`` (distinct counts fitted)."""

    overhead_s: float
    cost_s_per_record: float
    rmse_s: float
    n: int
    penalty: float
    latency_offset_s: float
    executor_counts: int
    scaling_exponent: float = 1.0  # alpha: k executors do effective_parallelism ** alpha executors' work
    #: measured / predicted batch duration in the periods after a change that removed executors (1 without any):
    #: no executor starts cold there, so it is smaller than the penalty after additions
    scale_in_penalty: float = 1.0


class MicroBatchModel:
    """``batch duration = overhead + cost x records / effective parallelism``, fitted online (module doc)."""

    def __init__(
        self,
        window: int = WINDOW,
        min_samples: int = MIN_SAMPLES,
        settle_periods: int = SETTLE_PERIODS,
    ) -> None:
        if window < 2:
            raise ValueError(f"window: must be >= 2 periods, got {window}")
        if min_samples < 2:
            raise ValueError(f"min_samples: must be >= 2 periods, got {min_samples}")
        if settle_periods < 0:
            raise ValueError(f"settle_periods: must be >= 0, got {settle_periods}")
        self.window, self.min_samples, self.settle_periods = window, min_samples, settle_periods
        self.samples: deque[Sample] = deque(maxlen=window)
        self.last_executors: int | None = None  # executors of the last observed period
        self.since_change = settle_periods  # periods observed since the executor count last changed
        self.last_change = 0  # the sign of the last executor change (+1 added, -1 removed, 0 none yet)
        self._fit: Fit | None = None
        self._fitted = False  # _fit is up to date with the samples
        #: s per record of the last window whose batch sizes spread (None: never): carried through a window
        #: that cannot separate the overhead from the per-record cost
        self.cost_s_per_record: float | None = None
        #: the scaling exponent of the last window that ran on two executor counts or more (1 before any)
        self.scaling_exponent: float = 1.0

    # ---- learning ------------------------------------------------------------------------------------------
    def observe(
        self,
        records: float | None,
        duration_s: float | None,
        executors: int | None,
        partitions: int | None = None,
        interval_s: float | None = None,
        response_time_s: float | None = None,
        speed: float = 1.0,
    ) -> bool:
        """One period's measurements: mean records per batch, mean batch duration (s), executors in place,
        partitions (None: unknown), trigger interval (s), mean response time (s). Returns whether it became a
        sample; a period with a missing or non-positive field (no batch, no executor) only advances the
        executor-change clock when the executor count is known."""
        if executors is not None and executors > 0:
            if self.last_executors is not None and executors != self.last_executors:
                self.since_change = 0
                self.last_change = 1 if executors > self.last_executors else -1
            else:
                self.since_change += 1
            self.last_executors = int(executors)
        if records is None or duration_s is None or executors is None:
            return False
        if not (records > 0 and duration_s > 0 and executors > 0 and speed > 0):
            return False
        if not (math.isfinite(records) and math.isfinite(duration_s)):
            return False
        rt = response_time_s if response_time_s is not None and math.isfinite(response_time_s) else None
        interval = interval_s if interval_s is not None and interval_s > 0 else None
        parts = int(partitions) if partitions is not None and partitions > 0 else None
        self.samples.append(
            Sample(
                float(records),
                float(duration_s),
                int(executors),
                parts,
                float(speed),
                None if interval is None else float(interval),
                None if rt is None else float(rt),
                self.since_change < self.settle_periods,
                self.since_change < self.settle_periods and self.last_change < 0,
            )
        )
        self._fitted = False
        return True

    # ---- the fit -------------------------------------------------------------------------------------------
    def fit(self) -> Fit | None:
        """The least-squares fit over the window's settled periods; None while it cannot separate overhead from
        per-record cost (fewer than two periods, no spread of records / parallelism, a non-positive cost)."""
        if self._fitted:
            return self._fit
        self._fitted = True
        self._fit = None
        settled = [s for s in self.samples if not s.settling]
        if len(settled) < 2:
            return None
        y = np.array([s.duration_s for s in settled])
        counts = len({s.executors for s in settled})
        linear_work = np.array([s.work for s in settled])
        spread = bool(linear_work.std() > MIN_SPREAD * float(linear_work.mean()))
        alpha = self._scaling_exponent(settled, y) if spread and counts >= 2 else self.scaling_exponent
        x = np.array([s.work_at(alpha) for s in settled])
        if not spread:
            # batches of one size identify the level of the line, not its slope: keep the per-record cost of the
            # last window that spread (a steady load on one executor count for a whole window must not make the
            # model forget what it knew), and refit the overhead to the window
            if self.cost_s_per_record is None:
                return None
            b = self.cost_s_per_record
            a = max(float(np.mean(y - b * x)), 0.0)
        else:
            line = _line_fit(x, y)
            if line is None:
                return None
            a, b = line
            self.cost_s_per_record = float(b)
            self.scaling_exponent = alpha
        resid = y - (a + b * x)
        rmse = float(np.sqrt(np.mean(resid * resid)))
        ratios = [s.duration_s / (a + b * s.work_at(alpha)) for s in self.samples if s.settling]
        penalty = float(np.mean(ratios)) if ratios else 1.0
        ratios_in = [
            s.duration_s / (a + b * s.work_at(alpha)) for s in self.samples if s.settling and s.scale_in
        ]
        penalty_in = float(np.mean(ratios_in)) if ratios_in else 1.0
        gaps = [
            s.response_time_s - _latency(s.duration_s, s.interval_s)
            for s in settled
            if s.response_time_s is not None
        ]
        offset = float(np.mean(gaps)) if gaps else 0.0
        self._fit = Fit(float(a), float(b), rmse, len(settled), penalty, offset, counts, alpha, penalty_in)
        return self._fit

    @staticmethod
    def _scaling_exponent(settled: list[Sample], y: np.ndarray) -> float:
        """The exponent of :data:`SCALING_EXPONENTS` whose line fit has the smallest squared error, if it beats
        linear scaling (1) by more than noise: an F-test of the one extra parameter at :data:`SCALING_F` (periods
        on two executor counts or more; 1 otherwise). All exponents are fitted at once (one column each)."""
        dof = len(settled) - 3  # overhead, per-record cost, exponent
        if dof < 1:
            return 1.0
        alphas = np.asarray(SCALING_EXPONENTS, dtype=float)
        records = np.array([s.records / s.speed for s in settled])
        waves = np.array([_waves_parallelism(s.executors, s.partitions) for s in settled])
        _, _, errors = _line_fits(records[:, None] / waves[:, None] ** alphas[None, :], y)
        if not np.isfinite(errors).any():
            return 1.0
        best = len(alphas) - 1 - int(np.argmin(errors[::-1]))  # ties go to the larger exponent
        linear = errors[alphas == 1.0]
        linear_sse = float(linear[0]) if linear.size else math.inf
        if alphas[best] == 1.0 or linear_sse - errors[best] <= SCALING_F * errors[best] / dof:
            return 1.0
        return float(alphas[best])

    def parallelism(self, executors: int, partitions: int | None = None, speed: float = 1.0) -> float:
        """Executors' worth of work of ``executors`` under the fitted scaling exponent (linear before a fit)."""
        f = self.fit()
        return effective_parallelism(executors, partitions, speed, 1.0 if f is None else f.scaling_exponent)

    @property
    def ready(self) -> bool:
        """Whether the fit may be planned on: it exists, and its periods ran on two executor counts or more, or
        number at least ``min_samples``."""
        f = self.fit()
        return f is not None and (f.executor_counts >= 2 or f.n >= self.min_samples)

    def _params(self) -> Fit:
        f = self.fit()
        if f is None:
            raise ValueError("engine model: not fitted yet (too few periods, or no spread of batch sizes)")
        return f

    # ---- predictions ---------------------------------------------------------------------------------------
    def batch_s(
        self,
        records: float,
        executors: int,
        partitions: int | None = None,
        speed: float = 1.0,
        settling: bool = False,
        scale_in: bool = False,
    ) -> float:
        """Duration (s) of one batch of ``records`` records; ``settling``: right after an executor change (x the
        measured penalty; with ``scale_in``, the penalty measured after changes that removed executors)."""
        f = self._params()
        e = effective_parallelism(executors, partitions, speed, f.scaling_exponent)
        factor = (f.scale_in_penalty if scale_in else f.penalty) if settling else 1.0
        return batch_duration_s(f.overhead_s, f.cost_s_per_record, records, e, factor)

    def predict_batch_s(
        self,
        rate: float,
        executors: int,
        interval_s: float | None,
        partitions: int | None = None,
        speed: float = 1.0,
    ) -> float:
        """Steady-state mean batch duration (s) at an arrival ``rate`` (tuples/s): ``a + b rate T / e`` while that
        fits in the interval ``T``; else batches run back to back and settle at ``a / (1 - b rate / e)``
        (``inf`` at or beyond the capacity)."""
        f = self._params()
        e = effective_parallelism(executors, partitions, speed, f.scaling_exponent)
        return steady_batch_s(f.overhead_s, f.cost_s_per_record, rate, e, interval_s)

    def predict_latency_s(
        self,
        rate: float,
        executors: int,
        interval_s: float | None,
        partitions: int | None = None,
        speed: float = 1.0,
    ) -> float:
        """Steady-state mean response time (s) at ``rate`` (tuples/s): ``max(T, d) / 2 + d + offset``."""
        d = self.predict_batch_s(rate, executors, interval_s, partitions, speed)
        return _latency(d, interval_s) + self._params().latency_offset_s

    def queue_model(
        self, interval_s: float | None, partitions: int | None = None
    ) -> MicroBatchQueueModel | None:
        """The fit as a :class:`MicroBatchQueueModel` for simulations of this operator (steady state, trigger
        interval ``interval_s`` s, ``partitions``); None while the model is not :attr:`ready`."""
        if not self.ready:
            return None
        f = self._params()
        return MicroBatchQueueModel(
            service_mean_s=f.cost_s_per_record,
            service_var_s2=0.0,
            overhead_s=f.overhead_s,
            interval_s=float(interval_s or 0.0),
            partitions=int(partitions or 0),
            latency_offset_s=f.latency_offset_s,
            scaling_exponent=f.scaling_exponent,
        )

    def capacity(self, executors: int, partitions: int | None = None, speed: float = 1.0) -> float:
        """Throughput limit (tuples/s) of ``executors``: ``e / cost`` (batches back to back, the overhead
        amortised over ever larger batches). A sustained rate at or above it builds an unbounded backlog."""
        f = self._params()
        return effective_parallelism(executors, partitions, speed, f.scaling_exponent) / f.cost_s_per_record

    def max_rate(
        self,
        executors: int,
        interval_s: float | None,
        r_max_s: float,
        partitions: int | None = None,
        speed: float = 1.0,
        after_scale_in: bool = False,
    ) -> float:
        """The largest arrival rate (tuples/s) whose steady-state mean response time meets ``r_max_s`` (s) on
        ``executors`` (0 when even an idle query would not): the inverse of :meth:`predict_latency_s`.
        ``after_scale_in``: with every batch slowed by the penalty measured after scale-ins (when above 1), i.e.
        the rate the deployment carries through the periods right after a scale-in to it."""
        f = self._params()
        e = effective_parallelism(executors, partitions, speed, f.scaling_exponent)
        slow = max(f.scale_in_penalty, 1.0) if after_scale_in else 1.0
        a, b = f.overhead_s * slow, f.cost_s_per_record * slow
        r = r_max_s - f.latency_offset_s  # what the formula max(T, d) / 2 + d may reach
        t = interval_s or 0.0
        if e <= 0 or r <= 0:
            return 0.0
        if t > 0 and a < t and r < 1.5 * t:  # batches within the interval: r = T / 2 + a + b rate T / e
            return max(0.0, e * (r - 0.5 * t - a) / (b * t))
        # batches back to back: 1.5 d <= r with d = a / (1 - b rate / e)
        return max(0.0, e / b * (1.0 - 1.5 * a / r))

    def backlog_evolution(
        self,
        backlog: float,
        rate: float,
        executors: int,
        interval_s: float | None,
        period_s: float,
        partitions: int | None = None,
        speed: float = 1.0,
        settling: bool = False,
        scale_in: bool = False,
    ) -> list[tuple[float, float]]:
        """Batch by batch over one period of ``period_s`` seconds: ``(start s, records taken)`` of each batch that
        starts in it. The first batch takes the ``backlog`` (tuples waiting, at least one interval's arrivals),
        each next one what arrived while the previous ran (``max(T, d)``). ``settling``: every batch runs at the
        post-change penalty (``scale_in``: the one measured after scale-ins)."""
        t_int = interval_s or 0.0
        q = max(float(backlog), rate * t_int)
        out: list[tuple[float, float]] = []
        t = 0.0
        while t < period_s and len(out) < MAX_BATCHES_PER_PERIOD:
            out.append((t, q))
            d = self.batch_s(q, executors, partitions, speed, settling, scale_in)
            step = max(t_int, d)
            if not math.isfinite(step) or step <= 0:
                break
            t += step
            q = rate * step
        return out

    def backlog_after(
        self,
        backlog: float,
        rate: float,
        executors: int,
        interval_s: float | None,
        period_s: float,
        partitions: int | None = None,
        speed: float = 1.0,
        settling: bool = False,
    ) -> float:
        """Tuples waiting for a batch at the end of the period (:meth:`backlog_evolution`): what the batch that
        would start next takes, i.e. the arrivals since the last batch started in the period."""
        batches = self.backlog_evolution(
            backlog, rate, executors, interval_s, period_s, partitions, speed, settling
        )
        start, q = batches[-1]
        d = self.batch_s(q, executors, partitions, speed, settling)
        return rate * max(interval_s or 0.0, d)

    def drains_within(
        self,
        backlog: float,
        rate: float,
        executors: int,
        interval_s: float | None,
        period_s: float,
        partitions: int | None = None,
        speed: float = 1.0,
        settling: bool = False,
        r_max_s: float | None = None,
        scale_in: bool = False,
    ) -> bool:
        """Whether the query catches up within ``period_s`` (s): some batch starting in the period also finishes in
        it with a predicted response time within ``r_max_s`` (s) -- or, without a bound, no longer than the
        steady-state batch at this rate (within :data:`CATCH_UP_TOLERANCE`), i.e. back to its usual cadence."""
        t_int = interval_s or 0.0
        steady = self.predict_batch_s(rate, executors, interval_s, partitions, speed)
        offset = self._params().latency_offset_s
        if not math.isfinite(steady):  # at or above the capacity: every batch is larger than the last
            return False
        for start, q in self.backlog_evolution(
            backlog, rate, executors, interval_s, period_s, partitions, speed, settling, scale_in
        ):
            d = self.batch_s(q, executors, partitions, speed, settling, scale_in)
            if start + d > period_s:
                break
            if r_max_s is not None:
                if _latency(d, interval_s) + offset <= r_max_s:
                    return True
            elif d <= max(t_int, steady) * (1.0 + CATCH_UP_TOLERANCE):
                return True
        return False

    # ---- reporting and state -------------------------------------------------------------------------------
    def summary(self) -> dict[str, Any]:
        """The fit for an explanation: ``overhead_s``, ``cost_ms_per_record``, ``rmse_s``, ``n``, ``penalty``,
        ``latency_offset_s``, ``ready``; only ``n`` (periods in the window) and ``ready`` before a fit."""
        f = self.fit()
        if f is None:
            return {"n": len(self.samples), "ready": False}
        return {
            "overhead_s": f.overhead_s,
            "cost_ms_per_record": 1000.0 * f.cost_s_per_record,
            "rmse_s": f.rmse_s,
            "n": f.n,
            "penalty": f.penalty,
            "scale_in_penalty": f.scale_in_penalty,
            "latency_offset_s": f.latency_offset_s,
            "scaling_exponent": f.scaling_exponent,
            "ready": self.ready,
        }

    def to_state(self) -> dict[str, Any]:
        """JSON-able state; :meth:`from_state` restores it exactly."""
        return {
            "window": self.window,
            "min_samples": self.min_samples,
            "settle_periods": self.settle_periods,
            "last_executors": self.last_executors,
            "since_change": self.since_change,
            "last_change": self.last_change,
            "samples": [list(asdict(s).values()) for s in self.samples],
            "cost_s_per_record": self.cost_s_per_record,
            "scaling_exponent": self.scaling_exponent,
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> MicroBatchModel:
        """The model :meth:`to_state` described; ValueError naming the field when it is malformed."""
        try:
            model = cls(int(state["window"]), int(state["min_samples"]), int(state["settle_periods"]))
            last = state["last_executors"]
            model.last_executors = None if last is None else int(last)
            model.since_change = int(state["since_change"])
            model.last_change = int(state.get("last_change", 0))  # absent in states saved before it was kept
            for row in state["samples"]:
                model.samples.append(Sample(*row))
            cost = state.get("cost_s_per_record")  # absent in states saved before it was kept
            model.cost_s_per_record = None if cost is None else float(cost)
            alpha = state.get("scaling_exponent", 1.0)  # absent in states saved before it was learned
            if isinstance(alpha, bool) or not isinstance(alpha, int | float) or not 0.0 < alpha <= 1.0:
                raise ValueError(
                    f"engine model state: scaling_exponent must be a number in (0, 1], got {alpha!r}"
                )
            model.scaling_exponent = float(alpha)
        except KeyError as exc:
            raise ValueError(f"engine model state: missing field {exc.args[0]!r}") from exc
        except TypeError as exc:
            raise ValueError(f"engine model state: malformed samples ({exc})") from exc
        return model


def batch_duration_s(
    overhead_s: float, cost_s_per_record: float, records: float, parallelism: float, factor: float = 1.0
) -> float:
    """Duration (s) of one batch of ``records`` on ``parallelism`` effective executors: ``(overhead + cost x
    records / parallelism) x factor`` (the post-change penalty, 1 when settled); ``inf`` without parallelism."""
    if parallelism <= 0:
        return math.inf
    return (overhead_s + cost_s_per_record * records / parallelism) * factor


def steady_batch_s(
    overhead_s: float, cost_s_per_record: float, rate: float, parallelism: float, interval_s: float | None
) -> float:
    """Steady-state mean batch duration (s) at an arrival ``rate`` (tuples/s) on ``parallelism`` effective
    executors: ``a + b rate T / e`` while that fits in the trigger interval ``T`` (s); else batches run back to
    back and settle at ``a / (1 - b rate / e)``; ``inf`` at or beyond the capacity ``e / b``."""
    if parallelism <= 0:
        return math.inf
    a, b = overhead_s, cost_s_per_record
    if interval_s:
        d = a + b * rate * interval_s / parallelism
        if d <= interval_s:
            return d
    load = b * rate / parallelism
    return a / (1.0 - load) if load < 1.0 else math.inf


@dataclass(frozen=True)
class MicroBatchQueueModel(QueueModel):
    """A fitted micro-batch model seen through the :class:`policies.operator_model.QueueModel` interface, in steady state,
    so that the application simulator (the AM's BO, the what-if replay) runs a Spark operator as its engine runs
    it rather than as an M/G/1 queue per replica (issue 21, item 2).

    ``service_mean_s``: cost per record on one effective executor of speed 1 (s); ``overhead_s``: fixed cost of
    a batch (s); ``interval_s``: trigger interval (s, 0: batches back to back); ``partitions`` (0: unknown);
    ``latency_offset_s``: the learned gap between measured and formula response times (s). A deployment of
    ``k`` executors whose slowest type has speedup ``s`` runs at ``effective_parallelism(k, P, s, alpha)`` (a wave
    waits for its slowest task). The penalty after an executor change is a transient, not part of the steady
    state. ``service_var_s2`` is unused (0)."""

    overhead_s: float = 0.0
    interval_s: float = 0.0
    partitions: int = 0
    latency_offset_s: float = 0.0
    scaling_exponent: float = 1.0

    def __post_init__(self) -> None:
        super().__post_init__()
        if not 0.0 < self.scaling_exponent <= 1.0:
            raise ValueError(f"scaling_exponent: must be in (0, 1], got {self.scaling_exponent}")
        for name in ("overhead_s", "interval_s"):
            value = getattr(self, name)
            if not (math.isfinite(value) and value >= 0):
                raise ValueError(f"{name}: must be a finite number >= 0 (s), got {value}")
        if self.partitions < 0:
            raise ValueError(f"partitions: must be >= 0 (0: unknown), got {self.partitions}")

    def parallelism(self, k: np.ndarray, speedups: np.ndarray) -> float:
        """Effective executors of deployment ``k`` (replicas per node type) with ``speedups`` per type."""
        k = np.asarray(k)
        present = k > 0
        if not present.any():
            return 0.0
        slowest = float(np.asarray(speedups)[present].min())
        return effective_parallelism(int(k.sum()), self.partitions or None, slowest, self.scaling_exponent)

    def batch_s(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> float:
        """Steady-state mean batch duration (s) of deployment ``k`` at ``rate`` tuples/s."""
        e = self.parallelism(k, speedups)
        return steady_batch_s(self.overhead_s, self.service_mean_s, rate, e, self.interval_s or None)

    def response_time(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> float:
        """Mean response time (s): ``max(T, d) / 2 + d + offset`` (inf at or beyond the capacity)."""
        d = self.batch_s(k, speedups, rate)
        if not math.isfinite(d):
            return math.inf
        return _latency(d, self.interval_s or None) + self.latency_offset_s

    def replica_response_times(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> np.ndarray:
        """Every executor serves every batch: the operator's response time (s) for each node type."""
        return np.full(len(np.asarray(k)), self.response_time(k, speedups, rate))

    def utilisation(self, k: np.ndarray, speedups: np.ndarray, rate: float) -> float:
        """Busy fraction of the query, ``d / max(T, d)`` (1 when batches run back to back); beyond the capacity
        the load ``b rate / e`` (> 1), as a queue's rho."""
        e = self.parallelism(k, speedups)
        if e <= 0:
            return math.inf
        d = self.batch_s(k, speedups, rate)
        if not math.isfinite(d):
            return self.service_mean_s * rate / e
        return d / max(self.interval_s, d) if d > 0 else 0.0

    def capacity(self, k: np.ndarray, speedups: np.ndarray) -> float:
        """Throughput limit (tuples/s): ``e / b``."""
        return self.parallelism(k, speedups) / self.service_mean_s


def _latency(duration_s: float, interval_s: float | None) -> float:
    """Mean response time (s) of a record in batches of ``duration_s`` at trigger interval ``interval_s``: it
    waits half an interval (half a batch when batches run back to back), then its batch runs."""
    return 0.5 * max(interval_s or 0.0, duration_s) + duration_s


def _line_fit(x: np.ndarray, y: np.ndarray) -> tuple[float, float] | None:
    """Least-squares ``y = a + b x`` with ``a >= 0`` (else the line through the origin); None without a spread of
    ``x`` or a positive slope."""
    a, b, sse = _line_fits(x[:, None], y)
    return (float(a[0]), float(b[0])) if np.isfinite(sse[0]) else None


def _line_fits(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """:func:`_line_fit` of ``y`` (n) on every column of ``x`` (n x m) in closed form: intercepts, slopes and
    squared errors (``inf`` for a column without spread or a positive slope)."""
    xm, ym = x.mean(axis=0), float(y.mean())
    dx = x - xm
    sxx = (dx * dx).sum(axis=0)
    with np.errstate(divide="ignore", invalid="ignore"):
        b = (dx * (y - ym)[:, None]).sum(axis=0) / sxx
        a = ym - b * xm
        through_origin = a < 0.0  # no negative overhead: the line through the origin
        b = np.where(through_origin, (x * y[:, None]).sum(axis=0) / (x * x).sum(axis=0), b)
    a = np.where(through_origin, 0.0, a)
    resid = y[:, None] - (a + b * x)
    sse = (resid * resid).sum(axis=0)
    valid = (sxx > 0.0) & (b > 0.0)
    return a, b, np.where(valid, sse, np.inf)
