"""bench_spark's parts without Spark: the strategies' rules, the ingest stub's contract, the period statistics
and the fluid-queue prediction."""

from __future__ import annotations

import json
import urllib.request
from pathlib import Path

import numpy as np
import pytest

from benchmarks.spark.ingest_stub import IngestStub
from benchmarks.spark.prediction import (
    engine_model,
    engine_prediction,
    engine_replay,
    fitted_model,
    service_times_s,
    simulator_prediction,
)
from benchmarks.spark.runner import BenchConfig, fluid_prediction, period_stats, static_sizes
from benchmarks.spark.strategies import DS2, OMPolicy, PeriodStats, StreamingRule


def _stats(rate=100.0, ratio=0.5, busy=0.5, executors=2, latency=5.0):
    return PeriodStats(rate, rate, ratio, busy, latency, latency, executors)


def test_streaming_rule_thresholds():
    rule = StreamingRule(k_max=4)
    assert rule.decide(_stats(ratio=0.95, executors=2)) == 3
    assert rule.decide(_stats(ratio=0.95, executors=4)) == 4  # K_max
    assert rule.decide(_stats(ratio=0.2, executors=2)) == 1
    assert rule.decide(_stats(ratio=0.2, executors=1)) == 1
    assert rule.decide(_stats(ratio=0.5, executors=2)) == 2


def test_ds2_sizes_from_the_true_rate():
    ds2 = DS2(k_max=8, headroom=0.0)
    # 100 rec/s processed with 0.5 busy s/s on 2 executors: 100 rec/s per busy executor
    assert ds2.decide(_stats(rate=100.0, busy=0.5, executors=2)) == 1
    assert ds2.decide(PeriodStats(350.0, 100.0, 1.0, 0.5, 9.0, 9.0, 2)) == 4
    assert DS2(k_max=3).decide(PeriodStats(1000.0, 100.0, 1.0, 0.5, 9.0, 9.0, 2)) == 3


def test_a_period_without_a_finished_batch_is_overload_for_the_rule_and_ds2_not_idleness():
    """Trips arrived but no micro-batch finished: one has run longer than the period. The rule read the missing
    batch ratio as 0 (idle) and scaled in; DS2 had no rate to size with."""
    stalled = PeriodStats(120.0, 0.0, 0.0, 0.0, None, None, 2, elapsed_s=60.0)
    assert StreamingRule(k_max=6).decide(stalled) == 3
    ds2 = DS2(k_max=6, headroom=0.0)
    assert ds2.decide(stalled) == 2  # nothing measured yet: keeps its count, never fewer
    assert ds2.decide(_stats(rate=100.0, busy=0.5, executors=2)) == 1  # 100 trips/s per busy executor
    # no batch finished: sized with the last true rate, never scaled in
    assert ds2.decide(PeriodStats(300.0, 0.0, 0.0, 0.0, None, None, 1)) == 3
    assert ds2.decide(PeriodStats(50.0, 0.0, 0.0, 0.0, None, None, 2)) == 2
    idle = PeriodStats(0.0, 0.0, 0.0, 0.0, None, None, 2)  # nothing arrived, nothing ran
    assert StreamingRule(k_max=6).decide(idle) == 1 and ds2.decide(idle) == 2


def test_the_adapter_observes_the_processing_rate():
    from benchmarks.spark.strategies import observation

    obs = observation(PeriodStats(190.0, 80.0, 1.2, 1.0, 30.0, 40.0, 2), 10.0, None)
    assert obs.processing_rate == 80.0 and obs.input_rate == 190.0 and obs.violated


def test_om_policy_adapter_proposes_a_feasible_count():
    policy = OMPolicy("ql-pds-plus", k_max=4, r_max_s=10.0, service_s=0.02, max_rate=200.0)
    for _ in range(5):
        k = policy.decide(_stats(rate=190.0, executors=1, latency=30.0))
        assert 1 <= k <= 4


