"""The shipped example manifests apply cleanly, and applying them again changes nothing."""

from __future__ import annotations

import pytest
from django.core.management import call_command

from autoscaler import models as m

from .conftest import EXAMPLES


@pytest.mark.django_db
def test_examples_apply_cleanly_and_idempotently(alice, capsys):
    call_command("apply", "-f", str(EXAMPLES), "--owner", "alice")
    first = capsys.readouterr().out.splitlines()
    assert first and all(line.endswith("created") for line in first)
    assert set(m.NodeTypeCatalog.objects.values_list("name", flat=True)) == {
        "vm-example",
        "infra-a",
        "infra-b",
        "wordcount-nodes",
    }
    assert m.NodeType.objects.filter(catalog__name="infra-b").count() == 10
    assert set(m.Application.objects.filter(owner=alice).values_list("name", flat=True)) == {
        "wordcount",
        "taxi-sim",
        "taxi-microbatch-sim",
        "paper-a-pipeline",
        "paper-b-diamond",
        "paper-c-multisink",
        "wordcount-multilevel",
        "flink-wordcount",
        "spark-wordcount",
        "spark-taxi",
    }
    call_command("apply", "-f", str(EXAMPLES), "--owner", "alice")
    second = capsys.readouterr().out.splitlines()
    assert len(second) == len(first) and all(line.endswith("unchanged") for line in second)
    assert m.DeploymentHistory.objects.count() == m.Deployment.objects.count()


@pytest.mark.django_db
def test_infrastructure_catalogs_match_policy_model(shared):
    from policies.operator_model import INFRA_SPEEDUPS

    for key in ("A", "B"):
        rows = m.NodeType.objects.filter(catalog__name=f"infra-{key.lower()}").order_by("position")
        assert tuple(r.speedup for r in rows) == INFRA_SPEEDUPS[key]
        assert all(r.price_per_hour == r.speedup for r in rows)


@pytest.mark.django_db
@pytest.mark.parametrize(
    "manifest_app, library_app",
    [
        ("paper-a-pipeline", "A"),
        ("paper-b-diamond", "B"),
        ("paper-c-multisink", "C"),
        ("wordcount-multilevel", "wordcount"),
    ],
)
def test_paper_application_manifests_match_the_policy_library(alice, manifest_app, library_app):
    """The example manifests of paper 001 Fig. 19 and paper 004 WordCount declare the same operators, edges,
    service times (ms) and selectivities as the applications the benchmarks simulate (policies/app_graphs.py)."""
    from policies.app_graphs import application

    call_command("apply", "-f", str(EXAMPLES), "--owner", "alice")
    lib = application(library_app)
    app = m.Application.objects.get(owner=alice, name=manifest_app)
    inner = {op.name: op for op in app.operators.filter(service_time_ms__isnull=False)}
    assert set(inner) == {op.name for op in lib.operators}
    for op in lib.operators:
        assert inner[op.name].service_time_ms == pytest.approx(op.service_mean_s * 1000.0, rel=1e-3)
        assert inner[op.name].selectivity == pytest.approx(op.selectivity)
        assert inner[op.name].max_parallelism == lib.k_max
    edges = {(s.source.name, s.target.name) for s in app.streams.all()}
    assert set(lib.edges) <= edges
    assert app.r_max_ms == pytest.approx(lib.r_max_s * 1000.0)
