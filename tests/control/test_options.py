"""The typed options registry (policies.options): every option documented with its unit and the benchmark its
default comes from, the policies' defaults are the registry's, the docs table is current, and an option set in a
manifest reaches the Arbiter the tick builds and the BayesianAM the AM tuning builds."""

from __future__ import annotations

import pytest

from autoscaler import manifests
from autoscaler.control.am import bo_configuration
from autoscaler.control.builders import simulated_pipeline
from autoscaler.control.models import ApplicationControl, Decision
from autoscaler.control.policy_choice import policy_choice
from autoscaler.control.tick import forget_definitions, run_tick
from autoscaler.control.topology import topology
from autoscaler.models import Application, Deployment
from policies import options, registry
from policies.am.guard import GuardParams, guard_params

QUIET = 0.2  # rate scale at which the threshold OMs scale in (as in test_consolidation)


# ---- the registry itself -------------------------------------------------------------------------------------
@pytest.mark.parametrize("opt", options.OPTIONS, ids=lambda o: f"{o.level}.{o.name}")
def test_every_option_is_documented_with_its_unit_and_where_its_default_comes_from(opt: options.Option):
    assert opt.level in options.LEVELS
    assert opt.doc.strip() and opt.doc.strip()[-1] in ".)", opt.doc
    assert opt.policies, "an option no policy takes"
    if opt.numeric:
        assert opt.unit.strip(), f"{opt.name}: a number needs a unit"
        assert opt.bounds(), f"{opt.name}: a number needs bounds"
    assert opt.source.strip()
    benchmark = opt.source.split(":")[0]
    assert benchmark in options.BENCHMARKS or opt.source.startswith("no benchmark"), opt.source
    # the default passes the option's own check, and the field is spelled as the other policy params are
    assert opt.check(opt.default) == opt.default
    assert opt.field == f"spec.policies.{opt.manifest_level}.params.{opt.name}"
    assert opt.name == opt.name.lower() and " " not in opt.name


def test_the_registry_owns_the_parameters_of_every_am_rm_and_im_policy():
    assert set(options.AM_NAMES) == set(registry.AM_POLICIES)
    assert set(options.RM_NAMES) == set(registry.RM_POLICIES)
    assert set(options.IM_NAMES) == set(registry.IM_POLICIES)
    names = [(o.manifest_level, p, o.name) for o in options.OPTIONS for p in o.policies]
    assert len(names) == len(set(names)), "an option declared twice for one policy"


@pytest.mark.parametrize(
    "level,name",
    [("am", n) for n in options.AM_NAMES]
    + [("rm", n) for n in options.RM_NAMES]
    + [("im", n) for n in options.IM_NAMES],
)
def test_defaults_validate_and_are_the_policy_classes_defaults(level: str, name: str):
    defaults = options.defaults(level, name)
    assert defaults
    # the one validation layer accepts them, explicitly given or left out, and returns them unchanged
    assert registry.validate_params(level, name, {}) == defaults
    assert registry.validate_params(level, name, dict(defaults)) == defaults
    cls = registry.load(level, name)
    if hasattr(cls, "DEFAULTS"):
        assert cls.DEFAULTS == defaults


def test_the_defaults_are_what_the_am_benchmark_ran_with():
    """benchmarks/am.py (BUCKET, RESERVE) and the documented command of docs/benchmarks.md's AM sections."""
    from benchmarks.am import BUCKET, RESERVE

    bo = options.defaults("am", "bo")
    assert (bo["bucket_capacity"], bo["scale_in_reserve"]) == (BUCKET, RESERVE) == (3.0, 1.0)
    assert bo["guard"] and bo["hold_scale_ins"] and bo["batching"]
    documented = {
        "n_bo": 25,
        "max_rounds": 2,
        "replications": 3,
        "validation_replications": 6,
        "validation_k": 1.0,
        "validation_load": 1.1,
        "validation_steps": 8000,
        "fallback_top": 5,
        "margin": 0.5,
        "margin_r": 1.0,
        "validation_phases": True,
    }
    assert {k: bo[k] for k in documented} == documented
    # the guard's defaults are the GuardParams the bench's --guard ran with
    assert guard_params(bo) == GuardParams()
    assert options.defaults("rm", "model-based")["w_d"] == 0.7
    assert options.defaults("rm", "simple")["n_idle"] == 1