def test_pretrained_om_policy_learns_from_recorded_periods_before_acting():
    from dataclasses import asdict

    fresh = OMPolicy("model-based", k_max=4, r_max_s=10.0, service_s=0.02, max_rate=200.0)
    trained = OMPolicy("model-based-pretrained", k_max=4, r_max_s=10.0, service_s=0.02, max_rate=200.0)
    assert trained.wants_history and not fresh.wants_history and trained.name == "model-based-pretrained"
    # recorded: one executor keeps R under 10 s up to 40 trips/s and violates from 60/s on
    history = [
        asdict(_stats(rate=r, executors=1, latency=30.0 if r >= 60 else 3.0)) for r in (20, 40, 60, 70, 30)
    ]
    assert trained.pretrain(history) == len(history)
    now = _stats(rate=90.0, executors=1, latency=3.0)
    assert trained.decide(now) > 1  # knows one executor cannot carry 90/s
    assert fresh.decide(now) <= 1  # optimistic until it has seen a violation


def test_ingest_stub_speaks_the_agent_contract():
    stub = IngestStub().start()
    try:
        base = stub.url + "/api/v1/ingest/bench/op"
        get = json.loads(urllib.request.urlopen(base + "/desired").read())
        assert get == {"generation": 0, "executors": None, "profile": None}
        assert stub.set_desired(3, {"name": "exec.small", "cores": 1, "memoryMiB": 512}) == 1
        assert json.loads(urllib.request.urlopen(base + "/desired").read())["executors"] == 3
        body = {
            "progress": [{"numInputRows": 7}],
            "latency": [{"timestamp": 1e12, "mean_s": 1, "p95_s": 2, "n": 7}],
            "driver": {"executors": 3},
        }
        req = urllib.request.Request(base + "/progress", json.dumps(body).encode(), method="POST")
        assert urllib.request.urlopen(req).status == 201
        prog, lat, drv = stub.since(0)
        assert prog == [{"numInputRows": 7}] and lat[0]["n"] == 7 and drv == {"executors": 3}
        bad = urllib.request.Request(base + "/progress", b"{not json", method="POST")
        with pytest.raises(urllib.error.HTTPError) as err:
            urllib.request.urlopen(bad)
        assert err.value.code == 400
    finally:
        stub.stop()


def test_period_stats_and_fluid_prediction(tmp_path: Path):
    prog = [{"numInputRows": 50, "batchDuration": 2500}, {"numInputRows": 50, "batchDuration": 5000}]
    lat = [{"mean_s": 4.0, "p95_s": 6.0, "n": 30}, {"mean_s": 8.0, "p95_s": 9.0, "n": 10}]
    s = period_stats(prog, lat, 2, 10.0, 5.0)
    assert s.input_rate == 10.0 and s.busy_s_per_s == 0.75 and s.batch_ratio == 0.75
    # with the records the source created in the period, the input rate is the arrival rate (a backlog grows)
    behind = period_stats(prog, lat, 2, 10.0, 5.0, elapsed_s=40.0, arrived=250)
    assert behind.input_rate == 25.0 and behind.processed_rate == 10.0 and behind.elapsed_s == 40.0
    assert s.latency_mean_s == 5.0 and s.latency_p95_s == 9.0
    cfg = BenchConfig(
        master="local[1]",
        workdir=tmp_path,
        minutes=1.0,
        compress=60.0,
        rate_scale=0.1,
        r_max_s=10.0,
        wait_ms=20.0,
    )
    series = [{"start": 0.0, "end": 30.0, "executors": 1}, {"start": 30.0, "end": 60.0, "executors": 1}]
    ok_viol, ok_lat = fluid_prediction(cfg, series, mu=1000.0, t0=0.0)
    assert ok_viol == 0.0 and ok_lat == pytest.approx(7.5)  # ample capacity: 1.5 intervals
    bad_viol, bad_lat = fluid_prediction(cfg, series, mu=1.0, t0=0.0)
    assert bad_viol > 0 and bad_lat > ok_lat  # too little capacity: the backlog grows
    peak, mean = static_sizes(cfg)
    assert peak >= mean >= 1


def _period(start: float, executors: int, processed: float, busy: float) -> dict:
    return {"start": start, "end": start + 10.0, "executors": executors, "processed_rate": processed,
            "busy_s_per_s": busy}  # fmt: skip


