"""The micro-batch engine model (policies.engine_model): fitting, predictions, missing fields, state."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from policies import engine_model
from policies.engine_model import MicroBatchModel, effective_parallelism

A_S, B_S = 1.2, 0.02  # true overhead (s per batch) and cost (s per record on one executor)
PARTITIONS, INTERVAL_S = 12, 5.0


def _true_duration(records: float, executors: int) -> float:
    return A_S + B_S * records / effective_parallelism(executors, PARTITIONS)


def _fed(noise_s: float = 0.1, periods: int = 30, seed: int = 1) -> MicroBatchModel:
    """A model fed ``periods`` periods of a ramp on 1..6 executors, durations with Gaussian noise (s)."""
    rng = np.random.default_rng(seed)
    model = MicroBatchModel()
    for i in range(periods):
        k = 1 + (i // 5) % 6
        records = 100.0 + 40.0 * (i % 5) + 30.0 * k
        d = _true_duration(records, k) + rng.normal(0.0, noise_s)
        model.observe(records, d, k, PARTITIONS, INTERVAL_S, 0.5 * max(INTERVAL_S, d) + d + 0.7)
    return model


def test_effective_parallelism_counts_waves() -> None:
    assert effective_parallelism(4, 12) == 4.0
    assert effective_parallelism(5, 12) == 4.0  # 3 waves, as with 4
    assert effective_parallelism(6, 12) == 6.0
    assert effective_parallelism(5, 8) == 4.0
    assert effective_parallelism(3, None) == 3.0
    assert effective_parallelism(2, 12, speed=1.5) == 3.0
    assert effective_parallelism(0, 12) == 0.0


def test_recovers_known_parameters_from_noisy_periods() -> None:
    fit = _fed(noise_s=0.1).fit()
    assert fit is not None
    assert fit.overhead_s == pytest.approx(A_S, abs=0.15)
    assert fit.cost_s_per_record == pytest.approx(B_S, rel=0.08)
    assert 0.03 < fit.rmse_s < 0.2  # about the noise's standard deviation
    assert fit.latency_offset_s == pytest.approx(0.7, abs=0.15)
    # the settling periods (two after each of the five changes) are kept out of the fit
    assert fit.n == 30 - 2 * 5
    assert fit.executor_counts == 6


def test_post_change_penalty_is_measured() -> None:
    model = MicroBatchModel(settle_periods=1)
    for i in range(12):
        k = 2 if i < 6 else 3
        records = 200.0 + 50.0 * (i % 3)
        d = _true_duration(records, k) * (1.8 if i == 6 else 1.0)  # the period of the change is 1.8x slower
        model.observe(records, d, k, PARTITIONS, INTERVAL_S)
    fit = model.fit()
    assert fit is not None
    assert fit.penalty == pytest.approx(1.8, rel=1e-6)
    assert model.batch_s(300.0, 3, PARTITIONS, settling=True) == pytest.approx(1.8 * _true_duration(300.0, 3))


def test_predictions_follow_the_engine() -> None:
    model = _fed(noise_s=0.0)
    assert model.ready
    # below the interval's capacity: a + b rate T / e
    assert model.predict_batch_s(40.0, 2, INTERVAL_S, PARTITIONS) == pytest.approx(_true_duration(200.0, 2))
    # 5 executors on 12 partitions are no faster than 4 (3 waves of tasks)
    assert model.capacity(5, PARTITIONS) == pytest.approx(model.capacity(4, PARTITIONS))
    assert model.capacity(4, PARTITIONS) == pytest.approx(4 / B_S)
    assert model.capacity(6, PARTITIONS) == pytest.approx(6 / B_S)
    # back to back above the interval's capacity, unbounded at the capacity
    rate = 0.9 * model.capacity(2, PARTITIONS)
    assert model.predict_batch_s(rate, 2, INTERVAL_S, PARTITIONS) == pytest.approx(A_S / (1 - 0.9))
    assert math.isinf(model.predict_batch_s(model.capacity(2, PARTITIONS), 2, INTERVAL_S, PARTITIONS))
    # max_rate inverts the latency prediction, on both sides of the interval's capacity
    for r_max in (5.0, 7.4, 15.0, 40.0):
        lam = model.max_rate(3, INTERVAL_S, r_max, PARTITIONS)
        assert lam > 0
        assert model.predict_latency_s(lam, 3, INTERVAL_S, PARTITIONS) == pytest.approx(r_max, rel=1e-6)
    assert model.max_rate(3, INTERVAL_S, 0.5, PARTITIONS) == 0.0  # not even an idle query meets it


def test_backlog_drains_faster_on_more_executors() -> None:
    model = _fed(noise_s=0.0)
    rate, backlog, period = 90.0, 2000.0, 15.0
    # on 2 executors the first batch alone outlasts the period
    assert model.backlog_evolution(backlog, rate, 2, INTERVAL_S, period, PARTITIONS) == [(0.0, backlog)]
    batches = model.backlog_evolution(backlog, rate, 6, INTERVAL_S, period, PARTITIONS)
    assert batches[0] == (0.0, backlog)
    # each next batch takes what arrived while the previous one ran (at least one interval's arrivals)
    d0 = model.batch_s(backlog, 6, PARTITIONS)
    d1 = model.batch_s(rate * d0, 6, PARTITIONS)
    assert d1 < INTERVAL_S < d0
    expected = [d0, rate * d0, d0 + INTERVAL_S, rate * INTERVAL_S]
    assert [x for b in batches[1:] for x in b] == pytest.approx(expected)
    assert not model.drains_within(backlog, rate, 2, INTERVAL_S, period, PARTITIONS)
    assert model.drains_within(backlog, rate, 6, INTERVAL_S, period, PARTITIONS)
    # with a bound: caught up once a finished batch's response time meets it
    assert model.drains_within(backlog, rate, 6, INTERVAL_S, period, PARTITIONS, r_max_s=15.0)
    assert model.backlog_after(backlog, rate, 6, INTERVAL_S, period, PARTITIONS) == pytest.approx(
        rate * INTERVAL_S
    )
    assert model.backlog_after(backlog, rate, 2, INTERVAL_S, period, PARTITIONS) > rate * INTERVAL_S


def test_missing_fields_are_skipped_and_not_ready_without_spread() -> None:
    model = MicroBatchModel()
    assert not model.observe(None, 2.0, 2)
    assert not model.observe(100.0, None, 2)
    assert not model.observe(100.0, 2.0, None)
    assert not model.observe(0.0, 2.0, 2)  # no batch ran
    assert not model.observe(100.0, float("nan"), 2)
    assert model.fit() is None and not model.ready
    assert model.summary() == {"n": 0, "ready": False}
    with pytest.raises(ValueError, match="not fitted"):
        model.capacity(2)
    # the same batch size again and again cannot separate overhead from per-record cost
    for _ in range(6):
        assert model.observe(100.0, 3.0, 2)
    assert model.fit() is None
    # one executor count needs min_samples periods; partitions unknown: linear in executors
    model = MicroBatchModel(min_samples=4)
    for i, records in enumerate((100.0, 300.0, 500.0, 700.0)):
        model.observe(records, A_S + B_S * records / 2, 2, None, INTERVAL_S)
        assert model.ready == (i == 3)
    assert model.capacity(4) == pytest.approx(2 * model.capacity(2))


def test_bad_settings_name_the_field() -> None:
    with pytest.raises(ValueError, match="window"):
        MicroBatchModel(window=1)
    with pytest.raises(ValueError, match="min_samples"):
        MicroBatchModel(min_samples=1)
    with pytest.raises(ValueError, match="settle_periods"):
        MicroBatchModel(settle_periods=-1)
    with pytest.raises(ValueError, match="samples"):
        MicroBatchModel.from_state({**MicroBatchModel().to_state(), "samples": [[1.0, 2.0]]})
    with pytest.raises(ValueError, match="since_change"):
        state = MicroBatchModel().to_state()
        del state["since_change"]
        MicroBatchModel.from_state(state)


def test_state_round_trip_is_exact_through_json() -> None:
    model = _fed(noise_s=0.13, periods=50)  # more than the window: the oldest periods were forgotten
    assert len(model.samples) == model.window
    restored = MicroBatchModel.from_state(json.loads(json.dumps(model.to_state())))
    assert restored.to_state() == model.to_state()
    assert restored.fit() == model.fit()
    # and it goes on identically
    for m in (model, restored):
        m.observe(321.0, 2.5, 4, PARTITIONS, INTERVAL_S, 6.0)
    assert restored.fit() == model.fit()
    assert restored.summary() == model.summary()


def test_a_steady_window_keeps_the_per_record_cost_it_learned_and_refits_the_overhead() -> None:
    """A steady load on one executor count for a whole window leaves batch sizes that do not spread: the model
    must not forget what it knew (the live run went from planning on it to a plan without it and scaled 5 -> 3
    executors at a rate 3 could not carry). It keeps the last identifiable per-record cost, refits the overhead
    to the window, and the state carries it."""
    model = _fed(noise_s=0.0)
    first = model.fit()
    assert first is not None and model.ready
    # a whole window at 4 executors, 500 records per batch, on an overhead that grew to 1.5 s
    for _ in range(model.window):
        model.observe(500.0, 1.5 + B_S * 500.0 / 4, 4, PARTITIONS, INTERVAL_S)
    fit = model.fit()
    assert fit is not None and model.ready
    assert fit.cost_s_per_record == pytest.approx(first.cost_s_per_record, rel=1e-9)
    assert fit.overhead_s == pytest.approx(1.5, rel=1e-6)
    restored = MicroBatchModel.from_state(json.loads(json.dumps(model.to_state())))
    assert restored.fit() == fit
    # never fitted: the same steady window gives no model
    steady = MicroBatchModel()
    for _ in range(steady.window):
        steady.observe(500.0, 1.5 + B_S * 500.0 / 4, 4, PARTITIONS, INTERVAL_S)
    assert steady.fit() is None and not steady.ready


def _sublinear(alpha: float, counts: tuple[int, ...], noise_s: float, seed: int = 2) -> MicroBatchModel:
    """A model fed periods of an engine whose ``k`` executors do ``e(k) ** alpha`` executors' work (a host with
    fewer cores than executors), on the executor counts ``counts``, with Gaussian noise (s)."""
    rng = np.random.default_rng(seed)
    model = MicroBatchModel()
    for i in range(36):
        k = counts[(i // 4) % len(counts)]
        records = 100.0 + 50.0 * (i % 4) + 60.0 * k
        d = (
            A_S
            + B_S * records / effective_parallelism(k, PARTITIONS, exponent=alpha)
            + rng.normal(0, noise_s)
        )
        model.observe(records, d, k, PARTITIONS, INTERVAL_S)
    return model


def test_effective_parallelism_takes_the_scaling_exponent() -> None:
    assert effective_parallelism(4, 12, exponent=0.5) == pytest.approx(2.0)
    assert effective_parallelism(5, 12, exponent=0.5) == pytest.approx(2.0)  # still 3 waves, as with 4
    assert effective_parallelism(1, 12, speed=1.5, exponent=0.3) == pytest.approx(
        1.5
    )  # one executor: its speed


def test_the_scaling_exponent_is_learned_and_predicts_a_count_it_never_ran() -> None:
    """Fitted on 1-3 executors of an engine scaling as e ** 0.6, the model predicts the capacity of 6 executors
    within 5 %; the linear model it used to be (exponent 1) promised over 1.5 times 6 executors' real capacity."""
    model = _sublinear(0.6, (1, 2, 3), noise_s=0.05)
    fit = model.fit()
    assert fit is not None and fit.scaling_exponent == pytest.approx(0.6, abs=0.1)
    true_capacity = effective_parallelism(6, PARTITIONS, exponent=0.6) / B_S  # tuples/s
    assert model.capacity(6, PARTITIONS) == pytest.approx(true_capacity, rel=0.05)
    true_6 = A_S + B_S * 600.0 / effective_parallelism(6, PARTITIONS, exponent=0.6)
    assert model.batch_s(600.0, 6, PARTITIONS) == pytest.approx(true_6, rel=0.05)
    linear = MicroBatchModel()
    linear.samples.extend(model.samples)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(engine_model, "SCALING_EXPONENTS", (1.0,))
        assert linear.capacity(6, PARTITIONS) > 1.5 * true_capacity
    qm = model.queue_model(INTERVAL_S, PARTITIONS)
    assert qm is not None and qm.scaling_exponent == fit.scaling_exponent
    assert qm.capacity(np.array([6]), np.array([1.0])) == pytest.approx(model.capacity(6, PARTITIONS))
    assert model.summary()["scaling_exponent"] == fit.scaling_exponent


