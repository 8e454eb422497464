"""``bench_spark``'s closed-loop prediction (``benchmarks.spark.closed_loop``): the run's policy, cold, through the
product (manifest -> tick -> OM / AM -> the simulated engine's micro-batch mode) on the engine fitted from a run's
periods, and ``bench_spark --predict-from``."""

from __future__ import annotations

import json
import math

import pytest
from django.core.management import call_command

from autoscaler.models import Application, NodeTypeCatalog
from benchmarks.spark.closed_loop import CATALOG, SparkReplaySettings, closed_loop_prediction, fit_engine
from policies.engine_model import effective_parallelism
from policies.registry import om_choice

pytestmark = pytest.mark.django_db

OVERHEAD_S, COST_S = (
    0.5,
    0.02,
)  # the run's engine: 0.5 s per batch, 20 ms per record (50 records/s per executor)
INTERVAL_S, PERIOD_S, PARTITIONS, R_MAX_S = 5.0, 15.0, 8, 15.0


def _period(i: int, rate: float, executors: int) -> dict:
    """A 15-s period as bench_spark records it, its batches exactly the engine's."""
    records = rate * INTERVAL_S
    duration = OVERHEAD_S + COST_S * records / effective_parallelism(executors, PARTITIONS)
    return {
        "start": PERIOD_S * i,
        "end": PERIOD_S * (i + 1),
        "executors": executors,
        "input_rate": rate,
        "processed_rate": rate,
        "batch_duration_s": duration,
        "batch_records": records,
        "latency_mean_s": 0.5 * INTERVAL_S + duration + 0.3,
        "startup": False,
    }


def _settings(policy: str = "model-based-trend") -> SparkReplaySettings:
    return SparkReplaySettings(
        om_choice(policy), R_MAX_S, 0.05, 0.2, PERIOD_S, 10 * PERIOD_S, 6, INTERVAL_S, 8
    )


def _step(executors_before: int, executors_after: int) -> list[dict]:
    """20 records/s for 10 periods, then 70 records/s (more than one executor's 50) for 20."""
    before = [_period(i, 20.0 if i % 2 else 16.0, executors_before) for i in range(10)]
    return before + [_period(i, 70.0, executors_after) for i in range(10, 30)]


def test_the_fit_is_the_engine_model_of_the_runs_periods():
    fit = fit_engine(_step(1, 2), _settings())
    assert fit.overhead_s == pytest.approx(OVERHEAD_S, rel=1e-6)
    assert fit.cost_s_per_record == pytest.approx(COST_S, rel=1e-6)
    assert fit.latency_offset_s == pytest.approx(0.3, abs=1e-6)
    assert fit_engine(_step(1, 2)[:1], _settings()) is None  # one period: nothing to fit


def test_the_policy_decides_the_executors_not_the_recording():
    """After the step one executor cannot keep up: the policy adds executors, whatever the run recorded."""
    predicted = closed_loop_prediction(_step(1, 2), _settings())
    assert predicted.periods == 30 and predicted.complete >= 28
    assert (
        closed_loop_prediction(_step(1, 3), _settings()) == predicted
    )  # the same engine, recorded otherwise
    flat = closed_loop_prediction([_period(i, 24.0 if i % 2 else 12.0, 1) for i in range(30)], _settings())
    assert predicted.reconfigurations >= 1
    # the step's 20 periods run on 2 executors or more once it reacted: more than the flat run's 1 each
    assert predicted.replica_s >= flat.replica_s + 15 * PERIOD_S
    assert predicted.violations_pct <= 20.0  # a few periods of catching up at most
    assert not Application.objects.filter(name="spark-replay-taxi").exists()  # what it registered is gone
    assert not NodeTypeCatalog.objects.filter(name=CATALOG).exists()


def test_predict_from_fills_the_runs_rows(tmp_path):
    series = tmp_path / "series.json"
    config = {"period_s": PERIOD_S, "interval_s": INTERVAL_S, "r_max_s": R_MAX_S, "k_max": 6, "partitions": 8}
    runs = [
        {"strategy": "product:model-based-trend", "run": 2, "series": _step(1, 2)},
        {"strategy": "ds2", "run": 1, "series": _step(1, 2)},  # a harness strategy: no closed loop
    ]
    series.write_text(json.dumps({"config": config, "runs": runs}))
    rows = tmp_path / "rows.json"
    keys = {
        "violations_pct": 3.3,
        "core_s": 900.0,
        "predicted_violations_pct": None,
        "predicted_core_s": None,
    }
    rows.write_text(
        json.dumps(
            [
                {"strategy": "product:model-based-trend", "run": 2, **keys},
                {"strategy": "ds2", "run": 1, **keys},
            ]
        )
    )
    call_command("bench_spark", "--predict-from", str(series), "--json", str(rows))
    product, ds2 = json.loads(rows.read_text())
    direct = closed_loop_prediction(_step(1, 2), _settings())
    assert product["closed_loop_core_s"] == pytest.approx(direct.replica_s, abs=0.1)
    assert product["closed_loop_violations_pct"] == pytest.approx(direct.violations_pct, abs=0.01)
    expected_core_s = sum(r["executors"] * PERIOD_S for r in _step(1, 2))
    assert product["predicted_core_s"] == pytest.approx(
        expected_core_s
    )  # the replay of the recorded executors
    assert "closed_loop_core_s" not in ds2 and ds2["predicted_core_s"] is None
    assert not math.isnan(product["closed_loop_core_s"])
