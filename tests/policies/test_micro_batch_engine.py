"""``policies.micro_batch_engine``: the fitted micro-batch model played forward, batch by batch."""

from __future__ import annotations

import json

import pytest

from policies.engine_model import MicroBatchModel
from policies.micro_batch_engine import BatchClock, MicroBatchEngine

#: 1 s per batch, 10 ms per record on one executor (100 records/s), 5-s trigger
ENGINE = MicroBatchEngine(overhead_s=1.0, cost_s_per_record=0.01, interval_s=5.0)


def test_a_steady_query_runs_one_batch_per_trigger_of_what_arrived_since_the_last():
    clock = BatchClock.starting(0.0, 5.0)
    first = clock.run(ENGINE, 60.0, 50.0, 1)
    assert [b.start for b in first] == [5.0 * i for i in range(1, 12)]  # nothing to read at 0: no batch
    batches = clock.run(ENGINE, 120.0, 50.0, 1)
    assert len(batches) == 12
    for b in batches:
        assert b.records == pytest.approx(250.0)  # 5 s of 50 records/s
        assert b.duration_s == pytest.approx(1.0 + 0.01 * 250.0)
        assert b.latency_s == pytest.approx(2.5 + 3.5)  # half an interval waiting, then the batch
    assert clock.waiting == pytest.approx(250.0)  # arrived after the last trigger of the period


def test_an_overload_runs_batches_back_to_back_and_carries_the_backlog_until_executors_are_added():
    clock = BatchClock.starting(0.0, 5.0)
    over = clock.run(ENGINE, 60.0, 150.0, 1) + clock.run(ENGINE, 120.0, 150.0, 1)
    durations = [b.duration_s for b in over]
    assert all(
        b > a for a, b in zip(durations, durations[1:], strict=False)
    )  # each batch larger than the last
    assert all(
        over[i + 1].start == pytest.approx(over[i].start + over[i].duration_s) for i in range(len(over) - 1)
    )
    behind = over[-1].latency_s
    assert behind > 30.0
    drained = clock.run(ENGINE, 180.0, 150.0, 3) + clock.run(ENGINE, 240.0, 150.0, 3)
    assert drained[-1].duration_s == pytest.approx(1.0 + 0.01 * 150.0 * 5.0 / 3.0)  # back on the trigger
    assert drained[-1].latency_s < behind / 5


def test_the_penalty_slows_the_batches_of_the_periods_after_a_change_and_partitions_run_in_waves():
    slow = MicroBatchEngine(1.0, 0.01, 5.0, partitions=4, penalty=2.0, scale_in_penalty=1.5)
    assert slow.batch_s(400.0, 2) == pytest.approx(1.0 + 0.01 * 400.0 / 2)
    assert slow.batch_s(400.0, 3) == slow.batch_s(400.0, 2)  # 4 partitions on 3 executors: 2 waves, as on 2
    assert slow.batch_s(400.0, 2, settling=True) == pytest.approx(2.0 * slow.batch_s(400.0, 2))
    assert slow.batch_s(400.0, 2, settling=True, scale_in=True) == pytest.approx(1.5 * slow.batch_s(400.0, 2))


def test_the_engine_of_a_fit_predicts_what_the_fitted_model_predicts():
    model = MicroBatchModel()
    for executors, records in ((1, 100.0), (1, 300.0), (2, 200.0), (2, 600.0), (1, 200.0), (2, 400.0)):
        model.observe(records, 0.5 + 0.02 * records / executors, executors, None, 5.0, None)
    fit = model.fit()
    engine = MicroBatchEngine.from_fit(fit, 5.0, None)
    for executors in (1, 2, 3):
        assert engine.batch_s(250.0, executors) == pytest.approx(model.batch_s(250.0, executors))
    assert engine.overhead_s == pytest.approx(0.5) and engine.cost_s_per_record == pytest.approx(0.02)


def test_the_clock_round_trips_through_json_and_continues_where_it_stopped():
    clock = BatchClock.starting(0.0, 5.0)
    clock.run(ENGINE, 60.0, 150.0, 1)
    restored = BatchClock.from_dict(json.loads(json.dumps(clock.to_dict())))
    assert restored == clock
    assert restored.run(ENGINE, 120.0, 150.0, 1) == clock.run(ENGINE, 120.0, 150.0, 1)


@pytest.mark.parametrize(
    ("field", "value", "message"),
    [
        ("cost_s_per_record", 0.0, "cost_s_per_record: must be > 0"),
        ("overhead_s", -1.0, "overhead_s: must be a finite number >= 0"),
        ("scaling_exponent", 1.5, "scaling_exponent: must be in (0, 1]"),
        ("penalty", 0.0, "penalty: must be a finite number > 0"),
        ("partitions", 0, "partitions: must be >= 1"),
    ],
)
def test_bad_parameters_are_refused_naming_the_field(field: str, value: float, message: str):
    params = {"overhead_s": 1.0, "cost_s_per_record": 0.01, "interval_s": 5.0, field: value}
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace("]", r"\]")):
        MicroBatchEngine(**params)
