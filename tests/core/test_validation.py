"""One test per validation rule: the rejected input yields an error whose path names the offending field."""

from __future__ import annotations

import copy

import pytest

from autoscaler import manifests
from autoscaler.schemas import ManifestError, validate_document

WORDCOUNT = {
    "apiVersion": "autoscaler/v1",
    "kind": "Application",
    "metadata": {"name": "wordcount"},
    "spec": {
        "engine": "spark",
        "slo": {"rMaxMs": 60, "etaV": 0.05, "etaR": 0.10},
        "operators": [
            {"name": "sentences", "kind": "source"},
            {"name": "splitter", "kind": "operator", "maxParallelism": 20, "selectivity": 5.0},
            {"name": "counter", "kind": "operator", "maxParallelism": 20},
            {"name": "top", "kind": "sink"},
        ],
        "streams": [["sentences", "splitter"], ["splitter", "counter"], ["counter", "top"]],
        "policies": {"om": "ql-pds-plus", "am": "naive"},
    },
}
CATALOG = {
    "apiVersion": "autoscaler/v1",
    "kind": "NodeTypeCatalog",
    "metadata": {"name": "tiny"},
    "spec": {
        "nodeTypes": [{"name": "n1", "cores": 1, "memoryMiB": 512, "speedup": 1.0, "pricePerHour": 0.01}]
    },
}


def app(**changes) -> dict:
    doc = copy.deepcopy(WORDCOUNT)
    doc["spec"].update(changes)
    return doc


def errors_of(doc, refs=None) -> dict[str, str]:
    """loc -> msg of every error validating ``doc`` (the document must be rejected)."""
    with pytest.raises(ManifestError) as info:
        validate_document(doc, refs)
    return {e.loc: e.msg for e in info.value.errors}


def test_valid_application_passes():
    valid = validate_document(copy.deepcopy(WORDCOUNT), None)
    assert valid.kind == "Application" and valid.name == "wordcount"
    assert [op.name for op in valid.spec.operators] == ["sentences", "splitter", "counter", "top"]


def test_cycle_is_rejected_and_named():
    doc = app(
        operators=WORDCOUNT["spec"]["operators"] + [{"name": "loop"}],
        streams=WORDCOUNT["spec"]["streams"] + [["counter", "loop"], ["loop", "splitter"]],
    )
    errors = errors_of(doc)
    assert errors["spec.streams"] == "cycle splitter -> counter -> loop -> splitter"


def test_self_loop_is_a_cycle():
    doc = app(streams=WORDCOUNT["spec"]["streams"] + [["counter", "counter"]])
    assert errors_of(doc)["spec.streams"] == "cycle counter -> counter"


def test_edge_to_unknown_operator():
    doc = app(
        streams=[["sentences", "splitter"], ["splitter", "counter"], ["counter", "foo"], ["counter", "top"]]
    )
    assert errors_of(doc)["spec.streams[2]"] == "edge to unknown operator 'foo'"


def test_operator_unreachable_from_any_source():
    doc = app(
        operators=WORDCOUNT["spec"]["operators"] + [{"name": "orphan"}],
        streams=WORDCOUNT["spec"]["streams"] + [["orphan", "top"]],
    )
    assert errors_of(doc)["spec.operators[4]"] == "operator 'orphan' is unreachable from any source"


def test_operator_leading_to_no_sink():
    doc = app(
        operators=WORDCOUNT["spec"]["operators"] + [{"name": "dead_end"}],
        streams=WORDCOUNT["spec"]["streams"] + [["splitter", "dead_end"]],
    )
    assert "leads to no sink" in errors_of(doc)["spec.operators[4]"]


@pytest.mark.parametrize("missing", ["source", "sink"])
def test_graph_needs_a_source_and_a_sink(missing):
    ops = [op for op in WORDCOUNT["spec"]["operators"] if op.get("kind") != missing]
    errors = errors_of(app(operators=ops))
    assert f"at least one operator of kind {missing}" in errors["spec.operators"]


def test_duplicate_operator_names():
    ops = WORDCOUNT["spec"]["operators"] + [{"name": "counter"}]
    assert "duplicate operator name 'counter'" in errors_of(app(operators=ops))["spec.operators[4].name"]


def test_duplicate_streams():
    doc = app(streams=WORDCOUNT["spec"]["streams"] + [["splitter", "counter"]])
    assert "duplicate stream" in errors_of(doc)["spec.streams[3]"]


