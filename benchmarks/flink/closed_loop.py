"""What a policy would do on the engine fitted from a bench_flink run: the closed-loop prediction (sim-to-real).

``prediction.flink_prediction`` replays the run's *recorded* parallelism on a fitted model: it tests the model,
but the slot-seconds it reports are the run's own by construction. Here the policy decides: the product's
control path (``benchmarks.loop.runner.run_scenario``: manifest -> ``control.tick`` -> OM / AM -> connector, the
AM's tuning and the region's step, as ``bench_loop`` drives them) runs the run's policy, cold, on the product's
simulated engine (``engine: simulated`` with ``backlog: true``: fluid queues carried across periods, a rescale
stopping the job for its downtime, ``connectors.simulated``) fitted from the run:

- per controlled operator the mean service time (s per record) of its fitted M/G/1 subtask
  (``prediction.fitted_models``: the busy time per record the Flink monitor measured);
- the arrival rate of every period (sentences/s, ``prediction.arrivals``: the splitter's measured input in the
  periods that measured the arrivals, interpolated over restarts) as the trace, one rate per period, and the words
  per sentence measured as the splitter's selectivity;
- the downtime of one rescale: the median the run measured (s; none when it never rescaled);
- the latency outside the operators' queues (``prediction.latency_offset``: source, sink and network time);
- what Flink measures: only each path's end-to-end time (``pathLatencyOnly``), each operator getting its share as
  the Flink monitor computes it (``connectors.latency_share``), so the policy sees the attribution it saw live
  (on the 2 Dec fixture run, the code of that day read 9 % / 2,240 slot-s with each operator's own queue time and
  21 % / 3,190 with Flink's attribution: the attribution, not the queues, drove its cost).

Everything else is the run's manifest: the SLO, the OM policy, T_OM, T_AM, K_max, the TaskManager's node type in
a region of one node. The prediction is what the product's own ledger records for the simulated run, counted as
the live run counts (``benchmarks.loop.replay``): violations in % of the periods with a complete end-to-end
latency, slot-seconds of splitter and counter (the parallelism each period ran, times T_OM).
"""

from __future__ import annotations

import statistics
from dataclasses import dataclass
from typing import Any

from benchmarks.flink.prediction import CONTROLLED, arrivals, fitted_models, latency_offset
from benchmarks.loop.replay import (
    ClosedLoopPrediction,
    ReplayRun,
    count_ledger,
    replay_application,
    replay_ledger,
)

SCENARIO = "flink-replay"
APPLICATION = "flink-replay-wordcount"
CATALOG = "bench-loop-flink-replay"
OPERATORS = ("sentences", "splitter", "counter", "top")


@dataclass(frozen=True)
class EngineFit:
    """The engine fitted from one run: ``service_s`` per controlled operator (s per record on one slot),
    ``rates`` (sentences/s, one per period), ``words`` (counter records per sentence), ``downtime_s`` (s per
    rescale), ``latency_offset_s`` (s per path)."""

    service_s: dict[str, float]
    rates: list[float]
    words: float
    downtime_s: float
    latency_offset_s: float


@dataclass(frozen=True)
class ReplaySettings(ReplayRun):
    """The run's own settings (``ReplayRun``) and ``slots``, the task slots of the one TaskManager."""

    slots: int


def fit_engine(series: list[dict[str, Any]]) -> EngineFit | None:
    """The engine of a run's series (module doc); None when the run cannot be fitted."""
    models = fitted_models(series)
    arrived = arrivals(series)
    if models is None or arrived is None:
        return None
    rates, words = arrived
    downtimes = [float(r["downtime_s"]) for r in series if r.get("downtime_s")]
    return EngineFit(
        service_s={op: models[op].service_mean_s for op in CONTROLLED},
        rates=rates,
        words=words,
        downtime_s=statistics.median(downtimes) if downtimes else 0.0,
        latency_offset_s=max(0.0, latency_offset(series, models, rates, words)),
    )


def documents(
    fit: EngineFit, trace_path: str, run: ReplaySettings, noise: float = 0.0, seed: int = 0
) -> list[dict[str, Any]]:
    """The replay's manifests: the bench's application on the fitted simulated engine (module doc), its measured
    rates with a relative error of ``noise`` (the simulated connector's ``noise``, seeded with ``seed``)."""
    from benchmarks.flink.product import catalog_document
    from benchmarks.flink.runner import taskmanager_type
    from benchmarks.loop.scenarios import deployment_documents, region_document, region_name

    node_type = taskmanager_type(run.slots)
    region = region_name(SCENARIO)
    ops: list[dict[str, Any]] = [{"name": OPERATORS[0], "kind": "source"}]
    ops += [
        {
            "name": "splitter",
            "maxParallelism": run.k_max,
            "selectivity": round(fit.words, 6),
            "serviceTimeMs": fit.service_s["splitter"] * 1000.0,
        },
        {"name": "counter", "maxParallelism": run.k_max, "serviceTimeMs": fit.service_s["counter"] * 1000.0},
        {"name": OPERATORS[-1], "kind": "sink"},
    ]
    connector = {
        "trace": trace_path,
        "downtimeS": fit.downtime_s,
        "backlog": True,
        "latencyOffsetMs": fit.latency_offset_s * 1000.0,
        "pathLatencyOnly": True,
        "noise": noise,
        "seed": seed,
    }
    app = replay_application(APPLICATION, connector, ops, region, run)
    catalog = catalog_document(
        CATALOG, run.slots, "bench_flink's closed-loop prediction: the bench's TaskManager"
    )
    region_doc = region_document(SCENARIO, 1, 1, 0.0, CATALOG)
    return [catalog, region_doc, app, *deployment_documents(app, region, node_type)]


def closed_loop_prediction(
    series: list[dict[str, Any]], run: ReplaySettings, noise: float = 0.0, seed: int = 0
) -> ClosedLoopPrediction | None:
    """Run ``run.om_policy`` cold through the product on the engine fitted from ``series`` for as many periods
    as the run measured (module doc); None when the run cannot be fitted. Uses the database (what the replay
    registers is removed again). ``noise`` > 0 adds a relative error of that standard deviation to every rate the
    policy is shown (seeded with ``seed``; the fitted engine's own queues carry the true rates): the prediction
    is exact by default, and with noise a study of how the policy copes with what a live monitor measures."""
    fit = fit_engine(series)
    if fit is None:
        return None
    periods = len(series)
    ticks, first = replay_ledger(
        SCENARIO, lambda trace: documents(fit, trace, run, noise, seed), fit.rates, periods, CATALOG
    )
    return count_ledger(ticks, first, periods, run.period_s, run.r_max_s, CONTROLLED)