def test_simulator_prediction_fits_the_runs_service_times_and_replays_its_executors():
    # one record costs 20 ms on one executor in every period (busy x k / rate = 0.02 s)
    series = [_period(0.0, 1, 25.0, 0.5), _period(10.0, 2, 50.0, 0.5), _period(20.0, 2, 40.0, 0.4)]
    assert service_times_s(series) == pytest.approx([0.02, 0.02, 0.02])
    model = fitted_model(series)
    assert model.service_mean_s == pytest.approx(0.02) and model.service_var_s2 == pytest.approx(0.0)
    # 25 tuples/s on 1 executor (rho 0.5) and on 2: M/D/1 sojourn + 1.5 x 2 s of micro-batching
    viol, mean = simulator_prediction(series, lambda s: 25.0, 0.0, interval_s=2.0, r_max_s=10.0)
    assert viol == 0.0 and 3.0 < mean < 3.1
    # 60 tuples/s exceeds one executor's 50/s: that period is unstable, counted as a violation
    viol, _ = simulator_prediction(series, lambda s: 60.0, 0.0, interval_s=2.0, r_max_s=10.0)
    assert viol == pytest.approx(100.0 / 3)
    assert simulator_prediction(series[:1], lambda s: 25.0, 0.0, 2.0, 10.0) is None  # one period: no fit


def _batch_period(start: float, executors: int, rate: float, records: float) -> dict:
    """A 15-s period of 5-s batches on 12 partitions: duration 1 s + 20 ms x records / executors."""
    d = 1.0 + 0.02 * records / executors
    return {"start": start, "end": start + 15.0, "executors": executors, "input_rate": rate, "startup": False,
            "batch_duration_s": d, "batch_records": records, "latency_mean_s": 0.5 * max(5.0, d) + d}  # fmt: skip


def test_engine_prediction_fits_the_runs_batches_and_replays_its_executors():
    series = [_batch_period(15.0 * i, k, r / 5.0, r) for i, (k, r) in enumerate(
        [(1, 50.0), (1, 100.0), (1, 150.0), (1, 200.0), (2, 300.0), (2, 400.0), (2, 500.0), (2, 600.0)]
    )]  # fmt: skip
    model = engine_model(series, 12, 5.0)
    fit = model.fit()
    assert fit.overhead_s == pytest.approx(1.0) and fit.cost_s_per_record == pytest.approx(0.02)
    assert fit.latency_offset_s == pytest.approx(0.0, abs=1e-9)
    # within capacity every batch takes one interval's arrivals: latency = T / 2 + d, no violation; the first
    # batch of period 1 (20/s) reads the last 5 s of period 0 (10/s)
    lats = engine_replay(model, series, 5.0, 12)
    assert lats[1] == pytest.approx((50.0 * (2.5 + 2.0) + 200.0 * (2.5 + 3.0)) / 250.0)
    viol, mean, core_s = engine_prediction(series, 5.0, 15.0, 12)
    assert viol == 0.0 and core_s == pytest.approx(15.0 * 12)
    # 60 tuples/s on one executor (capacity 50/s): batches grow period after period, the bound is crossed
    over = [{**row, "executors": 1, "input_rate": 60.0} for row in series]
    lats = engine_replay(model, over, 5.0, 12)
    done = [x for x in lats if x is not None]
    assert done == sorted(done) and done[-1] > 15.0
    assert None in lats  # a period in which no batch starts (one batch outlasts it) reports no latency
    assert engine_prediction(series[:1], 5.0, 15.0, 12) is None  # one period: no fit


