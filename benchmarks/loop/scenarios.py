"""The scenarios of ``manage.py bench_loop``: manifests (plain documents for ``autoscaler.manifests``) and traces.

Every scenario gets a region of its own (``bench-loop-<scenario>``) on the catalog ``bench-loop-infra-a3``: the
first three node types of paper 001's infrastructure A (A1 speedup 1.0 at $1.0/h, A2 0.7 at $0.7/h, A3 1.3 at
$1.3/h; the N_res = 3 setting of the policy benchmarks in docs/benchmarks.md). Applications are owned by the user
``bench-loop`` and start ``running`` with one A1 replica per scaled operator.

- ``demo``: the simulated demo's application as ``scripts/demo_control.py`` builds it (``demo-taxi``: src -> op0
  -> op1 -> op2 -> sink, 5 ms per record on a speedup-1 node, K_max 10, R_max 100 ms, eta_V 5 %, eta_R 10 %, the
  Taxi trace x 0.6, T_OM 10 s, T_AM 100 s, AM naive) under the demo's default OM (``DEMO_OM_POLICY``), in a region
  like the shipped ``region-a`` (100 nodes, 10 new per period, 60 s provisioning delay);
- ``paper-001``: paper 001's applications A (pipeline), B (diamond), C (multi-sink) from
  ``manifests/examples/apps-paper-001-fig19.yaml`` as shipped (QL+PDS+ OMs, BO AM, T_OM 60 s, T_AM 3600 s, the
  Taxi trace), with one Deployment (A1 x 1) per operator;
- ``taxi``: the shipped simulated example ``manifests/examples/app-simulated.yaml`` (``taxi-sim``) as shipped;
- ``step``, ``flash``, ``ramp``, ``shortage``: a demo-shaped pipeline (T_OM 60 s, T_AM 600 s) on generated
  traces (files in the run's trace directory, which bench_loop adds to ``AUTOSCALER_TRACE_DIRS``): a step from
  150 to 450 tuples/s at a third of the run; a flash crowd (150 -> 900 tuples/s for 15 periods at half the run);
  a ramp from 60 to 1,800 tuples/s (30x) after 20 flat periods; and a node shortage (a step from 150 to 600
  tuples/s at a third of the run in a region of 10 nodes at most, 1 new node per period, 180 s provisioning).

Taxi-driven scenarios start at 06:00 of the trace's first day (trace index 360: the morning rise); generated
traces start at index 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import yaml
from django.conf import settings

from policies.registry import RECOMMENDED_OM, om_choice

OWNER = "bench-loop"
CATALOG = "bench-loop-infra-a3"
#: the simulated demo's default OM policy (scripts/demo_control.py's default: the recommended one), as the
#: manifest writes it
DEMO_OM_POLICY = om_choice(RECOMMENDED_OM)
TAXI_START = 360  # trace index of 06:00 on the first day (one rate per minute)
EXAMPLES = Path(settings.BASE_DIR) / "manifests" / "examples"


@dataclass(frozen=True)
class Scenario:
    """One scenario: ``build(trace_dir, periods)`` returns its manifest documents; the first period observes
    trace index ``first_index``; ``change_at(periods)`` is the period (0-based) of the step or flash crowd whose
    recovery is measured (None: no change)."""

    name: str
    description: str
    build: Callable[[Path, int], list[dict[str, Any]]]
    first_index: int = 0
    change_at: Callable[[int], int | None] = lambda periods: None


# ---- documents ------------------------------------------------------------------------------------------------
def catalog_document() -> dict[str, Any]:
    types = [("A1", 1.0), ("A2", 0.7), ("A3", 1.3)]
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "NodeTypeCatalog",
        "metadata": {"name": CATALOG},
        "spec": {
            "description": "bench_loop: the first 3 node types of paper 001's infrastructure A (price = speedup)",
            "nodeTypes": [
                {"name": n, "cores": 1, "memoryMiB": 1024, "speedup": s, "pricePerHour": s} for n, s in types
            ],
        },
    }


def region_name(scenario: str) -> str:
    return f"bench-loop-{scenario}"


def region_document(
    scenario: str,
    max_nodes: int = 100,
    new_per_period: int = 10,
    delay_s: float = 60.0,
    catalog: str = CATALOG,
) -> dict[str, Any]:
    """The scenario's region of ``catalog``: at most ``max_nodes`` nodes, ``new_per_period`` new ones per
    period, each usable ``delay_s`` s after its request."""
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Region",
        "metadata": {"name": region_name(scenario)},
        "spec": {
            "catalog": catalog,
            "maxNodes": max_nodes,
            "maxNewNodesPerPeriod": new_per_period,
            "provisioningDelayS": delay_s,
        },
    }


def deployment_documents(app: dict[str, Any], region: str, node_type: str = "A1") -> list[dict[str, Any]]:
    """One Deployment (``node_type`` x 1) per scaled operator (kind ``operator``) of an Application document."""
    name = app["metadata"]["name"]
    return [
        {
            "apiVersion": "autoscaler/v1",
            "kind": "Deployment",
            "metadata": {"name": f"{name}-{op['name']}"},
            "spec": {
                "application": name,
                "operator": op["name"],
                "region": region,
                "replicas": {node_type: 1},
            },
        }
        for op in app["spec"]["operators"]
        if op.get("kind", "operator") == "operator"
    ]


def pipeline_document(
    name: str,
    region: str,
    trace: str,
    rate_scale: float = 1.0,
    om_s: float = 60.0,
    am_s: float = 600.0,
    om_policy: str | dict[str, Any] = DEMO_OM_POLICY,
    n_operators: int = 3,
) -> dict[str, Any]:
    """The demo's application shape (``autoscaler.control.builders.simulated_pipeline``) as a manifest."""
    ops = [{"name": "src", "kind": "source"}]
    ops += [{"name": f"op{i}", "maxParallelism": 10, "serviceTimeMs": 5.0} for i in range(n_operators)]
    ops += [{"name": "sink", "kind": "sink"}]
    names = [op["name"] for op in ops]
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Application",
        "metadata": {"name": name},
        "spec": {
            "engine": "simulated",
            "connector": {"trace": trace, "rateScale": rate_scale, "noise": 0.0, "seed": 1, "downtimeS": 0.0},
            "slo": {"rMaxMs": 100, "etaV": 0.05, "etaR": 0.1},
            "operators": ops,
            "streams": [[a, b] for a, b in zip(names, names[1:], strict=False)],
            "policies": {"om": om_policy, "am": "naive"},
            "periods": {"omS": om_s, "amS": am_s},
            "regions": [region],
            "state": "running",
        },
    }


