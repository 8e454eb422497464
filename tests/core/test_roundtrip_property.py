"""Property: for any valid application, export -> apply changes nothing and export reproduces the declaration."""

from __future__ import annotations

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from autoscaler import manifests
from autoscaler import models as m


@st.composite
def applications(draw) -> dict:
    """A random valid Application manifest: a DAG from one source to one sink through 0..6 operators."""
    n_middle = draw(st.integers(0, 6))
    names = ["src"] + [f"op{i}" for i in range(n_middle)] + ["sink"]
    edges = {(names[i], names[i + 1]) for i in range(len(names) - 1)}  # a chain keeps every node on a path
    for i in range(len(names) - 1):
        for j in range(i + 2, len(names)):
            if draw(st.booleans()):
                edges.add((names[i], names[j]))
    operators = [{"name": "src", "kind": "source"}]
    for name in names[1:-1]:
        op = {"name": name, "maxParallelism": draw(st.integers(1, 50))}
        if draw(st.booleans()):
            op["selectivity"] = draw(st.floats(0, 10, allow_nan=False))
        if draw(st.booleans()):
            op["serviceTimeMs"] = draw(st.floats(0.01, 1000, allow_nan=False))
        if draw(st.booleans()):
            op["expectedPeakRate"] = draw(st.floats(0.01, 1e6, allow_nan=False))
        operators.append(op)
    operators.append({"name": "sink", "kind": "sink"})
    engine = draw(st.sampled_from(["spark", "flink", "simulated"]))
    spec = {
        "engine": engine,
        "slo": {
            "rMaxMs": draw(st.floats(0.001, 1e6, allow_nan=False)),
            "etaV": draw(st.floats(0, 0.99, allow_nan=False)),
            "etaR": draw(st.floats(0, 0.99, allow_nan=False)),
            "paths": [{"path": names, "rMaxMs": 10.0}] if draw(st.booleans()) else [],
        },
        "operators": operators,
        "streams": sorted([list(e) for e in edges], key=lambda e: (names.index(e[0]), names.index(e[1]))),
        "policies": {"om": draw(st.sampled_from(["threshold", "ql-pds-plus", "dql-pds"])), "am": "naive"},
        "dryRun": draw(st.booleans()),
        "state": draw(st.sampled_from(["registered", "running", "paused", "deleted"])),
    }
    return {"apiVersion": "autoscaler/v1", "kind": "Application", "metadata": {"name": "prop"}, "spec": spec}


@pytest.mark.django_db
@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(doc=applications())
def test_export_apply_round_trip_for_any_valid_application(alice, doc, settings):
    # Flink's default restUrl, declared by staff
    settings.AUTOSCALER_ENGINE_ENDPOINTS = ["http://127.0.0.1:8081"]
    m.Application.objects.filter(owner=alice).delete()
    (created,) = manifests.apply_documents([doc], alice)
    assert created.action == "created"
    exported = manifests.export("Application", "prop", alice)[0]
    for key in ("dryRun", "state", "streams"):
        assert exported["spec"][key] == doc["spec"][key]
    for declared, stored in zip(doc["spec"]["operators"], exported["spec"]["operators"], strict=True):
        assert {k: stored[k] for k in declared} == declared
    assert exported["spec"]["slo"] | {"paths": []} == doc["spec"]["slo"] | {"paths": []}
    (again,) = manifests.apply_documents([exported], alice)
    assert again.action == "unchanged"
    assert manifests.export("Application", "prop", alice)[0] == exported