def test_k_max_below_one():
    doc = app()
    doc["spec"]["operators"][1]["maxParallelism"] = 0
    assert "greater than or equal to 1" in errors_of(doc)["spec.operators[1].maxParallelism"]


@pytest.mark.parametrize(("field", "value"), [("expectedPeakRate", 0), ("expectedPeakRate", -3.0),
                                               ("serviceTimeMs", 0), ("expectedPeakRate", "lots")])  # fmt: skip
def test_operator_hints_must_be_positive_numbers(field, value):
    doc = app()
    doc["spec"]["operators"][1][field] = value
    assert f"spec.operators[1].{field}" in errors_of(doc)


def test_operator_hints_are_optional_and_kept():
    doc = app()
    doc["spec"]["operators"][1].update(expectedPeakRate=2500.0, serviceTimeMs=0.4)
    valid = validate_document(doc, None)
    assert valid.spec.operators[1].expected_peak_rate == 2500.0
    assert valid.spec.operators[1].service_time_ms == 0.4
    assert validate_document(app(), None).spec.operators[1].expected_peak_rate is None


@pytest.mark.parametrize("r_max", [0, -5])
def test_r_max_not_positive(r_max):
    doc = app(slo={"rMaxMs": r_max})
    assert "greater than 0" in errors_of(doc)["spec.slo.rMaxMs"]


@pytest.mark.parametrize(("field", "value"), [("etaV", 1.0), ("etaV", -0.01), ("etaR", 1.5), ("etaR", -1)])
def test_eta_outside_unit_interval(field, value):
    doc = app(slo={"rMaxMs": 60, field: value})
    assert f"spec.slo.{field}" in errors_of(doc)


def test_path_override_must_follow_streams():
    doc = app(slo={"rMaxMs": 60, "paths": [{"path": ["sentences", "counter", "top"], "rMaxMs": 40}]})
    assert errors_of(doc)["spec.slo.paths[0].path"] == "no stream sentences -> counter"


def test_path_override_with_non_positive_bound():
    doc = app(
        slo={"rMaxMs": 60, "paths": [{"path": ["sentences", "splitter", "counter", "top"], "rMaxMs": 0}]}
    )
    assert "spec.slo.paths[0].rMaxMs" in errors_of(doc)


def test_unknown_policy_name():
    doc = app(policies={"om": "no-such-policy"})
    assert "unknown om policy 'no-such-policy'" in errors_of(doc)["spec.policies.om.name"]


def test_bad_policy_parameter_names_the_param_path():
    doc = app(policies={"om": {"name": "ql-pds-plus", "params": {"no_such_param": 1}}})
    locs = list(errors_of(doc))
    assert len(locs) == 1 and locs[0].startswith("spec.policies.om.params")


def test_bad_policy_parameter_type():
    doc = app(policies={"rm": {"name": "simple", "params": {"n_idle": "many"}}})
    assert errors_of(doc)["spec.policies.rm.params.n_idle"] == "must be a number, got 'many'"


def test_unknown_policy_level():
    doc = app(policies={"xm": "naive"})
    assert "spec.policies.xm" in errors_of(doc)


def test_connector_settings_validated_per_engine():
    errors = errors_of(app(connector={"restUrl": "http://jm:8081"}))  # a Flink setting on a Spark app
    assert "spec.connector.restUrl" in errors
    assert "spec.connector.rateScale" in errors_of(app(engine="simulated", connector={"rateScale": -1}))


def test_unknown_engine():
    assert "spec.engine" in errors_of(app(engine="storm"))


def test_am_period_shorter_than_om_period():
    assert "must be >= omS" in errors_of(app(periods={"omS": 60, "amS": 30}))["spec.periods"]


def test_unknown_field_is_rejected():
    assert errors_of(app(rmax=3))["spec.rmax"] == "Extra inputs are not permitted"


def test_unknown_kind():
    doc = dict(copy.deepcopy(WORDCOUNT), kind="Pipeline")
    assert errors_of(doc)["kind"].startswith("unknown kind 'Pipeline'")


def test_unknown_version():
    doc = dict(copy.deepcopy(WORDCOUNT), apiVersion="autoscaler/v2")
    assert errors_of(doc)["apiVersion"].startswith("unknown version 'autoscaler/v2'")


def test_bad_name():
    doc = dict(copy.deepcopy(WORDCOUNT), metadata={"name": "has space"})
    assert "metadata.name" in errors_of(doc)


def test_negative_price():
    doc = copy.deepcopy(CATALOG)
    doc["spec"]["nodeTypes"][0]["pricePerHour"] = -0.01
    assert "greater than or equal to 0" in errors_of(doc)["spec.nodeTypes[0].pricePerHour"]