def _shipped(file: str, region: str) -> list[dict[str, Any]]:
    """The Application and Deployment documents of a shipped example, moved to ``region`` and set running."""
    docs = [d for d in yaml.safe_load_all((EXAMPLES / file).read_text()) if d]
    out = []
    for doc in docs:
        if doc["kind"] == "Application":
            doc["spec"]["regions"] = [region]
            doc["spec"]["state"] = "running"
        elif doc["kind"] == "Deployment":
            doc["spec"]["region"] = region
        out.append(doc)
    return out


# ---- traces ---------------------------------------------------------------------------------------------------
def step_trace(periods: int, base: float, high: float, at: int) -> np.ndarray:
    """``base`` tuples/s before period ``at``, ``high`` from it on."""
    return np.where(np.arange(periods) < at, base, high).astype(float)


def flash_trace(periods: int, base: float, peak: float, at: int, length: int) -> np.ndarray:
    """``base`` tuples/s, ``peak`` during periods ``at .. at + length - 1``."""
    t = np.arange(periods)
    return np.where((t >= at) & (t < at + length), peak, base).astype(float)


def ramp_trace(periods: int, start: float, factor: float, hold: int) -> np.ndarray:
    """``start`` tuples/s for ``hold`` periods, then a linear ramp to ``start * factor`` at the last period."""
    t = np.arange(periods, dtype=float)
    span = max(periods - 1 - hold, 1)
    return start + (factor - 1.0) * start * np.clip((t - hold) / span, 0.0, 1.0)


