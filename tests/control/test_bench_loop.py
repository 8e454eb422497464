"""``manage.py bench_loop``: its JSON on a short scenario, its per-period record against the control loop's own
aggregates, the recovery measure, and the simulated demo's application within its SLO budgets after the warm-up."""

from __future__ import annotations

import io
import json
from collections import Counter
from contextlib import contextmanager

import pytest
from django.core.management import call_command

from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.models import Application, Region
from benchmarks.loop.report import JSON_KEYS, app_result, recovery
from benchmarks.loop.runner import OWNER, cleanup, run_scenario
from benchmarks.loop.scenarios import SCENARIOS, flash_trace, ramp_trace, step_trace

pytestmark = pytest.mark.django_db


def bench_json(*args: str) -> list[dict]:
    out = io.StringIO()
    call_command("bench_loop", "--json", "--no-baseline", *args, stdout=out, stderr=io.StringIO())
    return [json.loads(line) for line in out.getvalue().splitlines() if line.strip()]


def test_json_has_exactly_the_keys_and_types_on_a_short_scenario():
    rows = bench_json("--scenario", "step", "--periods", "12", "--warmup", "3")
    assert len(rows) == 1
    row = rows[0]
    assert list(row) == list(JSON_KEYS)
    assert row["app"] == "step-pipeline" and row["scenario"] == "step"
    assert row["periods"] == 9 and row["warmup"] == 3
    for key in ("violations_pct", "eta_v_pct", "reconfigurations_pct", "eta_r_pct", "cost"):
        assert isinstance(row[key], float | int) and not isinstance(row[key], bool), key
        assert row[key] >= 0, key
    assert 0 <= row["violations_pct"] <= 100 and 0 <= row["reconfigurations_pct"] <= 100
    assert row["eta_v_pct"] == 5.0 and row["eta_r_pct"] == 10.0
    assert isinstance(row["floor_cost"], float) and row["floor_cost"] > 0
    assert row["cost_vs_floor"] == pytest.approx(row["cost"] / row["floor_cost"], rel=1e-2)
    # the step comes at period 12 // 3 = 4: the recovery is a count of periods, or None if never recovered
    assert row["recovery_periods"] is None or isinstance(row["recovery_periods"], int)
    # 9 periods of 60 s of at least 3 replicas at >= $0.7/h
    assert row["cost"] >= 9 * 3 * 0.7 * 60 / 3600 - 1e-9
    # nothing is left behind
    assert not Application.objects.filter(owner__username=OWNER).exists()
    assert not Region.objects.filter(name__startswith="bench-loop-").exists()


def test_policy_override_goes_through_the_manifest_and_is_validated():
    from django.core.management.base import CommandError

    with pytest.raises(CommandError, match="manifests were refused"):
        bench_json("--scenario", "step", "--periods", "2", "--warmup", "0", "--policy", "no-such-policy")
    rows = bench_json("--scenario", "step", "--periods", "3", "--warmup", "0", "--policy", "threshold")
    assert rows[0]["periods"] == 3


def test_the_record_matches_the_control_loops_aggregates(tmp_path):
    run = run_scenario(SCENARIOS["step"], 15, tmp_path)
    try:
        (rec,) = run.apps
        control = ApplicationControl.objects.get(application_id=rec.app_id)
        done = [s == "done" for s in rec.status]
        assert control.periods == sum(done) == 15
        assert control.violated_periods == sum(v for v, d in zip(rec.violated, done, strict=True) if d)
        assert control.reconfigured_periods == sum(rec.reconfigured)
        assert control.total_cost == pytest.approx(sum(rec.cost))
        # the engine's rates are the trace's: 150 tuples/s, then 450 from period 5 on
        assert rec.rates["op0"][:5] == [150.0] * 5 and rec.rates["op0"][5:] == [450.0] * 10
        result = app_result("step", rec, warmup=5, change=5)
        assert result.periods == 10 and result.floor_cost is not None
        assert result.extra["floor"]["violations"] == 0  # 450 tuples/s fit in K_max = 10 within the bound
    finally:
        cleanup()


def test_recovery_counts_periods_until_the_application_stays_within_r_max():
    v = [False, False, True, True, False, True, False, False, False, False, False]
    done = [True] * len(v)
    assert recovery(v, done, 2, hold=5) == 4  # back within R_max at period 6 for good
    assert recovery(v, done, 2, hold=1) == 2
    assert recovery(v, done, None) is None
    assert recovery([True] * 6, [True] * 6, 1) is None
    assert recovery([False] * 6, [True] * 6, 3) == 0


def test_generated_traces():
    assert step_trace(6, 1.0, 3.0, 2).tolist() == [1, 1, 3, 3, 3, 3]
    assert flash_trace(6, 1.0, 5.0, 2, 2).tolist() == [1, 1, 5, 5, 1, 1]
    ramp = ramp_trace(12, 60.0, 30.0, 2)
    assert ramp[:3].tolist() == [60.0, 60.0, 60.0] and ramp[-1] == pytest.approx(1800.0)
    assert all(b >= a for a, b in zip(ramp, ramp[1:], strict=False))


