"""What the project's simulator predicts for a recorded bench_spark run (the sim-to-real gap we track).

The simulator (``policies.sim``) models an operator as k replicas of an M/G/1 queue (``policies.operator_model.QueueModel``,
Pollaczek-Khinchine) whose service time mean and variance the AM fits from observations
(``policies.am.bo.fit_queue_model``). Here the observations are the run's own periods: per period, the service
time of one record on one executor (s) = busy executor-seconds / records processed, with busy executor-seconds =
batch-busy seconds per second x executors x period length. The prediction replays, period by period, the trace
rate of the period (tuples/s) on the executors recorded in that period, and adds the micro-batch delay of
Structured Streaming (a record waits on average half an interval for its batch, then the batch runs: 1.5
intervals in total), which the per-record queue model does not contain.

Unlike the fluid model in ``runner.fluid_prediction`` the queue model is stationary per period: it carries no
backlog from one period to the next, so it under-predicts after overloads. Both are reported.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from policies.am.bo import fit_queue_model
from policies.engine_model import MicroBatchModel
from policies.micro_batch_engine import BatchClock, MicroBatchEngine
from policies.operator_model import QueueModel

MIN_PERIODS = 2  # periods with processed records needed to fit a model


def service_times_s(series: list[dict[str, Any]]) -> np.ndarray:
    """Per-period service time of one record on one executor (s), from periods that processed records."""
    out = []
    for row in series:
        rate, busy, k = row.get("processed_rate", 0.0), row.get("busy_s_per_s", 0.0), row.get("executors", 0)
        if rate > 0 and busy > 0 and k > 0:
            out.append(busy * k / rate)
    return np.array(out, dtype=float)


def fitted_model(series: list[dict[str, Any]]) -> QueueModel | None:
    """The M/G/1 per-executor model fitted from the run, or None with fewer than ``MIN_PERIODS`` usable periods."""
    st = service_times_s(series)
    if st.size < MIN_PERIODS:
        return None
    return fit_queue_model(st)


def simulator_prediction(
    series: list[dict[str, Any]],
    rate_at,  # noqa: ANN001 - callable: seconds since the trace start -> tuples/s
    t0: float,
    interval_s: float,
    r_max_s: float,
) -> tuple[float, float] | None:
    """(violations % of periods, mean response time s) predicted for the recorded executor series, or None when
    no model can be fitted. An unstable period (utilisation >= 1) counts as a violation and is left out of the
    mean."""
    model = fitted_model(series)
    if model is None or not series:
        return None
    speed = np.ones(1)
    violations, finite = 0, []
    for row in series:
        k = np.array([max(1, int(row["executors"]))])
        times = np.arange(row["start"], row["end"], 1.0)
        lam = float(np.mean([rate_at(s - t0) for s in times])) if len(times) else 0.0
        r = model.response_time(k, speed, lam) + 1.5 * interval_s
        violations += int(r > r_max_s)
        if np.isfinite(r):
            finite.append(r)
    return 100.0 * violations / len(series), float(np.mean(finite)) if finite else float("inf")


# ---- the engine model (policies.engine_model) -----------------------------------------------------------------


def engine_model(series: list[dict[str, Any]], partitions: int | None, interval_s: float) -> MicroBatchModel:
    """The micro-batch engine model fitted from a run's periods as ``model-based`` fits it online: per period,
    mean batch duration (s) and records per batch, executors, the latency measured; start-up periods skipped.
    It is refitted after every period, as the policy refits it: the per-record cost of the last window whose
    batch sizes spread carries through a final window of one batch size (a model fitted only once, on the last
    window, cannot separate overhead from cost there and predicts nothing)."""
    model = MicroBatchModel()
    for row in series:
        if row.get("startup"):
            continue
        d, r = row.get("batch_duration_s"), row.get("batch_records")
        if d is None and row.get("batch_s"):  # series recorded before the period kept its means
            d, r = float(np.mean(row["batch_s"])), float(np.mean(row["batch_rows"]))
        if model.observe(r, d, int(row["executors"]), partitions, interval_s, row.get("latency_mean_s")):
            model.fit()
    return model


def engine_replay(
    model: MicroBatchModel,
    series: list[dict[str, Any]],
    interval_s: float,
    partitions: int | None,
) -> list[float | None]:
    """Per period, the mean response time (s, record-weighted) the engine model predicts for the recorded
    executor series at the recorded arrival rates (``input_rate``, tuples/s), batch by batch: a batch takes every
    record waiting when it starts, runs ``overhead + cost x records / effective parallelism`` (x the penalty in the
    ``settle_periods`` periods after an executor change) and the next starts ``max(interval, duration)`` later,
    so the backlog carries across periods. None for a period in which no batch starts."""
    if not series:
        return []
    fit = model.fit()
    if fit is None:
        return [None] * len(series)
    engine = MicroBatchEngine.from_fit(fit, interval_s, partitions, model.settle_periods)
    clock = BatchClock.starting(float(series[0]["start"]), interval_s)
    k_prev, since_change, scale_in = None, model.settle_periods, False
    out: list[float | None] = []
    for row in series:
        k = int(row["executors"])
        if k_prev is not None and k != k_prev:
            since_change, scale_in = 0, k < k_prev
        else:
            since_change += 1
        k_prev = k
        batches = clock.run(
            engine,
            float(row["end"]),
            float(row["input_rate"]),
            k,
            1.0,
            since_change < model.settle_periods,
            scale_in,
        )
        rows = [b.records for b in batches]
        out.append(float(np.average([b.latency_s for b in batches], weights=rows)) if rows else None)
    return out


def engine_prediction(
    series: list[dict[str, Any]], interval_s: float, r_max_s: float, partitions: int | None
) -> tuple[float, float, float] | None:
    """(violations % of periods, mean response time s, executor-seconds) the engine model fitted from the run
    predicts for its own executor series (:func:`engine_replay`); None when the run cannot be fitted. A period in
    which no batch starts reports no latency and is no violation, as in the measured runs (the sink reports
    nothing in it)."""
    model = engine_model(series, partitions, interval_s)
    if model.fit() is None:
        return None
    lats = engine_replay(model, series, interval_s, partitions)
    finite = [x for x in lats if x is not None]
    violations = sum(1 for x in lats if x is not None and x > r_max_s)
    core_s = sum(max(0, int(r["executors"])) * (float(r["end"]) - float(r["start"])) for r in series)
    mean = float(np.mean(finite)) if finite else float("inf")
    return 100.0 * violations / len(series), mean, core_s
