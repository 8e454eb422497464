"""What a queue model fitted from a bench_flink run predicts for the run's own parallelism series (sim-to-real).

The model is the one the product's OM plans on for a Flink operator: each subtask an M/G/1 queue
(``policies.operator_model.QueueModel``) whose service time (s per record) is the busy time per record the
monitor measured (``connectors.flink.monitor``: the true processing rate of DS2 and the Flink autoscaler), fitted
from the run's complete periods (``policies.am.bo.fit_queue_model``). To it the replay adds what a restart does:
a rescale stops the whole job for its measured downtime (s), the arrivals of that time wait, and the job catches
up at its capacity (subtasks x 1 / service time) minus the arrival rate. Per second of the run, per controlled
operator in pipeline order (splitter, then counter on the splitter's output):

    backlog(t + 1) = max(0, backlog(t) + arrivals - capacity)           (records; capacity 0 while restarting)
    response time  = backlog / capacity + M/G/1 response time at the arrival rate (utilisation capped)

and a period's predicted end-to-end latency is the mean over its running seconds of the operators' sum, plus a
latency offset fitted from the run (the median of measured minus modelled over the complete periods that follow
no restart: source, sink and network time the operators' queues do not contain).

Arrivals: the splitter's measured input rate (sentences/s) in the complete periods that follow no restart; a
period of a restart or right after one (``CATCH_UP_PERIODS``) reads the catch-up, not the arrivals, so it gets
the mean of its nearest such neighbours. The counter receives the splitter's output x the words per sentence measured in the run (median
counter input / splitter input over those periods).

Reported like the Spark engine model's prediction (``benchmarks.spark.prediction.engine_prediction``): predicted
violations (% of the periods the run measured as complete whose predicted latency exceeds R_max, as the run
counts them), mean predicted latency (s), and slot-seconds of the replayed series (the recorded parallelism x
the period lengths).
"""

from __future__ import annotations

import math
import statistics
from typing import Any

import numpy as np

from policies.am.bo import fit_queue_model
from policies.operator_model import QueueModel

CONTROLLED = ("splitter", "counter")
MIN_PERIODS = 2  # complete periods with a service time needed to fit an operator's model
#: periods after a rescale whose measured input rate is the catch-up of the restart, not the arrivals (the
#: restart's own period, which the monitor reports incomplete, and the one after it)
CATCH_UP_PERIODS = 2
MAX_UTILISATION = 0.95  # the M/G/1 term's utilisation cap: beyond it the backlog term carries the overload


def fitted_models(series: list[dict[str, Any]]) -> dict[str, QueueModel] | None:
    """Per controlled operator, the M/G/1 subtask model fitted from the run's measured service times (s per
    record); None when an operator has fewer than ``MIN_PERIODS`` of them."""
    models = {}
    for op in CONTROLLED:
        st = [
            float(v)
            for row in series
            if row.get("e2e_s") is not None
            and (v := (row.get("service_time_s") or {}).get(op)) is not None
            and v > 0
            and math.isfinite(v)
        ]
        if len(st) < MIN_PERIODS:
            return None
        models[op] = fit_queue_model(np.array(st))
    return models


def _restarted(series: list[dict[str, Any]]) -> list[bool]:
    """Per period: whether it is one of the ``CATCH_UP_PERIODS`` after a rescale (applied at the end of a period,
    the job stops in the next one): the job catches up in them, so they measure the backlog's replay, not the
    arrivals nor the steady latency."""
    return [
        any(bool(series[j].get("downtime_s")) for j in range(max(0, i - CATCH_UP_PERIODS), i))
        for i in range(len(series))
    ]


def arrivals(series: list[dict[str, Any]]) -> tuple[list[float], float] | None:
    """(sentences/s arriving in each period, words per sentence reaching the counter), from the periods that
    measured the arrivals (module doc); None when no period did, or none measured the counter's input (the
    words per sentence, and so the counter's load, would be a guess)."""
    restarted = _restarted(series)
    clean = [
        i
        for i, row in enumerate(series)
        if row.get("e2e_s") is not None
        and not restarted[i]
        and (row.get("input_rate") or {}).get("splitter") is not None
    ]
    if not clean:
        return None
    rate = {i: float(series[i]["input_rate"]["splitter"]) for i in clean}
    ratios = [
        float(series[i]["input_rate"]["counter"]) / rate[i]
        for i in clean
        if rate[i] > 0 and (series[i]["input_rate"].get("counter") or 0) > 0
    ]
    if not ratios:
        return None
    words = statistics.median(ratios)
    out = []
    for i in range(len(series)):
        if i in rate:
            out.append(rate[i])
            continue
        before = next((rate[j] for j in range(i - 1, -1, -1) if j in rate), None)
        after = next((rate[j] for j in range(i + 1, len(series)) if j in rate), None)
        near = [x for x in (before, after) if x is not None]
        out.append(sum(near) / len(near))
    return out, words