def test_om_policy_passes_the_batches_to_the_engine_model():
    prog = [{"batchId": 3, "numInputRows": 300, "batchDuration": 4000}, {"batchId": 4, "numInputRows": 100,
            "batchDuration": 2000}]  # fmt: skip
    s = period_stats(prog, [{"mean_s": 6.0, "p95_s": 8.0, "n": 400}], 2, 15.0, 5.0)
    assert s.batch_duration_s == 3.0 and s.batch_records == 200.0
    assert period_stats([], [], 2, 15.0, 5.0).batch_duration_s is None
    policy = OMPolicy("model-based", 6, 15.0, 0.02, 200.0, engine=(12, 5.0, 15.0))
    policy.decide(s)
    assert policy.policy.engine.samples[-1].records == 200.0
    assert policy.policy._engine_ctx.partitions == 12
    plain = OMPolicy("model-based", 6, 15.0, 0.02, 200.0)
    plain.decide(s)
    assert len(plain.policy.engine.samples) == 0


def test_the_start_up_period_is_marked_and_neither_teaches_nor_moves_a_policy():
    """A query's first micro-batch includes its start-up (seen: 23 s for 1 record under dynamic allocation):
    taken as load, it would teach "one replica violates at 0.1 records/s" and pin the policy at K_max."""
    prog = [{"batchId": 0, "numInputRows": 2, "batchDuration": 23000}]
    lat = [{"mean_s": 25.0, "p95_s": 25.0, "n": 2}]
    first = period_stats(prog, lat, 2, 15.0, 5.0)
    assert first.startup
    later = period_stats([{**prog[0], "batchId": 1}], lat, 2, 15.0, 5.0)
    assert not later.startup
    policy = OMPolicy("model-based-capacity", k_max=6, r_max_s=15.0, service_s=0.02, max_rate=200.0)
    assert policy.decide(first) == 2
    assert np.isinf(policy.policy.thr_hi).all() and not policy.policy.cap_stats.any()
    policy.decide(later)
    policy.decide(later)  # learned from (the first step only starts the policy)
    assert np.isfinite(policy.policy.thr_hi).all()


def _ramp_schedule():
    from connectors.spark.trace_source import TraceSchedule

    # one trace minute per wall second (compress 60): 10 s at 20/s, 10 s at 100/s, 10 s at 20/s
    return TraceSchedule(np.array([20.0] * 10 + [100.0] * 10 + [20.0] * 10), compress=60.0)


def test_clairvoyant_sizes_for_the_coming_period_and_the_backlog():
    from benchmarks.spark.strategies import Clairvoyant

    oracle = Clairvoyant(
        _ramp_schedule(), period_s=5.0, mu=50.0, k_max=4, headroom=0.0, lead_s=0.0, interval_s=1.0
    )
    assert oracle.initial() == 1  # the first 5 s bring 20/s
    # end of 0..5 s, all processed: 5..10 s brings 20/s again
    assert oracle.decide(PeriodStats(20.0, 20.0, 0.2, 0.2, 1.0, 1.0, 1, elapsed_s=5.0)) == 1
    # end of 5..10 s: the next period brings 100/s -> 2 executors before the rate arrives
    assert oracle.decide(PeriodStats(20.0, 20.0, 0.2, 0.2, 1.0, 1.0, 1, elapsed_s=10.0)) == 2
    # end of 10..15 s with only 50/s processed: 250 - 1 s in flight (100) = 150 unprocessed -> +30/s
    assert oracle.decide(PeriodStats(50.0, 50.0, 1.0, 1.0, 9.0, 9.0, 2, elapsed_s=15.0)) == 3
    # end of 25..30 s: the trace is over, nothing left -> 1
    late = Clairvoyant(_ramp_schedule(), period_s=5.0, mu=50.0, k_max=4, headroom=0.0, lead_s=0.0)
    late.processed = 1200.0 - 20.0 * 5.0
    assert late.decide(PeriodStats(20.0, 20.0, 0.2, 0.2, 1.0, 1.0, 1, elapsed_s=30.0)) == 1
    with pytest.raises(ValueError, match="mu"):
        Clairvoyant(_ramp_schedule(), period_s=5.0, mu=0.0, k_max=4)


