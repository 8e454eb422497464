"""A real PySpark streaming query on a real standalone cluster under the connector's control.

One driver lives through the phases of one test (the live server's database is flushed between tests):
listener -> ingest endpoint -> observation; live scale out and in verified on the driver's REST API; an
executor-profile change by restart with the aggregation state preserved exactly and the downtime recorded; an
apply the cluster cannot satisfy, rolled back and surfaced. Measured times are printed (``-s`` shows them).
"""

from __future__ import annotations

import itertools
import time

import pytest

from autoscaler.control.connectors import build_connector
from autoscaler.control.models import Decision, Tick
from autoscaler.control.tick import run_tick
from autoscaler.ingest.models import AppliedAck, ProgressSample
from connectors.base import Period, ScalingPlan
from connectors.spark.monitor import rest_executors
from tests.celery_procs import wait_until
from tests.connectors.spark.wordcount import build_query_factory, counts_of, start_agent, write_words

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.urls("ingest_only_urls")]


def wait_for(predicate, timeout_s: float, what: str):
    return wait_until(predicate, timeout_s, what, step=0.3)


def test_a_spark_query_is_observed_scaled_live_restarted_with_state_and_rolled_back(
    cluster, live_server, django_user_model, make_app, tmp_path
):
    owner = django_user_model.objects.create_user("alice")
    connector = f'{{master: "{cluster.master_url}", batchIntervalS: 1.0, applyTimeoutS: 150}}'
    app, token = make_app(owner, connector)
    in_dir, ck = tmp_path / "in", tmp_path / "ck"
    in_dir.mkdir()
    agent = start_agent(build_query_factory(in_dir, ck), cluster.master_url, live_server.url, token, 30.0)
    try:
        connector_ = build_connector(app)
        # ---- listener -> ingest -> observation -------------------------------------------------------------
        expected: dict[str, int] = {"warm": 1}
        write_words(in_dir, "warm-up.json", expected)  # executors started, first batch planned
        wait_for(lambda: counts_of(agent) == expected, 240, "the warm-up file to be counted")
        # A batch belongs to the period its trigger started in, and lists its files after that start: a trigger
        # fired just before t_start could still pick up f0 on a loaded machine (CI once counted 413 of 468
        # rows). Nothing is written for a while after t_start, so such a trigger has listed an empty directory.
        t_start = time.time()
        time.sleep(2 * 1.0 + 0.5)  # two trigger intervals (1 s) and a margin
        t_fed = time.time()  # the first file is written now
        written = 0
        for i in range(8):
            batch = {"alpha": 30 + i, "beta": 20, f"w{i}": 5}
            written += write_words(in_dir, f"f{i}.json", batch)
            for w, n in batch.items():
                expected[w] = expected.get(w, 0) + n
            time.sleep(1.0)
        wait_for(lambda: counts_of(agent) == expected, 300, "the first eight files to be counted")
        t_end = time.time() + 0.001

        def shipped_rows() -> int:  # the last progress event follows the sink's commit: wait for it
            agent.flush(5)
            return sum(
                ProgressSample.objects.filter(operator__name="counter").values_list(
                    "num_input_rows", flat=True
                )
            )

        wait_for(lambda: shipped_rows() == written + 1, 60, "every batch's progress to be stored")
        metrics = connector_.monitor.collect(Period(0, t_start, t_end))
        assert metrics.complete, metrics.reason
        m = metrics.operators["counter"]
        assert m.input_rate * (t_end - t_start) == pytest.approx(written)
        assert 0 < m.utilisation <= 1 and m.processing_rate > 0
        # records are created after t_start and counted before t_end: a real latency lies in between
        assert 0 < m.response_time_s <= m.response_time_p95_s * 2 and m.response_time_p95_s <= t_end - t_start
        assert m.deployment == {"small": 1} and "executors via rest" in m.reason
        assert metrics.path_response_time_s["src->counter->out"] == pytest.approx(m.response_time_s)

        # ---- a control tick on this engine (dry run): complete observation, a decision per operator ---------
        # The tick of slot s observes [(s - 1) T, s T). Which periods of the fed window the engine's progress
        # covers depends on how long its batches took (on a loaded machine a batch can outlast T = 4 s: CI once
        # saw 26 % of a period covered): the tick runs on the first period the monitor calls complete, and its
        # outcome must be the monitor's verdict.
        period_s = float(app.om_period_s)
        slots = range(int(t_fed // period_s) + 2, int(t_end // period_s) + 1)
        assert slots, (t_fed, t_end, period_s)

        verdicts = (
            (s, connector_.monitor.collect(Period(s - 1, (s - 1) * period_s, s * period_s))) for s in slots
        )
        first = next(verdicts)
        slot, verdict = next((sv for sv in itertools.chain([first], verdicts) if sv[1].complete), first)
        app.dry_run = True
        app.save()
        outcome = run_tick(app.pk, slot)
        tick = Tick.objects.get(application=app, slot=slot)
        if verdict.complete:
            assert outcome.status == "done" and outcome.decisions == 1, tick.error
            decision = Decision.objects.get(application=app, slot=slot)
            assert decision.observed["input_rate"] > 0 and decision.deployment == {"small": 1}
        else:  # no period of the window was covered: the tick records no data, for the monitor's reason
            assert outcome.status == "no_data" and verdict.reason in tick.error, tick.error

        # ---- live scale out and in ---------------------------------------------------------------------------
        ui = agent.driver_info()["uiUrl"]
        timings = {}
        for target in (3, 1):
            t0 = time.monotonic()
            result = connector_.realizer.apply(ScalingPlan({"counter": {"small": target}}, slot=1))
            timings[f"live to {target}"] = time.monotonic() - t0
            assert result.ok, result.error
            assert result.deployments == {"counter": {"small": target}} and result.downtime_s == 0.0
            assert len(rest_executors(ui)) == target
        print(f"\nlive executor changes until verified (s): {timings}")

        # ---- profile change by restart: state preserved exactly ---------------------------------------------
        result = connector_.realizer.apply(ScalingPlan({"counter": {"large": 1}}, slot=2))
        assert result.ok, result.error
        assert result.deployments == {"counter": {"large": 1}}
        assert result.downtime_s > 0 and result.details["counter"]["downtime_s"] == result.downtime_s
        ack = AppliedAck.objects.filter(operator__name="counter").order_by("-generation").first()
        assert ack.downtime_s == result.downtime_s and ack.error == ""
        new_ui = agent.driver_info()["uiUrl"]
        executors = rest_executors(new_ui)
        assert [e["totalCores"] for e in executors] == [2]
        print(
            f"restart-based profile change: downtime {result.downtime_s:.1f} s, "
            f"until verified {result.details['counter']['duration_s']:.1f} s"
        )
        more = {"alpha": 7, "gamma": 4}
        write_words(in_dir, "after-restart.json", more)
        for w, n in more.items():
            expected[w] = expected.get(w, 0) + n
        got = wait_for(lambda: (c := counts_of(agent)) == expected and c, 120, "counts after the restart")
        assert got == expected  # no record lost (state restored), none duplicated (files not re-read)

        # ---- an apply the cluster cannot satisfy: rolled back and surfaced ----------------------------------
        # 4 cores in the cluster: at most 2 executors of 2 cores, 5 requested
        result = connector_.realizer.apply(ScalingPlan({"counter": {"large": 5}}, slot=3))
        assert not result.ok and result.rolled_back
        assert "5 desired" in result.error, result.error
        assert result.details["counter"]["rollback_verified"] is True
        assert result.deployments == {"counter": {"large": 1}}
        assert len(rest_executors(new_ui)) == 1
        assert agent.query.isActive
    finally:
        agent.stop()
    assert agent.stats.dropped == 0 and agent.stats.post_failures == 0
