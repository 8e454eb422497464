"""The decision explorer's time filter and order against a plain computation: every decision whose period time
``slot * period_s`` lies in [From, Until), latest period first, across applications with different control
periods and for an application whose period changed (the product path)."""

from __future__ import annotations

import datetime as dt
import random

import pytest

from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import Decision, Tick
from dashboard.monitor.decision_query import first_slot

pytestmark = pytest.mark.django_db

T0 = 1_740_000_000  # 2025-02-19 21:20 UTC, s


def test_first_slot_is_the_smallest_slot_reaching_the_bound():
    rng = random.Random(6)
    for _ in range(20_000):
        period = rng.choice([0.1, 0.3, 1.0, 7.5, 10.0, 60.0, 59.97, rng.uniform(0.01, 900.0)])
        t = rng.choice([T0 + rng.uniform(-1e6, 1e6), round(T0 / period) * period, rng.uniform(0, 1e10)])
        k = first_slot(t, period)
        assert k * period >= t and (k - 1) * period < t, (t, period, k)


def record(app, slot: int, period_s: float) -> Decision:
    tick = Tick.objects.create(application=app, slot=slot, period_s=period_s, status="done")
    return Decision.objects.create(
        tick=tick, application=app, operator=app.operators.get(name="op0"), slot=slot, outcome="no_change"
    )


@pytest.fixture
def decisions(alice):
    """Three applications: 60 s periods, 10 s periods, and one whose period changed from 30 s to 20 s."""
    minute = simulated_pipeline("minute", n_operators=1, owner="alice", period_s=60.0)
    fast = simulated_pipeline("fast", n_operators=1, owner="alice", period_s=10.0)
    changed = simulated_pipeline("changed", n_operators=1, owner="alice", period_s=20.0)
    out = []
    for i in range(40):
        out.append(record(minute, T0 // 60 + i, 60.0))
        out.append(record(fast, T0 // 10 + 6 * i + 3, 10.0))
    for i in range(20):
        out.append(record(changed, T0 // 30 + i, 30.0))
        out.append(record(changed, (T0 + 600) // 20 + i, 20.0))
    return out


def listed(client, query: str) -> list[int]:
    ids, page = [], 1
    while True:
        r = client.get(f"/decisions/?{query}&page={page}")
        assert r.status_code == 200 and not r.context["form"].errors
        ids += [d.id for d in r.context["page"]]
        if not r.context["page"].has_next():
            return ids
        page += 1


def fmt(t: float) -> str:
    return dt.datetime.fromtimestamp(t, tz=dt.UTC).strftime("%Y-%m-%dT%H:%M")


def expected(decisions: list[Decision], since: float, until: float, app: str | None = None) -> list[int]:
    rows = [
        (d.slot * d.tick.period_s, d.id)
        for d in decisions
        if since <= d.slot * d.tick.period_s < until and (app is None or d.application.name == app)
    ]
    return [pk for _, pk in sorted(rows, reverse=True)]


@pytest.mark.parametrize("app", [None, "minute", "fast", "changed"])
def test_filter_and_order_match_the_period_times(decisions, alice_client, app):
    rng = random.Random(1)
    prefix = f"application={app}&" if app else ""
    everything = expected(decisions, 0, 1e12, app)
    assert listed(alice_client, prefix.rstrip("&") or "outcome=") == everything
    for _ in range(6):  # minute-aligned bounds (the form's resolution) inside and around the data
        a, b = sorted(rng.sample(range(T0 // 60 - 5, T0 // 60 + 50), 2))
        since, until = a * 60.0, b * 60.0
        got = listed(alice_client, f"{prefix}since={fmt(since)}&until={fmt(until)}")
        assert got == expected(decisions, since, until, app), (app, fmt(since), fmt(until))