def test_clairvoyant_bound_is_the_executor_seconds_of_per_period_sizing():
    from benchmarks.spark.strategies import clairvoyant_bound

    # 10-s periods: 20/s -> 1, 100/s -> 2 (mu 50, no headroom), 20/s -> 1; against 2 executors all along
    assert clairvoyant_bound(_ramp_schedule(), 10.0, 50.0, peak=2, headroom=0.0) == pytest.approx(4 / 6)
    # 10 % headroom: 110/s needs 3 executors of 50/s
    assert clairvoyant_bound(_ramp_schedule(), 10.0, 50.0, peak=3, headroom=0.1) == pytest.approx(5 / 9)


def test_rule_based_strategies_keep_the_deployment_through_the_start_up_period():
    """The first micro-batch's duration is the query's start-up (1.9 batch intervals, 0.1 trips/s read while
    15/s arrive): DS2 read it as 6 executors needed and the streaming rule as overload."""
    start = PeriodStats(15.0, 0.1, 1.9, 0.6, 10.0, 10.0, 1, startup=True)
    assert DS2(k_max=6).decide(start) == 1
    assert StreamingRule(k_max=6).decide(start) == 1
    later = PeriodStats(15.0, 0.1, 1.9, 0.6, 10.0, 10.0, 1)
    assert DS2(k_max=6).decide(later) == 6 and StreamingRule(k_max=6).decide(later) == 2


def test_bench_command_prints_the_clairvoyant_floor_without_starting_spark():
    from io import StringIO

    from django.core.management import CommandError, call_command

    out = StringIO()
    call_command("bench_spark", "--periods", "20", "--floor-only", stdout=out)
    assert "static peak 4" in out.getvalue() and "= 0.70 x static peak" in out.getvalue()
    finer = StringIO()
    call_command(
        "bench_spark", "--periods", "20", "--kmax", "8", "--peak-executors", "8", "--floor-only", stdout=finer
    )
    assert "static peak 8" in finer.getvalue() and "0.66 x static peak" in finer.getvalue()
    with pytest.raises(CommandError, match="--clairvoyant-capacity"):
        call_command("bench_spark", "--clairvoyant-capacity", "0", "--floor-only")
    for args, field in (
        (["--periods", "0"], "--periods"),
        (["--repeat", "0"], "--repeat"),
        (["--eta-r", "0"], "--eta-r"),
        (["--policies", "no-such-policy"], "--policies"),
        (["--master", "local[2]"], "--master"),
        (["--master-web-ui", "127.0.0.1:8080"], "--master-web-ui"),
        (["--trace", "/no/such/trace"], "--trace"),
        (["--trace-start", "99999999"], "--trace-start"),
        (["--minutes", "-1"], "--minutes"),
    ):
        with pytest.raises(CommandError, match=field):
            call_command("bench_spark", *args, "--floor-only")
    # --minutes (the earlier runs' commands) is --periods at the control period: 5 minutes = 20 periods of 15 s
    same = StringIO()
    call_command("bench_spark", "--minutes", "5", "--floor-only", stdout=same)
    assert same.getvalue() == out.getvalue()
    # the product path on SQLite without a separate server: refused before anything starts (on PostgreSQL it
    # would start a cluster and run: not here)
    from django.db import connection

    if connection.vendor == "sqlite":
        with pytest.raises(CommandError, match="PostgreSQL"):
            call_command("bench_spark", "--periods", "2", "--strategies", "")
    # an existing master for the product path needs its web UI (the region's nodes are its workers)
    with pytest.raises(CommandError, match="--master-web-ui: required"):
        call_command(
            "bench_spark", "--periods", "2", "--strategies", "", "--master", "spark://127.0.0.1:7077",
            "--control-plane", "http://127.0.0.1:9",
        )  # fmt: skip


