"""What the project's simulator predicts for a recorded bench_spark run (the sim-to-real gap we track).

The simulator (``policies.sim``) models an operator as k replicas of an M/G/1 queue (``policies.model.QueueModel``,
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
from policies.model import QueueModel

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