def replay(
    series: list[dict[str, Any]], models: dict[str, QueueModel], rates: list[float], words: float
) -> list[float | None]:
    """Per period, the modelled latency (s, without the offset) averaged over its running seconds; None for a
    period that never runs (a downtime longer than the period)."""
    backlog = dict.fromkeys(CONTROLLED, 0.0)
    speed = np.ones(1)
    out: list[float | None] = []
    downtime_left = 0.0
    for i, row in enumerate(series):
        if i > 0 and series[i - 1].get("downtime_s"):
            downtime_left = float(series[i - 1]["downtime_s"])
        length = max(1, round(float(row["end"]) - float(row["start"])))
        k = {op: max(float((row.get("parallelism_during") or {}).get(op) or 1.0), 1e-9) for op in CONTROLLED}
        lats = []
        for _ in range(length):
            arriving = rates[i]
            if downtime_left > 0:
                stopped = min(1.0, downtime_left)
                downtime_left -= stopped
            else:
                stopped = 0.0
            running = 1.0 - stopped
            total = 0.0
            for op in CONTROLLED:
                mu = 1.0 / models[op].service_mean_s
                capacity = k[op] * mu * running
                inflow = arriving if op == "splitter" else arriving * words
                served = min(capacity, backlog[op] + inflow)
                backlog[op] = backlog[op] + inflow - served
                arriving = served if op == "splitter" else arriving
                if running > 0:
                    lam = min(inflow, MAX_UTILISATION * k[op] * mu)
                    kk = np.array([max(1, round(k[op]))])
                    stationary = models[op].response_time(kk, speed, lam * round(k[op]) / k[op])
                    total += backlog[op] / (k[op] * mu) + stationary
            if running > 0:
                lats.append(total)
        out.append(float(np.mean(lats)) if lats else None)
    return out


def latency_offset(
    series: list[dict[str, Any]],
    models: dict[str, QueueModel],
    rates: list[float],
    words: float,
    modelled: list[float | None] | None = None,
) -> float:
    """The latency (s) the run measured beyond the modelled queues: the median of measured minus modelled over the
    complete periods that follow no restart (source, sink and network time); 0 when there is none.
    ``modelled``: :func:`replay`'s output when already computed."""
    modelled = replay(series, models, rates, words) if modelled is None else modelled
    restarted = _restarted(series)
    gaps = [
        float(row["e2e_s"]) - m
        for row, m, r in zip(series, modelled, restarted, strict=True)
        if row.get("e2e_s") is not None and m is not None and not r
    ]
    return statistics.median(gaps) if gaps else 0.0


def flink_prediction(series: list[dict[str, Any]], r_max_s: float) -> tuple[float, float, float] | None:
    """(violations % of the complete periods, mean latency s, slot-seconds) predicted for the run's recorded
    parallelism series (module doc); None when the run cannot be fitted."""
    if not series:
        return None
    models = fitted_models(series)
    arrived = arrivals(series)
    if models is None or arrived is None:
        return None
    rates, words = arrived
    modelled = replay(series, models, rates, words)
    offset = latency_offset(series, models, rates, words, modelled)
    complete = [(row, m) for row, m in zip(series, modelled, strict=True) if row.get("e2e_s") is not None]
    predicted = [m + offset for _, m in complete if m is not None]
    violations = sum(1 for _, m in complete if m is not None and m + offset > r_max_s)
    slot_s = sum(
        sum(float(v) for v in (row.get("parallelism_during") or {}).values())
        * (float(row["end"]) - float(row["start"]))
        for row in series
    )
    pct = 100.0 * violations / len(complete) if complete else float("nan")
    return pct, float(np.mean(predicted)) if predicted else float("inf"), slot_s