def test_recorded_live_run_replays_to_the_engine_models_decisions():
    """The periods of a live ``model-based-trend`` run (tests/fixtures/spark_periods_taxi12.json, one executor at
    the start, untrained) replayed through the same adapter: the engine model plans from its fourth period on one
    executor, sizes 47 tuples/s for 3 executors in one step (the live run asked 1 -> 3 there), and then, with a
    backlog of 3,800 records that nothing drains within a period, steps to 6 (live: 3 -> 6)."""
    data = json.loads(
        (Path(__file__).resolve().parents[2] / "fixtures" / "spark_periods_taxi12.json").read_text()
    )
    series = next(r["series"] for r in data["runs"] if r["strategy"] == "model-based-trend")
    policy = OMPolicy("model-based-trend", 6, 15.0, 0.02, 216.0, engine=(12, 5.0, 15.0))
    asked, notes = [], []
    for row in series:
        rows, durations = row["batch_rows"], row["batch_s"]
        stats = PeriodStats(
            row["input_rate"], row["processed_rate"], np.mean(durations) / 5.0 if durations else 0.0,
            sum(durations) / (row["end"] - row["start"]), row["latency_mean_s"], None, row["executors"],
            row["startup"], 0.0, float(np.mean(durations)) if durations else None,
            float(np.mean(rows)) if rows else None,
        )  # fmt: skip
        asked.append((row["executors"], policy.decide(stats)))
        notes.append(policy.policy._engine_extras().get("engine_model", {}))
    changes = list(dict.fromkeys((k, want) for k, want in asked if want != k))  # asked again while applying
    assert changes[:2] == [(1, 3), (3, 6)]
    assert sum(1 for n in notes if n.get("planning")) >= 3
    fit = next(n for n in notes if n.get("planning"))
    assert 2.0 < fit["overhead_s"] < 5.0 and 15.0 < fit["cost_ms_per_record"] < 35.0
    step = next(
        n["backlog_step"] for n in notes if "backlog_step" in n and n["backlog_step"]["target"] == [6]
    )
    assert step["backlog_tuples"] > 3000 and "drain it fastest" in step["reason"]


def test_the_files_source_reports_written_but_unread_records_as_its_backlog(tmp_path: Path):
    """What a Kafka source reports as offsets behind: the product's monitor adds the backlog's growth to the
    rows read, so an overloaded query's input rate is the arrivals, not its own throughput."""
    from connectors.spark.pipelines.run import FileBacklog
    from connectors.spark.trace_source import _GENERATORS, FileTraceGenerator

    gen = FileTraceGenerator(tmp_path / "in", {"kind": "taxi", "rateScale": 1.0, "traceMinutes": 5})
    gen.write_available(gen.t0 + 10.0)  # 10 s of the trace written
    _GENERATORS[str(tmp_path / "in")] = gen
    try:
        backlog = FileBacklog()
        progress = {"numInputRows": 100, "sources": [{"description": "FileStreamSource", "metrics": {}}]}
        first = json.loads(backlog.enrich(json.dumps(progress)))
        assert first["sources"][0]["metrics"]["backlog"] == str(gen.next_index - 100)
        second = json.loads(backlog.enrich(json.dumps({**progress, "numInputRows": 50})))
        assert second["sources"][0]["metrics"]["backlog"] == str(gen.next_index - 150)
        assert json.loads(backlog.enrich(json.dumps({"numInputRows": 5}))) == {"numInputRows": 5}
    finally:
        _GENERATORS.pop(str(tmp_path / "in"), None)


def test_the_product_runs_executor_seconds_stop_at_the_last_measured_period():
    """Executors as the agent reported them, sampled each second: each count holds until the next sample; the
    drain after the trace is not a measured period (the harness strategies stop counting there too)."""
    from benchmarks.spark.product import ExecutorSampler

    sampler = ExecutorSampler(operator_id=1, initial=2, since=100.0)
    sampler.tick(4, now=110.0)
    sampler.tick(None, now=120.0)  # nothing new reported: the count holds
    assert sampler.core_s == 2 * 10 + 4 * 10
    assert sampler.core_s_until(115.0) == 2 * 10 + 4 * 5
    assert sampler.core_s_until(130.0) == 2 * 10 + 4 * 20
    assert (sampler.at(109.0), sampler.at(110.0), sampler.at(99.0)) == (2, 4, 2)


