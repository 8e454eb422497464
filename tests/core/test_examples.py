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
    }
    assert m.NodeType.objects.filter(catalog__name="infra-b").count() == 10
    assert set(m.Application.objects.filter(owner=alice).values_list("name", flat=True)) == {
        "wordcount",
        "taxi-sim",
    }
    call_command("apply", "-f", str(EXAMPLES), "--owner", "alice")
    second = capsys.readouterr().out.splitlines()
    assert len(second) == len(first) and all(line.endswith("unchanged") for line in second)
    assert m.DeploymentHistory.objects.count() == m.Deployment.objects.count()


@pytest.mark.django_db
def test_infrastructure_catalogs_match_policy_model(shared):
    from policies.model import INFRA_SPEEDUPS

    for key in ("A", "B"):
        rows = m.NodeType.objects.filter(catalog__name=f"infra-{key.lower()}").order_by("position")
        assert tuple(r.speedup for r in rows) == INFRA_SPEEDUPS[key]
        assert all(r.price_per_hour == r.speedup for r in rows)
