"""The micro-batch engine model (policies.engine_model) on periods recorded from real Spark runs.

Fixture ``tests/fixtures/spark_periods_taxi12.json``: ``manage.py bench_spark --minutes 4 --partitions 12
--series-json ...`` (the command is in its ``source``), every period of each run with its micro-batches (records,
duration s). The machine was shared with other jobs (load average 6-21), so batches carry more overhead and more
noise than on a quiet machine; the bounds below are for these recordings. Only the static runs are used: in the
runs that changed executors under that load, the count at a period's end (what the monitor reports) often
differs from the one that ran its batches (60-70 s batches spanning several changes).
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from benchmarks.spark.prediction import engine_model as fitted
from benchmarks.spark.prediction import engine_prediction
from policies import engine_model
from policies.engine_model import MicroBatchModel

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "spark_periods_taxi12.json"


@pytest.fixture(scope="module")
def recorded() -> dict:
    data = json.loads(FIXTURE.read_text())
    assert data["config"]["partitions"] == 12 and data["config"]["interval_s"] == 5.0
    return data


def _periods(data: dict, strategy: str) -> list[dict]:
    """The run's periods that ran micro-batches, start-up excluded (the Spark monitor reports it incomplete)."""
    series = next(r["series"] for r in data["runs"] if r["strategy"] == strategy)
    return [r for r in series if r["batch_s"] and not r["startup"]]


def _observe(model: MicroBatchModel, row: dict, partitions: int) -> None:
    """One period as the Spark monitor reports it: mean records per batch and mean batch duration (s)."""
    model.observe(
        float(np.mean(row["batch_rows"])),
        float(np.mean(row["batch_s"])),
        row["executors"],
        partitions,
        5.0,
        row["latency_mean_s"],
    )


def _errors(model: MicroBatchModel, rows: list[dict], partitions: int) -> tuple[float, float]:
    """(RMSE of the model's batch durations, RMSE of predicting their mean) over ``rows``, in seconds."""
    observed = np.array([np.mean(r["batch_s"]) for r in rows])
    predicted = np.array(
        [model.batch_s(float(np.mean(r["batch_rows"])), r["executors"], partitions) for r in rows]
    )
    rmse = float(np.sqrt(np.mean((predicted - observed) ** 2)))
    return rmse, float(np.sqrt(np.mean((observed - observed.mean()) ** 2)))


def test_held_out_periods_of_two_executor_counts(recorded: dict) -> None:
    """Fitted on every other period of static mean (2 executors) and static peak (4), the model predicts the
    other periods' mean batch duration within 1.5 s RMSE (measured: 1.0 s), a third of what their mean does."""
    model, held_out = MicroBatchModel(window=200), []
    for strategy in ("static-mean", "static-peak"):
        model.last_executors = None  # a new run, not an executor change
        for i, row in enumerate(_periods(recorded, strategy)):
            if i % 2 == 0:
                _observe(model, row, 12)
            else:
                held_out.append(row)
    assert model.ready and model.fit().executor_counts == 2
    rmse, baseline = _errors(model, held_out, 12)
    assert len(held_out) >= 10
    assert rmse < 1.5
    assert rmse < 0.5 * baseline


def test_larger_batches_under_backlog_are_extrapolated(recorded: dict) -> None:
    """Fitted on static mean's first eight periods (batches of 90-800 records), the model predicts the last
    three, when the backlog had grown batches to 1,000-2,100 records and 12-24 s, within 4 s RMSE (measured:
    2.7 s; their mean predicts them with 11.8 s)."""
    rows = _periods(recorded, "static-mean")
    model = MicroBatchModel()
    for row in rows[:8]:
        _observe(model, row, 12)
    assert model.ready
    later = rows[8:]
    assert min(np.mean(r["batch_rows"]) for r in later) > max(np.mean(r["batch_rows"]) for r in rows[:8])
    mean_of_fitted = np.mean([np.mean(r["batch_s"]) for r in rows[:8]])
    observed = np.array([np.mean(r["batch_s"]) for r in later])
    rmse, _ = _errors(model, later, 12)
    assert rmse < 4.0
    assert rmse < 0.35 * float(np.sqrt(np.mean((observed - mean_of_fitted) ** 2)))


def test_runs_that_changed_executors_replay_to_their_violations_with_the_learned_exponent(
    recorded: dict,
) -> None:
    """Sim-to-real on the recorded runs that changed executors (ds2: 1-3-6, model-based-trend: 1-3-6, the linear
    variant: 1-2-3): the engine model fitted from each run's periods, replayed on its executor series, predicts
    its violated periods within the issue's 10 points. With linear scaling (exponent held at 1) ds2 and
    model-based-trend were 31 and 25 points off (12 % and 56 % against 44 % and 31 %; 62 % before a batch
    after an empty trigger counted its records' wait from that trigger, not from the batch before it): on that
    loaded machine (load 6-21 on 2 cores) 6 executors did little more than 3, and the fit learns an exponent
    well below 1."""
    cfg = recorded["config"]
    for strategy in ("ds2", "model-based-trend", "model-based-trend-linear"):
        series = next(r["series"] for r in recorded["runs"] if r["strategy"] == strategy)
        measured = (
            100.0
            * sum(
                1 for r in series if r["latency_mean_s"] is not None and r["latency_mean_s"] > cfg["r_max_s"]
            )
            / len(series)
        )
        predicted = engine_prediction(series, cfg["interval_s"], cfg["r_max_s"], cfg["partitions"])
        assert predicted is not None and abs(predicted[0] - measured) <= 10.0, (strategy, predicted, measured)
        if strategy != "model-based-trend-linear":
            assert fitted(series, cfg["partitions"], cfg["interval_s"]).fit().scaling_exponent < 0.5
            with pytest.MonkeyPatch.context() as mp:
                mp.setattr(engine_model, "SCALING_EXPONENTS", (1.0,))
                linear = engine_prediction(series, cfg["interval_s"], cfg["r_max_s"], cfg["partitions"])
            assert linear is not None and abs(linear[0] - measured) >= 25.0, (strategy, linear, measured)