def write_trace(trace_dir: Path, name: str, rates: np.ndarray) -> str:
    """Write ``rates`` (tuples/s, one per line) to ``trace_dir/name.txt``; returns the absolute path."""
    path = Path(trace_dir).resolve() / f"{name}.txt"
    path.write_text("".join(f"{r:.6f}\n" for r in rates))
    return str(path)


# ---- the scenarios --------------------------------------------------------------------------------------------
def _demo(trace_dir: Path, periods: int) -> list[dict[str, Any]]:
    region = region_name("demo")
    app = pipeline_document("demo-taxi", region, "taxi_last_month", rate_scale=0.6, om_s=10.0, am_s=100.0)
    return [catalog_document(), region_document("demo"), app, *deployment_documents(app, region)]


def _paper(trace_dir: Path, periods: int) -> list[dict[str, Any]]:
    region = region_name("paper-001")
    docs = [catalog_document(), region_document("paper-001")]
    for app in _shipped("apps-paper-001-fig19.yaml", region):
        docs += [app, *deployment_documents(app, region)]
    return docs


def _taxi(trace_dir: Path, periods: int) -> list[dict[str, Any]]:
    region = region_name("taxi")
    return [catalog_document(), region_document("taxi"), *_shipped("app-simulated.yaml", region)]


def _generated(scenario: str, trace: Callable[[int], np.ndarray], **region: Any):
    def build(trace_dir: Path, periods: int) -> list[dict[str, Any]]:
        name = region_name(scenario)
        path = write_trace(trace_dir, scenario, trace(periods))
        app = pipeline_document(f"{scenario}-pipeline", name, path)
        return [
            catalog_document(),
            region_document(scenario, **region),
            app,
            *deployment_documents(app, name),
        ]

    return build


SCENARIOS: dict[str, Scenario] = {
    s.name: s
    for s in (
        Scenario("demo", "the simulated demo's demo-taxi (Taxi x 0.6, T_OM 10 s)", _demo, TAXI_START),
        Scenario("paper-001", "paper 001 Fig. 19 applications A, B, C (Taxi, BO AM)", _paper, TAXI_START),
        Scenario("taxi", "the shipped taxi-sim example (Taxi trace)", _taxi, TAXI_START),
        Scenario(
            "step",
            "step 150 -> 450 tuples/s at a third of the run",
            _generated("step", lambda n: step_trace(n, 150.0, 450.0, n // 3)),
            change_at=lambda n: n // 3,
        ),
        Scenario(
            "flash",
            "flash crowd 150 -> 900 tuples/s for 15 periods at half the run",
            _generated("flash", lambda n: flash_trace(n, 150.0, 900.0, n // 2, 15)),
            change_at=lambda n: n // 2,
        ),
        Scenario(
            "ramp",
            "ramp 60 -> 1800 tuples/s (30x) after 20 flat periods",
            _generated("ramp", lambda n: ramp_trace(n, 60.0, 30.0, 20)),
        ),
        Scenario(
            "shortage",
            "step 150 -> 600 tuples/s at a third of the run; region of 10 nodes, 1 new per period, 180 s delay",
            _generated(
                "shortage",
                lambda n: step_trace(n, 150.0, 600.0, n // 3),
                max_nodes=10,
                new_per_period=1,
                delay_s=180.0,
            ),
            change_at=lambda n: n // 3,
        ),
    )
}


def documents(
    scenario: Scenario, trace_dir: Path, periods: int, om_policy: str | dict[str, Any] | None
) -> list[dict[str, Any]]:
    """The scenario's manifest documents; ``om_policy`` (when given) replaces every application's
    ``spec.policies.om`` (the manifest field, so it is validated like any user's)."""
    docs = scenario.build(trace_dir, periods)
    if om_policy:
        for doc in docs:
            if doc["kind"] == "Application":
                doc["spec"]["policies"] = {**doc["spec"].get("policies", {}), "om": om_policy}
    return docs