def test_the_demo_application_stays_within_its_budgets_after_the_warm_up():
    """The simulated demo's application (scripts/demo_control.py's demo-taxi under the demo's OM policy) through
    bench_loop's default run length: violations <= eta_V and reconfigurations <= eta_R after the warm-up."""
    (row,) = bench_json("--scenario", "demo", "--periods", "240", "--warmup", "60")
    assert row["app"] == "demo-taxi"
    assert row["violations_pct"] <= row["eta_v_pct"], row
    assert row["reconfigurations_pct"] <= row["eta_r_pct"], row


@contextmanager
def scenario_result(name: str, tmp_path):
    """Run scenario ``name`` through bench_loop for 240 periods (60 of warm-up); yields its one application's
    record and result, then removes what the run created."""
    scenario = SCENARIOS[name]
    run = run_scenario(scenario, 240, tmp_path)
    try:
        (rec,) = run.apps
        yield rec, app_result(name, rec, warmup=60, change=scenario.change_at(240))
    finally:
        cleanup()


def test_the_ramp_meets_its_budgets_by_planning_ahead_and_reconfiguring_together(tmp_path):
    """bench_loop's 30x ramp with the recommended OM (model-based-trend) and the AM defaults: within eta_V and
    eta_R after the warm-up. What gets it there is visible in the decision log: scale-outs planned on the rising
    trend (the proposal's forecast) and batches deferred while a batch-mate waits for its nodes, so that the
    operators spend one token together (12.2 % violations before, most of them scale-outs waiting for a token
    the others had spent one or two periods earlier)."""
    with scenario_result("ramp", tmp_path) as (rec, result):
        assert result.violations_pct <= 5.0, result
        assert result.reconfigurations_pct <= 10.0, result
        # scaled out to the rate: no period below what the rate needs. 6 before the batch waited for all its nodes,
        # 4 before a planned rate past the deployment's learned bound ruled out staying put, 1 while the bound
        # inside the learned bracket was its midpoint (now M/G/1 with the variability learned from response times)
        assert result.extra["under_provisioned_periods"] == 0, result
        decisions = Decision.objects.filter(application_id=rec.app_id)
        planned = [d for d in decisions if "forecast" in (d.proposal or {}).get("explanation", {})]
        assert planned and all(
            d.proposal["explanation"]["forecast"]["planned_rate_tuples_s"] > d.observed["input_rate"]
            for d in planned
        )
        assert decisions.filter(reason__contains="deferred: to reconfigure together").exists()


def test_a_step_is_followed_in_one_reconfiguration_per_operator(tmp_path):
    """bench_loop's 3x step: each overloaded operator goes to a deployment that carries the new rate in one
    reconfiguration, the three together, even where that means a node type it did not run (1 x A1 -> 2 x A3).
    Before, a multi-replica step kept the types in place, so the operators went 1 x A1 -> 1 x A1 + 1 x A3 ->
    2 x A3 and waited for nodes twice (3.33 % violations, recovery in 6 periods)."""
    with scenario_result("step", tmp_path) as (rec, result):
        assert result.violations_pct <= 5.0 and result.reconfigurations_pct <= 10.0, result
        assert result.recovery_periods is not None and result.recovery_periods <= 3, result
        change = SCENARIOS["step"].change_at(240)
        applied = Decision.objects.filter(
            application_id=rec.app_id, slot__gte=change, slot__lt=change + 20, outcome="applied"
        )
        per_operator = Counter(d.operator.name for d in applied)
        assert per_operator and max(per_operator.values()) == 1, per_operator


def test_a_node_shortage_is_served_by_fewer_new_nodes_of_another_type(tmp_path):
    """bench_loop's shortage (a 4x step in a region of 10 nodes, 1 new per period, 180 s provisioning): the
    operators' first requests (2 x A2 -> 6 x A2, 1 x A1 -> 4 x A1 twice: 14 nodes) cannot fit; the tick marks them
    node-limited and the OMs ask for the deployment with the fewest new replicas (3 x A3 each: 9 nodes), which the
    RM makes room for by releasing idle nodes of the other types. Before, the application waited to the end of the
    run (88.9 % of periods violated); the physical minimum here is about 13 periods (9 new nodes, one per period,
    plus the 3-period provisioning), so the bound asserted is that the application recovers and stays within
    R_max, not eta_V (see docs/benchmarks.md)."""
    with scenario_result("shortage", tmp_path) as (rec, result):
        assert result.violations_pct <= 10.0, result
        assert result.recovery_periods is not None and result.recovery_periods <= 18, result
        decisions = Decision.objects.filter(application_id=rec.app_id)
        frugal = [d for d in decisions if "node_limit" in (d.proposal or {}).get("explanation", {})]
        assert frugal, "no proposal was made under the node limit"
        assert all(sum(d.proposal["target"].values()) <= 4 for d in frugal), [
            d.proposal["target"] for d in frugal
        ]
        # the tick checks the region's limit before the AM arbitrates: after the step no operator waits for a
        # request that did not fit (before, the first requests after the step asked for 14 nodes and the region spent a period
        # and one node on them)
        step = min(d.slot for d in decisions) + 80  # the scenario's step (earlier waits: the warm-up's nodes)
        waits = [d for d in decisions if d.slot >= step and d.reason.startswith("waiting for capacity")]
        assert waits and all("node_limit" in d.proposal["explanation"] for d in waits), sorted(
            (d.slot, d.operator_id, d.proposal["target"])
            for d in waits
            if "node_limit" not in d.proposal["explanation"]
        )
