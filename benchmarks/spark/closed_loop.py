"""What a policy would do on the micro-batch engine fitted from a bench_spark run: the closed-loop prediction
(sim-to-real).

``prediction.engine_prediction`` replays the run's *recorded* executors on the fitted engine model: it tests the
model, but its executor-seconds are the run's own by construction. Here the policy decides: the product's control
path (``benchmarks.loop.replay``: manifest -> ``control.tick`` -> OM / AM -> connector, the AM's tuning and the
region's step, as ``bench_loop`` drives them) runs the run's policy, cold, on the product's simulated engine in its
micro-batch mode (``engine: simulated`` with ``microBatch``, ``connectors.simulated_batches``) fitted from the run:

- the micro-batch engine model ``policies.engine_model`` fits from the run's periods, as the policy fits it
  online (``prediction.engine_model``): overhead per batch, cost per record, scaling exponent, the penalties after
  executor additions and removals, the latency offset; the run's trigger interval and partitions;
- the arrival rate of every period (records/s, the monitor's ``input_rate``) as the trace, one rate per period.

Everything else is the run's manifest (``product.documents``): the SLO, the OM policy, T_OM, T_AM, K_max, the
executor profile, in a region of K_max nodes that are there at once (the bench's cluster is the user's own). The
prediction is what the product's ledger records for the simulated run, counted as the live run is counted
(``runner.finish``): violations in % of all periods, executor-core-seconds (executors each period ran x T_OM x the
profile's cores).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from benchmarks.loop.replay import (
    ClosedLoopPrediction,
    ReplayRun,
    count_ledger,
    replay_application,
    replay_ledger,
)
from policies.engine_model import Fit

from .prediction import engine_model

SCENARIO = "spark-replay"
APPLICATION = "spark-replay-taxi"
CATALOG = "bench-loop-spark-replay"
OPERATOR = "taxi"


@dataclass(frozen=True)
class SparkReplaySettings(ReplayRun):
    """The run's own settings (``ReplayRun``; ``k_max``: executors at most), ``interval_s`` (trigger interval,
    s) and ``partitions``."""

    interval_s: float
    partitions: int | None


def fit_engine(series: list[dict[str, Any]], run: SparkReplaySettings) -> Fit | None:
    """The engine model of a run's periods (module doc); None when it cannot be fitted."""
    return engine_model(series, run.partitions, run.interval_s).fit()


def documents(fit: Fit, trace_path: str, run: SparkReplaySettings) -> list[dict[str, Any]]:
    """The replay's manifests: the bench's application on the fitted simulated engine (module doc)."""
    from benchmarks.loop.scenarios import deployment_documents, region_document, region_name

    from .product import catalog_document
    from .runner import PROFILE

    region = region_name(SCENARIO)
    micro_batch: dict[str, Any] = {
        "intervalMs": run.interval_s * 1000.0,
        "overheadMs": fit.overhead_s * 1000.0,
        "scalingExponent": fit.scaling_exponent,
        "penalty": fit.penalty,
        "scaleInPenalty": fit.scale_in_penalty,
        "latencyOffsetMs": fit.latency_offset_s * 1000.0,
    }
    if run.partitions:
        micro_batch["partitions"] = run.partitions
    operators = [
        {"name": "src", "kind": "source"},
        {
            "name": OPERATOR,
            "kind": "operator",
            "maxParallelism": run.k_max,
            "serviceTimeMs": fit.cost_s_per_record * 1000.0,
        },
        {"name": "sink", "kind": "sink"},
    ]
    connector = {"trace": trace_path, "microBatch": micro_batch}
    app = replay_application(APPLICATION, connector, operators, region, run)
    catalog = catalog_document(CATALOG, "bench_spark's closed-loop prediction: the bench's executor profile")
    region_doc = region_document(SCENARIO, run.k_max, run.k_max, 0.0, CATALOG)
    return [catalog, region_doc, app, *deployment_documents(app, region, PROFILE["name"])]


def closed_loop_prediction(
    series: list[dict[str, Any]], run: SparkReplaySettings
) -> ClosedLoopPrediction | None:
    """Run ``run.om_policy`` cold through the product on the engine fitted from ``series`` for as many periods
    as the run measured (module doc); None when the run cannot be fitted. ``violations_pct`` is over all
    periods, as ``runner.finish`` counts a live run; ``replica_s`` are executor-core-seconds. Uses the database
    (what the replay registers is removed again)."""
    from .runner import PROFILE

    fit = fit_engine(series, run)
    if fit is None:
        return None
    periods = len(series)
    rates = [max(0.0, float(row.get("input_rate") or 0.0)) for row in series]
    ticks, first = replay_ledger(SCENARIO, lambda trace: documents(fit, trace, run), rates, periods, CATALOG)
    return count_ledger(
        ticks,
        first,
        periods,
        run.period_s,
        run.r_max_s,
        (OPERATOR,),
        float(PROFILE["cores"]),
        over_all_periods=True,
    )
