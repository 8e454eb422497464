"""The regions list shows each region's nodes per type as its page's table does: ready (of which used) and
pending, from the region's last RM step."""

from __future__ import annotations

import pytest
from django.urls import reverse

from autoscaler.control import capacity
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.regions import region_step
from autoscaler.models import Region

pytestmark = pytest.mark.django_db


def test_regions_list_shows_ready_used_and_pending_nodes_per_type(staff_client):
    app = simulated_pipeline("shown", n_operators=2)
    app.policies = {**app.policies, "rm": {"name": "simple", "params": {"n_idle": 1}}}
    app.save()
    region = Region.objects.get(name="region-a")
    before = staff_client.get(reverse("dashboard:regions")).content.decode()
    assert "nodes: no RM step yet" in before
    region_step(region.pk, 10)
    counts = capacity.region_node_counts(region.pk)
    html = staff_client.get(reverse("dashboard:regions")).content.decode()
    shown = [t for t, c in counts.items() if c["ready"] or c["pending"] or c["used"]]
    assert shown
    for t in shown:
        c = counts[t]
        assert f"{t}: {c['ready']} ready ({c['used']} used), {c['pending']} pending" in html
