"""Build simulated applications directly in the database (benchmarks, demos, tests).

A pipeline ``src -> op0 -> ... -> op{n-1} -> sink`` on the paper's infrastructure A (catalog ``infra-a``, region
``region-a``, both created if missing); only the ``n`` middle operators have Deployments (are scaled).
"""

from __future__ import annotations

from django.contrib.auth import get_user_model

from autoscaler.models import Application, Deployment, NodeType, NodeTypeCatalog, Operator, Region, Stream
from policies.operator_model import INFRA_SPEEDUPS


def ensure_region(name: str = "region-a", n_types: int = 3) -> Region:
    """Catalog ``infra-a`` (first ``n_types`` types of infrastructure A, price = speedup $/h) and its region."""
    catalog, created = NodeTypeCatalog.objects.get_or_create(name="infra-a")
    if created or not catalog.node_types.exists():
        for i, s in enumerate(INFRA_SPEEDUPS["A"][:n_types]):
            NodeType.objects.create(
                catalog=catalog,
                position=i,
                name=f"A{i + 1}",
                cores=1,
                memory_mib=1024,
                speedup=s,
                price_per_hour=s,
            )
    region, _ = Region.objects.get_or_create(
        name=name, defaults={"catalog": catalog, "max_nodes": 100000, "max_new_nodes_per_period": 1000}
    )
    return region


def simulated_pipeline(
    name: str,
    n_operators: int = 2,
    om_policy: str = "threshold",
    om_params: dict | None = None,
    owner: str = "control",
    period_s: float = 60.0,
    dry_run: bool = False,
    state: str = "running",
    rate_scale: float = 1.0,
    r_max_ms: float = 100.0,
) -> Application:
    """A running simulated application with ``n_operators`` scaled operators (service time 5 ms each, K_max 10)."""
    user, _ = get_user_model().objects.get_or_create(username=owner)
    region = ensure_region()
    app = Application.objects.create(
        owner=user,
        name=name,
        engine="simulated",
        connector={
            "trace": "taxi_last_month",
            "rateScale": rate_scale,
            "noise": 0.0,
            "seed": 1,
            "downtimeS": 0.0,
        },
        r_max_ms=r_max_ms,
        eta_v=0.05,
        eta_r=0.1,
        policies={
            "om": {"name": om_policy, "params": om_params or {}},
            "am": {"name": "naive", "params": {}},
        },
        om_period_s=period_s,
        am_period_s=period_s * 10,
        dry_run=dry_run,
        state=state,
    )
    app.regions.add(region)
    names = ["src"] + [f"op{i}" for i in range(n_operators)] + ["sink"]
    ops = []
    for i, op_name in enumerate(names):
        kind = "source" if i == 0 else "sink" if i == len(names) - 1 else "operator"
        ops.append(
            Operator(
                application=app,
                position=i,
                name=op_name,
                kind=kind,
                max_parallelism=10 if kind == "operator" else 1,
                service_time_ms=5.0 if kind == "operator" else None,
            )
        )
    ops = Operator.objects.bulk_create(ops)
    Stream.objects.bulk_create(
        [
            Stream(application=app, position=i, source=a, target=b)
            for i, (a, b) in enumerate(zip(ops, ops[1:], strict=False))
        ]
    )
    Deployment.objects.bulk_create(
        [
            Deployment(owner=user, name=f"{name}-{op.name}", operator=op, region=region, replicas={"A1": 1})
            for op in ops[1:-1]
        ]
    )
    return app