@pytest.mark.django_db
def test_the_pretrained_product_variant_stores_the_replayed_policy_as_the_operators_agent_state(
    tmp_path: Path,
):
    """``<policy>-pretrained`` through the product: the manifests are applied, earlier periods are replayed
    through the policy the tick builds, and the tick loads that state (it knows one executor violates at 60/s)."""
    from dataclasses import asdict

    from autoscaler.control.models import AgentState
    from benchmarks.spark.product import OPERATOR, pretrain, register

    cfg = BenchConfig(master="spark://127.0.0.1:7077", workdir=tmp_path)
    app, token = register(cfg, "model-based", eta_v=0.05, eta_r=0.2, am_period_s=150.0)
    assert token.startswith("ssi_") and app.state == "running" and app.engine == "spark"
    history = [
        asdict(_stats(rate=r, executors=1, latency=30.0 if r >= 60 else 3.0)) for r in (20, 40, 60, 70, 30)
    ]
    assert pretrain(app, history, cfg) == len(history)
    agent = AgentState.objects.get(operator__application=app, operator__name=OPERATOR)
    assert agent.policy == "model-based" and agent.steps > 0
    # loaded as the tick loads it, the state knows one executor cannot carry 90/s; a fresh policy does not yet
    from autoscaler.control.om_config import operator_spec
    from autoscaler.control.tick import control_of
    from autoscaler.control.topology import topology
    from benchmarks.spark.strategies import observation
    from policies import registry

    topo = topology(app)
    op = next(o for o in topo.operators if o.name == OPERATOR)
    spec = operator_spec(topo, op, control_of(app).am_config)
    trained, fresh = registry.load("om", "model-based")(spec), registry.load("om", "model-based")(spec)
    trained.load_state(bytes(agent.blob))
    now = observation(_stats(rate=90.0, executors=1, latency=3.0), cfg.r_max_s, None)
    assert int(trained.step(now).deployment.sum()) > 1
    assert int(fresh.step(now).deployment.sum()) <= 1


def test_a_product_ticks_line_says_why_from_the_decision_log() -> None:
    """The bench deletes the decision log after a run: its tick lines keep what the log said of each tick."""
    from types import SimpleNamespace

    from benchmarks.spark.product import _why

    engine = {"planning": True, "penalty": 1.34, "scaling_exponent": 0.6}
    withheld = SimpleNamespace(
        proposal={"action": 0, "target": {"exec.small": 6}, "explanation": {
            "engine_model": engine, "settling": {"withheld": [4], "penalty": 1.34}}},
        deployment={"exec.small": 6}, granted=False, reason="",
    )  # fmt: skip
    assert _why(withheld) == " (scale-in to 4 withheld (settling); penalty 1.34, alpha 0.6)"
    denied = SimpleNamespace(
        proposal={"action": -1, "target": {"exec.small": 5}, "explanation": {"engine_model": {
            "planning": False, "backlog_step": {"target": [5]}}}},
        deployment={"exec.small": 2}, granted=False, reason="denied: reconfiguration budget",
    )  # fmt: skip
    assert _why(denied) == " (proposed 5; backlog step; denied: reconfiguration budget)"
    quiet = SimpleNamespace(proposal={"action": 0}, deployment={"exec.small": 2}, granted=False, reason="")
    assert _why(quiet) == ""


def test_engine_prediction_carries_the_cost_through_a_last_window_of_one_batch_size():
    """A run that spread its batch sizes early and then held one size for a whole window (the model's 40
    periods) is still predicted: the model is refitted period by period, as the policy refits it online, so the
    per-record cost of the spread window carries (fitted once at the end, it could not separate the overhead)."""
    from policies.engine_model import WINDOW

    early = [(1, 50.0), (1, 100.0), (1, 150.0), (1, 200.0), (2, 300.0), (2, 400.0)]
    steady = [(2, 400.0)] * (WINDOW + 5)
    series = [_batch_period(15.0 * i, k, r / 5.0, r) for i, (k, r) in enumerate(early + steady)]
    prediction = engine_prediction(series, 5.0, 15.0, 12)
    assert prediction is not None
    viol, _, core_s = prediction
    assert viol == 0.0 and core_s == pytest.approx(15.0 * sum(k for k, _ in early + steady))
    assert engine_model(series, 12, 5.0).fit().cost_s_per_record == pytest.approx(0.02)