def test_a_linear_engine_keeps_the_exponent_at_one_through_noise() -> None:
    """The exponent must beat linear scaling by more than noise (an F-test at about 95 %): of 30 noisy linear
    engines, at most 3 read an exponent below 1, and none below 0.85."""
    exponents = [
        _sublinear(1.0, (1, 2, 3, 4, 6), noise_s=0.15, seed=s).fit().scaling_exponent for s in range(30)
    ]
    assert sum(a < 1.0 for a in exponents) <= 3 and min(exponents) >= 0.85, exponents


def test_one_executor_count_keeps_the_exponent_learned_and_the_state_keeps_it() -> None:
    model = _sublinear(0.6, (1, 2, 3), noise_s=0.0)
    alpha = model.fit().scaling_exponent
    assert alpha < 1.0
    for i in range(40):  # a whole window on 3 executors: the exponent is not identified, and is kept
        records = 200.0 + 30.0 * (i % 5)
        model.observe(records, A_S + B_S * records / 3**0.6, 3, PARTITIONS, INTERVAL_S)
    fit = model.fit()
    assert fit.executor_counts == 1 and fit.scaling_exponent == alpha
    restored = MicroBatchModel.from_state(json.loads(json.dumps(model.to_state())))
    assert restored.fit() == fit
    old = model.to_state()
    del old["scaling_exponent"]  # a state saved before the exponent was learned: linear
    assert MicroBatchModel.from_state(old).scaling_exponent == 1.0
    for bad in (0.0, 1.5, "0.6", None):
        with pytest.raises(ValueError, match=r"scaling_exponent must be a number in \(0, 1\]"):
            MicroBatchModel.from_state({**model.to_state(), "scaling_exponent": bad})