@pytest.mark.parametrize(
    "level,name,params,field,message",
    [
        ("am", "naive", {"bucket_capacity": 0.5}, "bucket_capacity", "must be >= 1 tokens, got 0.5"),
        ("am", "naive", {"bucket_capacity": True}, "bucket_capacity", "must be a number, got True"),
        ("am", "bo", {"scale_in_reserve": 2.5}, "scale_in_reserve", "must be <= bucket_capacity - 1 = 2"),
        ("am", "bo", {"bucket_capacity": 1}, "scale_in_reserve", "must be <= bucket_capacity - 1 = 0"),
        ("am", "bo", {"validation_load": 3}, "validation_load", "must be in [0.5, 2]"),
        ("am", "bo", {"validation_steps": 0}, "validation_steps", "must be >= 1 periods"),
        ("am", "bo", {"n_bo": 2.5}, "n_bo", "must be an integer, got 2.5"),
        ("am", "bo", {"timeout_s": float("inf")}, "timeout_s", "must be a finite number"),
        ("am", "bo", {"guard_relax_below": 0.9}, "guard_relax_below", "must be <= guard_trigger = 0.5"),
        ("am", "naive", {"n_bo": 3}, "n_bo", "unknown parameter for policy 'naive'"),
        ("am", "centralized", {"nope": 1}, "nope", "unknown parameter for policy 'centralized'"),
        ("rm", "model-based", {"w_d": 0.5}, "w_d", "w_d + w_r must be 1"),
        ("rm", "simple", {"n_idle": -1}, "n_idle", "must be >= 0 nodes, got -1"),
        (
            "im",
            "cheapest-first",
            {"acquisition_budget_per_period": -1},
            "acquisition_budget_per_period",
            ">= 0",
        ),
        ("im", "region-preference", {"region_order": "eu"}, "region_order", "must be a list of names"),
    ],
)
def test_a_bad_value_is_refused_naming_the_option(level, name, params, field, message):
    with pytest.raises(ValueError) as err:
        registry.validate_params(level, name, params)
    text = str(err.value)
    assert text.startswith(f"params.{field}: "), text
    assert message in text


def test_resolve_never_raises_for_stored_params_and_keeps_what_still_passes():
    assert options.resolve("am", "naive", None) == options.defaults("am", "naive")
    kept = options.resolve("am", "naive", {"bucket_capacity": 2, "guard_window": 0, "gone": 1})
    assert kept["bucket_capacity"] == 2.0 and kept["guard_window"] == 200 and "gone" not in kept
    # a policy the registry does not own gets its params through unchanged
    assert options.resolve("rm", "static", {"nodes": 3}) == {"nodes": 3}


def test_docs_options_md_is_current_and_the_readme_points_to_it(capsys):
    assert options.main(["--check"]) == 0, "run: python -m policies.options --markdown"
    text = options.DOC_PATH.read_text()
    for opt in options.OPTIONS:
        assert f"| `{opt.name}` |" in text
    readme = (options.DOC_PATH.parent.parent / "README.md").read_text()
    assert "docs/options.md" in readme


def test_check_fails_on_a_stale_table(tmp_path, capsys):
    stale = tmp_path / "options.md"
    stale.write_text(options.markdown().replace("`3`", "`1`", 1))
    assert options.main(["--check", "-o", str(stale)]) == 1
    assert "out of date" in capsys.readouterr().err
    assert options.main(["--markdown", "-o", str(stale)]) == 0
    assert options.main(["--check", "-o", str(stale)]) == 0