@pytest.mark.parametrize("speedup", [0, -1.0])
def test_non_positive_speedup(speedup):
    doc = copy.deepcopy(CATALOG)
    doc["spec"]["nodeTypes"][0]["speedup"] = speedup
    assert "greater than 0" in errors_of(doc)["spec.nodeTypes[0].speedup"]


def test_duplicate_node_type_names():
    doc = copy.deepcopy(CATALOG)
    doc["spec"]["nodeTypes"].append(dict(doc["spec"]["nodeTypes"][0]))
    assert "duplicate node type name 'n1'" in errors_of(doc)["spec.nodeTypes[1].name"]


def test_every_error_is_reported_at_once():
    doc = app(slo={"rMaxMs": -1, "etaV": 2})
    doc["spec"]["operators"][1]["maxParallelism"] = 0
    assert {"spec.slo.rMaxMs", "spec.slo.etaV", "spec.operators[1].maxParallelism"} <= set(errors_of(doc))


# ---- rules that need stored resources ----------------------------------------------------------------------
REGION = {
    "apiVersion": "autoscaler/v1",
    "kind": "Region",
    "metadata": {"name": "r1"},
    "spec": {"catalog": "tiny", "maxNodes": 10, "maxNewNodesPerPeriod": 2},
}


def deployment(**spec) -> dict:
    base = {"application": "wordcount", "operator": "splitter", "region": "r1", "replicas": {"n1": 2}}
    return {
        "apiVersion": "autoscaler/v1",
        "kind": "Deployment",
        "metadata": {"name": "d1"},
        "spec": {**base, **spec},
    }


@pytest.fixture
def stored(db, alice):
    manifests.apply_documents(
        [copy.deepcopy(CATALOG), copy.deepcopy(REGION), copy.deepcopy(WORDCOUNT)], alice
    )
    return manifests.DatabaseReferences(alice)


def test_stored_valid_deployment_passes(stored):
    assert validate_document(deployment(), stored).spec.total() == 2


def test_region_with_unknown_catalog(stored):
    doc = copy.deepcopy(REGION)
    doc["spec"]["catalog"] = "nope"
    assert errors_of(doc, stored)["spec.catalog"] == "unknown node-type catalog 'nope'"


def test_application_with_unknown_region(stored):
    assert errors_of(app(regions=["r1", "mars"]), stored) == {"spec.regions[1]": "unknown region 'mars'"}


def test_deployment_with_unknown_region(stored):
    assert errors_of(deployment(region="mars"), stored)["spec.region"] == "unknown region 'mars'"


def test_deployment_with_unknown_node_type(stored):
    errors = errors_of(deployment(replicas={"n1": 1, "huge": 1}), stored)
    assert errors == {"spec.replicas.huge": "unknown node type 'huge' in region 'r1'"}


def test_deployment_above_k_max(stored):
    errors = errors_of(deployment(replicas={"n1": 21}), stored)
    assert errors["spec.replicas"] == "21 replicas exceed maxParallelism 20 of operator 'splitter'"


def test_deployment_with_no_replica(stored):
    assert (
        errors_of(deployment(replicas={"n1": 0}), stored)["spec.replicas"]
        == "a deployment needs at least one replica"
    )


def test_deployment_with_negative_replicas(stored):
    assert "spec.replicas.n1" in errors_of(deployment(replicas={"n1": -1}), stored)


def test_deployment_of_unknown_operator_or_application(stored):
    assert "has no operator 'nope'" in errors_of(deployment(operator="nope"), stored)["spec.operator"]
    assert (
        errors_of(deployment(application="nope"), stored)["spec.application"] == "unknown application 'nope'"
    )


def test_second_deployment_of_one_operator(stored, alice):
    manifests.apply_documents([deployment()], alice)
    doc = deployment()
    doc["metadata"]["name"] = "d2"
    assert errors_of(doc, stored)["spec.operator"] == "operator 'splitter' already has deployment 'd1'"


def test_lowering_k_max_below_a_deployment(stored, alice):
    manifests.apply_documents([deployment(replicas={"n1": 5})], alice)
    doc = app()
    doc["spec"]["operators"][1]["maxParallelism"] = 4
    errors = errors_of(doc, stored)
    assert errors["spec.operators[1].maxParallelism"] == "4 is below the 5 replicas of deployment 'd1'"


