"""A real PySpark streaming query on a real standalone cluster under the connector's control.

One driver lives through the phases of one test (the live server's database is flushed between tests):
listener -> ingest endpoint -> observation; live scale out and in verified on the driver's REST API; an
executor-profile change by restart with the aggregation state preserved exactly and the downtime recorded; an
apply the cluster cannot satisfy, rolled back and surfaced. Measured times are printed (``-s`` shows them).
"""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from autoscaler.control.models import Decision, Tick
from autoscaler.control.tick import run_tick
from autoscaler.ingest.models import AppliedAck, ProgressSample
from connectors.base import Period, ScalingPlan
from connectors.factory import build_connector
from connectors.spark.monitor import rest_executors

pytestmark = [pytest.mark.slow, pytest.mark.django_db(transaction=True), pytest.mark.urls("ingest_only_urls")]

SMALL = {"name": "small", "cores": 1, "memoryMiB": 512}


def write_words(directory: Path, name: str, counts: dict[str, int]) -> int:
    """One JSON-lines file of words stamped with their creation time (s); returns the number of records."""
    now = time.time()
    lines = [json.dumps({"word": w, "created": now}) for w, n in counts.items() for _ in range(n)]
    tmp = directory.parent / f".{name}"
    tmp.write_text("\n".join(lines) + "\n")
    tmp.rename(directory / name)  # atomic: the file source never sees a partial file
    return len(lines)


def build_query_factory(in_dir: Path, checkpoint: Path):
    def build(spark):
        from pyspark.sql import functions as F

        words = (
            spark.readStream.schema("word string, created double")
            .option("maxFilesPerTrigger", 1)
            .json(str(in_dir))
        )
        lat = F.unix_micros(F.current_timestamp()) / 1e6 - F.col("created")
        observed = words.withColumn("lat", lat).observe(
            "e2e",
            F.avg("lat").alias("mean_s"),
            F.percentile_approx("lat", 0.95).alias("p95_s"),
            F.count(F.lit(1)).alias("n"),
        )
        counts = observed.groupBy("word").count()
        return (
            counts.writeStream.outputMode("complete")
            .format("memory")
            .queryName("counts")
            .option("checkpointLocation", str(checkpoint))
            .trigger(processingTime="1 second")
            .start()
        )

    return build


def counts_of(agent) -> dict[str, int]:
    return {r["word"]: r["count"] for r in agent.spark.sql("select * from counts").collect()}


def wait_for(predicate, timeout_s: float, what: str):
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = predicate()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out after {timeout_s} s waiting for {what}")


def test_a_spark_query_is_observed_scaled_live_restarted_with_state_and_rolled_back(
    cluster, live_server, django_user_model, make_app, tmp_path
):
    from connectors.spark.agent import run

    owner = django_user_model.objects.create_user("alice")
    connector = f'{{master: "{cluster.master_url}", batchIntervalS: 1.0, applyTimeoutS: 150}}'
    app, token = make_app(owner, connector)
    in_dir, ck = tmp_path / "in", tmp_path / "ck"
    in_dir.mkdir()
    conf = {
        "spark.sql.shuffle.partitions": "2",
        "spark.ui.port": "0",
        "spark.driver.host": "127.0.0.1",
        "spark.ui.showConsoleProgress": "false",
    }
    agent = run(
        build_query_factory(in_dir, ck),
        conf,
        master=cluster.master_url,
        application="wc",
        operator="counter",
        url=live_server.url,
        token=token,
        profile=SMALL,
        executors=1,
        block=False,
        apply_timeout_s=30.0,
        poll_interval_s=0.5,
        ship_interval_s=0.5,
    )
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
        period_s = float(app.om_period_s)
        slot = int(t_fed // period_s) + 2  # observes [(slot - 1) T, slot T), inside the fed window
        assert slot * period_s <= t_end
        app.dry_run = True
        app.save()
        outcome = run_tick(app.pk, slot)
        tick = Tick.objects.get(application=app, slot=slot)
        assert outcome.status == "done" and outcome.decisions == 1, tick.error
        decision = Decision.objects.get(application=app, slot=slot)
        assert decision.observed["input_rate"] > 0 and decision.deployment == {"small": 1}

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