# ---- from a manifest to the control loop ---------------------------------------------------------------------
def set_am_params_by_manifest(app: Application, am: dict) -> None:
    """Export the application, set ``spec.policies.am`` and apply it back: the manifest path a user takes."""
    (doc,) = manifests.export("application", app.name, app.owner)
    doc["spec"]["policies"]["am"] = am
    manifests.apply_documents([doc], app.owner)
    stored = policy_choice(Application.objects.get(pk=app.pk), "am", "naive")
    assert stored == (am["name"], am.get("params") or {})  # stored as declared
    forget_definitions(app.pk)


@pytest.mark.django_db
@pytest.mark.parametrize("params,capacity", [({}, 3.0), ({"bucket_capacity": 2, "scale_in_reserve": 0}, 2.0)])
def test_the_bucket_capacity_of_the_manifest_is_the_arbiters(params: dict, capacity: float):
    app = simulated_pipeline(f"bucket-{capacity:g}", n_operators=1, rate_scale=1.0)
    set_am_params_by_manifest(app, {"name": "naive", "params": params})
    run_tick(app.pk, 10)
    control = ApplicationControl.objects.get(application=app)
    # the bucket starts full and its refill is capped at the capacity; a period with a change spends one token
    spent = Decision.objects.get(application=app, slot=10).outcome == "applied"
    assert control.bucket_tokens == pytest.approx(capacity - spent)


@pytest.mark.django_db
@pytest.mark.parametrize("reserve", [0.0, 0.5])
def test_the_scale_in_reserve_of_the_manifest_defers_scale_ins_in_the_tick(reserve: float):
    """Bucket 2, eta_R 0.1: the first scale-in spends a token (1.1 left after the next refill); the second one
    needs 1 + reserve tokens: granted without a reserve, deferred with 0.5 kept for scale-outs."""
    app = simulated_pipeline(f"reserve-{reserve:g}", n_operators=1, rate_scale=QUIET)
    set_am_params_by_manifest(
        app, {"name": "naive", "params": {"bucket_capacity": 2, "scale_in_reserve": reserve, "guard": False}}
    )
    Deployment.objects.filter(operator__application=app).update(replicas={"A1": 6})
    forget_definitions(app.pk)
    run_tick(app.pk, 10)
    first = Decision.objects.get(application=app, slot=10)
    assert first.outcome == "applied" and first.proposal["target"] == {"A1": 5}
    run_tick(app.pk, 11)
    second = Decision.objects.get(application=app, slot=11)
    assert second.proposal["target"] == {"A1": 4}
    if reserve:
        assert second.outcome == "denied"
        assert second.reason.startswith("denied: scale-in deferred: 1.10 tokens < 1 + 0.5"), second.reason
    else:
        assert second.outcome == "applied"


@pytest.mark.django_db
def test_the_bo_options_of_the_manifest_reach_the_bayesian_am():
    """The AM tuning's BayesianAM runs the BO budget and validation the manifest declares: validation on 2
    held-out seeds of 30 periods each (the record of the optimisation says so); without validation, none."""
    app = simulated_pipeline("bo-options", n_operators=2, rate_scale=2.0)
    small = {
        "n_bo": 2,
        "max_rounds": 1,
        "timeout_s": 120,
        "replications": 1,
        "validation_replications": 2,
        "validation_steps": 30,
        "validate_top": 1,
        "fallback_top": 0,
        "bucket_capacity": 2,
        "scale_in_reserve": 0.5,
    }
    set_am_params_by_manifest(app, {"name": "bo", "params": small})
    for slot in range(10, 17):
        run_tick(app.pk, slot)
    app.refresh_from_db()
    topo = topology(app)
    params = app.policies["am"]["params"]
    assert params == small  # stored as declared
    record = bo_configuration(app, topo, params, since_slot=-1)["record"]
    assert record["phases"] and all(p["evaluations"] <= 2 for p in record["phases"])
    assert {p["round"] for p in record["phases"]} == {0}
    validation = record["validation"]
    assert 1 <= len(validation) <= 2 and validation[0]["warm_start"]
    assert {v["periods"] for v in validation} == {30}
    off = bo_configuration(app, topo, {**params, "validation_replications": 0}, since_slot=-1)["record"]
    assert "validation" not in off