def test_removing_a_node_type_in_use(stored, alice):
    manifests.apply_documents([deployment()], alice)
    doc = copy.deepcopy(CATALOG)
    doc["spec"]["nodeTypes"][0]["name"] = "n2"
    assert "node type 'n1' cannot be removed" in errors_of(doc, stored)["spec.nodeTypes"]


def test_duplicate_region_in_application():
    assert errors_of(app(regions=["r1", "r1"]))["spec.regions[1]"] == "duplicate region 'r1'"


def test_deployment_outside_the_applications_regions(stored, alice):
    manifests.apply_documents(
        [dict(copy.deepcopy(REGION), metadata={"name": "r2"}), app(regions=["r2"])], alice
    )
    errors = errors_of(deployment(region="r1"), stored)
    assert errors == {"spec.region": "region 'r1' is not one of the application's regions"}


def test_application_cannot_drop_the_region_of_a_deployment(stored, alice):
    manifests.apply_documents([dict(copy.deepcopy(REGION), metadata={"name": "r2"}), deployment()], alice)
    errors = errors_of(app(regions=["r2"]), stored)
    assert errors == {"spec.regions": "deployment 'd1' runs in region 'r1'"}


def test_region_with_unknown_provider_kind(stored):
    doc = copy.deepcopy(REGION)
    doc["spec"]["provider"] = {"kind": "kubernetes"}
    assert "spec.provider.kind" in errors_of(doc, stored)


def test_region_provider_round_trips(stored, alice):
    doc = copy.deepcopy(REGION)
    doc["spec"]["provider"] = {"kind": "spark-standalone", "settings": {"master": "spark://127.0.0.1:7077"}}
    manifests.apply_documents([doc], alice)
    exported = manifests.export("Region", "r1", alice)[0]
    assert exported["spec"]["provider"] == doc["spec"]["provider"]


# ---- issue #4 bad-input rules of the control hierarchy ----------------------------------------------------------
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"n_bo": 0}, "n_bo"),
        ({"n_bo": -3}, "n_bo"),
        ({"max_rounds": 0}, "max_rounds"),
        ({"timeout_s": 0}, "timeout_s"),
    ],
)
def test_bo_iteration_counts_below_one_are_rejected(params, field):
    doc = app(policies={"om": "ql-pds-plus", "am": {"name": "bo", "params": params}})
    errors = errors_of(doc)
    assert list(errors) == [f"spec.policies.am.params.{field}"], errors


@pytest.mark.parametrize("am", ["naive", "bo"])
@pytest.mark.parametrize(
    ("params", "field"),
    [
        ({"guard": "yes"}, "guard"),
        ({"guard_window": 0}, "guard_window"),
        ({"guard_cooldown": -1}, "guard_cooldown"),
    ],
)
def test_bad_guard_params_of_the_am_are_rejected_naming_the_field(am, params, field):
    doc = app(policies={"om": "ql-pds-plus", "am": {"name": am, "params": params}})
    errors = errors_of(doc)
    assert list(errors) == [f"spec.policies.am.params.{field}"], errors


def test_bo_with_valid_params_passes():
    doc = app(policies={"om": "ql-pds-plus", "am": {"name": "bo", "params": {"n_bo": 1, "timeout_s": 30}}})
    assert validate_document(doc, None).spec.policies.am.name == "bo"


def _timed(r_max_ms: float, paths: list | None = None) -> dict:
    ops = copy.deepcopy(WORDCOUNT["spec"]["operators"])
    ops[1]["serviceTimeMs"] = 25.0
    ops[2]["serviceTimeMs"] = 20.0
    return app(operators=ops, slo={"rMaxMs": r_max_ms, "paths": paths or []})


def test_r_max_below_the_sum_of_service_times_is_never_meetable():
    spec = validate_document(_timed(40.0), None).spec  # semantically valid: speedups are in the catalogs
    errors = spec.unmeetable_path_errors(max_speedup=1.0)
    assert [e.loc for e in errors] == ["spec.slo.rMaxMs"]
    assert "sentences -> splitter -> counter -> top (45 ms" in errors[0].msg
    assert "can never be met" in errors[0].msg
    assert spec.unmeetable_path_errors(max_speedup=1.5) == []  # 30 ms on the fastest node type: meetable
    assert validate_document(_timed(45.0), None).spec.unmeetable_path_errors() == []  # exactly the floor


