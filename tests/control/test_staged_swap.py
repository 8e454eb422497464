"""Node-type swaps under a region's node limit (``autoscaler.control.staged_swap``): the first step of a swap the
region cannot hold make-before-break, and the control loop getting out of what was a permanent wait."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from autoscaler.control.models import Decision
from autoscaler.control.staged_swap import stage_step
from benchmarks.loop import scenarios
from benchmarks.loop.runner import cleanup, run_scenario

# node types A1, A2, A3 as in bench_loop's catalog: speedups 1.0, 0.7, 1.3; slowest first: A2, A1, A3
SPEEDUPS = np.array([1.0, 0.7, 1.3])
ORDER = [1, 0, 2]
NOTHING = np.zeros(3, dtype=np.int64)


def round_robin(k: np.ndarray) -> float:
    """Capacity under round-robin dispatch: replicas x the slowest present type's speedup."""
    k = np.asarray(k)
    return float(k.sum() * SPEEDUPS[k > 0].min()) if k.any() else 0.0


def step(k, target, free=NOTHING, coming=NOTHING, k_min=1, k_max=10):
    out = stage_step(
        np.array(k), np.array(target), np.array(free), np.array(coming), round_robin, ORDER, k_min, k_max
    )
    return None if out is None else out.tolist()


def test_only_a_swap_the_region_cannot_supply_is_staged():
    assert step([0, 2, 0], [0, 3, 0]) is None  # only adds: not a swap
    assert step([0, 2, 0], [0, 1, 0]) is None  # only removes
    # the region supplies both A3 replicas (one free, one booting or acquirable): the request waits as usual
    assert step([0, 2, 0], [0, 0, 2], free=[0, 0, 1], coming=[0, 0, 1]) is None
    # nothing free yet, one A3 coming: wait for it before losing capacity
    assert step([0, 2, 0], [0, 0, 2], coming=[0, 0, 1]) is None


def test_the_first_step_adds_what_is_free_and_removes_what_capacity_allows():
    # one A3 free, nothing more coming: add it, drop one A2 (2 x 0.7 = 1.4 stays), not the second (1.3 < 1.4)
    assert step([0, 2, 0], [0, 0, 2], free=[0, 0, 1]) == [0, 1, 1]
    # two A3 free for a swap to three: 4 x A2 (2.8) -> 2 x A2 + 2 x A3 keeps 4 x 0.7; a third removal loses
    assert step([0, 4, 0], [0, 0, 3], free=[0, 0, 2]) == [0, 2, 2]
    # K_max binds: 3 x A2 + 2 x A3 is too many, the A2 replicas go down to 3 in all (whatever the capacity),
    # then the capacity test lets the last one go too (2 x A3 carry 2.6 > 2.1)
    assert step([0, 3, 0], [0, 0, 3], free=[0, 0, 2], k_max=3) == [0, 0, 2]
    # ... and stops where it would lose capacity: 2 x A2 + 1 x A3 (2.1), not 1 x A2 + 1 x A3 (1.4)
    assert step([0, 3, 0], [0, 0, 3], free=[0, 0, 1], k_max=3) == [0, 2, 1]


def test_with_nothing_free_and_nothing_coming_one_replica_goes_first():
    # break-before-make: one replica of the slowest type the swap drops
    assert step([2, 2, 0], [0, 0, 3]) == [2, 1, 0]
    # ... never below k_min (or one replica)
    assert step([0, 1, 0], [0, 0, 2]) is None
    assert step([0, 2, 0], [0, 0, 3], k_min=2) is None


def swap_scenario(max_nodes: int) -> scenarios.Scenario:
    """One operator on 2 x A2 at 200 tuples/s, 400 tuples/s from period 5 (2 x A2 carry 280 under round-robin,
    2 x A3 carry 520), in a region of ``max_nodes`` nodes that the two A2 nodes nearly fill."""

    def build(trace_dir: Path, periods: int) -> list[dict]:
        region = scenarios.region_name("swap")
        trace = scenarios.write_trace(trace_dir, "swap", scenarios.step_trace(periods, 200.0, 400.0, 5))
        app = scenarios.pipeline_document("swap-pipeline", region, trace, n_operators=1)
        deployments = scenarios.deployment_documents(app, region)
        for d in deployments:
            d["spec"]["replicas"] = {"A2": 2}
        region_doc = scenarios.region_document("swap", max_nodes=max_nodes, new_per_period=1, delay_s=60.0)
        return [scenarios.catalog_document(), region_doc, app, *deployments]

    return scenarios.Scenario("swap", "a node-type swap under a node limit", build)


@pytest.mark.django_db
@pytest.mark.parametrize("max_nodes", [2, 3])
def test_a_node_type_swap_under_a_full_node_limit_is_staged_and_completes(tmp_path, max_nodes):
    """Before staging, the OM's 2 x A2 -> 2 x A3 waited for A3 nodes the region could never acquire (the A2
    nodes stayed busy, the limit full) to the end of the run."""
    run = run_scenario(swap_scenario(max_nodes), 30, tmp_path)
    try:
        (rec,) = run.apps
        rows = list(Decision.objects.filter(application_id=rec.app_id).order_by("slot"))
        final = rows[-1].deployment
        assert final.get("A3", 0) >= 2 and not final.get("A2"), [r.deployment for r in rows]
        staged = [r for r in rows if "a staged node-type swap" in r.reason and r.granted]
        assert staged, [r.reason for r in rows]
        assert all("staged_swap" in r.proposal["explanation"] for r in staged)
        # the stage never asked for more nodes than the region may hold, and the run ends within R_max
        assert all(sum(r.deployment.values()) <= max(max_nodes, 2) for r in rows)
        assert not rows[-1].violated
    finally:
        cleanup()