def test_unmeetable_path_override_names_the_override():
    path = {"path": ["sentences", "splitter", "counter", "top"], "rMaxMs": 44.0}
    spec = validate_document(_timed(100.0, [path]), None).spec
    errors = spec.unmeetable_path_errors()
    assert [e.loc for e in errors] == ["spec.slo.paths[0].rMaxMs"]
    with pytest.raises(ValueError, match="max_speedup"):
        spec.unmeetable_path_errors(max_speedup=0)


def test_unmeetable_r_max_is_rejected_when_applied_to_a_region(stored, alice):
    doc = _timed(40.0)
    doc["spec"]["regions"] = ["r1"]  # r1's fastest node type has speedup 1.0: 45 ms > 40 ms on every path
    with pytest.raises(ManifestError) as info:
        manifests.apply_documents([doc], alice)
    assert [e.loc for e in info.value.errors] == ["spec.slo.rMaxMs"]
    assert "can never be met" in info.value.errors[0].msg
    assert manifests.DatabaseReferences(alice).application("wordcount").slo.r_max_ms == 60  # unchanged
    doc["spec"]["slo"]["rMaxMs"] = 45.0
    manifests.apply_documents([doc], alice)


# ---- every error of a document in one answer: field, graph and reference checks together --------------------
def _cyclic_slow_bad(r_max_ms: float = 40.0) -> dict:
    """A cycle (counter -> splitter), etaV 1.5, K_max 0 and an rMaxMs below the operators' service times."""
    doc = _timed(r_max_ms)
    doc["spec"]["slo"]["etaV"] = 1.5
    doc["spec"]["operators"][2]["maxParallelism"] = 0
    doc["spec"]["streams"].append(["counter", "splitter"])
    doc["spec"]["regions"] = ["r1"]
    return doc


def test_field_graph_and_reference_errors_are_reported_together(stored, alice):
    with pytest.raises(ManifestError) as info:
        manifests.apply_documents([_cyclic_slow_bad()], alice)
    found = {e.loc: e.msg for e in info.value.errors}
    assert set(found) == {
        "spec.slo.etaV",
        "spec.operators[2].maxParallelism",
        "spec.streams",
        "spec.slo.rMaxMs",
    }, found
    assert found["spec.streams"].startswith("cycle ")
    assert "can never be met" in found["spec.slo.rMaxMs"]
    assert manifests.DatabaseReferences(alice).application("wordcount").slo.eta_v == 0.05  # nothing stored


def test_envelope_and_spec_errors_are_reported_together():
    doc = app(slo={"rMaxMs": 60, "etaR": 3})
    doc["apiVersion"] = "v0"
    doc["metadata"] = {"name": "bad name"}
    doc["spec"]["streams"].append(["top", "sentences"])  # out of a sink, into a source
    found = errors_of(doc)
    assert {"apiVersion", "metadata.name", "spec.slo.etaR", "spec.streams[3]"} <= set(found), found


def test_a_field_left_at_its_default_raises_no_follow_up_error(stored, alice):
    """K_max 0 is reported once: the check of the deployments against K_max does not also report it at 1."""
    manifests.apply_documents([deployment(replicas={"n1": 2})], alice)
    doc = app()
    doc["spec"]["operators"][1]["maxParallelism"] = 0
    with pytest.raises(ManifestError) as info:
        manifests.apply_documents([doc], alice)
    assert [(e.loc, e.msg.split(",")[0]) for e in info.value.errors] == [
        ("spec.operators[1].maxParallelism", "Input should be greater than or equal to 1")
    ]


def test_an_unmeetable_bound_is_found_past_a_cycle():
    spec = validate_document(_timed(40.0), None).spec
    spec.streams.append(("counter", "splitter"))
    assert [e.loc for e in spec.unmeetable_path_errors()] == ["spec.slo.rMaxMs"]


@pytest.mark.parametrize(
    "shape",
    [{"kind": ["Application"]}, {"kind": {"a": 1}}, {"apiVersion": []}, {"metadata": []}, {"spec": []}],
)
def test_any_json_shape_is_a_manifest_error(shape):
    doc = {**app(), **shape}
    with pytest.raises(ManifestError):
        validate_document(doc, None, expected_kind="Application")
    assert manifests._kind_of(doc) in ("", "Application")  # apply's dependency order reads any kind value


def test_a_document_of_another_kind_at_a_kind_endpoint_is_not_checked_as_that_kind():
    doc = {"kind": "Region", "metadata": {"name": "r"}, "spec": {"catalog": "c"}}
    with pytest.raises(ManifestError) as info:
        validate_document(doc, None, expected_kind="Application")
    assert [e.loc for e in info.value.errors] == ["kind"]
